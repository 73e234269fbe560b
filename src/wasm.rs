//! The browser's entry points (wasm-bindgen), called from `www/worker.js`.
//!
//! Thin on purpose: each function takes file names and texts (the browser has no file
//! system) plus options as a JS object, calls the same library functions as the CLI, and
//! returns the same serialisable report as JSON text (so the page and `--json` agree byte
//! for byte), together with the report's tables and a few page-ready views.
//!
//! Long jobs take a JS callback `progress(stage, done, total) -> bool`; it is called every
//! few items and returning `false` cancels the job (`Error::Cancelled`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use wasm_bindgen::prelude::*;

use crate::error::{Error, Location};
use crate::jobs::{self, NamedText, Outcome};
use crate::report::Table;
use crate::stats::bootstrap::Bootstrap;

/// Called once when the worker loads the module: readable panics in the console.
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// The program version written into every report.
#[wasm_bindgen]
pub fn version() -> String {
    crate::VERSION.to_string()
}

/// The threaded build's pool: the worker calls `initThreadPool(n)` once, before any job, when
/// the page is cross-origin isolated (shared memory); the CPU path then runs on `n` threads.
#[cfg(feature = "threads")]
pub use wasm_bindgen_rayon::init_thread_pool;

/// What this build is and how many threads its CPU path runs on (1 until the pool started).
#[derive(Serialize)]
struct EngineInfo {
    threaded_build: bool,
    threads: usize,
    simd: &'static str,
}

/// The SIMD this build was compiled with: "simd128", "simd128 + relaxed" (fused
/// multiply-add in the products), or "no SIMD".
fn simd_name() -> &'static str {
    if cfg!(target_feature = "relaxed-simd") {
        "simd128 + relaxed"
    } else if cfg!(target_feature = "simd128") {
        "simd128"
    } else {
        "no SIMD"
    }
}

#[wasm_bindgen]
pub fn engine_info() -> Result<JsValue, JsValue> {
    to_js(&EngineInfo {
        threaded_build: cfg!(target_feature = "atomics"),
        threads: crate::model::cpu::worker_threads(),
        simd: simd_name(),
    })
}

// ------------------------------------------------------------------ requests ----------------

/// One file the user gave the page, with the kind they confirmed and that kind's
/// parameters (e.g. `system` for a HiTZ file, `dimension` for a qrels file).
#[derive(Debug, Clone, Deserialize)]
pub struct InputFile {
    pub name: String,
    pub text: String,
    pub kind: String,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
}

impl InputFile {
    fn named(&self) -> NamedText {
        NamedText::new(self.name.clone(), self.text.clone())
    }
    fn kinded(&self) -> jobs::files::KindedFile<'_> {
        jobs::files::KindedFile { name: &self.name, text: &self.text, kind: &self.kind, params: &self.params }
    }
    fn param(&self, key: &str) -> Result<&str, Error> {
        self.kinded().param(key)
    }
}

/// The options the page's form sends; names match the CLI's flags.
#[derive(Debug, Clone, Deserialize)]
#[serde(default)]
pub struct JobOptions {
    /// Seed, resamples and confidence, sent as three flat fields like the CLI's flags.
    #[serde(flatten)]
    pub bootstrap: Bootstrap,
    /// NRP tie policy: pessimistic | optimistic | average.
    pub ties: String,
    /// NRP denominator: docs (|D_q|) | docs+1 (|D_q|+1), as the CLI's --denominator.
    pub denominator: String,
    /// NRP judged documents without a score: below | drop, as the CLI's --unscored.
    pub unscored: String,
    /// The NRP paper's public code's settings, as the CLI's --as-public-code.
    pub as_public_code: bool,
    /// NRP fusion rankers, as the CLI's --fuse (`[NAME=]rrf:A,B`).
    pub fuse: Vec<String>,
    /// The fusion rankers' scope in the expert agreement: items | pool, as the CLI's
    /// --fuse-scope.
    pub fuse_scope: String,
    /// NRP grades meaning "not able to judge", as (dimension, grades) — the CLI's
    /// --not-judgeable.
    pub not_judgeable: Vec<(String, Vec<i64>)>,
    /// Systems that are control cases.
    pub controls: Vec<String>,
    /// NRP dimension weights (normalised by the library); none = equal.
    pub weights: Option<Vec<(String, f64)>>,
    /// Where a model evaluation runs the encoder: auto (WebGPU when the browser gives an
    /// adapter) | cpu (wasm) | gpu (WebGPU or an error) — the CLI's `--backend`.
    pub backend: String,
    /// Keep empty MCQA options as candidates — the CLI's `--keep-empty-options`.
    pub keep_empty_options: bool,
}

