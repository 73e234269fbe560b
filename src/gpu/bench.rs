//! Encoder throughput: sequences/s and tokens/s at the lengths x batch sizes, for
//! any [`Encoder`] (CPU or GPU), so `medrank bench` and the browser's benchmark page print
//! the same table. The clock is passed in because `std::time::Instant` does not exist in
//! the browser (the page passes `performance.now()`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::Result;
use crate::model::cpu::profile;
use crate::model::{Encoder, Readout, TokenBatch};

/// The grid: lengths 128, 256, 512 x batch 1, 8, 32.
pub const LENGTHS: [usize; 3] = [128, 256, 512];
pub const BATCHES: [usize; 3] = [1, 8, 32];

/// One measured cell.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BenchRow {
    /// "cpu", "wasm-cpu", "gpu", "webgpu": what the caller says it measured.
    pub backend: String,
    /// Adapter name for the GPU paths, a CPU description otherwise.
    pub device: String,
    pub seq_len: usize,
    pub batch: usize,
    /// What each pass hands back to the host: "states" (every token's hidden state),
    /// "pooled" (one vector per sequence) or "logits", as [`readout_name`] names them.
    pub readout: &'static str,
    /// Forward passes timed (after one untimed warm-up pass).
    pub repeats: usize,
    /// Mean seconds per forward pass.
    pub seconds_per_pass: f64,
    pub sequences_per_s: f64,
    pub tokens_per_s: f64,
    /// Bytes copied from the device to the host per pass (GPU encoders; `None` on the CPU,
    /// whose results are in host memory already).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_read_back_per_pass: Option<f64>,
    /// The CPU path's seconds per pass in each step, summed over threads
    /// (`model::cpu::profile`); empty on the GPU paths.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<StepSeconds>,
}

/// Seconds per forward pass spent in one step of the CPU path.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepSeconds {
    pub step: &'static str,
    pub seconds: f64,
}

/// How a bench row names a readout (`None`: the hidden states).
pub fn readout_name(readout: Option<Readout>) -> &'static str {
    match readout {
        None => "states",
        Some(Readout::Pooled(_)) => "pooled",
        Some(Readout::Logits) => "logits",
    }
}

/// One pass of `encoder` on `tokens` with `readout` (`None`: the last layer's states).
async fn pass<E: Encoder>(encoder: &E, tokens: &TokenBatch, readout: Option<Readout>) -> Result<()> {
    match readout {
        None => encoder.encode(tokens, encoder.config().num_layers).await.map(|_| ()),
        Some(r) => encoder.read_out(tokens, r).await.map(|_| ()),
    }
}

/// A batch of `batch` sequences of exactly `seq_len` random tokens (no padding), seeded.
pub fn bench_batch(vocab_size: usize, seq_len: usize, batch: usize, seed: u64) -> TokenBatch {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let n = seq_len * batch;
    TokenBatch {
        batch,
        seq_len,
        ids: (0..n).map(|_| rng.gen_range(0..vocab_size as u32)).collect(),
        type_ids: vec![0; n],
        mask: vec![1; n],
    }
}

/// Times full forward passes of `encoder` on a `seq_len` x `batch` batch, each handing
/// back what `readout` asks (`None`: every token's state, as [`Encoder::encode`]): one
/// warm-up pass (shader compilation, allocation), then passes until `min_seconds` have
/// elapsed (at least one, at most `max_repeats`). `now` returns seconds from any fixed
/// origin.
#[allow(clippy::too_many_arguments)]
pub async fn bench_encoder<E: Encoder>(
    encoder: &E,
    backend: &str,
    device: &str,
    seq_len: usize,
    batch: usize,
    readout: Option<Readout>,
    min_seconds: f64,
    max_repeats: usize,
    now: &dyn Fn() -> f64,
) -> Result<BenchRow> {
    let config = encoder.config();
    let tokens = bench_batch(config.vocab_size, seq_len, batch, 42);
    pass(encoder, &tokens, readout).await?;
    let read_before = encoder.bytes_read_back();
    let start = now();
    let mut repeats = 0;
    profile::start(true);
    while repeats == 0 || (now() - start < min_seconds && repeats < max_repeats.max(1)) {
        pass(encoder, &tokens, readout).await?;
        repeats += 1;
    }
    let seconds_per_pass = (now() - start) / repeats as f64;
    let bytes_read_back_per_pass =
        encoder.bytes_read_back().zip(read_before).map(|(after, before)| (after - before) as f64 / repeats as f64);
    // Only the CPU path adds to the steps: all zero means another encoder ran.
    let steps: Vec<StepSeconds> = profile::stop()
        .into_iter()
        .map(|(step, seconds)| StepSeconds { step: step.name(), seconds: seconds / repeats as f64 })
        .collect();
    let steps = if steps.iter().all(|s| s.seconds == 0.0) { Vec::new() } else { steps };
    Ok(BenchRow {
        backend: backend.to_string(),
        device: device.to_string(),
        seq_len,
        batch,
        readout: readout_name(readout),
        repeats,
        seconds_per_pass,
        sequences_per_s: batch as f64 / seconds_per_pass,
        tokens_per_s: (batch * seq_len) as f64 / seconds_per_pass,
        bytes_read_back_per_pass,
        steps,
    })
}

