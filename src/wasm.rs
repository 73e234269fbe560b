//! The browser's entry points (wasm-bindgen), called from `www/worker.js`.
//!
//! Only conversion lives here: JS values or JSON text in, JSON text or plain JS objects out,
//! the page's progress callback, errors as `{message, location}`, and the `Model` handle the
//! worker keeps. Every job goes through one `run(job, request)` (or the kept model's `run`):
//! what a job is, reads, runs and shows is the job layer's (`jobs::JOBS`), and the page's
//! front end (`crate::page`) serves it, built and tested natively.

use serde::de::DeserializeOwned;
use serde::Serialize;
use wasm_bindgen::prelude::*;

use crate::error::{Error, Result};
use crate::jobs::{self, InputFile, NamedText};
use crate::page::{self, training};

/// Called once when the worker loads the module: readable panics in the console.
#[wasm_bindgen(start)]
pub fn start() {
    console_error_panic_hook::set_once();
}

/// The threaded build's pool: `initThreadPool(n)` once, before any job, when the page is
/// cross-origin isolated; the CPU path then runs on `n` threads.
#[cfg(feature = "threads")]
pub use wasm_bindgen_rayon::init_thread_pool;

/// Errors reach the page as `page::error_reply` writes them (`{message, location?, ...}`).
impl From<Error> for JsValue {
    fn from(e: Error) -> JsValue {
        to_js(&page::error_reply(&e)).unwrap_or_else(|_| JsValue::from_str(&e.to_string()))
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

/// The page's callback `progress(stage, done, total) -> bool`: `false` means Cancel.
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

/// What the page learns when the engine is ready (`page::describe`), as JSON text.
#[wasm_bindgen]
pub fn describe() -> Result<String, JsValue> {
    Ok(page::describe()?)
}

/// The job `job` without a model on the page's request (JSON text); its reply as JSON text.
#[wasm_bindgen]
pub fn run(job: &str, request: &str, progress: &js_sys::Function) -> Result<String, JsValue> {
    Ok(page::run(job, request, &mut progress_of(progress))?)
}

/// The checks `job` makes before any model loads (`with_model`: a model will run it).
#[wasm_bindgen]
pub fn check(job: &str, request: &str, with_model: bool) -> Result<String, JsValue> {
    Ok(page::check(job, request, with_model)?)
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
    Ok(to_js(&page::files::check_file(&file)?)?)
}

/// What the training form offers for a file: `{format, tasks, systems, instances}`.
#[wasm_bindgen]
pub fn training_choices(name: &str, text: &str) -> Result<JsValue, JsValue> {
    Ok(to_js(&jobs::training_choices(&NamedText::new(name, text))?)?)
}

/// A self-check of this build by name (`page::bench::self_check`: "gradients", "int8").
#[wasm_bindgen]
pub async fn self_check(which: String) -> Result<String, JsValue> {
    Ok(page::bench::self_check(&which).await?)
}

/// A Hub model downloaded by the worker's `fetch` through the CLI's steps (`page::hub`).
#[wasm_bindgen]
pub struct HubDownload(page::hub::HubDownload);

#[wasm_bindgen]
impl HubDownload {
    /// `endpoint`: the public Hub when undefined, else a stand-in on this machine.
    #[wasm_bindgen(constructor)]
    pub fn new(id: &str, endpoint: Option<String>) -> Result<HubDownload, JsValue> {
        Ok(HubDownload(page::hub::HubDownload::new(id, endpoint.as_deref())?))
    }
    pub fn listing_url(&self) -> String {
        self.0.listing_url()
    }
    /// The listing's answer to the plan, `page::hub::PagePlan` as JSON text.
    pub fn plan(&mut self, answer: JsValue, body: &[u8]) -> Result<String, JsValue> {
        Ok(self.0.plan(&from_js(answer)?, body)?)
    }
    /// A file's answer before its body; then each chunk (`update`), then `finish`.
    pub fn open(&mut self, path: &str, answer: JsValue) -> Result<(), JsValue> {
        Ok(self.0.open(path, &from_js(answer)?)?)
    }
    pub fn update(&mut self, chunk: &[u8]) -> Result<(), JsValue> {
        Ok(self.0.update(chunk)?)
    }
    pub fn finish(&mut self) -> Result<(), JsValue> {
        Ok(self.0.finish()?)
    }
}

/// A model the worker keeps across jobs (`jobs::KeptModel`) until it frees it (`model.free()`).
#[wasm_bindgen]
pub struct Model {
    kept: jobs::KeptModel,
    /// A training on this model under way (`train_*` methods).
    training: Option<training::PageTraining>,
}

/// The model's files as the worker loaded them (`{name, config, tokenizer, weights, ...}`).
fn model_files(model: &JsValue) -> Result<crate::model::ModelFiles> {
    let get = |key: &str| js_sys::Reflect::get(model, &key.into()).ok().filter(|v| !v.is_undefined() && !v.is_null());
    let text = |key: &str| get(key).and_then(|v| v.as_string()).map(String::into_bytes);
    let missing = |file: &str| Error::invalid(format!("the model has no {file}"));
    let weights = get("weights").ok_or_else(|| missing("model.safetensors"))?;
    let name = get("name").and_then(|v| v.as_string()).unwrap_or_else(|| "model".into());
    // `spm_only`: the worker found spm.model but no tokenizer.json.
    let no_tokenizer = || crate::model::load::no_tokenizer_in_the_page(&name, get("spm_only").is_some());
    Ok(crate::model::ModelFiles {
        config_json: text("config").ok_or_else(|| missing("config.json"))?,
        tokenizer_json: text("tokenizer").ok_or_else(no_tokenizer)?,
        name,
        weights: js_sys::Uint8Array::new(&weights).to_vec(),
        pooling_json: text("pooling"),
        modules_json: text("modules"),
        sentence_config_json: text("sentence_config"),
        // An evaluator trained in this browser: its dev figures (jobs::quality).
        train_log_json: text("train_log"),
        ..Default::default() // the page reads tokenizer.json and model.safetensors only
    })
}

#[wasm_bindgen]
impl Model {
    #[wasm_bindgen(constructor)]
    pub fn new(files: JsValue) -> Result<Model, JsValue> {
        let files = model_files(&files)?;
        Ok(Model { kept: jobs::KeptModel::from_files(&files)?, training: None })
    }
    /// The job `job` on this model (evaluator, grader, NLI model); request and reply JSON text.
    pub async fn run(&mut self, job: String, request: String, progress: js_sys::Function) -> Result<String, JsValue> {
        let mut progress = progress_of(&progress);
        Ok(page::run_on_model(&mut self.kept, &job, &request, &seconds_now, &mut progress).await?)
    }
    /// The encoder's states and logits for texts and pairs (`page::encoder_outputs`).
    pub async fn encoder_outputs(&mut self, request: String) -> Result<String, JsValue> {
        Ok(page::encoder_outputs(&mut self.kept, &request).await?)
    }
    /// The bench page's grid or workload (`page::bench::BenchRequest`, JSON text).
    pub async fn bench(&mut self, request: String, progress: js_sys::Function) -> Result<String, JsValue> {
        let mut progress = progress_of(&progress);
        Ok(page::bench::bench_page(&mut self.kept, &request, &seconds_now, &mut progress).await?)
    }
    // Training in steps (`page::training`): start, encode, epochs, then finish (or abort).
    /// Reads the form (`TrainPageRequest`) and its data; the summary (`PageSummary`).
    pub async fn train_start(&mut self, request: JsValue) -> Result<JsValue, JsValue> {
        self.training = None;
        let training = training::PageTraining::start(&from_js(request)?, &mut self.kept, seconds_now).await?;
        let summary = to_js(&training.page_summary())?;
        self.training = Some(training);
        Ok(summary)
    }
    /// Each recipe's estimated time on the form's data (`[RecipeEstimate]`).
    pub async fn train_estimates(&mut self, request: JsValue) -> Result<JsValue, JsValue> {
        let request: training::TrainPageRequest = from_js(request)?;
        Ok(to_js(&training::recipe_estimates(&request, &mut self.kept, seconds_now).await?)?)
    }
    /// Up to `max_batches` more batches of the frozen pass (`EncodeProgress`).
    pub async fn train_encode(&mut self, max_batches: usize) -> Result<JsValue, JsValue> {
        let training = self.training.as_mut().ok_or_else(not_started)?;
        Ok(to_js(&training.encode(&mut self.kept, max_batches).await?)?)
    }
    /// One epoch (`TrainProgress` with its log, its stages to `progress`), or `{over: true}`.
    pub async fn train_epoch(&mut self, progress: js_sys::Function) -> Result<JsValue, JsValue> {
        let training = self.training.as_mut().ok_or_else(not_started)?;
        let mut report = |p: &training::TrainProgress| {
            if let Ok(p) = to_js(p) {
                let _ = progress.call1(&JsValue::NULL, &p);
            }
        };
        Ok(to_js(&training.epoch(&mut report).await?)?)
    }
    /// The trained evaluator: `{report, outcome, files}` (the folder's files by name).
    pub async fn train_finish(&mut self) -> Result<JsValue, JsValue> {
        let training = self.training.take().ok_or_else(not_started)?;
        let (trained, outcome) = training.finish(&self.kept.tokenizer_json).await?;
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
