//! `medrank bench`: throughput figures (a benchmark that prints numbers, never a test that
//! times things). The core part builds inputs of the issue's size as *text files* and runs
//! them through the same jobs as the CLI, so parsing and validation are measured too.

use super::output::{emit, OutputArgs, Outputs};
use crate::jobs::{self, NamedText};
use crate::report::Table;
use crate::{Error, Result};
use clap::Args;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;
use std::path::PathBuf;
use std::time::Instant;

use crate::gpu::encoder::GpuEncoder;
use crate::model::Readout;

#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    pub step: String,
    pub size: String,
    pub seconds: f64,
}

fn time<T>(timings: &mut Vec<Timing>, step: &str, size: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let start = Instant::now();
    let out = f()?;
    let seconds = start.elapsed().as_secs_f64();
    eprintln!("  {step} ({size}): {seconds:.2} s");
    timings.push(Timing { step: step.into(), size: size.into(), seconds });
    Ok(out)
}

/// 100,000 arguments (25,000 MCQA instances x 4 systems) with predictions and human
/// rankings, and NRP over 1,000,000 qrels lines with 100,000 answers; plus the statistics
/// alone at that size. Inputs are generated deterministically.
pub fn core(timings: &mut Vec<Timing>) -> Result<()> {
    const INSTANCES: usize = 25_000;
    const SYSTEMS: [&str; 4] = ["expert", "model_a", "model_b", "model_c"];
    let mut bundle = String::with_capacity(INSTANCES * 400);
    let mut predictions = String::from("instance,system,predicted,p_correct\n");
    let mut rankings = String::from("instance,annotator,system,rank\n");
    for i in 0..INSTANCES {
        let answer = 1 + i % 5;
        let _ = write!(
            bundle,
            r#"{{"id":"i{i}","task":"mcqa","question":"Case {i}: a patient presents with finding {i}. What is the diagnosis?","options":{{"1":"A","2":"B","3":"C","4":"D","5":"E"}},"answer":"{answer}","arguments":{{"#
        );
        for (s, system) in SYSTEMS.iter().enumerate() {
            let _ =
                write!(bundle, r#"{}"{system}":"Argument of {system} for case {i}.""#, if s > 0 { "," } else { "" });
            let right = (i * 7 + s * 3) % (4 + s) != 0;
            let predicted = if right { answer } else { 1 + (answer % 5) };
            let _ = writeln!(predictions, "i{i},{system},{predicted},{:.3}", if right { 0.8 } else { 0.1 });
            if i < 1_000 {
                for annotator in ["a1", "a2", "a3"] {
                    let rank = 1 + (s + i + annotator.len()) % 4;
                    let _ = writeln!(rankings, "i{i},{annotator},{system},{rank}");
                }
            }
        }
        bundle.push_str("}}\n");
    }
    let req = jobs::EvaluateRequest {
        bundle: NamedText::new("bench_bundle.jsonl", bundle),
        predictions: vec![jobs::EvaluatorPredictions {
            evaluator: None,
            file: NamedText::new("bench_predictions.csv", predictions),
        }],
        rankings: Some(NamedText::new("bench_rankings.csv", rankings)),
        corpus: None,
        options: jobs::ProxyOptions::default(),
    };
    time(
        timings,
        "evaluate: parse + check + rank + 1000 paired bootstrap resamples + human agreement",
        "100,000 arguments, 12,000 human ranks",
        || jobs::evaluate_predictions(&req),
    )?;

    // Statistics alone on 100,000 pairs.
    let x: Vec<f64> = (0..100_000u64).map(|i| ((i * 7919) % 1000) as f64).collect();
    let y: Vec<f64> = (0..100_000u64).map(|i| ((i * 104_729) % 997) as f64 + (i % 3) as f64).collect();
    time(timings, "Kendall tau-b with p-value", "100,000 pairs", || Ok(crate::stats::kendall::tau_b(&x, &y)))?;
    time(timings, "Spearman rho with p-value", "100,000 pairs", || Ok(crate::stats::spearman::spearman(&x, &y)))?;
    let blocks: Vec<Vec<f64>> =
        (0..25_000u64).map(|i| (0..4u64).map(|s| ((i * 31 + s * 17) % 5) as f64).collect()).collect();
    time(timings, "Friedman test", "25,000 blocks x 4 systems", || Ok(crate::stats::friedman::friedman(&blocks)))?;
    let coders: Vec<Vec<Option<f64>>> = (0..3u64)
        .map(|c| {
            (0..100_000u64).map(|u| if (u + c) % 11 == 0 { None } else { Some((1 + (u * 3 + c) % 4) as f64) }).collect()
        })
        .collect();
    time(timings, "Krippendorff's alpha (ordinal)", "3 coders x 100,000 units", || {
        Ok(crate::stats::krippendorff::alpha(&coders, crate::stats::krippendorff::Level::Ordinal))
    })?;

    // NRP: 1,000 queries x 1,000 judged documents, 10 systems x 10 samples per query.
    const QUERIES: usize = 1_000;
    const DOCS: usize = 1_000;
    let mut topics = String::new();
    let mut qrels = String::with_capacity(QUERIES * DOCS * 20);
    let mut run = String::with_capacity(QUERIES * DOCS * 40);
    let mut answers = String::new();
    let mut scores = String::from("qid,system,prompt,sample,score\n");
    for q in 0..QUERIES {
        let _ = writeln!(topics, r#"{{"qid":"q{q}","query":"query {q}"}}"#);
        for d in 0..DOCS {
            let _ = writeln!(qrels, "q{q} 0 d{q}-{d} {}", (d * 31 + q) % 3);
            let _ = writeln!(run, "q{q} Q0 d{q}-{d} {} {} bench", d + 1, 1000.0 - ((d * 17 + q) % 997) as f64 / 10.0);
        }
        for s in 0..10 {
            for sample in 0..10 {
                let _ = writeln!(
                    answers,
                    r#"{{"qid":"q{q}","system":"m{s}","prompt":"p","sample":{sample},"text":"answer"}}"#
                );
                let _ = writeln!(scores, "q{q},m{s},p,{sample},{}", 1000.0 - ((q + s * 7 + sample) % 103) as f64);
            }
        }
    }
    let req = jobs::NrpRequest {
        topics: NamedText::new("bench_topics.jsonl", topics),
        qrels: vec![jobs::QrelsFile {
            dimension: Some("relevance".into()),
            file: NamedText::new("bench_qrels.txt", qrels),
        }],
        documents: None,
        answers: vec![jobs::AnswerFile {
            file: NamedText::new("bench_answers.jsonl", answers),
            system: None,
            prompt: None,
        }],
        rankers: vec![jobs::PrecomputedRanker {
            name: "bench".into(),
            run: NamedText::new("bench_run.txt", run),
            answer_scores: NamedText::new("bench_answer_scores.csv", scores),
        }],
        expert_rankings: None,
        options: jobs::NrpRequestOptions { bm25: false, ..Default::default() },
    };
    time(
        timings,
        "nrp: parse + check + nDCG@10 validation + NRP + 1000 bootstrap resamples",
        "1,000,000 qrels lines, 1,000,000 run lines, 100,000 answers",
        || jobs::nrp(&req),
    )?;
    Ok(())
}

/// Everything one `medrank bench` run measured.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BenchReport {
    pub version: String,
    pub core: Vec<Timing>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub encoder: Option<crate::model::bench::BenchReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuBench>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_profile: Option<GpuProfile>,
    /// The end-to-end job (`evaluate` on the CasiMedicos dev bundle), per backend.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workload: Vec<jobs::WorkloadResult>,
    /// The CPU path's seconds per step, per cell, timed by the bench page's own function.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub profile: Vec<crate::gpu::bench::BenchRow>,
    /// Whole-encoder fine-tuning, CPU and GPU trainers and the PyTorch peer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub train: Option<super::bench_train::TrainBench>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GpuBench {
    pub adapter: crate::gpu::context::AdapterSummary,
    /// The linear layers' weights and arithmetic (`MEDRANK_GPU_PRECISION`; f32 unless asked).
    pub weight_format: crate::gpu::encoder::WeightFormat,
    pub rows: Vec<crate::gpu::bench::BenchRow>,
    /// Cells left out (software adapter without --full-gpu-grid).
    pub skipped: Vec<(usize, usize)>,
    /// PyTorch on CUDA on the same folder and cells, where it runs.
    pub peer: Option<TorchPeer>,
    /// Why there is no peer (no CUDA device, PyTorch missing, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_skipped: Option<String>,
}

/// The PyTorch CUDA peer's figures (tests/reference/torch_cuda_peer.py).
#[derive(Debug, Clone, Serialize)]
pub struct TorchPeer {
    pub device: String,
    pub torch: String,
    pub cells: Vec<TorchPeerCell>,
}

/// Median tokens/s of one cell, fp32 (TF32 off) and fp16.
#[derive(Debug, Clone, Serialize)]
pub struct TorchPeerCell {
    pub seq_len: usize,
    pub batch: usize,
    pub fp32_tokens_per_s: f64,
    pub fp16_tokens_per_s: f64,
}

impl TorchPeer {
    fn cell(&self, seq_len: usize, batch: usize) -> Option<&TorchPeerCell> {
        self.cells.iter().find(|c| (c.seq_len, c.batch) == (seq_len, batch))
    }
}

/// Runs the PyTorch CUDA peer over `cells` (one process for all: CUDA starts once).
/// `Err` says why it could not run, which the bench reports as a skipped peer.
fn torch_peer(script: &Path, model_dir: &Path, cells: &[(usize, usize)]) -> std::result::Result<TorchPeer, String> {
    let grid: Vec<String> = cells.iter().map(|(l, b)| format!("{l}x{b}")).collect();
    let v = super::peers::run_peer_script(
        script,
        model_dir,
        &["--grid", &grid.join(","), "--repeats", "5", "--warmup", "3"],
    )?;
    let median_rate = |cell: &serde_json::Value, key: &str, tokens: usize| -> f64 {
        let mut times: Vec<f64> =
            cell[key].as_array().map(|a| a.iter().filter_map(|x| x.as_f64()).collect()).unwrap_or_default();
        if times.is_empty() {
            return f64::NAN;
        }
        tokens as f64 / crate::model::bench::median(&mut times)
    };
    let cells = v["cells"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|c| {
                    let (l, b) = (c["seq_len"].as_u64()? as usize, c["batch"].as_u64()? as usize);
                    Some(TorchPeerCell {
                        seq_len: l,
                        batch: b,
                        fp32_tokens_per_s: median_rate(c, "fp32", l * b),
                        fp16_tokens_per_s: median_rate(c, "fp16", l * b),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(TorchPeer {
        device: v["device"].as_str().unwrap_or("?").to_string(),
        torch: v["torch"].as_str().unwrap_or("?").to_string(),
        cells,
    })
}

/// The GPU profile: per cell, GPU time per step of the pass.
#[derive(Debug, Clone, Serialize)]
pub struct GpuProfile {
    pub adapter: crate::gpu::context::AdapterSummary,
    pub rows: Vec<crate::gpu::bench::ProfileRow>,
    /// Cells that take more than one pass on this adapter (a profile times one).
    pub skipped: Vec<(usize, usize)>,
    /// Why there are no rows (no timestamp-query on this adapter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

/// Times every dispatch of the GPU encoder's pass on the GPU (timestamp queries) and sums
/// them per step. On an adapter without timestamps it says so and measures nothing.
/// The model folder's GPU encoder on this machine's adapter, opened once for every GPU part
/// of a bench run (the weights are uploaded once).
/// With it, the readout the model's jobs take from the GPU: its pooling (the similarity
/// evaluator, dense ranking), or its head's logits where it has one (MCQA, classification,
/// grading, NLI).
fn open_gpu<'a>(slot: &'a mut Option<(GpuEncoder, Readout)>, model_dir: &Path) -> Result<&'a (GpuEncoder, Readout)> {
    if slot.is_none() {
        let model = crate::model::TextModel::read_dir(model_dir)?;
        let ctx = crate::gpu::context::GpuContext::new_blocking()?;
        eprintln!("  adapter: {}", ctx.adapter);
        let readout = match model.encoder.model.head {
            Some(_) => Readout::Logits,
            None => Readout::Pooled(model.pooling),
        };
        *slot = Some((GpuEncoder::with_context(ctx, &model.encoder.model)?, readout));
    }
    Ok(slot.as_ref().expect("opened above"))
}

pub fn gpu_profile(
    encoder: &GpuEncoder,
    readout: Readout,
    lengths: &[usize],
    batches: &[usize],
    full_grid: bool,
) -> Result<GpuProfile> {
    let adapter = encoder.context().adapter.clone();
    if !adapter.timestamps {
        let why = format!("{} has no timestamp-query feature: GPU time per step cannot be measured", adapter.name);
        eprintln!("  {why}");
        return Ok(GpuProfile { adapter, rows: Vec::new(), skipped: Vec::new(), unavailable: Some(why) });
    }
    let (lengths, batches) = if adapter.is_fallback && !full_grid {
        eprintln!("  software adapter: profiling length 128 x batch 1 only (--full-gpu-grid for all); its times are CPU emulation");
        (vec![128], vec![1])
    } else {
        (lengths.to_vec(), batches.to_vec())
    };
    let (rows, skipped) =
        crate::gpu::bench::profile_grid_blocking(encoder, &lengths, &batches, Some(readout), 5, |r| {
            let gpu = r.profile.gpu_seconds();
            let worst = r.profile.steps.iter().max_by(|a, b| a.seconds.total_cmp(&b.seconds));
            eprintln!(
                "  len {} batch {}: {:.2} ms on the GPU, most in {} ({:.0} %); read-back {:.2} ms",
                r.seq_len,
                r.batch,
                gpu * 1e3,
                worst.map_or("-", |w| w.step),
                worst.map_or(0.0, |w| 100.0 * w.seconds / gpu.max(f64::MIN_POSITIVE)),
                r.profile.readback_seconds * 1e3
            )
        })?;
    for (l, b) in &skipped {
        eprintln!("  len {l} batch {b}: not profiled (more than one pass on this adapter)");
    }
    Ok(GpuProfile { adapter, rows, skipped, unavailable: None })
}

/// The CPU encoder in each of `precisions` against its peers of the same precision on the
/// same weights and shapes: ONNX Runtime and NumPy in f32, ONNX Runtime's dynamic int8
/// quantization of the same graph (`minilm_onnx.py --int8`) in int8.
pub fn encoder(
    model_dir: &Path,
    peers_dir: &Path,
    precisions: &[crate::model::Precision],
    lengths: &[usize],
    batches: &[usize],
    repeats: usize,
) -> Result<crate::model::bench::BenchReport> {
    use crate::model::bench::PeerScript;
    use crate::model::Precision;
    let model = crate::model::TextModel::read_dir(model_dir)?;
    let peer = |name: &str, script: &str, args: &[&str], precision| PeerScript {
        name: name.into(),
        script: peers_dir.join(script),
        args: args.iter().map(|a| a.to_string()).collect(),
        precision,
    };
    let peers = [
        peer("onnxruntime", "minilm_onnx.py", &[], Precision::F32),
        peer("numpy", "minilm_numpy.py", &[], Precision::F32),
        peer("onnxruntime", "minilm_onnx.py", &["--int8"], Precision::Int8),
    ];
    crate::model::bench::bench_with_peers(
        &model.encoder.model,
        precisions,
        model_dir,
        &peers,
        lengths,
        batches,
        repeats,
        &mut |line| eprintln!("  {line}"),
    )
}

/// Where the CPU path's time goes, per cell: the same `gpu::bench::bench_encoder` as the bench
/// page, so its steps compare one to one with the page's.
pub fn profile(model_dir: &Path, lengths: &[usize], batches: &[usize]) -> Result<Vec<crate::gpu::bench::BenchRow>> {
    let model = crate::model::TextModel::read_dir(model_dir)?;
    let threads = crate::model::cpu::worker_threads();
    let device = format!("CPU, {threads} threads, {}", crate::model::cpu::matmul::Kernel::this_machine().name());
    crate::gpu::bench::bench_grid_blocking(&model.encoder, "cpu", &device, lengths, batches, None, 1.0, |r| {
        let total: f64 = r.steps.iter().map(|s| s.seconds).sum();
        let worst = r.steps.iter().max_by(|a, b| a.seconds.total_cmp(&b.seconds));
        eprintln!(
            "  len {} batch {}: {:.0} tokens/s; {:.1} ms of thread time per pass, most in {} ({:.0} %)",
            r.seq_len,
            r.batch,
            r.tokens_per_s,
            total * 1e3,
            worst.map_or("-", |w| w.step),
            worst.map_or(0.0, |w| 100.0 * w.seconds / total.max(f64::MIN_POSITIVE))
        )
    })
}

/// The wgpu encoder of `model_dir` on this machine's adapter: each cell twice, reading back
/// every token's state and then only what the model's jobs read (`readout`).
pub fn gpu(
    encoder: &GpuEncoder,
    readout: Readout,
    model_dir: &Path,
    peers_dir: &Path,
    lengths: &[usize],
    batches: &[usize],
    full_grid: bool,
) -> Result<GpuBench> {
    let adapter = encoder.context().adapter.clone();
    let software = adapter.is_fallback;
    let mut skipped = Vec::new();
    let (lengths, batches): (Vec<usize>, Vec<usize>) = if software && !full_grid {
        for &l in lengths {
            for &b in batches {
                if !(l == 128 && (b == 1 || b == 8)) {
                    skipped.push((l, b));
                }
            }
        }
        eprintln!("  software adapter: measuring length 128 x batch 1 and 8 only (--full-gpu-grid for all; it takes tens of minutes)");
        (vec![128], vec![1, 8])
    } else {
        (lengths.to_vec(), batches.to_vec())
    };
    let mut rows = Vec::new();
    for readout in [None, Some(readout)] {
        let name = crate::gpu::bench::readout_name(readout);
        rows.extend(crate::gpu::bench::bench_grid_blocking(
            encoder,
            "wgpu",
            &adapter.name,
            &lengths,
            &batches,
            readout,
            1.0,
            |r| {
                eprintln!(
                    "  len {} batch {} ({name}): {:.1} seq/s, {:.0} tokens/s, {:.0} bytes read back a pass",
                    r.seq_len,
                    r.batch,
                    r.sequences_per_s,
                    r.tokens_per_s,
                    r.bytes_read_back_per_pass.unwrap_or(0.0)
                )
            },
        )?);
    }
    // Each cell once for the peer (the grid above measured every cell twice).
    let mut cells: Vec<(usize, usize)> = rows.iter().map(|r| (r.seq_len, r.batch)).collect();
    cells.sort_unstable();
    cells.dedup();
    let (peer, peer_skipped) = if software {
        (None, Some("a software adapter is not compared with a GPU peer".to_string()))
    } else {
        eprintln!("  PyTorch CUDA peer on the same folder and cells:");
        match torch_peer(&peers_dir.join("torch_cuda_peer.py"), model_dir, &cells) {
            Ok(p) => {
                for c in &p.cells {
                    eprintln!(
                        "  PyTorch len {} batch {}: fp32 {:.0}, fp16 {:.0} tokens/s",
                        c.seq_len, c.batch, c.fp32_tokens_per_s, c.fp16_tokens_per_s
                    );
                }
                (Some(p), None)
            }
            Err(why) => {
                eprintln!("  PyTorch peer skipped: {why}");
                (None, Some(why))
            }
        }
    };
    Ok(GpuBench { adapter, weight_format: encoder.weight_format(), rows, skipped, peer, peer_skipped })
}

/// The workload (`jobs::run_workload`, the same job the benchmark page times) on each backend
/// of `backends` ("cpu", "gpu"); a backend that cannot start is reported and skipped.
pub fn workload(
    model_dir: &Path,
    dev: &Path,
    backends: &[String],
    precisions: &[crate::model::Precision],
) -> Result<Vec<jobs::WorkloadResult>> {
    let files = crate::model::ModelFiles::read_dir(model_dir)?;
    let mut model = jobs::KeptModel::from_files(&files)?;
    let dev = super::output::read_input(dev)?;
    let clock = Instant::now();
    let now = || clock.elapsed().as_secs_f64();
    let mut out = Vec::new();
    let runs = precisions.iter().flat_map(|&p| backends.iter().map(move |b| (p, b)));
    for (precision, name) in runs {
        let choice = jobs::parse_backend(name)?;
        if precision == crate::model::Precision::Int8 && choice != crate::gpu::BackendChoice::Cpu {
            continue; // int8 runs on the CPU only (its CPU row is there)
        }
        model.set_precision(precision);
        let name = &format!("{name} {}", precision.name());
        if choice != crate::gpu::BackendChoice::Cpu {
            // `auto` takes a hardware adapter only; when it falls back, the CPU row is there already.
            match pollster::block_on(model.encoder(choice)) {
                Err(e) => {
                    eprintln!("  {name}: not run ({e})");
                    continue;
                }
                Ok((_, report)) if report.backend != "gpu" => {
                    eprintln!("  {name}: no GPU run ({})", report.fallback_reason().unwrap_or("no adapter"));
                    continue;
                }
                Ok(_) => {}
            }
        }
        let mut last = 0;
        let result = pollster::block_on(jobs::run_workload(&mut model, &dev, choice, &now, &mut |done, total| {
            if done == total || done >= last + 500 {
                last = done;
                eprintln!("  {name}: {done} / {total} sequences ({:.1} s)", now());
            }
            true
        }))?;
        eprintln!(
            "  {name}: {} sequences in {:.1} s = {:.1} sequences/s ({}, {} threads)",
            result.sequences, result.seconds, result.sequences_per_s, result.device, result.threads
        );
        out.push(result);
    }
    Ok(out)
}

/// The CPU encoder's grid: a row per shape and precision (f32 and int8 of a shape next to
/// each other), each peer's column showing its run of the row's precision ("-" where the
/// peer has none, as NumPy in int8), medrank over the fastest peer of that precision, and
/// on int8 rows int8 over f32 tokens/s for medrank and for each peer run in both.
fn encoder_table(e: &crate::model::bench::BenchReport) -> Table {
    use crate::model::Precision;
    let mut names: Vec<&str> = Vec::new();
    for p in &e.peers {
        if !names.contains(&p.name.as_str()) {
            names.push(&p.name);
        }
    }
    let (shapes, precisions) = e.shapes_and_precisions();
    let both = precisions.contains(&Precision::F32) && precisions.contains(&Precision::Int8);
    // A peer's int8 / f32 column only where it ran in both precisions.
    let speedup_peers: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| {
            both && [Precision::F32, Precision::Int8]
                .iter()
                .all(|&q| e.peers.iter().any(|r| r.name == *n && r.precision == q))
        })
        .collect();
    let mut headers = vec![
        "length".to_string(),
        "batch".into(),
        "precision".into(),
        "medrank seq/s".into(),
        "medrank tokens/s".into(),
    ];
    headers.extend(names.iter().map(|n| format!("{n} tokens/s")));
    headers.push("medrank / fastest peer".into());
    if both {
        headers.push("medrank int8 / f32".into());
        headers.extend(speedup_peers.iter().map(|n| format!("{n} int8 / f32")));
    }
    let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let kernels = match e.int8_kernel {
        Some(k) => format!("{} f32 kernel, {k} int8 kernel", e.kernel),
        None => e.kernel.to_string(),
    };
    let title = format!(
        "Encoder on the CPU ({} threads, {kernels}): medrank and peers of the same precision on the same weights and inputs",
        e.threads
    );
    let mut t = Table::new("bench_encoder", &title, &refs);
    let ratio = |r: Option<f64>| r.map_or("n/a".to_string(), |r| format!("{r:.2}"));
    for (len, batch) in shapes {
        for &precision in &precisions {
            let Some(p) = e.point(len, batch, precision) else { continue };
            let mut row = vec![
                len.to_string(),
                batch.to_string(),
                precision.name().to_string(),
                format!("{:.1}", p.sequences_per_s),
                format!("{:.0}", p.tokens_per_s),
            ];
            for name in &names {
                let run = e.peers.iter().find(|r| r.name == *name && r.precision == precision);
                row.push(match run {
                    None => "-".into(),
                    Some(run) => match run.points.iter().find(|q| (q.seq_len, q.batch) == (len, batch)) {
                        Some(q) => format!("{:.0}", q.tokens_per_s),
                        None => run.error.clone().map_or("n/a".into(), |e| format!("n/a ({e})")),
                    },
                });
            }
            row.push(ratio(e.ratio_to_fastest_peer(len, batch, precision)));
            if both {
                let int8 = precision == Precision::Int8;
                row.push(if int8 { ratio(e.int8_speedup(len, batch, None)) } else { String::new() });
                for name in &speedup_peers {
                    row.push(if int8 { ratio(e.int8_speedup(len, batch, Some(name))) } else { String::new() });
                }
            }
            t.push(row);
        }
    }
    if e.int8_kernel.is_some() {
        note(
            &mut t,
            "int8: medrank's weights per output channel with 7-bit activations per token; ONNX Runtime's quantize_dynamic (per channel, QInt8) of the same graph's linear layers, uint8 activations per tensor",
        );
    }
    t
}

/// A table's note goes after its title (tables have no other place for one).
fn note(t: &mut Table, text: &str) {
    t.title = format!("{}. {text}", t.title);
}

impl BenchReport {
    pub fn tables(&self) -> Vec<Table> {
        let mut tables = Vec::new();
        if !self.core.is_empty() {
            let mut t = Table::new(
                "bench_core",
                "Core (non-neural): wall-clock seconds on this machine",
                &["step", "size", "seconds"],
            );
            for x in &self.core {
                t.push(vec![x.step.clone(), x.size.clone(), format!("{:.2}", x.seconds)]);
            }
            tables.push(t);
        }
        if let Some(e) = &self.encoder {
            tables.push(encoder_table(e));
            if let Some(m) = e.peak_memory_bytes {
                let mut t = Table::new("bench_memory", "Peak memory", &["process", "peak resident MiB"]);
                t.push(vec!["medrank".into(), format!("{:.0}", m as f64 / 1048576.0)]);
                tables.push(t);
            }
        }
        if let Some(g) = &self.gpu {
            let title = format!(
                "Encoder on the GPU (wgpu): {} ({}{}); weights {:?}",
                g.adapter.name,
                g.adapter.backend,
                if g.adapter.is_fallback { ", a software adapter: not the speed target" } else { "" },
                g.weight_format
            );
            let mut headers = vec!["length", "batch", "read back", "bytes read back a pass", "seq/s", "tokens/s"];
            if g.peer.is_some() {
                headers.extend(["PyTorch fp32 tokens/s", "PyTorch fp16 tokens/s", "medrank / PyTorch fp32"]);
            }
            let mut t = Table::new("bench_gpu", &title, &headers);
            for r in &g.rows {
                let mut row = vec![
                    r.seq_len.to_string(),
                    r.batch.to_string(),
                    r.readout.to_string(),
                    r.bytes_read_back_per_pass.map_or("n/a".into(), |b| format!("{b:.0}")),
                    format!("{:.2}", r.sequences_per_s),
                    format!("{:.0}", r.tokens_per_s),
                ];
                if let Some(peer) = &g.peer {
                    match peer.cell(r.seq_len, r.batch) {
                        Some(c) => row.extend([
                            format!("{:.0}", c.fp32_tokens_per_s),
                            format!("{:.0}", c.fp16_tokens_per_s),
                            format!("{:.2}", r.tokens_per_s / c.fp32_tokens_per_s),
                        ]),
                        None => row.extend(["n/a".to_string(), "n/a".into(), "n/a".into()]),
                    }
                }
                t.push(row);
            }
            for (l, b) in &g.skipped {
                let mut row = vec![l.to_string(), b.to_string(), "skipped".into(), "(software adapter)".into()];
                row.resize(headers.len(), String::new());
                t.push(row);
            }
            match (&g.peer, &g.peer_skipped) {
                (Some(p), _) => note(&mut t, &format!(
                    "PyTorch {} on {}: AutoModel of the same folder, inference mode, TF32 off for fp32; \
                     the forward pass on the GPU with the states left there (medrank's figures include copying what each row says back to the host); median of 5 after 3 warm-ups",
                    p.torch, p.device
                )),
                (None, Some(why)) => note(&mut t, &format!("no GPU peer: {why}")),
                (None, None) => {}
            }
            tables.push(t);
        }
        if let Some(p) = &self.gpu_profile {
            let title = format!(
                "Where the GPU encoder's time goes: {} ({}{})",
                p.adapter.name,
                p.adapter.backend,
                if p.adapter.is_fallback { ", a software adapter: CPU emulation, not GPU time" } else { "" }
            );
            let mut t = Table::new(
                "bench_gpu_profile",
                &title,
                &["length", "batch", "read back", "step", "dispatches", "ms", "% of GPU time"],
            );
            for r in &p.rows {
                let gpu = r.profile.gpu_seconds();
                let cell = |step: &str, dispatches: String, seconds: f64, share: String| {
                    vec![
                        r.seq_len.to_string(),
                        r.batch.to_string(),
                        r.readout.to_string(),
                        step.to_string(),
                        dispatches,
                        format!("{:.3}", seconds * 1e3),
                        share,
                    ]
                };
                for s in &r.profile.steps {
                    let share = format!("{:.1}", 100.0 * s.seconds / gpu.max(f64::MIN_POSITIVE));
                    t.push(cell(s.step, s.dispatches.to_string(), s.seconds, share));
                }
                t.push(cell("GPU time, all steps", String::new(), gpu, "100.0".into()));
                let read_back = format!("read-back of {} bytes (host clock)", r.profile.readback_bytes);
                t.push(cell(&read_back, String::new(), r.profile.readback_seconds, String::new()));
                t.push(cell("whole timed pass (host clock)", String::new(), r.profile.wall_seconds, String::new()));
            }
            for (l, b) in &p.skipped {
                t.push(vec![
                    l.to_string(),
                    b.to_string(),
                    String::new(),
                    "not profiled: more than one pass on this adapter".into(),
                    String::new(),
                    String::new(),
                    String::new(),
                ]);
            }
            if let Some(why) = &p.unavailable {
                note(&mut t, why);
            } else {
                note(&mut t, "GPU time from timestamp queries, each dispatch in a timed pass of its own; the pass of median GPU time of 5, after one warm-up");
            }
            tables.push(t);
        }
        if let Some(first) = self.profile.first() {
            let mut headers = vec!["length".to_string(), "batch".into()];
            headers.extend(first.steps.iter().map(|s| format!("{} ms", s.step)));
            headers.push("all steps ms".into());
            let refs: Vec<&str> = headers.iter().map(String::as_str).collect();
            let title = format!(
                "Where the CPU path's time goes ({}): milliseconds per pass in each step, summed over threads",
                first.device
            );
            let mut t = Table::new("bench_profile", &title, &refs);
            for r in &self.profile {
                let mut row = vec![r.seq_len.to_string(), r.batch.to_string()];
                row.extend(r.steps.iter().map(|s| format!("{:.2}", s.seconds * 1e3)));
                row.push(format!("{:.2}", r.steps.iter().map(|s| s.seconds).sum::<f64>() * 1e3));
                t.push(row);
            }
            tables.push(t);
        }
        if !self.workload.is_empty() {
            let mut t = Table::new(
                "bench_workload",
                "Workload: evaluate --model on the CasiMedicos dev bundle (+ no_argument control), end to end",
                &[
                    "backend",
                    "precision",
                    "device",
                    "threads",
                    "instances",
                    "sequences",
                    "seconds",
                    "sequences/s",
                    "accuracy",
                ],
            );
            for w in &self.workload {
                t.push(vec![
                    w.backend.clone(),
                    w.precision.clone(),
                    w.device.clone(),
                    w.threads.to_string(),
                    w.instances.to_string(),
                    w.sequences.to_string(),
                    format!("{:.1}", w.seconds),
                    format!("{:.1}", w.sequences_per_s),
                    w.accuracy.map_or("n/a".into(), |a| format!("{a:.4}")),
                ]);
            }
            tables.push(t);
        }
        if let Some(t) = &self.train {
            tables.push(t.table());
        }
        tables
    }
}

// ---------------------------------------------------------------------------------------
// The subcommand

/// The parts of `medrank bench` (`--parts`): every name is checked before any part runs.
const PARTS: [&str; 7] = ["core", "encoder", "gpu", "gpu-profile", "workload", "profile", "train"];

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Parts to run, comma separated: core, encoder (CPU, with the peers), gpu (wgpu, with
    /// PyTorch on CUDA as the peer where it runs), gpu-profile (the GPU's time per step),
    /// workload (`evaluate --model` end to end on the CasiMedicos dev bundle), profile (the
    /// CPU path's time per step, as the bench page reports it), train (fine-tuning every
    /// layer on the CPU and GPU trainers, with PyTorch on CUDA as the peer where it runs).
    #[arg(long, value_delimiter = ',', default_value = "core,encoder,gpu", value_parser = PARTS)]
    pub parts: Vec<String>,
    /// The CasiMedicos dev file the workload's bundle is made from.
    #[arg(long, value_name = "FILE", default_value = "data/casimedicos/dev.jsonl")]
    pub workload_data: PathBuf,
    /// Backends the workload runs on, comma separated: cpu, auto (a hardware GPU when there
    /// is one), gpu (any adapter, software ones too: slow).
    #[arg(long, value_delimiter = ',', default_value = "cpu,auto", value_parser = ["cpu", "auto", "gpu"])]
    pub workload_backends: Vec<String>,
    /// Model folder for the encoder benchmarks. Or a Hugging Face Hub id, ORG/NAME[@REVISION] (README, "Models").
    #[arg(long, value_name = "DIR", default_value = "models/all-MiniLM-L6-v2")]
    pub model: PathBuf,
    /// Sequence lengths of the encoder grid (each 1 to 512, and at most the model's limit).
    #[arg(long, value_delimiter = ',', default_value = "128,256,512", value_parser = super::args::count(1, crate::bounds::MAX_BENCH_LENGTH))]
    pub lengths: Vec<usize>,
    /// Batch sizes of the encoder grid (each 1 to 1,024).
    #[arg(long, value_delimiter = ',', default_value = "1,8,32", value_parser = super::args::count(1, crate::bounds::MAX_BATCH))]
    pub batches: Vec<usize>,
    /// Precisions of the CPU encoder grid (the `encoder` part) and of the workload,
    /// comma separated: each shape runs in each, printed side by side with int8 / f32
    /// tokens/s, and each is compared with peers of the same precision (ONNX Runtime and
    /// NumPy in f32; ONNX Runtime's dynamic int8 quantization of the same weights in int8);
    /// the workload runs the CPU in each and the GPU in f32.
    #[arg(long, value_name = "LIST", value_delimiter = ',', default_value = "f32,int8", value_parser = ["f32", "int8"])]
    pub precision: Vec<String>,
    /// Timed passes per cell (1 to 1,000; the median is reported).
    #[arg(long, default_value_t = 3, value_parser = super::args::count(1, crate::bounds::MAX_REPEATS))]
    pub repeats: usize,
    /// Folder of the peer scripts (ONNX Runtime, NumPy and PyTorch CUDA forward passes of
    /// the same weights).
    #[arg(long, value_name = "DIR", default_value = "tests/reference")]
    pub peers: PathBuf,
    /// Sequence lengths of the `train` part (each 1 to 512, and at most the model's limit).
    #[arg(long, value_delimiter = ',', default_value = "256,512", value_parser = super::args::count(1, crate::bounds::MAX_BENCH_LENGTH))]
    pub train_lengths: Vec<usize>,
    /// Trainers of the `train` part, comma separated: cpu (every thread of this machine),
    /// gpu (a hardware adapter, with PyTorch on CUDA as the peer where it runs).
    #[arg(long, value_delimiter = ',', default_value = "cpu,gpu", value_parser = ["cpu", "gpu"])]
    pub train_backends: Vec<String>,
    /// Questions (of five options each) per optimiser step in the `train` part (1 to 1,024).
    #[arg(long, default_value_t = 16, value_parser = super::args::count(1, crate::bounds::MAX_BATCH))]
    pub train_questions: usize,
    /// On a software adapter (lavapipe, SwiftShader) the GPU grid is cut to length 128 x
    /// batch 1 and 8 (the full grid takes tens of minutes); this runs it all anyway.
    #[arg(long)]
    pub full_gpu_grid: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub(super) fn bench(mut a: BenchArgs) -> Result<()> {
    let outputs = Outputs::plan(&[&a.model], &a.output, &[], &[])?;
    // Every part but `core` runs the model, which may be a Hub id: its folder in the cache.
    if a.parts.iter().any(|p| p != "core") {
        a.model = super::hub::model_folder(&a.model, a.output.quiet)?.dir;
    }
    if cfg!(debug_assertions) {
        eprintln!(
            "note: this is a debug build of medrank; figures of `cargo run --release -- bench` are the ones to quote"
        );
    }
    let mut report = BenchReport::default();
    let mut gpu_encoder = None;
    // `--precision`: the encoder grid's and the workload's (each once, in the order given).
    let mut precisions = Vec::new();
    for name in &a.precision {
        let p = crate::model::Precision::parse(name)?;
        if !precisions.contains(&p) {
            precisions.push(p);
        }
    }
    for part in &a.parts {
        match part.as_str() {
            "core" => {
                eprintln!("core (non-neural):");
                core(&mut report.core)?;
            }
            "encoder" => {
                eprintln!("encoder on the CPU and its peers on the same weights:");
                report.encoder = Some(encoder(&a.model, &a.peers, &precisions, &a.lengths, &a.batches, a.repeats)?);
            }
            "gpu" => {
                eprintln!("encoder on the GPU (wgpu):");
                let (encoder, readout) = open_gpu(&mut gpu_encoder, &a.model)?;
                report.gpu = Some(gpu(encoder, *readout, &a.model, &a.peers, &a.lengths, &a.batches, a.full_gpu_grid)?);
            }
            "gpu-profile" => {
                eprintln!("the GPU encoder's time per step (timestamp queries):");
                let (encoder, readout) = open_gpu(&mut gpu_encoder, &a.model)?;
                report.gpu_profile = Some(gpu_profile(encoder, *readout, &a.lengths, &a.batches, a.full_gpu_grid)?);
            }
            "workload" => {
                eprintln!("workload: evaluate --model on the CasiMedicos dev bundle:");
                report.workload = workload(&a.model, &a.workload_data, &a.workload_backends, &precisions)?;
            }
            "profile" => {
                eprintln!("the CPU path's time per step:");
                report.profile = profile(&a.model, &a.lengths, &a.batches)?;
            }
            "train" => {
                eprintln!("fine-tuning every layer, CPU and GPU trainers:");
                let trainers = super::bench_train::Trainers {
                    cpu: a.train_backends.iter().any(|b| b == "cpu"),
                    gpu: a.train_backends.iter().any(|b| b == "gpu"),
                };
                report.train = Some(super::bench_train::train_bench(
                    &a.model,
                    &a.peers,
                    &a.train_lengths,
                    a.train_questions,
                    trainers,
                )?);
            }
            other => {
                return Err(Error::invalid(format!(
                    "unknown bench part `{other}` (core, encoder, gpu, gpu-profile, workload, profile, train)"
                )))
            }
        }
    }
    let tables = report.tables();
    emit(&report, &tables, &a.output, outputs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a CUDA device (or without PyTorch) the GPU peer says why it did not run,
    /// and the bench reports it as skipped. On a machine with CUDA it would measure.
    #[test]
    fn the_torch_peer_says_why_it_cannot_run() {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/reference/torch_cuda_peer.py");
        match torch_peer(&script, Path::new("models/all-MiniLM-L6-v2"), &[(128, 1)]) {
            Err(why) => assert!(why.starts_with("PyTorch peer"), "{why}"),
            Ok(peer) => assert_eq!((peer.cells[0].seq_len, peer.cells[0].batch), (128, 1)),
        }
    }
}
