//! The browser's entry points (wasm-bindgen), called from `www/worker.js`.
//!
//! Only conversion lives here: JS values in (read with serde), JSON text or plain JS
//! objects out, the page's progress callback, errors as `{message, location}`, and the
//! `Model` handle the worker keeps. What a request means, which defaults apply and what
//! each view shows is the page's front end, `crate::page`, built and tested natively.

use serde::de::DeserializeOwned;
use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::error::{Error, Result};
use crate::jobs::{self, NamedText};
use crate::page::{self, request::InputFile, request::JobRequest, training};

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

// ------------------------------------------------------------------ conversion ---------------

/// Errors reach the page as `{message, location?, cancelled}` so it can point at the file,
/// line and field; the message does not repeat the location.
impl From<Error> for JsValue {
    fn from(e: Error) -> JsValue {
        let message = if let Error::Input { message, .. } = &e { message.clone() } else { e.to_string() };
        let message = page::sentence_case(&message);
        let cancelled = matches!(e, Error::Cancelled);
        let js = serde_json::json!({"message": message, "location": e.location(), "cancelled": cancelled});
        to_js(&js).unwrap_or_else(|_| JsValue::from_str(&e.to_string()))
    }
}

/// Plain JS objects (not Maps), so the worker can post them as they are.
fn to_js<T: Serialize>(value: &T) -> Result<JsValue> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(|e| Error::invalid(format!("could not pass the reply to the page: {e}")))
}

/// A request from the page, read into the page layer's type.
fn from_js<T: DeserializeOwned>(value: JsValue) -> Result<T> {
    serde_wasm_bindgen::from_value(value).map_err(|e| Error::invalid(format!("bad request from the page: {e}")))
}

/// The page's callback `progress(stage, done, total) -> bool` as the page layer's progress
/// report: `false` from it means the user pressed Cancel.
fn progress_of(callback: &js_sys::Function) -> impl FnMut(&str, usize, usize) -> Result<()> + '_ {
    move |stage, done, total| {
        let args = [JsValue::from_str(stage), JsValue::from_f64(done as f64), JsValue::from_f64(total as f64)];
        let answer = callback.call3(&JsValue::NULL, &args[0], &args[1], &args[2]);
        match answer.map(|v| v.as_bool()) {
            Ok(Some(false)) => Err(Error::Cancelled),
            _ => Ok(()),
        }
    }
}

#[wasm_bindgen]
extern "C" {
    /// The browser's monotonic clock in milliseconds (window and worker alike).
    #[wasm_bindgen(js_namespace = performance, js_name = now)]
    fn performance_now() -> f64;
}

/// The page layer's clock: seconds from any fixed origin.
fn seconds_now() -> f64 {
    performance_now() / 1000.0
}

// ------------------------------------------------------------------ this build ---------------

/// The SIMD this build was compiled with.
fn simd_name() -> &'static str {
    if cfg!(target_feature = "relaxed-simd") {
        "simd128 + relaxed"
    } else if cfg!(target_feature = "simd128") {
        "simd128"
    } else {
        "no SIMD"
    }
}

/// "medrank kernels (wasm simd128, 4 threads)": what runs the CPU path in this build.
fn cpu_kernels(threads: usize) -> String {
    format!("medrank kernels (wasm {}, {threads} thread{})", simd_name(), if threads == 1 { "" } else { "s" })
}

/// What this build is and how many threads its CPU path runs on (1 until the pool started).
#[wasm_bindgen]
pub fn engine_info() -> Result<JsValue, JsValue> {
    let threads = crate::model::cpu::worker_threads();
    let threaded_build = cfg!(target_feature = "atomics");
    Ok(to_js(&serde_json::json!({"threaded_build": threaded_build, "threads": threads, "simd": simd_name()}))?)
}

// ------------------------------------------------------------------ files --------------------

/// The kinds of input file and which kinds each job reads: the page's only source for them.
#[wasm_bindgen]
pub fn file_kinds() -> Result<JsValue, JsValue> {
    Ok(to_js(&page::files::kinds_description())?)
}

/// A first guess of a file's kind and parameters; with `kind`, that kind's defaults.
#[wasm_bindgen]
pub fn describe_file(name: &str, text: &str, kind: Option<String>) -> Result<JsValue, JsValue> {
    Ok(to_js(&page::files::describe(name, text, kind.as_deref()))?)
}

/// Checks one file on its own (the page shows the result next to the file).
#[wasm_bindgen]
pub fn check_file(file: JsValue) -> Result<JsValue, JsValue> {
    let file: InputFile = from_js(file)?;
    Ok(to_js(&page::files::check_file(&file.kinded())?)?)
}