impl Default for JobOptions {
    fn default() -> Self {
        JobOptions {
            bootstrap: Bootstrap::default(),
            ties: "pessimistic".into(),
            denominator: "docs".into(),
            unscored: "below".into(),
            as_public_code: false,
            fuse: Vec::new(),
            fuse_scope: "items".into(),
            controls: ["no_argument", "label_only", "noise", "ir_passages"].map(String::from).to_vec(),
            weights: None,
            not_judgeable: Vec::new(),
            backend: "auto".into(),
            keep_empty_options: false,
        }
    }
}

impl JobOptions {
    /// The ranking options of `medrank evaluate` these page options stand for.
    fn ranking(&self) -> jobs::ProxyOptions {
        jobs::ProxyOptions { bootstrap: self.bootstrap, controls: self.controls.clone(), ..Default::default() }
    }
}

#[derive(Debug, Deserialize)]
pub struct JobRequest {
    pub files: Vec<InputFile>,
    #[serde(default)]
    pub options: JobOptions,
}

fn parse_request(request: JsValue) -> Result<JobRequest, JsValue> {
    serde_wasm_bindgen::from_value(request)
        .map_err(|e| error_to_js(&Error::invalid(format!("bad request from the page: {e}"))))
}

// ------------------------------------------------------------------ replies -----------------

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

/// Errors reach the page as `{message, location?}` so it can point at the file, line and
/// field; the message does not repeat the location.
#[derive(Serialize)]
struct JsError<'a> {
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<&'a Location>,
    cancelled: bool,
}

pub fn error_to_js(e: &Error) -> JsValue {
    let message = match e {
        Error::Input { message, .. } => message.clone(),
        other => other.to_string(),
    };
    let js = JsError { message, location: e.location(), cancelled: matches!(e, Error::Cancelled) };
    to_js(&js).unwrap_or_else(|_| JsValue::from_str(&e.to_string()))
}

/// Plain JS objects (not Maps), so the worker can post them as they are.
fn to_js<T: Serialize>(value: &T) -> Result<JsValue, JsValue> {
    value.serialize(&serde_wasm_bindgen::Serializer::json_compatible()).map_err(|e| JsValue::from_str(&e.to_string()))
}

fn to_json<T: Serialize>(value: &T) -> Result<String, JsValue> {
    serde_json::to_string(value).map_err(|e| error_to_js(&Error::invalid(e.to_string())))
}

// ------------------------------------------------------------------ progress ----------------

/// The page's progress callback; `false` from it means the user pressed Cancel.
pub struct Progress<'a> {
    callback: &'a js_sys::Function,
}

impl<'a> Progress<'a> {
    pub fn new(callback: &'a js_sys::Function) -> Self {
        Progress { callback }
    }
    /// Report `done` of `total` in `stage`; `Err(Cancelled)` once the user cancelled.
    pub fn step(&self, stage: &str, done: usize, total: usize) -> Result<(), Error> {
        let keep_going = self
            .callback
            .call3(
                &JsValue::NULL,
                &JsValue::from_str(stage),
                &JsValue::from_f64(done as f64),
                &JsValue::from_f64(total as f64),
            )
            .map(|v| v.as_bool().unwrap_or(true))
            .unwrap_or(true);
        if keep_going {
            Ok(())
        } else {
            Err(Error::Cancelled)
        }
    }
}

/// The kinds of input file and which kinds each job reads (`jobs::files`): the page's
/// only source for them.
#[wasm_bindgen]
pub fn file_kinds() -> Result<JsValue, JsValue> {
    to_js(&jobs::files::kinds_description())
}

/// A first guess of a file's kind and parameters from its name and first lines; with a
/// `kind` (the user's choice), that kind's default parameters.
#[wasm_bindgen]
pub fn describe_file(name: &str, text: &str, kind: Option<String>) -> Result<JsValue, JsValue> {
    let guess = match kind.as_deref().and_then(jobs::files::file_kind) {
        Some(k) => jobs::files::Guess { kind: Some(k.key), params: jobs::files::default_params(k.key, name) },
        None => jobs::files::guess_kind(name, text),
    };
    to_js(&guess)
}

/// Checks one file on its own (the page shows the result next to the file).
#[wasm_bindgen]
pub fn check_file(file: JsValue) -> Result<JsValue, JsValue> {
    let file: InputFile = serde_wasm_bindgen::from_value(file)
        .map_err(|e| error_to_js(&Error::invalid(format!("bad request from the page: {e}"))))?;
    let check = jobs::files::check_file(&file.kinded()).map_err(|e| error_to_js(&e))?;
    to_js(&check)
}

// ------------------------------------------------------------------ jobs ----------------------
//
// Each job maps the page's files to the request of the same `crate::jobs` function the CLI
// calls, so the same inputs give the same report. Replies are JSON text: the report (what
// `--json` writes), its tables with their CSV (what `--csv` writes), and page-only views.

#[derive(Serialize)]
struct Reply<'a, R: Serialize, V: Serialize> {
    report: &'a R,
    tables: Vec<PageTable<'a>>,
    #[serde(flatten)]
    views: V,
}

