//! What a job is for the front ends that list them: its name, label and title, the kinds
//! of input file it reads, whether it runs on the kept model, the tabs its reply fills, its
//! options at their defaults (its options type's `Default`: the one home of each default),
//! and its runs on the page's request (the files the user gave, each with its kind, and the
//! Options). Each job's file in `src/jobs/` fills one [`JobSpec`]; `jobs::JOBS` lists them,
//! and the page learns all of it at `ready` ([`JobSpec::description`]).
//!
//! Also here: the page's request ([`JobRequest`]) and reply ([`reply`]: the report, its
//! tables with the CSV `--csv` writes, and the views), the same for every job.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::kept::{KeptModel, ModelJob, Progress, RunOptions};
use super::{NamedText, Outcome};
use crate::report::Table;
use crate::{Error, Result};

/// A future of a run on the kept model (the page's worker awaits it; it is not `Send`).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A run without a model: the page's request in, the reply (JSON text) out.
pub type FreeRun = fn(&JobRequest, Progress) -> Result<String>;

/// A run on the kept model.
pub type KeptRun = for<'a> fn(ModelRun<'a>) -> LocalFuture<'a, Result<String>>;

/// What a run on the kept model is given: the model, the page's request, the page's clock
/// (seconds, for the time estimate) and its progress report.
pub struct ModelRun<'a> {
    pub kept: &'a mut KeptModel,
    pub request: &'a JobRequest,
    pub now: &'a dyn Fn() -> f64,
    pub progress: Progress<'a>,
}

impl<'a> ModelRun<'a> {
    /// `job` as the page runs it on the kept model (`KeptModel::run_for_page`, in `run`'s
    /// precision on its backend), then `done` as the last stage: the output, what ran, and
    /// the kept model (for the reply's [`RunViews`]).
    pub async fn run<J: ModelJob>(
        self,
        job: &J,
        run: &RunOptions,
        done: &str,
    ) -> Result<(J::Output, crate::gpu::BackendReport, &'a mut KeptModel)> {
        let (precision, choice) = run.read()?;
        let (output, backend) = self.kept.run_for_page(job, precision, choice, self.now, &mut *self.progress).await?;
        (self.progress)(done, 1, 1)?;
        Ok((output, backend, self.kept))
    }
}

/// One job, described once.
pub struct JobSpec {
    /// Its key: the page's `run(job, request)` and every reply name it so.
    pub name: &'static str,
    /// The page's button.
    pub label: &'static str,
    /// What a report of it is, in a sentence ("ranking over scoring"): the report's title.
    pub title: &'static str,
    /// The CLI's subcommand that runs it.
    pub command: &'static str,
    /// The kinds of input file it reads (`page::files::FILE_KINDS` names them).
    pub inputs: JobInputs,
    /// For a job that cannot run without a model: what the page says when none is chosen
    /// ("Grade needs a grader: ..."); empty otherwise.
    pub needs_model: &'static str,
    /// The tabs its reply fills, in order: each view's key (`www/results.js` draws it when
    /// the reply has it) and title.
    pub views: &'static [View],
    /// Its options as the Options form sends them, at their defaults.
    pub defaults: fn() -> Result<serde_json::Value>,
    /// Its run without a model (`None`: it needs one).
    pub run: Option<FreeRun>,
    /// Its run on the kept model.
    pub run_on_model: Option<KeptRun>,
    /// The checks a run makes before any model loads, and what it will encode (run as files
    /// and options change): `(request, with_model)` -> JSON text.
    pub check: Option<fn(&JobRequest, bool) -> Result<String>>,
}

/// Which kinds a job reads: every kind in `accepts`; of each group in `required`, at least
/// one must be present, except the groups a model replaces (`model_replaces`: the
/// predictions file when a model is the evaluator).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct JobInputs {
    pub accepts: &'static [&'static str],
    pub required: &'static [&'static [&'static str]],
    pub model_replaces: &'static [&'static str],
}

/// One tab of a job's reply.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct View {
    pub key: &'static str,
    pub title: &'static str,
    /// Drawn only when the reply has it (Grade's agreement with people, when they judged).
    pub optional: bool,
}

impl View {
    /// A tab every reply of the job fills.
    pub const fn tab(key: &'static str, title: &'static str) -> View {
        View { key, title, optional: false }
    }

    /// A tab drawn when the reply has its data.
    pub const fn optional(key: &'static str, title: &'static str) -> View {
        View { key, title, optional: true }
    }
}

/// How a job uses the model: the page loads one before `none` jobs never, `optional` jobs
/// when the user chose one, `required` jobs always.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelUse {
    None,
    Optional,
    Required,
}