/// The ranking's checks that need no model, and what a model run will encode
/// (`page::check_rank`): run when files or options change, before any model loads.
#[wasm_bindgen]
pub fn check_rank(request: JsValue, with_model: bool) -> Result<JsValue, JsValue> {
    Ok(to_js(&page::check_rank(&from_js(request)?, with_model)?)?)
}

/// What the training form offers for a file: `{format, tasks, systems, instances}`.
#[wasm_bindgen]
pub fn training_choices(name: &str, text: &str) -> Result<JsValue, JsValue> {
    Ok(to_js(&jobs::training_choices(&NamedText::new(name, text))?)?)
}

// ------------------------------------------------------------------ model-free jobs ----------

/// Ranking over scoring from imported predictions (`medrank evaluate`).
#[wasm_bindgen]
pub fn rank_systems(request: JsValue, progress: &js_sys::Function) -> Result<String, JsValue> {
    Ok(page::rank_systems(&from_js(request)?, &mut progress_of(progress))?)
}

/// NRP of generated answers among expert-judged documents (`medrank nrp`).
#[wasm_bindgen]
pub fn nrp(request: JsValue, progress: &js_sys::Function) -> Result<String, JsValue> {
    Ok(page::nrp(&from_js(request)?, &mut progress_of(progress))?)
}

/// Reference-based metrics over one candidates file (`medrank metrics`).
#[wasm_bindgen]
pub fn metrics(request: JsValue, progress: &js_sys::Function) -> Result<String, JsValue> {
    Ok(page::metrics(&from_js(request)?, &mut progress_of(progress))?)
}

/// Rubric grading over one file of graded responses (`medrank rubric`).
#[wasm_bindgen]
pub fn rubric(request: JsValue, progress: &js_sys::Function) -> Result<String, JsValue> {
    Ok(page::rubric(&from_js(request)?, &mut progress_of(progress))?)
}

/// A grader's agreement with people, and the people's with each other (`medrank
/// rubric-agreement`).
#[wasm_bindgen]
pub fn rubric_agreement(request: JsValue, progress: &js_sys::Function) -> Result<String, JsValue> {
    Ok(page::rubric_agreement(&from_js(request)?, &mut progress_of(progress))?)
}

/// The GPU trainer's gradient check on this browser's adapter: `{adapter, tolerance, checks}`.
#[wasm_bindgen]
pub async fn gpu_gradient_check() -> Result<String, JsValue> {
    Ok(page::bench::gradient_check().await?)
}

/// The int8 kernels of this build against the scheme's formula on odd shapes
/// (`model::cpu::int8::self_check`): the names of the kernels checked, or the first
/// difference as an error (the bench page's "Check the int8 kernels").
#[wasm_bindgen]
pub fn int8_self_check() -> Result<JsValue, JsValue> {
    let checked = crate::model::cpu::int8::self_check().map_err(Error::model)?;
    Ok(to_js(&checked)?)
}

// ------------------------------------------------------------------ the kept model -----------

/// A model the worker keeps across jobs (`jobs::KeptModel`: the weights and the encoder it
/// last ran on) until it frees it (`model.free()`) for another one.
#[wasm_bindgen]
pub struct Model {
    kept: jobs::KeptModel,
    /// The base model's tokenizer.json: a trained evaluator's folder holds a copy.
    tokenizer_json: Vec<u8>,
    /// A training on this model under way (`train_*` methods).
    training: Option<training::PageTraining>,
    /// The precision the model's folder holds (int8 weights or not): a training runs in it.
    folder_precision: crate::model::Precision,
}

/// The model's files as the worker loaded them: `{name, config, tokenizer, weights:
/// Uint8Array, pooling?, modules?, sentence_config?}`.
fn model_files(model: &JsValue) -> Result<crate::model::ModelFiles> {
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
        tokenizer_source: None,
    })
}

#[wasm_bindgen]
impl Model {
    #[wasm_bindgen(constructor)]
    pub fn new(files: JsValue) -> Result<Model, JsValue> {
        let files = model_files(&files)?;
        let kept = jobs::KeptModel::from_files(&files)?;
        let folder_precision = kept.model.encoder.model.precision;
        Ok(Model { kept, tokenizer_json: files.tokenizer_json, training: None, folder_precision })
    }

    /// The name reports give the evaluator (the folder's name or path).
    #[wasm_bindgen(getter)]
    pub fn name(&self) -> String {
        self.kept.model.name.clone()
    }

    /// Ranking over scoring with this model as the evaluator (`medrank evaluate --model`).
    pub async fn evaluate(&mut self, request: JsValue, progress: js_sys::Function) -> Result<String, JsValue> {
        let request: JobRequest = from_js(request)?;
        Ok(page::rank_with_model(&mut self.kept, &request, &seconds_now, &mut progress_of(&progress)).await?)
    }