fn reply<R: Serialize, V: Serialize>(outcome: &Outcome<R>, views: V) -> Result<String, JsValue> {
    to_json(&Reply { report: &outcome.report, tables: page_tables(&outcome.tables), views })
}

fn files_of<'a>(request: &'a JobRequest, kind: &'a str) -> impl Iterator<Item = &'a InputFile> + 'a {
    request.files.iter().filter(move |f| f.kind == kind)
}

fn one_file<'a>(request: &'a JobRequest, kind: &str, what: &str) -> Result<Option<&'a InputFile>, Error> {
    let mut files = request.files.iter().filter(|f| f.kind == kind);
    let first = files.next();
    if let Some(second) = files.next() {
        return Err(Error::invalid(format!(
            "give one {what}, not several ({} and {})",
            first.map(|f| f.name.as_str()).unwrap_or(""),
            second.name
        )));
    }
    Ok(first)
}

fn required<'a>(request: &'a JobRequest, kind: &str, what: &str) -> Result<&'a InputFile, Error> {
    one_file(request, kind, what)?.ok_or_else(|| Error::invalid(format!("add {what}")))
}

/// Runs a job between two progress calls (the jobs have no inner progress hooks yet), and
/// turns its error into the page's `{message, location}`.
fn run_job<T>(progress: &js_sys::Function, stage: &str, job: impl FnOnce() -> Result<T, Error>) -> Result<T, JsValue> {
    let progress = Progress::new(progress);
    let run = || {
        progress.step(stage, 0, 1)?;
        let out = job()?;
        progress.step(stage, 1, 1)?;
        Ok(out)
    };
    run().map_err(|e| error_to_js(&e))
}

// ------------------------------------------------------------------ ranking over scoring ----

/// The import of the Ranking-Over-Scoring files, when the page made the bundle from them:
/// its report (reordered options, control files, empty options) and table.
#[derive(Serialize)]
struct ImportView<'a> {
    report: &'a jobs::ImportReport,
    tables: Vec<PageTable<'a>>,
}

#[derive(Serialize)]
struct RankViews<'a> {
    /// Systems treated as control cases.
    controls: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    import: Option<ImportView<'a>>,
    instances: Vec<jobs::views::InstanceView<'a>>,
}

/// Ranking over scoring from imported predictions (`medrank evaluate`): a bundle, one
/// predictions file per evaluator, optional human rankings and a corpus (IR passages).
#[wasm_bindgen]
pub fn rank_systems(request: JsValue, progress: &js_sys::Function) -> Result<String, JsValue> {
    let request = parse_request(request)?;
    let o = &request.options;
    let predictions: Vec<(String, &InputFile)> = files_of(&request, "predictions")
        .map(|f| {
            let name = f.params.get("evaluator").filter(|e| !e.trim().is_empty()).cloned();
            (name.unwrap_or_else(|| jobs::file_stem(&f.name)), f)
        })
        .collect();
    let (bundle_text, imported) = bundle_of(&request).map_err(|e| error_to_js(&e))?;
    let outcome = run_job(progress, "Ranking systems", || {
        let req = jobs::EvaluateRequest {
            bundle: bundle_text.clone(),
            predictions: predictions
                .iter()
                .map(|(evaluator, f)| jobs::EvaluatorPredictions {
                    evaluator: Some(evaluator.clone()),
                    file: f.named(),
                })
                .collect(),
            rankings: one_file(&request, "rankings", "human rankings file")?.map(InputFile::named),
            corpus: one_file(&request, "corpus", "corpus")?.map(InputFile::named),
            options: o.ranking(),
        };
        jobs::evaluate_predictions(&req)
    })?;

    // The drill-down reads the same files again with the same readers (cheap, and keeps
    // the job's report free of page-only data).
    let (bundle, _) = crate::data::parse_bundle(&bundle_text.name, &bundle_text.text).map_err(|e| error_to_js(&e))?;
    let mut parsed = Vec::new();
    for (evaluator, f) in &predictions {
        let (file, _) = crate::data::parse_predictions(&f.name, &f.text).map_err(|e| error_to_js(&e))?;
        parsed.push((evaluator.as_str(), file));
    }
    let flat: Vec<(&str, &crate::data::Prediction)> =
        parsed.iter().flat_map(|(e, file)| file.predictions.iter().map(move |p| (*e, p))).collect();
    let controls = jobs::views::with_file_controls(&o.controls, &bundle);
    let views = RankViews {
        controls: &controls,
        import: import_view(&imported),
        instances: jobs::views::instance_views(&bundle, &flat),
    };
    reply(&outcome, views)
}

// ------------------------------------------------------------------ model evaluation ------

