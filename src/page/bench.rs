//! The benchmark page's encoder grid: `gpu::bench::bench_encoder` (the code `medrank bench`
//! times) for each backend at each (length, batch) cell, on the page's kept model. The
//! clock and the progress report are passed in (the browser's `performance.now()` and the
//! worker's callback), so the loop is plain Rust and runs natively in its tests.

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::gpu::bench::BenchRow;
use crate::gpu::BackendChoice;
use crate::jobs::KeptModel;
use crate::model::Precision;

/// One backend's part of the benchmark page: its rows, or why it could not run.
#[derive(Debug, Serialize)]
pub struct BenchBackend {
    /// "wasm-cpu", "wasm-cpu-int8" or "webgpu".
    pub backend: String,
    /// The encoder's arithmetic: "f32" or "int8" (`model::Precision`).
    pub precision: &'static str,
    /// The adapter's name (WebGPU) or what runs the CPU path (`cpu_device`).
    pub device: String,
    /// Threads of the CPU path (0 for WebGPU).
    pub threads: usize,
    pub rows: Vec<BenchRow>,
    /// WebGPU only: the GPU's time per step of the pass at each cell (timestamp queries,
    /// `medrank bench --parts gpu-profile`'s function).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gpu_profile: Vec<crate::gpu::bench::ProfileRow>,
    /// WebGPU only: why there is no GPU profile, or which cells it leaves out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_profile_note: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What the page's bench measures and how.
pub struct BenchPlan<'a> {
    /// Backend names as the page's select has them ("cpu", "gpu").
    pub backends: &'a [String],
    /// Precisions as the page's Options name them ("f32", "int8"): each backend runs in
    /// each, side by side, except int8 on the GPU (the GPU path is f32 only).
    pub precisions: &'a [String],
    /// (sequence length, batch) cells; lengths over the model's limit are skipped.
    pub cells: &'a [(usize, usize)],
    /// At least this many seconds of passes per cell.
    pub min_seconds: f64,
    /// What runs the CPU path, for its rows' `device` ("medrank kernels (wasm simd128, 4
    /// threads)").
    pub cpu_device: &'a dyn Fn(usize) -> String,
}

/// The SIMD this build was compiled with.
pub fn simd_name() -> &'static str {
    if cfg!(target_feature = "relaxed-simd") {
        "simd128 + relaxed"
    } else if cfg!(target_feature = "simd128") {
        "simd128"
    } else {
        "no SIMD"
    }
}

/// "medrank kernels (wasm simd128, 4 threads)": what runs the CPU path in this build.
pub fn cpu_kernels(threads: usize) -> String {
    format!("medrank kernels (wasm {}, {threads} thread{})", simd_name(), if threads == 1 { "" } else { "s" })
}

/// What this build is and how many threads its CPU path runs on (1 until the wasm pool
/// started).
#[derive(Debug, Serialize)]
pub struct Build {
    pub threaded_build: bool,
    pub threads: usize,
    pub simd: &'static str,
}

impl Build {
    pub fn this() -> Build {
        Build {
            threaded_build: cfg!(target_feature = "atomics"),
            threads: crate::model::cpu::worker_threads(),
            simd: simd_name(),
        }
    }
}

/// One of this build's self-checks, by name, as JSON text (the bench page's buttons):
/// `"gradients"`, the GPU trainer's gradient check ([`gradient_check`]); `"int8"`, the int8
/// kernels against the scheme's formula on odd shapes (`model::cpu::int8::self_check`): the
/// names of the kernels checked, or the first difference as an error.
pub async fn self_check(which: &str) -> Result<String> {
    match which {
        "gradients" => gradient_check().await,
        "int8" => crate::jobs::json(&crate::model::cpu::int8::self_check().map_err(crate::Error::model)?),
        other => Err(crate::Error::invalid(format!("no self-check is named {other:?} (gradients, int8)"))),
    }
}

/// What the bench page asks of the kept model, as the worker sends it (JSON text).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum BenchRequest {
    /// The encoder grid: a [`BenchPlan`] on this build's CPU kernels.
    Grid { backends: Vec<String>, precisions: Vec<String>, cells: Vec<(usize, usize)>, min_seconds: f64 },
    /// The workload on one backend (`super::workload`) with the CasiMedicos dev file's text.
    Workload { dev_text: String, backend: String },
}

/// A [`BenchRequest`] (JSON text) run: the grid's rows of every backend, or the workload's
/// result, as JSON.
pub async fn bench_page(
    kept: &mut KeptModel,
    request: &str,
    now: &dyn Fn() -> f64,
    progress: &mut dyn FnMut(&str, usize, usize) -> Result<()>,
) -> Result<String> {
    let request: BenchRequest = serde_json::from_str(request)
        .map_err(|e| crate::Error::invalid(format!("bad request from the bench page: {e}")))?;
    let (backends, precisions, cells, min_seconds) = match request {
        BenchRequest::Grid { backends, precisions, cells, min_seconds } => (backends, precisions, cells, min_seconds),
        BenchRequest::Workload { dev_text, backend } => {
            return super::workload(kept, dev_text, &backend, now, progress).await;
        }
    };
    let plan = BenchPlan {
        backends: &backends,
        precisions: &precisions,
        cells: &cells,
        min_seconds,
        cpu_device: &cpu_kernels,
    };
    crate::jobs::json(&bench_grid(kept, &plan, now, progress).await?)
}