    /// Grade: this model grades every criterion of the request's rubric
    /// file (`medrank grade --grader`).
    pub async fn grade(&mut self, request: JsValue, progress: js_sys::Function) -> Result<String, JsValue> {
        let request: JobRequest = from_js(request)?;
        Ok(page::grade_with_model(&mut self.kept, &request, &seconds_now, &mut progress_of(&progress)).await?)
    }

    /// Statements: this model, an NLI model, checks each answer against its expert
    /// statements (`medrank statements --nli`).
    pub async fn statements(&mut self, request: JsValue, progress: js_sys::Function) -> Result<String, JsValue> {
        let request: JobRequest = from_js(request)?;
        Ok(page::statements_with_model(&mut self.kept, &request, &seconds_now, &mut progress_of(&progress)).await?)
    }

    /// The bench page's encoder grid (`cells` flat: length, batch, length, batch, ...), each
    /// backend in each precision.
    pub async fn bench(
        &mut self,
        backends: Vec<String>,
        precisions: Vec<String>,
        cells: Vec<u32>,
        min_seconds: f64,
        progress: js_sys::Function,
    ) -> Result<String, JsValue> {
        let cells: Vec<(usize, usize)> = cells.chunks_exact(2).map(|c| (c[0] as usize, c[1] as usize)).collect();
        let plan = page::bench::BenchPlan {
            backends: &backends,
            precisions: &precisions,
            cells: &cells,
            min_seconds,
            cpu_device: &cpu_kernels,
        };
        let rows = page::bench::bench_grid(&mut self.kept, &plan, &seconds_now, &mut progress_of(&progress)).await?;
        Ok(page::json(&rows)?)
    }

    /// The benchmark page's workload (`medrank bench --parts workload`) on `backend`.
    pub async fn workload(
        &mut self,
        dev_text: String,
        backend: String,
        progress: js_sys::Function,
    ) -> Result<String, JsValue> {
        let mut progress = progress_of(&progress);
        Ok(page::workload(&mut self.kept, dev_text, &backend, &seconds_now, &cpu_kernels, &mut progress).await?)
    }

    // Training in steps (`page::training`): `train_start`, `train_encode` until finished,
    // `train_epoch` until `undefined`, then `train_finish` (or `train_abort`).

    /// Reads the form (`TrainPageRequest`) and its data, sets up a new head; the summary
    /// (`PageSummary`: with the dev baseline).
    pub fn train_start(&mut self, request: JsValue) -> Result<JsValue, JsValue> {
        self.training = None;
        let training =
            training::PageTraining::start(&from_js(request)?, &mut self.kept, self.folder_precision, seconds_now)?;
        let summary = to_js(&training.page_summary())?;
        self.training = Some(training);
        Ok(summary)
    }

    /// Up to `max_batches` more batches of the frozen pass (`EncodeProgress`).
    pub async fn train_encode(&mut self, max_batches: usize) -> Result<JsValue, JsValue> {
        let training = self.training.as_mut().ok_or_else(not_started)?;
        Ok(to_js(&training.encode(&mut self.kept, max_batches).await?)?)
    }

    /// One epoch (`TrainProgress` with its log), or `{over: true}` once training is over;
    /// `progress(TrainProgress)` sees its stages as they start.
    pub async fn train_epoch(&mut self, progress: js_sys::Function) -> Result<JsValue, JsValue> {
        let training = self.training.as_mut().ok_or_else(not_started)?;
        let mut report = |p: &training::TrainProgress| {
            if let Ok(p) = to_js(p) {
                let _ = progress.call1(&JsValue::NULL, &p);
            }
        };
        Ok(to_js(&training.epoch(&mut report).await?)?)
    }

    /// The trained evaluator: `{report, outcome, files}`, `files` the folder's files by
    /// name, `outcome` how training ended (`page::training::Outcome`).
    pub async fn train_finish(&mut self) -> Result<JsValue, JsValue> {
        let training = self.training.take().ok_or_else(not_started)?;
        let (trained, outcome) = training.finish(&self.tokenizer_json).await?;
        let files = js_sys::Object::new();
        for (name, bytes) in &trained.files {
            js_sys::Reflect::set(&files, &JsValue::from_str(name), &js_sys::Uint8Array::from(bytes.as_slice()))?;
        }
        let out = js_sys::Object::new();
        js_sys::Reflect::set(&out, &JsValue::from_str("report"), &to_js(&trained)?)?;
        js_sys::Reflect::set(&out, &JsValue::from_str("outcome"), &to_js(&outcome)?)?;
        js_sys::Reflect::set(&out, &JsValue::from_str("files"), &files)?;
        Ok(out.into())
    }

    /// Drops a training under way (the user cancelled): nothing of it is kept.
    pub fn train_abort(&mut self) {
        self.training = None;
    }
}

fn not_started() -> Error {
    Error::invalid("no training was started")
}