/// The model's files as the page loaded them (fetched from the site or picked from disk):
/// `{name, config, tokenizer, weights: Uint8Array, pooling?, modules?}`, texts as strings.
fn model_files(model: &JsValue) -> Result<crate::model::ModelFiles, Error> {
    let get = |key: &str| {
        js_sys::Reflect::get(model, &JsValue::from_str(key)).ok().filter(|v| !v.is_undefined() && !v.is_null())
    };
    let text = |key: &str| get(key).and_then(|v| v.as_string()).map(String::into_bytes);
    let missing = |file: &str| Error::invalid(format!("the model has no {file}"));
    let weights = get("weights").ok_or_else(|| missing("model.safetensors"))?;
    Ok(crate::model::ModelFiles {
        name: get("name").and_then(|v| v.as_string()).unwrap_or_else(|| "model".into()),
        config_json: text("config").ok_or_else(|| missing("config.json"))?,
        tokenizer_json: text("tokenizer").ok_or_else(|| missing("tokenizer.json"))?,
        weights: js_sys::Uint8Array::new(&weights).to_vec(),
        pooling_json: text("pooling"),
        modules_json: text("modules"),
        sentence_config_json: text("sentence_config"),
        weights_source: None,
    })
}

#[derive(Serialize)]
struct ModelViews<'a> {
    #[serde(flatten)]
    rank: RankViews<'a>,
    /// Which backend ran the encoder, on what, and why the CPU when it was a fallback.
    backend: &'a crate::gpu::BackendReport,
    /// Threads the CPU path used (1 in the single-threaded build).
    threads: usize,
}

/// A model the worker keeps across jobs until the user picks another one (as candle's wasm
/// examples keep theirs): built once from its files' bytes, with the encoder it last ran on
/// (the CPU layers, or the weights uploaded to WebGPU), so a second job starts encoding at
/// once. Free it (`model.free()`) before loading another.
#[wasm_bindgen]
pub struct Model {
    kept: jobs::KeptModel,
    /// The base model's tokenizer.json: a trained evaluator's folder holds a copy.
    tokenizer_json: Vec<u8>,
    /// A training on this model under way (`train_*` methods).
    training: Option<Training>,
}

#[wasm_bindgen]
impl Model {
    /// `files`: `{name, config, tokenizer, weights: Uint8Array, pooling?, modules?,
    /// sentence_config?}` as the worker loaded them (from the site or picked from disk).
    #[wasm_bindgen(constructor)]
    pub fn new(files: JsValue) -> Result<Model, JsValue> {
        let js = |e: Error| error_to_js(&e);
        let files = model_files(&files).map_err(js)?;
        let kept = jobs::KeptModel::from_files(&files).map_err(js)?;
        Ok(Model { kept, tokenizer_json: files.tokenizer_json, training: None })
    }

    /// The name reports give the evaluator (the folder's name or path).
    #[wasm_bindgen(getter)]
    pub fn name(&self) -> String {
        self.kept.model.name.clone()
    }

    /// Ranking over scoring with this model as the evaluator (`medrank evaluate --model DIR
    /// --controls --backend B`): the bundle (or HiTZ files), optional human rankings and
    /// corpus. Runs on WebGPU when `options.backend` allows it and the browser gives an
    /// adapter, else on the wasm CPU; the reply says which (`backend`) and on how many
    /// threads.
    pub async fn evaluate(&mut self, request: JsValue, progress: js_sys::Function) -> Result<String, JsValue> {
        let request = parse_request(request)?;
        let progress = Progress::new(&progress);
        let o = &request.options;
        let js = |e: Error| error_to_js(&e);
        let choice = jobs::parse_backend(&o.backend).map_err(js)?;
        let (bundle_text, imported) = bundle_of(&request).map_err(js)?;
        let corpus = one_file(&request, "corpus", "corpus").map_err(js)?.map(InputFile::named);
        // The control cases the inputs allow (IR passages need a corpus), as `--controls`.
        let controls: Vec<String> =
            o.controls.iter().filter(|c| corpus.is_some() || c.as_str() != "ir_passages").cloned().collect();
        let req = jobs::EvaluateRequest {
            bundle: bundle_text.clone(),
            predictions: Vec::new(),
            rankings: one_file(&request, "rankings", "human rankings file").map_err(js)?.map(InputFile::named),
            corpus,
            options: o.ranking(),
        };
        let model_options =
            jobs::ModelOptions { controls, keep_empty_options: o.keep_empty_options, ..Default::default() };
        let mut on_batch = |done: usize, total: usize| progress.step("Encoding with the model", done, total).is_ok();
        let ((outcome, predictions), backend) =
            self.kept.evaluate(&req, choice, &model_options, &mut on_batch).await.map_err(js)?;
        progress.step("Ranking systems", 1, 1).map_err(js)?;

        let (bundle, _) = crate::data::parse_bundle(&bundle_text.name, &bundle_text.text).map_err(js)?;
        let evaluator = outcome.report.evaluators.first().map(|e| e.evaluator.as_str()).unwrap_or("model");
        let flat: Vec<(&str, &crate::data::Prediction)> = predictions.iter().map(|p| (evaluator, p)).collect();
        let controls = jobs::views::with_file_controls(&o.controls, &bundle);
        let views = ModelViews {
            rank: RankViews {
                controls: &controls,
                import: import_view(&imported),
                instances: jobs::views::instance_views(&bundle, &flat),
            },
            backend: &backend,
            threads: crate::model::cpu::worker_threads(),
        };
        reply(&outcome, views)
    }