/// The whole grid (lengths longer than the model allows are skipped), natively, blocking.
/// `progress` is told about each row as it is measured (the CLI prints it at once: a cell
/// on a software adapter can take many seconds).
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::too_many_arguments)]
pub fn bench_grid_blocking<E: Encoder>(
    encoder: &E,
    backend: &str,
    device: &str,
    lengths: &[usize],
    batches: &[usize],
    readout: Option<Readout>,
    min_seconds: f64,
    mut progress: impl FnMut(&BenchRow),
) -> Result<Vec<BenchRow>> {
    let origin = std::time::Instant::now();
    let now = move || origin.elapsed().as_secs_f64();
    let mut rows = Vec::new();
    for &seq_len in lengths.iter().filter(|&&l| l <= encoder.config().max_tokens()) {
        for &batch in batches {
            let row = pollster::block_on(bench_encoder(
                encoder,
                backend,
                device,
                seq_len,
                batch,
                readout,
                min_seconds,
                100,
                &now,
            ))?;
            progress(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// One cell of the GPU profile: the median of `passes` timed passes (by GPU time).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ProfileRow {
    pub seq_len: usize,
    pub batch: usize,
    /// What the pass hands back ([`readout_name`]).
    pub readout: &'static str,
    pub passes: usize,
    pub profile: crate::gpu::PassProfile,
}

/// Where the GPU encoder's time goes on a `seq_len` x `batch` batch: one untimed warm-up
/// pass, then `passes` passes with every dispatch timed on the GPU
/// ([`crate::gpu::GpuEncoder::profile`]); the pass of median GPU time is reported.
pub async fn profile_encoder(
    encoder: &crate::gpu::GpuEncoder,
    seq_len: usize,
    batch: usize,
    readout: Option<Readout>,
    passes: usize,
    now: &dyn Fn() -> f64,
) -> Result<ProfileRow> {
    let config = encoder.config();
    let tokens = bench_batch(config.vocab_size, seq_len, batch, 42);
    let layers = config.num_layers;
    pass(encoder, &tokens, readout).await?;
    let mut timed = Vec::with_capacity(passes.max(1));
    for _ in 0..passes.max(1) {
        timed.push(encoder.profile(&tokens, layers, readout, now).await?);
    }
    timed.sort_by(|a, b| a.gpu_seconds().total_cmp(&b.gpu_seconds()));
    let profile = timed.swap_remove(timed.len() / 2);
    Ok(ProfileRow { seq_len, batch, readout: readout_name(readout), passes: passes.max(1), profile })
}

/// The profiled cells, and the (length, batch) cells left out for taking several passes.
pub type ProfiledGrid = (Vec<ProfileRow>, Vec<(usize, usize)>);

/// [`profile_encoder`] on each (length, batch) cell; `progress` is told about each cell as
/// it is measured. Lengths longer than the model allows are skipped, and so are cells that
/// take more than one pass of the adapter (a profile times one submission): those are
/// returned beside the rows. The CLI and the bench page both profile through this.
pub async fn profile_cells(
    encoder: &crate::gpu::GpuEncoder,
    cells: &[(usize, usize)],
    readout: Option<Readout>,
    passes: usize,
    now: &dyn Fn() -> f64,
    progress: &mut dyn FnMut(&ProfileRow),
) -> Result<ProfiledGrid> {
    let (mut rows, mut skipped) = (Vec::new(), Vec::new());
    for &(seq_len, batch) in cells.iter().filter(|(l, _)| *l <= encoder.config().max_tokens()) {
        if !encoder.fits_one_pass(seq_len, batch)? {
            skipped.push((seq_len, batch));
            continue;
        }
        let row = profile_encoder(encoder, seq_len, batch, readout, passes, now).await?;
        progress(&row);
        rows.push(row);
    }
    Ok((rows, skipped))
}

/// [`profile_cells`] over the grid `lengths` x `batches`, natively, blocking.
#[cfg(not(target_arch = "wasm32"))]
pub fn profile_grid_blocking(
    encoder: &crate::gpu::GpuEncoder,
    lengths: &[usize],
    batches: &[usize],
    readout: Option<Readout>,
    passes: usize,
    mut progress: impl FnMut(&ProfileRow),
) -> Result<ProfiledGrid> {
    let origin = std::time::Instant::now();
    let now = move || origin.elapsed().as_secs_f64();
    let cells: Vec<(usize, usize)> = lengths.iter().flat_map(|&l| batches.iter().map(move |&b| (l, b))).collect();
    pollster::block_on(profile_cells(encoder, &cells, readout, passes, &now, &mut progress))
}
