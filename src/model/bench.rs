//! Encoder throughput (`medrank bench`): sequences/s and tokens/s of the CPU encoder at
//! several lengths and batch sizes, on seeded random token ids (speed does not depend on
//! the ids), in each precision asked for (f32, int8), plus the process's peak memory, and
//! the same shapes through peer implementations of the same precision for a ratio. Native
//! only (timing and child processes).
//!
//! Peers (in `tests/reference/`): `minilm_onnx.py` runs the same weights in ONNX Runtime
//! (when `pip install onnxruntime onnx` works), with `--int8` quantized by ONNX Runtime's
//! `quantize_dynamic` (the int8 peer); `minilm_numpy.py --bench` in NumPy (f32). All print
//! `{"seconds": [...]}` for repeated forward passes of one batch; the median is used on
//! both sides, after one warm-up pass.

use super::encoder::CpuEncoder;
use super::states::TokenBatch;
use super::Precision;
use crate::error::{Error, Result};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::time::Instant;

/// One measured shape.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BenchPoint {
    pub seq_len: usize,
    pub batch: usize,
    /// The arithmetic that ran (f32, or int8 products).
    pub precision: Precision,
    /// Median seconds per forward pass of the batch.
    pub seconds: f64,
    pub sequences_per_s: f64,
    pub tokens_per_s: f64,
}

impl BenchPoint {
    pub fn from_seconds(seq_len: usize, batch: usize, precision: Precision, seconds: f64) -> BenchPoint {
        BenchPoint {
            seq_len,
            batch,
            precision,
            seconds,
            sequences_per_s: batch as f64 / seconds,
            tokens_per_s: (batch * seq_len) as f64 / seconds,
        }
    }
}

/// The shapes the issue asks for: lengths 128/256/512 x batch 1/8/32.
pub const DEFAULT_LENGTHS: [usize; 3] = [128, 256, 512];
pub const DEFAULT_BATCHES: [usize; 3] = [1, 8, 32];

/// A full-length batch of seeded random ids (no padding; `[CLS]`-free: speed only).
pub fn random_batch(vocab: usize, seq_len: usize, batch: usize, seed: u64) -> TokenBatch {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let low = 1000.min(vocab.saturating_sub(1)) as u32;
    let ids: Vec<u32> = (0..seq_len * batch).map(|_| rng.gen_range(low..vocab as u32)).collect();
    TokenBatch { batch, seq_len, type_ids: vec![0; ids.len()], mask: vec![1; ids.len()], ids }
}

pub fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    let n = xs.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

/// Time the CPU encoder at every (length, batch) in its model's precision: one warm-up,
/// then `repeats` passes. `progress` sees each point as it is measured.
pub fn bench_cpu(
    encoder: &CpuEncoder,
    lengths: &[usize],
    batches: &[usize],
    repeats: usize,
    progress: &mut dyn FnMut(&BenchPoint),
) -> Result<Vec<BenchPoint>> {
    let cfg = &encoder.model.config;
    let mut out = Vec::new();
    for &len in lengths {
        if len > cfg.max_tokens() {
            return Err(Error::invalid(format!("length {len} exceeds the model's {} tokens", cfg.max_tokens())));
        }
        for &b in batches {
            let batch = random_batch(cfg.vocab_size, len, b, 0);
            encoder.hidden_states(&batch, cfg.num_layers)?; // warm-up
            let mut times = Vec::with_capacity(repeats);
            for _ in 0..repeats.max(1) {
                let t0 = Instant::now();
                encoder.hidden_states(&batch, cfg.num_layers)?;
                times.push(t0.elapsed().as_secs_f64());
            }
            let p = BenchPoint::from_seconds(len, b, encoder.model.precision, median(&mut times));
            progress(&p);
            out.push(p);
        }
    }
    Ok(out)
}