/// Runs the grid; `progress(stage, done, total)` counts cells and may cancel (`Err`).
pub async fn bench_grid(
    kept: &mut KeptModel,
    plan: &BenchPlan<'_>,
    now: &dyn Fn() -> f64,
    progress: &mut dyn FnMut(&str, usize, usize) -> Result<()>,
) -> Result<Vec<BenchBackend>> {
    let mut runs = Vec::new();
    for precision in plan.precisions {
        let precision = Precision::parse(precision)?;
        for name in plan.backends {
            let choice = crate::jobs::parse_backend(name)?;
            if precision == Precision::F32 || choice == BackendChoice::Cpu {
                runs.push((precision, choice));
            }
        }
    }
    let total = plan.cells.len() * runs.len();
    let max_tokens = kept.model.tokenizer.max_tokens;
    let threads = crate::model::cpu::worker_threads();
    let mut out = Vec::new();
    for (k, &(precision, choice)) in runs.iter().enumerate() {
        let label = match (choice, precision) {
            (BackendChoice::Cpu, Precision::Int8) => "wasm-cpu-int8",
            (BackendChoice::Cpu, _) => "wasm-cpu",
            _ => "webgpu",
        };
        kept.set_precision(precision);
        let (encoder, report) = match kept.encoder(choice).await {
            Ok(x) => x,
            Err(e) => {
                let error = Some(e.to_string());
                out.push(BenchBackend {
                    backend: label.into(),
                    precision: precision.name(),
                    device: String::new(),
                    threads: 0,
                    rows: vec![],
                    gpu_profile: vec![],
                    gpu_profile_note: None,
                    error,
                });
                continue;
            }
        };
        let on_gpu = report.backend == "gpu";
        let device = if on_gpu { report.device.trim().to_string() } else { (plan.cpu_device)(threads) };
        let mut rows = Vec::new();
        for (i, &(seq_len, batch)) in plan.cells.iter().enumerate() {
            progress(&format!("{label}: length {seq_len}, batch {batch}"), k * plan.cells.len() + i, total)?;
            if seq_len > max_tokens {
                continue;
            }
            let row = crate::gpu::bench::bench_encoder(
                encoder,
                label,
                &device,
                seq_len,
                batch,
                None,
                plan.min_seconds,
                100,
                now,
            )
            .await?;
            rows.push(row);
        }
        let (mut gpu_profile, mut gpu_profile_note) = (Vec::new(), None);
        if let crate::gpu::AnyEncoder::Gpu(gpu) = encoder {
            (gpu_profile, gpu_profile_note) = gpu_profile_of(gpu, plan, now).await?;
        }
        let threads = if on_gpu { 0 } else { threads };
        out.push(BenchBackend {
            backend: label.into(),
            precision: precision.name(),
            device,
            threads,
            rows,
            gpu_profile,
            gpu_profile_note,
            error: None,
        });
    }
    progress("Done", total, total)?;
    Ok(out)
}

/// The GPU profile of every cell of the plan that one pass holds (a profile times one
/// submission), with a note on what is missing: the whole profile where the adapter has no
/// `timestamp-query`, or the cells left out.
async fn gpu_profile_of(
    gpu: &crate::gpu::GpuEncoder,
    plan: &BenchPlan<'_>,
    now: &dyn Fn() -> f64,
) -> Result<(Vec<crate::gpu::bench::ProfileRow>, Option<String>)> {
    let adapter = &gpu.context().adapter;
    if !adapter.timestamps {
        let note = format!("{} has no timestamp-query: GPU time per step cannot be measured here", adapter.name);
        return Ok((Vec::new(), Some(note)));
    }
    let (rows, skipped) = crate::gpu::bench::profile_cells(gpu, plan.cells, None, 3, now, &mut |_| {}).await?;
    let left_out: Vec<String> = skipped.iter().map(|(l, b)| format!("{l} x {b}")).collect();
    let note = (!left_out.is_empty())
        .then(|| format!("not profiled (more than one pass on this adapter): {}", left_out.join(", ")));
    Ok((rows, note))
}

/// The bench page's check of the GPU trainer on the browser's WebGPU adapter (what the
/// native tests run on lavapipe): every trained tensor's gradient against candle's
/// autograd on tiny random models, as `{adapter, tolerance, checks}`.
async fn gradient_check() -> Result<String> {
    #[derive(Serialize)]
    struct Reply<'a> {
        adapter: &'a crate::gpu::context::AdapterSummary,
        tolerance: f64,
        checks: Vec<crate::train::gpu::gradient_check::TensorCheck>,
    }
    let ctx = crate::gpu::context::GpuContext::new().await?;
    let checks = crate::train::gpu::gradient_check::gradient_check(&ctx).await?;
    crate::jobs::json(&Reply { adapter: &ctx.adapter, tolerance: crate::train::gpu::gradient_check::TOLERANCE, checks })
}
