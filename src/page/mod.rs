//! The page's front end, beside the CLI's (`src/cli/`): plain Rust, built and tested
//! natively, that `src/wasm.rs` only wraps for JavaScript.
//!
//! - `files`: the kinds of input file, which kinds each job reads, the first guess and the
//!   check of one file (the page learns all of it from here);
//! - `request`: the dropped files and the Options read into the job layer's requests;
//! - `views`: what each result tab draws (`www/results.js` only draws); `drilldown`: the
//!   per-instance view of ranking over scoring;
//! - `training`: the training form and a training kept between the worker's steps;
//! - `bench`: the benchmark page's encoder grid, with the clock passed in.
//!
//! Each job here returns the reply the page gets: the report (what `--json` writes), its
//! tables with their CSV (what `--csv` writes) and the page's views, as JSON text.

pub mod bench;
pub mod drilldown;
pub mod files;
pub mod request;
pub mod training;
pub mod views;

use serde::Serialize;

use crate::error::Result;
use crate::jobs::{self, KeptModel, NamedText, Outcome};
use crate::report::Table;
use request::JobRequest;

/// A table as the page shows and exports it: the shared `Table` plus its CSV text, made by
/// the same `Table::to_csv` as the CLI's `--csv`, so exports are identical.
#[derive(Serialize)]
pub struct PageTable<'a> {
    #[serde(flatten)]
    pub table: &'a Table,
    pub csv: String,
}

pub fn page_tables(tables: &[Table]) -> Vec<PageTable<'_>> {
    tables.iter().map(|t| PageTable { table: t, csv: t.to_csv() }).collect()
}

#[derive(Serialize)]
struct Reply<'a, R: Serialize, V: Serialize> {
    report: &'a R,
    tables: Vec<PageTable<'a>>,
    #[serde(flatten)]
    views: V,
}

fn reply<R: Serialize, V: Serialize>(outcome: &Outcome<R>, views: V) -> Result<String> {
    json(&Reply { report: &outcome.report, tables: page_tables(&outcome.tables), views })
}

/// A reply as JSON text (the page parses it once; `--json` writes the same serialisation).
pub fn json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| crate::Error::invalid(format!("could not write the reply: {e}")))
}

/// The page's progress report: `(stage, done, total)`; `Err(Cancelled)` once the user
/// cancelled.
pub type Progress<'a> = &'a mut dyn FnMut(&str, usize, usize) -> Result<()>;

/// Runs a job between two progress reports (the model-free jobs have no inner steps).
fn between(progress: Progress, stage: &str, job: impl FnOnce() -> Result<String>) -> Result<String> {
    progress(stage, 0, 1)?;
    let out = job()?;
    progress(stage, 1, 1)?;
    Ok(out)
}

// ------------------------------------------------------------------ ranking over scoring ----

/// The import of the Ranking-Over-Scoring files, when the page made the bundle from them:
/// its report (reordered options, control files, empty options) and table.
#[derive(Serialize)]
struct ImportView<'a> {
    report: &'a jobs::ImportReport,
    tables: Vec<PageTable<'a>>,
}

/// Everything the ranking-over-scoring tabs draw.
#[derive(Serialize)]
struct RankViews<'a> {
    /// Systems treated as control cases (the options' and the control files the bundle marks).
    controls: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    import: Option<ImportView<'a>>,
    instances: Vec<drilldown::InstanceView<'a>>,
    #[serde(flatten)]
    proxy: views::ProxyViews<'a>,
}

/// The views of an evaluate outcome, with the bundle and every evaluator's predictions
/// for the drill-down.
fn rank_views<'a>(
    outcome: &'a Outcome<jobs::EvaluateReport>,
    imported: &'a Option<jobs::ImportOutcome>,
    bundle: &'a crate::data::Bundle,
    controls: &'a [String],
    predictions: &[(&'a str, &'a crate::data::Prediction)],
) -> RankViews<'a> {
    RankViews {
        controls,
        import: imported.as_ref().map(|o| ImportView { report: &o.report, tables: page_tables(&o.tables) }),
        instances: drilldown::instance_views(bundle, predictions),
        proxy: views::proxy_views(&outcome.report, controls),
    }
}