/// A job as the page learns it at `ready`.
#[derive(Debug, Serialize)]
pub struct JobDescription {
    pub name: &'static str,
    pub label: &'static str,
    pub title: &'static str,
    pub command: &'static str,
    #[serde(flatten)]
    pub inputs: JobInputs,
    pub model: ModelUse,
    #[serde(skip_serializing_if = "str::is_empty")]
    pub needs_model: &'static str,
    pub views: &'static [View],
    pub defaults: serde_json::Value,
    /// It has a check before any model loads.
    pub check: bool,
}

/// The options of a job that has none.
fn no_options() -> Result<serde_json::Value> {
    Ok(serde_json::json!({}))
}

impl JobSpec {
    /// A job called `name` (its button `label`, its report `title`, its subcommand
    /// `command`), reading nothing and running nothing yet: the methods below describe it,
    /// so that a job file's `JOB` stays a constant.
    pub const fn new(name: &'static str, label: &'static str, title: &'static str, command: &'static str) -> Self {
        JobSpec {
            name,
            label,
            title,
            command,
            inputs: JobInputs { accepts: &[], required: &[], model_replaces: &[] },
            needs_model: "",
            views: &[],
            defaults: no_options,
            run: None,
            run_on_model: None,
            check: None,
        }
    }

    /// The kinds it reads: every kind of `accepts`; of each group of `required`, one.
    pub const fn reads(
        mut self,
        accepts: &'static [&'static str],
        required: &'static [&'static [&'static str]],
    ) -> Self {
        self.inputs.accepts = accepts;
        self.inputs.required = required;
        self
    }

    /// Its tabs, in order.
    pub const fn views(mut self, views: &'static [View]) -> Self {
        self.views = views;
        self
    }

    /// Its options at their defaults.
    pub const fn defaults(mut self, defaults: fn() -> Result<serde_json::Value>) -> Self {
        self.defaults = defaults;
        self
    }

    /// Its run without a model.
    pub const fn runs(mut self, run: FreeRun) -> Self {
        self.run = Some(run);
        self
    }

    /// Its run on the kept model; a model replaces the kinds of `replaces` (a predictions
    /// file). `needs_model`: what the page says when none is chosen, for a job without a run
    /// of its own.
    pub const fn runs_on_model(
        mut self,
        run: KeptRun,
        replaces: &'static [&'static str],
        needs_model: &'static str,
    ) -> Self {
        self.run_on_model = Some(run);
        self.inputs.model_replaces = replaces;
        self.needs_model = needs_model;
        self
    }

    /// Its checks before any model loads.
    pub const fn checks(mut self, check: fn(&JobRequest, bool) -> Result<String>) -> Self {
        self.check = Some(check);
        self
    }

    pub fn model_use(&self) -> ModelUse {
        match (self.run.is_some(), self.run_on_model.is_some()) {
            (_, false) => ModelUse::None,
            (true, true) => ModelUse::Optional,
            (false, true) => ModelUse::Required,
        }
    }

    pub fn description(&self) -> Result<JobDescription> {
        Ok(JobDescription {
            name: self.name,
            label: self.label,
            title: self.title,
            command: self.command,
            inputs: self.inputs,
            model: self.model_use(),
            needs_model: self.needs_model,
            views: self.views,
            defaults: (self.defaults)()?,
            check: self.check.is_some(),
        })
    }
}

/// A job's options at their defaults, as the page's Options form holds them.
pub fn defaults_of<T: Default + Serialize>() -> Result<serde_json::Value> {
    options_value(&T::default())
}

/// Options as the page's Options form holds them.
pub fn options_value<T: Serialize>(options: &T) -> Result<serde_json::Value> {
    serde_json::to_value(options).map_err(|e| Error::invalid(format!("could not describe the options: {e}")))
}

// ------------------------------------------------------------------ the page's request ------

/// One file the user gave the page, with the kind they confirmed and that kind's
/// parameters (e.g. `system` for a HiTZ file, `dimension` for a qrels file).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
pub struct InputFile {
    pub name: String,
    pub text: String,
    pub kind: String,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// For a file's own check: the page's files of the kinds its import reads with it
    /// (`page::files::FileKind::reads_with`: a HealthBench eval file's completions).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub companions: Vec<NamedText>,
}

impl InputFile {
    pub fn named(&self) -> NamedText {
        NamedText::new(self.name.clone(), self.text.clone())
    }

    /// The file's parameter `key`, or its default from the file name when the page sent
    /// none (the evaluator of a predictions file, the ranker of a run file).
    pub fn param_or_stem(&self, key: &str) -> String {
        self.params.get(key).filter(|v| !v.trim().is_empty()).cloned().unwrap_or_else(|| super::file_stem(&self.name))
    }

    /// The file's parameter `key`; an error naming the file when it is missing or empty.
    pub fn param(&self, key: &str) -> Result<&str> {
        self.params
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| Error::in_file(&self.name, format!("give this file's {key}")))
    }
}