    /// The benchmark page's job: `gpu::bench::bench_encoder` (the same code as `medrank
    /// bench`) for each backend in `backends` ("cpu", "gpu") at each `[seq_len, batch]` cell,
    /// timed with `performance.now()`, at least `min_seconds` per cell. A backend that cannot
    /// start (no WebGPU adapter) gets an `error` instead of rows. `progress(stage, done,
    /// total)` counts cells.
    pub async fn bench(
        &mut self,
        backends: Vec<String>,
        cells: Vec<u32>,
        min_seconds: f64,
        progress: js_sys::Function,
    ) -> Result<String, JsValue> {
        let progress = Progress::new(&progress);
        let js = |e: Error| error_to_js(&e);
        // `cells` is flat: seq_len, batch, seq_len, batch, ...
        let cells: Vec<(usize, usize)> = cells.chunks_exact(2).map(|c| (c[0] as usize, c[1] as usize)).collect();
        let total = cells.len() * backends.len();
        let now = || performance_now() / 1000.0;
        let max_tokens = self.kept.model.encoder.model.config.max_tokens();
        let mut out = Vec::new();
        for (k, name) in backends.iter().enumerate() {
            let choice = jobs::parse_backend(name).map_err(js)?;
            let label = if choice == crate::gpu::BackendChoice::Cpu { "wasm-cpu" } else { "webgpu" };
            let (encoder, report) = match self.kept.encoder(choice).await {
                Ok(x) => x,
                Err(e) => {
                    out.push(BenchBackend {
                        backend: label.into(),
                        device: String::new(),
                        threads: 0,
                        rows: Vec::new(),
                        error: Some(e.to_string()),
                    });
                    continue;
                }
            };
            let threads = crate::model::cpu::worker_threads();
            let device = if report.backend == "gpu" { report.device.trim().to_string() } else { cpu_kernels(threads) };
            let mut rows = Vec::new();
            for (i, &(seq_len, batch)) in cells.iter().enumerate() {
                progress
                    .step(&format!("{label}: length {seq_len}, batch {batch}"), k * cells.len() + i, total)
                    .map_err(js)?;
                if seq_len > max_tokens {
                    continue;
                }
                let row =
                    crate::gpu::bench::bench_encoder(encoder, label, &device, seq_len, batch, min_seconds, 100, &now)
                        .await
                        .map_err(js)?;
                rows.push(row);
            }
            let threads = if report.backend == "gpu" { 0 } else { threads };
            out.push(BenchBackend { backend: label.into(), device, threads, rows, error: None });
        }
        progress.step("Done", total, total).map_err(js)?;
        to_json(&out)
    }

    /// The benchmark page's workload (`jobs::run_workload`, as `medrank bench --parts
    /// workload`): `evaluate` on the bundle made from the CasiMedicos dev file's text, on
    /// `backend` ("cpu" or "gpu"), timed with `performance.now()`.
    pub async fn workload(
        &mut self,
        dev_text: String,
        backend: String,
        progress: js_sys::Function,
    ) -> Result<String, JsValue> {
        let progress = Progress::new(&progress);
        let js = |e: Error| error_to_js(&e);
        let choice = jobs::parse_backend(&backend).map_err(js)?;
        let dev = NamedText::new("data/casimedicos/dev.jsonl", dev_text);
        let now = || performance_now() / 1000.0;
        let mut on_batch =
            |done: usize, total: usize| progress.step(&format!("workload on {backend}"), done, total).is_ok();
        let mut result = jobs::run_workload(&mut self.kept, &dev, choice, &now, &mut on_batch).await.map_err(js)?;
        if result.backend == "cpu" {
            result.device = cpu_kernels(result.threads);
        }
        to_json(&result)
    }
}

/// "medrank kernels (wasm simd128, 4 threads)": what runs the CPU path in this build.
fn cpu_kernels(threads: usize) -> String {
    let simd = format!("wasm {}", simd_name());
    format!("medrank kernels ({simd}, {threads} thread{})", if threads == 1 { "" } else { "s" })
}

