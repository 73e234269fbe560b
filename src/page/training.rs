//! Training an evaluator in the page: the form's request read into the job layer's
//! `TrainRequest` (the same as `medrank train`'s flags make), and the training kept between
//! the worker's steps (frozen pass, epochs, finish) with the one rule of where the trained
//! part runs in the page.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::gpu::{AnyEncoder, BackendChoice, BackendReport};
use crate::jobs::{self, KeptModel, NamedText};
use crate::train::{ClassWeights, EpochLog, ExampleOptions, Freeze, SelectBy, TrainOptions};

/// The page's training form; names match the CLI's flags (`medrank train`).
#[derive(Debug, Clone, Deserialize)]
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
        let o = TrainOptions::default();
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

/// A form field's value, or `None` when it was left empty (the default).
fn non_empty(s: &str) -> Option<&str> {
    Some(s.trim()).filter(|s| !s.is_empty())
}

impl TrainPageRequest {
    /// The job layer's request (as `medrank train` builds it from its flags) and where the
    /// frozen encoder runs.
    pub fn to_request(&self) -> Result<(jobs::TrainRequest, BackendChoice)> {
        let train = self.train.clone().ok_or_else(|| Error::invalid("add a training file"))?;
        let dev = match (self.dev.clone(), self.dev_split) {
            (Some(dev), None) => jobs::DevData::File(dev),
            (None, Some(fraction)) => jobs::DevData::Split(fraction),
            (Some(_), Some(_)) => return Err(Error::invalid("give a dev file or a dev split, not both")),
            (None, None) => return Err(Error::invalid("add a dev file or choose a dev split")),
        };
        let task = crate::data::Task::parse(&self.task)
            .ok_or_else(|| Error::invalid(format!("unknown task `{}` (mcqa, misinformation, nli)", self.task)))?;
        let options = TrainOptions {
            freeze: jobs::parse_freeze(&self.freeze)?,
            epochs: self.epochs,
            batch_size: self.batch_size,
            learning_rate: self.lr,
            patience: self.patience,
            seed: self.seed,
            select_by: non_empty(&self.select_by).map(SelectBy::parse).transpose()?,
            class_weights: non_empty(&self.class_weights).map(ClassWeights::parse).transpose()?,
            ..Default::default()
        };
        let request = jobs::TrainRequest {
            train,
            dev,
            task,
            arguments: self.arguments.clone(),
            options,
            conventions: ExampleOptions {
                keep_empty_options: self.keep_empty_options,
                keep_not_enough_evidence: self.keep_not_enough_evidence,
            },
            on_gpu: false,
            trace_steps: 0,
        };
        Ok((request, jobs::parse_backend(&self.backend)?))
    }
}

/// How far the frozen pass is, and where the trained part will run.
#[derive(Debug, Serialize)]
pub struct EncodeProgress<'a> {
    pub done: usize,
    pub total: usize,
    pub finished: bool,
    pub backend: &'a BackendReport,
    /// Where the trained part runs: cpu | gpu.
    pub trained_on: &'static str,
}

/// A training under way on the page's kept model, between the worker's steps.
pub struct PageTraining {
    job: jobs::TrainingJob,
    backend: BackendChoice,
    /// Whether the trained part's engine was chosen (after the frozen pass).
    placed: bool,
    /// Where the trained part runs: "cpu" (candle's autograd) or "gpu" (WebGPU).
    trained_on: &'static str,
}

impl PageTraining {
    /// Reads the training data and sets up a new head on `kept`'s model.
    pub fn start(request: &TrainPageRequest, kept: &KeptModel, clock: fn() -> f64) -> Result<PageTraining> {
        let (req, backend) = request.to_request()?;
        let job = jobs::TrainingJob::start(&req, &kept.model, clock)?;
        Ok(PageTraining { job, backend, placed: false, trained_on: "cpu" })
    }

    pub fn summary(&self) -> &jobs::TrainingSummary {
        self.job.summary()
    }