/// A job as the page sends it: the files it reads and the Options (the CLI's flag names,
/// each job reading its own; a field left out takes its default).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct JobRequest {
    pub files: Vec<InputFile>,
    #[serde(default)]
    pub options: serde_json::Value,
}

impl JobRequest {
    /// The request in the page's JSON text.
    pub fn from_json(text: &str) -> Result<JobRequest> {
        serde_json::from_str(text).map_err(|e| Error::invalid(format!("bad request from the page: {e}")))
    }

    /// The Options read as a job's options type (unknown fields are other jobs').
    pub fn options<T: DeserializeOwned + Default>(&self) -> Result<T> {
        match &self.options {
            serde_json::Value::Null => Ok(T::default()),
            options => serde_json::from_value(options.clone()).map_err(|e| Error::invalid(format!("options: {e}"))),
        }
    }

    pub fn files_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a InputFile> + 'a {
        self.files.iter().filter(move |f| f.kind == kind)
    }

    /// The one file of `kind`, if any; two are an error naming both.
    pub fn one_file(&self, kind: &str, what: &str) -> Result<Option<&InputFile>> {
        let mut files = self.files.iter().filter(|f| f.kind == kind);
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

    pub fn required(&self, kind: &str, what: &str) -> Result<&InputFile> {
        self.one_file(kind, what)?.ok_or_else(|| Error::invalid(format!("add {what}")))
    }

    pub fn optional(&self, kind: &str, what: &str) -> Result<Option<NamedText>> {
        Ok(self.one_file(kind, what)?.map(InputFile::named))
    }
}

// ------------------------------------------------------------------ the page's reply --------

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

/// A report with its tables and views, as one part of a reply (Grade's agreement with
/// people, ranking's import).
#[derive(Serialize)]
pub struct ReportPart<'a, R: Serialize, V: Serialize> {
    pub report: &'a R,
    pub tables: Vec<PageTable<'a>>,
    #[serde(flatten)]
    pub views: V,
}

impl<'a, R: Serialize, V: Serialize> ReportPart<'a, R, V> {
    pub fn new(outcome: &'a Outcome<R>, views: V) -> Self {
        ReportPart { report: &outcome.report, tables: page_tables(&outcome.tables), views }
    }
}

/// The reply of a job: its report (what `--json` writes), its tables with their CSV (what
/// `--csv` writes) and the page's views, as JSON text.
pub fn reply<R: Serialize, V: Serialize>(outcome: &Outcome<R>, views: V) -> Result<String> {
    json(&ReportPart::new(outcome, views))
}

/// A reply as JSON text (the page parses it once; `--json` writes the same serialisation).
pub fn json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::invalid(format!("could not write the reply: {e}")))
}

/// Runs a job between two progress reports (the model-free jobs have no inner steps).
pub fn between(progress: Progress, stage: &str, job: impl FnOnce() -> Result<String>) -> Result<String> {
    progress(stage, 0, 1)?;
    let out = job()?;
    progress(stage, 1, 1)?;
    Ok(out)
}

/// What every reply of a kept-model job says of the run.
#[derive(Serialize)]
pub struct RunViews<'a> {
    /// Which backend ran the encoder, on what, and why the CPU when it was a fallback.
    pub backend: &'a crate::gpu::BackendReport,
    /// Threads the CPU path used (1 in the single-threaded build).
    pub threads: usize,
    /// The precision the model ran in (`f32`, `int8`; the provenance says how).
    pub precision: &'static str,
    /// Why the CPU ran when the GPU was not used, in a clinician's words (the backend's
    /// `fallback_reason` is the technical detail).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_in_words: Option<&'static str>,
}

impl<'a> RunViews<'a> {
    pub fn of(kept: &KeptModel, backend: &'a crate::gpu::BackendReport) -> Self {
        RunViews {
            backend,
            threads: crate::model::cpu::worker_threads(),
            // The GPU refuses int8 (or Auto falls back to the CPU): the model's precision ran.
            precision: kept.model.encoder.model.precision.name(),
            fallback_in_words: backend.fallback_in_words(),
        }
    }
}

/// Requests as the page sends them, for the jobs' tests.
#[cfg(test)]
pub mod testing {
    use super::{InputFile, JobRequest};

    /// A file of `kind` with `params`, its text a placeholder.
    pub fn file(name: &str, kind: &str, params: &[(&str, &str)]) -> InputFile {
        InputFile {
            name: name.into(),
            text: format!("text of {name}"),
            kind: kind.into(),
            params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        }
    }

    pub fn request(files: Vec<InputFile>, options: serde_json::Value) -> JobRequest {
        JobRequest { files, options }
    }
}