/// The bundle the request gives, or the Ranking-Over-Scoring files to import it from.
fn bundle_of(request: &JobRequest) -> Result<(NamedText, Option<jobs::ImportOutcome>), Error> {
    let ros = files_of(request, "ros")
        .map(|f| {
            Ok(jobs::RosFile {
                system: f.param("system")?.to_string(),
                // The file's "control case" switch: `medrank import --control-source`.
                control: f.params.get("control").is_some_and(|v| v == "true"),
                file: f.named(),
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    jobs::bundle_or_import(one_file(request, "bundle", "argument bundle")?.map(InputFile::named), ros)
}

fn import_view(imported: &Option<jobs::ImportOutcome>) -> Option<ImportView<'_>> {
    imported.as_ref().map(|o| ImportView { report: &o.report, tables: page_tables(&o.tables) })
}

// ------------------------------------------------------------------ NRP ---------------------

/// NRP of generated answers among expert-judged documents (`medrank nrp`). A run file and
/// an answer-scores file form one precomputed ranker (matched by their `ranker` names; a
/// lone pair belongs together); BM25 is added when the documents are given.
#[wasm_bindgen]
pub fn nrp(request: JsValue, progress: &js_sys::Function) -> Result<String, JsValue> {
    let request = parse_request(request)?;
    let outcome = run_job(progress, "Placing answers among the judged documents", || {
        let o = &request.options;
        let ranker_of = |f: &InputFile| f.params.get("ranker").cloned().unwrap_or_else(|| jobs::file_stem(&f.name));
        let named = |kind| files_of(&request, kind).map(|f| (ranker_of(f), f.named())).collect::<Vec<_>>();
        let rankers = jobs::pair_precomputed(&named("run"), &named("answer_scores"))?;
        let documents = one_file(&request, "documents", "documents file")?;
        let req = jobs::NrpRequest {
            topics: required(&request, "topics", "the topics (queries)")?.named(),
            qrels: files_of(&request, "qrels")
                .map(|f| jobs::QrelsFile { dimension: f.params.get("dimension").cloned(), file: f.named() })
                .chain(
                    files_of(&request, "qrels_combined").map(|f| jobs::QrelsFile { dimension: None, file: f.named() }),
                )
                .collect(),
            documents: documents.map(InputFile::named),
            answers: files_of(&request, "answers")
                .chain(files_of(&request, "answers_jsonl"))
                .map(|f| jobs::AnswerFile {
                    file: f.named(),
                    system: f.params.get("system").cloned(),
                    prompt: f.params.get("prompt").cloned(),
                })
                .collect(),
            rankers,
            expert_rankings: one_file(&request, "expert_rankings", "expert rankings file")?.map(InputFile::named),
            options: jobs::NrpRequestOptions {
                ties: o.ties.clone(),
                denominator: o.denominator.clone(),
                unscored: o.unscored.clone(),
                as_public_code: o.as_public_code,
                fuse: o.fuse.clone(),
                fuse_scope: o.fuse_scope.clone(),
                weights: o.weights.clone().unwrap_or_default(),
                not_judgeable: o.not_judgeable.clone(),
                bm25: documents.is_some(),
                bootstrap: o.bootstrap,
                ..Default::default()
            },
        };
        jobs::nrp(&req)
    })?;
    reply(&outcome, ())
}

// ------------------------------------------------------------------ metrics, rubric ---------

/// Reference-based metrics over one candidates file (`medrank metrics`).
#[wasm_bindgen]
pub fn metrics(request: JsValue, progress: &js_sys::Function) -> Result<String, JsValue> {
    let wanted = ("metrics", "a candidates file (JSONL with candidate and references)");
    one_file_job(request, progress, "Scoring candidates", wanted, |file, bootstrap| {
        jobs::metrics(&jobs::MetricsRequest {
            file,
            options: crate::eval::metrics::MetricsOptions { bootstrap, ..Default::default() },
        })
    })
}

/// Rubric grading over one file of graded responses (`medrank rubric`).
#[wasm_bindgen]
pub fn rubric(request: JsValue, progress: &js_sys::Function) -> Result<String, JsValue> {
    let wanted = ("rubric", "a file of graded responses");
    one_file_job(request, progress, "Grading responses", wanted, |file, bootstrap| {
        jobs::rubric(&jobs::RubricRequest { file, options: crate::eval::rubric::RubricOptions { bootstrap } })
    })
}

/// A job over the one file of kind `wanted.0` (described as `wanted.1` when it is missing)
/// with the request's bootstrap settings.
fn one_file_job<R: Serialize>(
    request: JsValue,
    progress: &js_sys::Function,
    stage: &str,
    (kind, what): (&str, &str),
    job: impl FnOnce(NamedText, Bootstrap) -> Result<Outcome<R>, Error>,
) -> Result<String, JsValue> {
    let request = parse_request(request)?;
    let outcome = run_job(progress, stage, || job(required(&request, kind, what)?.named(), request.options.bootstrap))?;
    reply(&outcome, ())
}

// ------------------------------------------------------------------ GPU trainer check -------

/// The bench page's check of the GPU trainer on this browser's WebGPU adapter
/// (`train::gpu::gradient_check`, which the native tests run on lavapipe): every trained tensor's
/// gradient against candle's autograd on tiny random models. `{adapter, checks}`.
#[wasm_bindgen]
pub async fn gpu_gradient_check() -> Result<String, JsValue> {
    #[derive(Serialize)]
    struct Reply<'a> {
        adapter: &'a crate::gpu::context::AdapterSummary,
        tolerance: f64,
        checks: Vec<crate::train::gpu::gradient_check::TensorCheck>,
    }
    let js = |e: Error| error_to_js(&e);
    let ctx = crate::gpu::context::GpuContext::new().await.map_err(js)?;
    let checks = crate::train::gpu::gradient_check::gradient_check(&ctx).await.map_err(js)?;
    to_json(&Reply { adapter: &ctx.adapter, tolerance: crate::train::gpu::gradient_check::TOLERANCE, checks })
}

// ------------------------------------------------------------------ encoder benchmark -------

#[wasm_bindgen]
extern "C" {
    /// The browser's monotonic clock in milliseconds (window and worker alike).
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

/// One backend's part of the benchmark page: its rows, or why it could not run.
#[derive(Serialize)]
struct BenchBackend {
    /// "wasm-cpu" or "webgpu".
    backend: String,
    /// The adapter's name (WebGPU) or "medrank kernels (wasm simd128, N threads)".
    device: String,
    /// Threads of the CPU path (0 for WebGPU).
    threads: usize,
    rows: Vec<crate::gpu::bench::BenchRow>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

// ------------------------------------------------------------------ training ----------------
//
// `medrank train` in steps (`jobs::TrainingJob`), so the worker returns to its message loop
// between them (progress, cancel): `train_start`, `train_encode` until it says finished,
// `train_epoch` until it returns `undefined`, then `train_finish` (or `train_abort`).

/// The page's training form; names match the CLI's flags (`medrank train`).
#[derive(Debug, Deserialize)]
#[serde(default)]
pub struct TrainPageRequest {
    /// The training file: an argument bundle or a HiTZ MCQA file.
    pub train: Option<NamedText>,
    /// The dev file, or none with `dev_split`.
    pub dev: Option<NamedText>,
    pub dev_split: Option<f64>,
    pub task: String,
    pub arguments: String,
    pub freeze: String,
    pub epochs: usize,
    pub batch_size: usize,
    pub lr: f64,
    pub patience: usize,
    pub seed: u64,
    /// `accuracy`, `macro-f1`, `loss`, or empty for the task's metric (`--select-by`).
    pub select_by: String,
    /// `balanced`, `none`, or empty for the task's default (`--class-weights`).
    pub class_weights: String,
    pub keep_empty_options: bool,
    pub keep_not_enough_evidence: bool,
    /// Where the frozen encoder runs: auto | cpu | gpu (`--backend`).
    pub backend: String,
}

impl Default for TrainPageRequest {
    fn default() -> Self {
        let o = crate::train::TrainOptions::default();
        TrainPageRequest {
            train: None,
            dev: None,
            dev_split: None,
            task: "mcqa".into(),
            arguments: "none".into(),
            freeze: "head".into(),
            epochs: o.epochs,
            batch_size: o.batch_size,
            lr: o.learning_rate,
            patience: o.patience,
            seed: o.seed,
            select_by: String::new(),
            class_weights: String::new(),
            keep_empty_options: false,
            keep_not_enough_evidence: false,
            backend: "auto".into(),
        }
    }
}

struct Training {
    job: jobs::TrainingJob,
    backend: crate::gpu::BackendChoice,
    /// Whether the trained part's engine was chosen (after the frozen pass).
    placed: bool,
    /// Where the trained part runs: "cpu" (candle's autograd) or "gpu" (WebGPU).
    trained_on: &'static str,
}

/// A form field's value, or `None` when it was left empty (the default).
fn non_empty(s: &str) -> Option<&str> {
    Some(s.trim()).filter(|s| !s.is_empty())
}

fn seconds_now() -> f64 {
    performance_now() / 1000.0
}

/// How far the frozen pass is.
#[derive(Serialize)]
struct EncodeProgress<'a> {
    done: usize,
    total: usize,
    finished: bool,
    backend: &'a crate::gpu::BackendReport,
    /// Where the trained part runs: cpu | gpu.
    trained_on: &'static str,
}

#[wasm_bindgen]
impl Model {
    /// Reads the training data (`request`: [`TrainPageRequest`]) and sets up a new head on
    /// this model; returns the summary (examples, notes, warnings). Replaces a training
    /// under way.
    pub fn train_start(&mut self, request: JsValue) -> Result<JsValue, JsValue> {
        let js = |e: Error| error_to_js(&e);
        self.training = None;
        let r: TrainPageRequest = serde_wasm_bindgen::from_value(request)
            .map_err(|e| js(Error::invalid(format!("bad request from the page: {e}"))))?;
        let train = r.train.clone().ok_or_else(|| js(Error::invalid("add a training file")))?;
        let dev = match (r.dev.clone(), r.dev_split) {
            (Some(dev), None) => jobs::DevData::File(dev),
            (None, Some(fraction)) => jobs::DevData::Split(fraction),
            (Some(_), Some(_)) => return Err(js(Error::invalid("give a dev file or a dev split, not both"))),
            (None, None) => return Err(js(Error::invalid("add a dev file or choose a dev split"))),
        };
        let task = crate::data::Task::parse(&r.task)
            .ok_or_else(|| js(Error::invalid(format!("unknown task `{}` (mcqa, misinformation, nli)", r.task))))?;
        let options = crate::train::TrainOptions {
            freeze: jobs::parse_freeze(&r.freeze).map_err(js)?,
            epochs: r.epochs,
            batch_size: r.batch_size,
            learning_rate: r.lr,
            patience: r.patience,
            seed: r.seed,
            select_by: non_empty(&r.select_by).map(crate::train::SelectBy::parse).transpose().map_err(js)?,
            class_weights: non_empty(&r.class_weights)
                .map(crate::train::ClassWeights::parse)
                .transpose()
                .map_err(js)?,
            ..Default::default()
        };
        let req = jobs::TrainRequest {
            train,
            dev,
            task,
            arguments: r.arguments.clone(),
            options,
            conventions: crate::train::ExampleOptions {
                keep_empty_options: r.keep_empty_options,
                keep_not_enough_evidence: r.keep_not_enough_evidence,
            },
            on_gpu: false,
            trace_steps: 0,
        };
        let backend = jobs::parse_backend(&r.backend).map_err(js)?;
        let job = jobs::TrainingJob::start(&req, &self.kept.model, seconds_now).map_err(js)?;
        let summary = to_js(job.summary())?;
        self.training = Some(Training { job, backend, placed: false, trained_on: "cpu" });
        Ok(summary)
    }

    /// Computes the frozen encoder's part for up to `max_batches` more batches of inputs, on
    /// this model's kept encoder (WebGPU or the wasm CPU, as the request's backend asks):
    /// `{done, total, finished, backend}`.
    pub async fn train_encode(&mut self, max_batches: usize) -> Result<JsValue, JsValue> {
        let js = |e: Error| error_to_js(&e);
        let training = self.training.as_mut().ok_or_else(|| js(Error::invalid("no training was started")))?;
        let (encoder, report) = self.kept.encoder(training.backend).await.map_err(js)?;
        let finished = training.job.encode(encoder, max_batches.max(1)).await.map_err(js)?;
        // Trained layers (top:N) go to the GPU whose encoder computed the frozen part.
        if finished && !training.placed {
            training.placed = true;
            if let (crate::gpu::AnyEncoder::Gpu(gpu), crate::train::Freeze::TopLayers(_)) =
                (encoder, training.job.summary().freeze)
            {
                training.job.train_on_gpu(gpu.context().clone()).map_err(js)?;
                training.trained_on = "gpu";
            }
        }
        let (done, total) = training.job.inputs();
        to_js(&EncodeProgress { done, total, finished, backend: report, trained_on: training.trained_on })
    }

    /// One epoch: its log (`{epoch, steps, train_loss, dev_accuracy, learning_rate, ...}`), or
    /// `undefined` once training is over (all epochs, or early stopping).
    pub async fn train_epoch(&mut self) -> Result<JsValue, JsValue> {
        let js = |e: Error| error_to_js(&e);
        let training = self.training.as_mut().ok_or_else(|| js(Error::invalid("no training was started")))?;
        match training.job.epoch(&mut |_| {}).await.map_err(js)? {
            Some(log) => to_js(&log),
            None => Ok(JsValue::UNDEFINED),
        }
    }

    /// The trained evaluator: `{report, files}`, `report` what `train_log.json` summarises
    /// (best epoch, best dev accuracy, curve), `files` the folder's files by name
    /// (Uint8Array each: config.json, model.safetensors, train_log.json, tokenizer.json).
    pub async fn train_finish(&mut self) -> Result<JsValue, JsValue> {
        let js = |e: Error| error_to_js(&e);
        let training = self.training.take().ok_or_else(|| js(Error::invalid("no training was started")))?;
        let trained = training.job.finish(&self.tokenizer_json).await.map_err(js)?;
        let out = js_sys::Object::new();
        let files = js_sys::Object::new();
        for (name, bytes) in &trained.files {
            js_sys::Reflect::set(&files, &JsValue::from_str(name), &js_sys::Uint8Array::from(bytes.as_slice()))?;
        }
        js_sys::Reflect::set(&out, &JsValue::from_str("report"), &to_js(&trained)?)?;
        js_sys::Reflect::set(&out, &JsValue::from_str("files"), &files)?;
        Ok(out.into())
    }

    /// Drops a training under way (the user cancelled): nothing of it is kept.
    pub fn train_abort(&mut self) {
        self.training = None;
    }
}

/// What the training form offers for a file (`jobs::training_choices`): `{format, tasks,
/// systems, instances}`.
#[wasm_bindgen]
pub fn training_choices(name: &str, text: &str) -> Result<JsValue, JsValue> {
    let choices = jobs::training_choices(&NamedText::new(name, text)).map_err(|e| error_to_js(&e))?;
    to_js(&choices)
}