    /// Up to `max_batches` more batches of the frozen pass on `kept`'s encoder (the
    /// request's backend).
    pub async fn encode<'a>(&mut self, kept: &'a mut KeptModel, max_batches: usize) -> Result<EncodeProgress<'a>> {
        let (encoder, report) = kept.encoder(self.backend).await?;
        let finished = self.job.encode(encoder, max_batches.max(1)).await?;
        if finished && !self.placed {
            self.placed = true;
            self.place(encoder)?;
        }
        let (done, total) = self.job.inputs();
        Ok(EncodeProgress { done, total, finished, backend: report, trained_on: self.trained_on })
    }

    /// Where the trained part runs, once the frozen pass is done: trained top layers go to
    /// the GPU whose encoder computed the frozen part (the same device, its states already
    /// there); the head alone, or a CPU encoder, keeps it on the CPU.
    fn place(&mut self, encoder: &AnyEncoder) -> Result<()> {
        if let (AnyEncoder::Gpu(gpu), Freeze::TopLayers(_)) = (encoder, self.job.summary().freeze) {
            self.job.train_on_gpu(gpu.context().clone())?;
            self.trained_on = "gpu";
        }
        Ok(())
    }

    /// One epoch's log, or `None` once training is over (all epochs, or early stopping).
    pub async fn epoch(&mut self) -> Result<Option<EpochLog>> {
        self.job.epoch(&mut |_| {}).await
    }

    /// The best epoch's evaluator folder.
    pub async fn finish(self, tokenizer_json: &[u8]) -> Result<jobs::TrainedEvaluator> {
        self.job.finish(tokenizer_json).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(value: serde_json::Value) -> TrainPageRequest {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_form_left_empty_takes_the_trainers_defaults() {
        let (req, backend) =
            form(serde_json::json!({"train": {"name": "t.jsonl", "text": ""}, "dev_split": 0.2})).to_request().unwrap();
        let d = TrainOptions::default();
        assert_eq!(
            (req.options.epochs, req.options.batch_size, req.options.learning_rate, req.options.seed),
            (d.epochs, d.batch_size, d.learning_rate, d.seed)
        );
        assert_eq!(req.options.freeze, Freeze::HeadOnly);
        assert_eq!((req.options.select_by, req.options.class_weights), (None, None), "the task's own defaults");
        assert!(matches!(req.dev, jobs::DevData::Split(f) if f == 0.2));
        assert_eq!(backend, BackendChoice::Auto);
    }

    #[test]
    fn the_form_reads_its_fields_as_the_clis_flags() {
        let (req, backend) = form(serde_json::json!({
            "train": {"name": "t.jsonl", "text": ""}, "dev": {"name": "d.jsonl", "text": ""},
            "task": "nli", "freeze": "top:2", "select_by": "macro-f1", "class_weights": "none", "backend": "gpu",
            "epochs": 3, "lr": 0.01
        }))
        .to_request()
        .unwrap();
        assert_eq!(req.task, crate::data::Task::Nli);
        assert_eq!(req.options.freeze, Freeze::TopLayers(2));
        assert_eq!(req.options.select_by, Some(SelectBy::MacroF1));
        assert!(matches!(req.options.class_weights, Some(ClassWeights::Equal)));
        assert_eq!((req.options.epochs, req.options.learning_rate), (3, 0.01));
        assert!(matches!(req.dev, jobs::DevData::File(ref f) if f.name == "d.jsonl"));
        assert_eq!(backend, BackendChoice::Gpu);
    }

    #[test]
    fn an_incomplete_form_is_refused_with_what_to_add() {
        let err = |v| form(v).to_request().unwrap_err().to_string();
        assert_eq!(err(serde_json::json!({})), "add a training file");
        let train = serde_json::json!({"name": "t.jsonl", "text": ""});
        assert_eq!(err(serde_json::json!({"train": train})), "add a dev file or choose a dev split");
        assert_eq!(
            err(serde_json::json!({"train": train, "dev": train, "dev_split": 0.1})),
            "give a dev file or a dev split, not both"
        );
        assert!(err(serde_json::json!({"train": train, "dev_split": 0.1, "task": "x"})).contains("unknown task `x`"));
    }
}