/// Ranking over scoring from imported predictions (`medrank evaluate --predictions`).
pub fn rank_systems(request: &JobRequest, progress: Progress) -> Result<String> {
    let (bundle_text, imported) = request.bundle()?;
    let req = request.evaluate(bundle_text.clone())?;
    between(progress, "Ranking systems", || {
        let outcome = jobs::evaluate_predictions(&req)?;
        // The drill-down reads the same files again with the same readers (cheap, and keeps
        // the job's report free of page-only data).
        let (bundle, _) = crate::data::parse_bundle(&bundle_text.name, &bundle_text.text)?;
        let mut parsed = Vec::new();
        for p in &req.predictions {
            let (file, _) = crate::data::parse_predictions(&p.file.name, &p.file.text)?;
            parsed.push((p.evaluator.as_deref().unwrap_or_default(), file));
        }
        let flat: Vec<(&str, &crate::data::Prediction)> =
            parsed.iter().flat_map(|(e, file)| file.predictions.iter().map(move |p| (*e, p))).collect();
        let controls = drilldown::with_file_controls(&req.options.controls, &bundle);
        reply(&outcome, rank_views(&outcome, &imported, &bundle, &controls, &flat))
    })
}

/// Ranking over scoring with the kept model as the evaluator (`medrank evaluate --model
/// --controls --backend`): on WebGPU when the options allow it and the browser gives an
/// adapter, else on the CPU; the reply says which (`backend`) and on how many threads.
pub async fn rank_with_model(kept: &mut KeptModel, request: &JobRequest, progress: Progress<'_>) -> Result<String> {
    #[derive(Serialize)]
    struct ModelViews<'a> {
        #[serde(flatten)]
        rank: RankViews<'a>,
        /// Which backend ran the encoder, on what, and why the CPU when it was a fallback.
        backend: &'a crate::gpu::BackendReport,
        /// Threads the CPU path used (1 in the single-threaded build).
        threads: usize,
    }
    let (bundle_text, imported) = request.bundle()?;
    let (req, model_options, choice) = request.evaluate_with_model(bundle_text.clone())?;
    let mut on_batch = |done: usize, total: usize| progress("Encoding with the model", done, total).is_ok();
    let ((outcome, predictions), backend) = kept.evaluate(&req, choice, &model_options, &mut on_batch).await?;
    progress("Ranking systems", 1, 1)?;
    let (bundle, _) = crate::data::parse_bundle(&bundle_text.name, &bundle_text.text)?;
    let evaluator = outcome.report.evaluators.first().map(|e| e.evaluator.as_str()).unwrap_or("model");
    let flat: Vec<(&str, &crate::data::Prediction)> = predictions.iter().map(|p| (evaluator, p)).collect();
    let controls = drilldown::with_file_controls(&req.options.controls, &bundle);
    let views = ModelViews {
        rank: rank_views(&outcome, &imported, &bundle, &controls, &flat),
        backend: &backend,
        threads: crate::model::cpu::worker_threads(),
    };
    reply(&outcome, views)
}

// ------------------------------------------------------------------ NRP, metrics, rubric ----

/// NRP of generated answers among expert-judged documents (`medrank nrp`).
pub fn nrp(request: &JobRequest, progress: Progress) -> Result<String> {
    #[derive(Serialize)]
    struct NrpViews<'a> {
        nrp_view: views::NrpView<'a>,
    }
    let req = request.nrp()?;
    between(progress, "Placing answers among the judged documents", || {
        let outcome = jobs::nrp(&req)?;
        reply(&outcome, NrpViews { nrp_view: views::nrp_view(&outcome.report) })
    })
}

/// Reference-based metrics over one candidates file (`medrank metrics`).
pub fn metrics(request: &JobRequest, progress: Progress) -> Result<String> {
    let req = request.metrics()?;
    between(progress, "Scoring candidates", || reply(&jobs::metrics(&req)?, ()))
}

/// Rubric grading over one file of graded responses (`medrank rubric`).
pub fn rubric(request: &JobRequest, progress: Progress) -> Result<String> {
    let req = request.rubric()?;
    between(progress, "Grading responses", || reply(&jobs::rubric(&req)?, ()))
}

/// The benchmark page's workload (`jobs::run_workload`, as `medrank bench --parts
/// workload`): `evaluate` on the bundle made from the CasiMedicos dev file's text.
pub async fn workload(
    kept: &mut KeptModel,
    dev_text: String,
    backend: &str,
    now: &dyn Fn() -> f64,
    cpu_device: &dyn Fn(usize) -> String,
    progress: Progress<'_>,
) -> Result<String> {
    let choice = jobs::parse_backend(backend)?;
    let dev = NamedText::new("data/casimedicos/dev.jsonl", dev_text);
    let stage = format!("workload on {backend}");
    let mut on_batch = |done: usize, total: usize| progress(&stage, done, total).is_ok();
    let mut result = jobs::run_workload(kept, &dev, choice, now, &mut on_batch).await?;
    if result.backend == "cpu" {
        result.device = cpu_device(result.threads);
    }
    json(&result)
}