/// Peak resident memory of this process so far (Linux `VmHWM`), in bytes.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A peer implementation: `python3 SCRIPT MODEL_DIR --bench LEN BATCH REPEATS ARGS...`
/// printing `{"seconds": [...]}`, in `precision`.
#[derive(Debug, Clone)]
pub struct PeerScript {
    pub name: String,
    pub script: std::path::PathBuf,
    /// Given after the shape (`--int8` for ONNX Runtime's int8 graph).
    pub args: Vec<String>,
    pub precision: Precision,
}

/// Run a peer script at one shape (the first pass is dropped as warm-up). Returns the
/// point, or an error saying why the peer could not run (e.g. the package is not installed).
pub fn bench_peer(
    peer: &PeerScript,
    model_dir: &std::path::Path,
    seq_len: usize,
    batch: usize,
    repeats: usize,
) -> Result<BenchPoint> {
    let script = &peer.script;
    let out = std::process::Command::new("python3")
        .arg(script)
        .arg(model_dir)
        .arg("--bench")
        .args([seq_len.to_string(), batch.to_string(), (repeats + 1).to_string()])
        .args(&peer.args)
        .output()
        .map_err(|e| Error::io(script.display().to_string(), e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(Error::model(format!(
            "peer {} failed: {}",
            script.display(),
            err.lines().last().unwrap_or("no message")
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| Error::model(format!("peer {} printed no JSON: {e}", script.display())))?;
    let mut times: Vec<f64> =
        v["seconds"].as_array().map(|a| a.iter().skip(1).filter_map(|x| x.as_f64()).collect()).unwrap_or_default();
    if times.is_empty() {
        return Err(Error::model(format!("peer {} reported no timings", script.display())));
    }
    Ok(BenchPoint::from_seconds(seq_len, batch, peer.precision, median(&mut times)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_and_medians() {
        let p = BenchPoint::from_seconds(128, 8, Precision::Int8, 0.5);
        assert_eq!((p.sequences_per_s, p.tokens_per_s), (16.0, 2048.0));
        assert_eq!(serde_json::to_value(&p).unwrap()["precision"], "int8");
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        let b = random_batch(30522, 4, 2, 0);
        assert_eq!(b.ids.len(), 8);
        assert!(b.ids.iter().all(|&i| (1000..30522).contains(&i)));
        assert_eq!(b, random_batch(30522, 4, 2, 0));
    }

    /// The peer scripts build the BERT family's graph: for DeBERTa and ModernBERT the report
    /// says they were skipped and why (before, each peer failed on a tensor name: a KeyError).
    #[test]
    fn peers_of_another_family_are_skipped_with_a_reason() {
        use crate::model::config::{Arch, EncoderConfig, HeadKind};
        for arch in [Arch::DebertaV2, Arch::ModernBert] {
            let config = EncoderConfig { vocab_size: 2000, ..EncoderConfig::tiny(arch, 1, HeadKind::None, &[]) };
            let model = crate::model::load::random_model(config, 1).unwrap();
            let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
            let peer = PeerScript {
                name: "numpy".into(),
                script: root.join("tests/reference/minilm_numpy.py"),
                args: vec![],
                precision: Precision::F32,
            };
            let report =
                bench_with_peers(&model, &[Precision::F32], root, &[peer], &[16], &[1], 1, &mut |_| {}).unwrap();
            assert_eq!(report.ours.len(), 1, "{arch:?}: medrank itself is measured");
            let expected = format!(
                "skipped: the peer builds the BERT family's graph (BERT, RoBERTa, DistilBERT), not {}",
                arch.name()
            );
            assert_eq!(report.peers[0].error.as_deref(), Some(expected.as_str()));
            assert!(report.peers[0].points.is_empty());
        }
    }
}

/// A peer's measurements, or why it could not run.
#[derive(Debug, Clone, Serialize)]
pub struct PeerRun {
    pub name: String,
    /// The precision of its points: a peer is compared with medrank's rows of the same.
    pub precision: Precision,
    pub points: Vec<BenchPoint>,
    /// Set when the peer could not run (not installed, failed); no ratio then.
    pub error: Option<String>,
}

/// Ours against the peers at the same shapes.
#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    /// Threads of medrank's CPU path (the peers use all cores too).
    pub threads: usize,
    /// The product kernel of medrank's CPU path on this machine (`matmul::Kernel::name`).
    pub kernel: &'static str,
    /// The int8 product kernel (`int8::Int8Kernel::name`), when int8 rows were measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub int8_kernel: Option<&'static str>,
    /// Every shape in each precision (all f32 points first, then all int8 ones).
    pub ours: Vec<BenchPoint>,
    pub peers: Vec<PeerRun>,
    /// Peak resident memory of the medrank process (bytes), when the OS reports it.
    pub peak_memory_bytes: Option<u64>,
}

impl BenchReport {
    /// Ours at one shape in one precision.
    pub fn point(&self, seq_len: usize, batch: usize, precision: Precision) -> Option<&BenchPoint> {
        find(&self.ours, seq_len, batch, precision)
    }

    /// The shapes measured, in order, and the precisions, in order.
    pub fn shapes_and_precisions(&self) -> (Vec<(usize, usize)>, Vec<Precision>) {
        let (mut shapes, mut precisions) = (Vec::new(), Vec::new());
        for p in &self.ours {
            if !shapes.contains(&(p.seq_len, p.batch)) {
                shapes.push((p.seq_len, p.batch));
            }
            if !precisions.contains(&p.precision) {
                precisions.push(p.precision);
            }
        }
        (shapes, precisions)
    }

    /// ours tokens/s divided by the fastest peer's of the same precision at the same shape
    /// (> 1: medrank faster).
    pub fn ratio_to_fastest_peer(&self, seq_len: usize, batch: usize, precision: Precision) -> Option<f64> {
        let ours = self.point(seq_len, batch, precision)?;
        let best = self
            .peers
            .iter()
            .filter_map(|r| find(&r.points, seq_len, batch, precision))
            .map(|p| p.tokens_per_s)
            .fold(None, |m: Option<f64>, x| Some(m.map_or(x, |m| m.max(x))))?;
        Some(ours.tokens_per_s / best)
    }

    /// int8 tokens/s over f32 tokens/s at one shape: medrank's (`peer` None) or a peer's
    /// whose name has both precisions (> 1: int8 faster).
    pub fn int8_speedup(&self, seq_len: usize, batch: usize, peer: Option<&str>) -> Option<f64> {
        let at = |precision| match peer {
            None => self.point(seq_len, batch, precision),
            Some(name) => {
                self.peers.iter().filter(|r| r.name == name).find_map(|r| find(&r.points, seq_len, batch, precision))
            }
        };
        Some(at(Precision::Int8)?.tokens_per_s / at(Precision::F32)?.tokens_per_s)
    }

    /// A plain-text table: a row per shape and precision, the peers of that precision
    /// beside medrank.
    pub fn table(&self) -> String {
        let mut s = String::from("len  batch  precision  medrank seq/s  tok/s");
        for r in &self.peers {
            s.push_str(&format!("  | {} {} tok/s", r.name, r.precision.name()));
        }
        s.push_str("  | ratio (medrank / fastest peer)  | int8 / f32\n");
        let (shapes, precisions) = self.shapes_and_precisions();
        for (len, batch) in shapes {
            for &precision in &precisions {
                let Some(p) = self.point(len, batch, precision) else { continue };
                s.push_str(&format!(
                    "{:>4} {:>5}  {:>9} {:>14.1} {:>7.0}",
                    len,
                    batch,
                    precision.name(),
                    p.sequences_per_s,
                    p.tokens_per_s
                ));
                for r in &self.peers {
                    match find(&r.points, len, batch, precision) {
                        Some(q) => s.push_str(&format!("  | {:>8.0}", q.tokens_per_s)),
                        None => s.push_str("  |      n/a"),
                    }
                }
                match self.ratio_to_fastest_peer(len, batch, precision) {
                    Some(r) => s.push_str(&format!("  | {r:.2}")),
                    None => s.push_str("  | n/a"),
                }
                match self.int8_speedup(len, batch, None).filter(|_| precision == Precision::Int8) {
                    Some(r) => s.push_str(&format!("  | {r:.2}\n")),
                    None => s.push_str("  |\n"),
                }
            }
        }
        for r in &self.peers {
            if let Some(e) = &r.error {
                s.push_str(&format!("peer {} {}: not measured ({e})\n", r.name, r.precision.name()));
            }
        }
        if let Some(m) = self.peak_memory_bytes {
            s.push_str(&format!("peak memory (medrank process): {:.0} MiB\n", m as f64 / 1048576.0));
        }
        s
    }
}

fn find(points: &[BenchPoint], seq_len: usize, batch: usize, precision: Precision) -> Option<&BenchPoint> {
    points.iter().find(|p| (p.seq_len, p.batch, p.precision) == (seq_len, batch, precision))
}

/// Bench the model's CPU encoder in each of `precisions` (one after the other, each
/// encoder built from the same weights and dropped before the next), then each peer script
/// of one of those precisions at the same shapes. `model_dir` is the folder the peers read
/// (the same weights).
#[allow(clippy::too_many_arguments)]
pub fn bench_with_peers(
    model: &super::load::LoadedModel,
    precisions: &[Precision],
    model_dir: &std::path::Path,
    peers: &[PeerScript],
    lengths: &[usize],
    batches: &[usize],
    repeats: usize,
    progress: &mut dyn FnMut(&str),
) -> Result<BenchReport> {
    let mut ours = Vec::new();
    for &precision in precisions {
        // The tensors are shared by the clone; the CPU layers are built on first use.
        let encoder = CpuEncoder::new(super::load::LoadedModel { precision, ..model.clone() });
        ours.extend(bench_cpu(&encoder, lengths, batches, repeats, &mut |p| {
            progress(&format!(
                "medrank {} len {} batch {}: {:.0} tokens/s",
                p.precision.name(),
                p.seq_len,
                p.batch,
                p.tokens_per_s
            ))
        })?);
    }
    let peak_memory_bytes = peak_memory_bytes();
    // The peer scripts build the BERT family's graph (tests/reference/minilm_numpy.py reads
    // BERT, RoBERTa and DistilBERT folders): another family is reported as skipped, in words,
    // instead of a peer failing on a tensor name.
    let unsupported = matches!(model.config.arch, super::Arch::DebertaV2 | super::Arch::ModernBert).then(|| {
        format!(
            "skipped: the peer builds the BERT family's graph (BERT, RoBERTa, DistilBERT), not {}",
            model.config.arch.name()
        )
    });
    let mut runs = Vec::new();
    for peer in peers.iter().filter(|p| precisions.contains(&p.precision)) {
        let name = format!("{} {}", peer.name, peer.precision.name());
        let mut run = PeerRun { name: peer.name.clone(), precision: peer.precision, points: Vec::new(), error: None };
        if let Some(why) = &unsupported {
            run.error = Some(why.clone());
            runs.push(run);
            continue;
        }
        'shapes: for &len in lengths {
            for &b in batches {
                match bench_peer(peer, model_dir, len, b, repeats) {
                    Ok(p) => {
                        progress(&format!("{name} len {len} batch {b}: {:.0} tokens/s", p.tokens_per_s));
                        run.points.push(p);
                    }
                    Err(e) => {
                        run.error = Some(e.to_string());
                        break 'shapes;
                    }
                }
            }
        }
        runs.push(run);
    }
    let (threads, kernel) = (super::cpu::worker_threads(), super::cpu::matmul::Kernel::this_machine().name());
    let int8_kernel =
        precisions.contains(&Precision::Int8).then(|| super::cpu::int8::Int8Kernel::this_machine().name());
    Ok(BenchReport { threads, kernel, int8_kernel, ours, peers: runs, peak_memory_bytes })
}
