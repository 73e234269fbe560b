//! Training an evaluator in the page: the form's request read into the job layer's
//! `TrainRequest` (the same as `medrank train`'s flags make), and the training kept between
//! the worker's steps (frozen pass, epochs, finish) with the one rule of where the trained
//! part runs in the page; the stages named as they happen, one estimate of the time left
//! for all of them ([`time_left`]), and how the training ended beside the dev baseline
//! ([`outcome`]).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::gpu::{AnyEncoder, BackendChoice, BackendReport};
use crate::jobs::{self, KeptModel, NamedText};
use crate::train::{Baseline, EpochLog, SelectBy, TrainEvent};

/// The page's training form: the files, and the options as `medrank train`'s flags name
/// them (`jobs::TrainForm`, whose `Default` the page starts from).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct TrainPageRequest {
    /// The training file: an argument bundle, a HiTZ MCQA file, a rubric file or (task
    /// score) a metrics JSONL file with human scores.
    pub train: Option<NamedText>,
    /// The dev file; without one, the form's `dev_split` of the training file.
    pub dev: Option<NamedText>,
    #[serde(flatten)]
    pub form: jobs::TrainForm,
}

impl TrainPageRequest {
    /// The job layer's request (as `medrank train` builds it from its flags), training on
    /// a GPU or not (`on_gpu`: the default recipe), and where the frozen encoder runs.
    pub fn to_request(&self, on_gpu: bool) -> Result<(jobs::TrainRequest, BackendChoice)> {
        let train = self.train.clone().ok_or_else(|| Error::invalid("add a training file"))?;
        let dev = match self.dev.clone() {
            Some(dev) => jobs::DevData::File(dev),
            None => jobs::DevData::Split(self.form.dev_split),
        };
        Ok((self.form.request(train, dev, on_gpu)?, self.form.backend()?))
    }
}

/// What the page's training form learns when the engine is ready: its defaults, the tasks
/// it trains (with their names in words) and the arguments any file offers.
#[derive(Debug, Serialize)]
pub struct FormDescription {
    pub defaults: jobs::TrainForm,
    /// The recipes (`--recipe`) with what each sets.
    pub recipes: Vec<jobs::RecipeChoice>,
    pub tasks: Vec<TaskChoice>,
    pub arguments: Vec<jobs::ArgumentChoice>,
}

#[derive(Debug, Serialize)]
pub struct TaskChoice {
    pub name: &'static str,
    pub label: &'static str,
}

impl FormDescription {
    pub fn new() -> Result<FormDescription> {
        // The page's frozen encoder runs where its Model section says (WebGPU when there is one).
        let defaults = jobs::TrainForm { backend: jobs::RunOptions::page().backend, ..Default::default() };
        // Every task of the task table, the score task (a metric learned from human
        // scores, issue 43) included.
        let tasks = jobs::TrainTask::all().map(|t| TaskChoice { name: t.name(), label: t.label() }).collect();
        let recipes = jobs::recipe_choices();
        Ok(FormDescription { defaults, tasks, arguments: jobs::argument_choices(&[]), recipes })
    }
}

/// The stages of a training, named as they happen (issue 28: the frozen pass's name stayed
/// up through the first epoch).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Stage {
    /// The frozen layers computed once for every input.
    Frozen,
    /// Epoch `.0` of `.1`: its optimiser steps.
    Training(usize, usize),
    /// Epoch `.0` of `.1`: the dev figures.
    Dev(usize, usize),
    /// The best epoch's weights written as the evaluator's folder.
    Exporting,
}

impl Stage {
    pub fn text(self) -> String {
        match self {
            Stage::Frozen => "Computing features with the frozen encoder".into(),
            Stage::Training(k, n) => format!("Epoch {k} of {n}: training"),
            Stage::Dev(k, n) => format!("Epoch {k} of {n}: dev evaluation"),
            Stage::Exporting => "Exporting the trained evaluator".into(),
        }
    }
}

/// What the whole training will do: the work the estimate of time left counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// Inputs of the frozen pass (train and dev; 0 when every layer trains).
    pub inputs: usize,
    pub train_examples: usize,
    pub dev_examples: usize,
    pub epochs: usize,
    pub patience: usize,
    /// Encoder layers that train (the top ones) and all of them.
    pub trained_layers: usize,
    pub layers: usize,
}

/// What was measured so far.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measured {
    /// Inputs of the frozen pass done, and the seconds they took.
    pub inputs_done: usize,
    pub encode_seconds: f64,
    /// Finished epochs, the seconds of their training steps and of their dev evaluations.
    pub epochs_done: usize,
    pub train_seconds: f64,
    pub dev_seconds: f64,
    /// The epoch under way: training examples done and the seconds they took.
    pub in_epoch: Option<(usize, f64)>,
    /// The epoch under way is at its dev evaluation.
    pub in_dev: bool,
    /// Epochs since the best dev metric (early stopping comes at `patience`).
    pub since_best: usize,
}

/// The estimate of time left for the whole training.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TimeLeft {
    pub seconds: f64,
    /// Early stopping may end the training before its last epoch: the estimate is an
    /// upper bound (the rates measured so far holding).
    pub at_most: bool,
    /// As the page shows it.
    pub text: String,
}

/// Forward and backward through a layer cost about three forward passes (the backward
/// pass computes two products per forward one): the prior's factor for a training step.
const BACKWARD_FACTOR: f64 = 3.0;

/// Seconds left for the frozen pass, the epoch under way and every epoch after it, each
/// part at its measured rate (seconds per input or per example):
///
/// - the frozen pass: its seconds per input so far;
/// - training and dev evaluation: their seconds per example over the finished epochs; in
///   the first epoch, the training rate of its steps so far (its progress events); before
///   that, a prior from the frozen pass's rate: an example has `inputs / examples` inputs,
///   a frozen input ran the `layers - trained` frozen layers, a training example runs the
///   trained ones forward and backward ([`BACKWARD_FACTOR`]), a dev example forward (the
///   head alone counts as nothing next to a layer).
///
/// `None` until a rate is known. Every remaining epoch is counted: with early stopping
/// possible before the last one (`patience - since_best` epochs without a better dev
/// metric), the estimate is `at_most`.
pub fn time_left(plan: &Plan, m: &Measured) -> Option<TimeLeft> {
    let per_input = (m.inputs_done > 0).then(|| m.encode_seconds / m.inputs_done as f64);
    let examples = plan.train_examples + plan.dev_examples;
    let lower = plan.layers.saturating_sub(plan.trained_layers);
    // The prior's seconds per example of one forward pass through the trained layers.
    let forward = match (per_input, plan.inputs, lower) {
        _ if plan.trained_layers == 0 => Some(0.0),
        (Some(s), inputs, lower) if inputs > 0 && lower > 0 && examples > 0 => {
            Some(s * (inputs as f64 / examples as f64) * plan.trained_layers as f64 / lower as f64)
        }
        _ => None,
    };
    let train_rate = if m.epochs_done > 0 && plan.train_examples > 0 {
        Some(m.train_seconds / (m.epochs_done * plan.train_examples) as f64)
    } else if let Some((done, seconds)) = m.in_epoch.filter(|(done, _)| *done > 0) {
        Some(seconds / done as f64)
    } else {
        forward.map(|f| f * BACKWARD_FACTOR)
    };
    let dev_rate = if m.epochs_done > 0 && plan.dev_examples > 0 {
        Some(m.dev_seconds / (m.epochs_done * plan.dev_examples) as f64)
    } else {
        forward
    };
    let frozen = match plan.inputs.saturating_sub(m.inputs_done) {
        0 => 0.0,
        left => left as f64 * per_input?,
    };
    let (train_rate, dev_rate) = (train_rate?, dev_rate?);
    let dev = plan.dev_examples as f64 * dev_rate;
    let epoch = plan.train_examples as f64 * train_rate + dev;
    let under_way = m.in_epoch.is_some() || m.in_dev;
    let current = match (under_way, m.in_dev) {
        (_, true) => dev,
        (true, false) => plan.train_examples.saturating_sub(m.in_epoch.map_or(0, |(d, _)| d)) as f64 * train_rate + dev,
        (false, false) => 0.0,
    };
    // Epochs still to run, the one under way included.
    let remaining = plan.epochs.saturating_sub(m.epochs_done);
    let after = remaining.saturating_sub(under_way as usize);
    let seconds = frozen + current + after as f64 * epoch;
    let at_most = remaining >= 2 && plan.patience.saturating_sub(m.since_best).max(1) < remaining;
    Some(TimeLeft { seconds, at_most, text: left_text(seconds, at_most) })
}

/// "about 72 s", "about 4 min".
fn span_text(seconds: f64) -> String {
    if seconds < 1.0 {
        "less than a second".to_string()
    } else if seconds < 120.0 {
        format!("about {} s", seconds.round())
    } else {
        format!("about {} min", (seconds / 60.0).round())
    }
}

/// "about 72 s left", "about 4 min left"; an upper bound says so.
fn left_text(seconds: f64, at_most: bool) -> String {
    let span = span_text(seconds);
    if at_most {
        format!("at most {span} left (early stopping may end it sooner)")
    } else {
        format!("{span} left")
    }
}

/// A recipe's estimated time on the form's data, shown beside the recipe choice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecipeEstimate {
    pub recipe: &'static str,
    /// What it trains, in words: "every layer, 20 epochs, inputs up to 512 tokens".
    pub what: String,
    pub seconds: f64,
    /// Early stopping may end it sooner: every epoch is counted.
    pub at_most: bool,
    /// "about 4 min", "at most about 2 h".
    pub text: String,
}

/// The work of a whole training, in the units of the encoder's work per forward pass
/// through every layer (`EncodingPlan::batch_work`, per input, padding not counted): the
/// frozen pass once over every input (the layers that do not train), then each epoch the
/// trained layers forward and backward over the training inputs ([`BACKWARD_FACTOR`]) and
/// forward over the dev inputs, the same prior [`time_left`] starts from.
pub fn training_work(
    config: &crate::model::EncoderConfig,
    (train, dev): (&[usize], &[usize]),
    epochs: usize,
    trained_layers: usize,
) -> f64 {
    let layers = config.num_layers.max(1) as f64;
    let work = |lens: &[usize]| -> f64 {
        lens.iter().map(|&l| crate::model::batching::EncodingPlan::batch_work(1, l, config) as f64).sum()
    };
    let (train, dev) = (work(train), work(dev));
    let trained = trained_layers.min(config.num_layers) as f64 / layers;
    let frozen = (train + dev) * (1.0 - trained);
    frozen + epochs as f64 * trained * (train * BACKWARD_FACTOR + dev)
}

/// Each recipe's time on the form's data (its files, task and arguments; its explicit
/// options override each recipe's as they would in training), at the rate of `kept`'s
/// encoder on the form's backend measured here on one batch of 8 sequences of 128 tokens
/// (the first run on a backend includes its warm-up: the estimates err long).
pub async fn recipe_estimates(
    request: &TrainPageRequest,
    kept: &mut KeptModel,
    clock: fn() -> f64,
) -> Result<Vec<RecipeEstimate>> {
    let (_, backend) = request.to_request(false)?;
    kept.set_precision(kept.folder_precision);
    let config = kept.model.encoder.model.config.clone();
    let rate = {
        let (encoder, _) = kept.encoder(backend).await?;
        let (len, rows) = (128.min(config.max_tokens()), 8);
        // Any id of the vocabulary but padding: the arithmetic does not depend on it.
        let id = if config.pad_token_id == 1 { 2 } else { 1 };
        let ids = vec![id; len];
        let types = vec![0; len];
        let batch = crate::model::TokenBatch::from_sequences(&vec![(&ids[..], &types[..]); rows], config.pad_token_id);
        use crate::model::Encoder;
        let started = clock();
        encoder.encode(&batch, config.num_layers).await?;
        let seconds = (clock() - started).max(1e-6);
        crate::model::batching::EncodingPlan::batch_work(rows, len, &config) as f64 / seconds
    };
    let mut out = Vec::new();
    for recipe in crate::train::Recipe::NAMES {
        let form = jobs::TrainForm { recipe: recipe.into(), ..request.form.clone() };
        let named = TrainPageRequest { form, ..request.clone() };
        let (req, _) = named.to_request(false)?;
        let lens = jobs::input_lengths(&req, &kept.model)?;
        let o = &req.options;
        let trained = crate::train::trained_layers(o.freeze, config.num_layers);
        let seconds = training_work(&config, (&lens.0, &lens.1), o.epochs, trained) / rate;
        let at_most = o.patience < o.epochs;
        let longest = lens.0.iter().chain(&lens.1).max().copied().unwrap_or(0);
        let layers = match trained {
            0 => "the head".to_string(),
            n if n == config.num_layers => "every layer".to_string(),
            n => format!("the top {n} layers"),
        };
        let text = format!("{}{}", if at_most { "at most " } else { "" }, span_text(seconds));
        out.push(RecipeEstimate {
            recipe,
            what: format!("{layers}, {} epochs, inputs up to {longest} tokens", o.epochs),
            seconds,
            at_most,
            text,
        });
    }
    Ok(out)
}

/// One progress report of a training: its stage, the stage's count, the time left for the
/// whole training, and with an epoch's end its log.
#[derive(Debug, Clone, Serialize)]
pub struct TrainProgress {
    pub stage: String,
    pub done: usize,
    pub total: usize,
    pub left: Option<TimeLeft>,
    /// The epoch that ended (its report).
    pub epoch: Option<EpochLog>,
    /// Training is over (every epoch ran, or early stopping): export next.
    pub over: bool,
}

/// How far the frozen pass is, and where the trained part will run.
#[derive(Debug, Serialize)]
pub struct EncodeProgress<'a> {
    pub done: usize,
    pub total: usize,
    pub finished: bool,
    pub backend: &'a BackendReport,
    /// Why the CPU ran when the GPU was not used, in words (`BackendReport::fallback_in_words`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_in_words: Option<&'static str>,
    /// Where the trained part runs: cpu | gpu.
    pub trained_on: &'static str,
    /// On the GPU, what it holds there ([`crate::train::gpu::GpuMemory::describe`]),
    /// shown before the first epoch.
    pub gpu_memory: Option<String>,
    pub stage: String,
    pub left: Option<TimeLeft>,
}

/// What reading the data found, and what a model that learnt nothing scores on dev.
#[derive(Debug, Serialize)]
pub struct PageSummary<'a> {
    #[serde(flatten)]
    pub summary: &'a jobs::TrainingSummary,
    pub baseline: Option<Baseline>,
    /// The baseline in words.
    pub baseline_text: Option<String>,
}

/// How the training ended, for the chart and the result's text.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Outcome {
    /// Epochs asked for, and run.
    pub epochs: usize,
    pub ran: usize,
    /// The epoch early stopping ended at, and why.
    pub stopped_at: Option<usize>,
    pub stopped_text: Option<String>,
    pub baseline: Option<Baseline>,
    pub baseline_text: Option<String>,
    /// The picked epoch's dev metric is no better than the baseline's.
    pub baseline_warning: Option<String>,
}

/// The baseline in words: what it predicts and what it scores.
pub fn baseline_text(b: &Baseline, select_by: SelectBy) -> String {
    let what = match &b.label {
        Some(label) => format!("always predicting `{label}`, the dev set's majority class,"),
        None => "a uniform guess among each question's options (chance)".into(),
    };
    let accuracy = match (select_by, b.kind) {
        (SelectBy::Accuracy, "majority") => " (the majority-class rate)".to_string(),
        (SelectBy::Accuracy, _) => String::new(),
        (_, "majority") => format!(" and dev accuracy {:.4} (the majority-class rate)", b.accuracy),
        _ => format!(" and dev accuracy {:.4}", b.accuracy),
    };
    format!("{what} scores dev {} {:.4}{accuracy}", select_by.name(), b.metric)
}

/// How a training of `epochs` epochs with `patience` ended after `ran` epochs, the picked
/// epoch's dev metric beside the baseline's.
pub fn outcome(
    epochs: usize,
    patience: usize,
    ran: usize,
    select_by: SelectBy,
    best_dev_metric: f64,
    baseline: Option<Baseline>,
) -> Outcome {
    let stopped_at = (ran < epochs).then_some(ran);
    let stopped_text = stopped_at.map(|k| {
        let plural = if patience == 1 { "" } else { "s" };
        format!("stopped early at epoch {k} of {epochs}: no dev improvement for {patience} epoch{plural}")
    });
    let baseline_warning = baseline.as_ref().and_then(|b| {
        if !b.not_beaten_by(select_by, best_dev_metric) {
            return None;
        }
        let gap = b.lead(select_by, best_dev_metric);
        let relation = match (gap.abs() <= crate::train::BASELINE_TOLERANCE, select_by) {
            (true, _) => "=",
            (false, SelectBy::Loss) => ">",
            (false, _) => "<",
        };
        let (name, meaning) = match &b.label {
            Some(label) => ("the majority-class baseline", format!("always predicting `{label}`")),
            None => ("chance", "guessing".to_string()),
        };
        Some(format!(
            "dev {} {best_dev_metric:.4} {relation} {name} {:.4}: the model does no better than {meaning}",
            select_by.name(),
            b.metric
        ))
    });
    let baseline_text = baseline.as_ref().map(|b| baseline_text(b, select_by));
    Outcome { epochs, ran, stopped_at, stopped_text, baseline, baseline_text, baseline_warning }
}

/// A training under way on the page's kept model, between the worker's steps.
pub struct PageTraining {
    job: jobs::TrainingJob,
    backend: BackendChoice,
    /// Whether the trained part's engine was chosen (before the frozen pass).
    placed: bool,
    /// Where the trained part runs: "cpu" (candle's autograd) or "gpu" (WebGPU).
    trained_on: &'static str,
    plan: Plan,
    measured: Measured,
    clock: fn() -> f64,
}

impl PageTraining {
    /// Reads the training data and sets up a new head on `kept`'s model, run in the
    /// precision its folder holds, as `medrank train` runs it: the evaluation Options'
    /// precision is not the training's.
    /// The frozen encoder is opened first: where it runs decides the default recipe.
    pub async fn start(request: &TrainPageRequest, kept: &mut KeptModel, clock: fn() -> f64) -> Result<PageTraining> {
        // The form's own errors first, before any encoder opens.
        let (_, backend) = request.to_request(false)?;
        kept.set_precision(kept.folder_precision);
        let on_gpu = jobs::gpu_of(kept.encoder(backend).await?.0).is_some();
        let (req, _) = request.to_request(on_gpu)?;
        let job = jobs::TrainingJob::start(&req, &kept.model, clock)?;
        let s = job.summary();
        let (trained_layers, layers) = job.trainer().layers();
        let options = job.trainer().options();
        let plan = Plan {
            inputs: if job.trainer().has_frozen_pass() { s.inputs } else { 0 },
            train_examples: s.train_examples,
            dev_examples: s.dev_examples,
            epochs: options.epochs,
            patience: options.patience,
            trained_layers,
            layers,
        };
        Ok(PageTraining { job, backend, placed: false, trained_on: "cpu", plan, measured: Measured::default(), clock })
    }

    pub fn summary(&self) -> &jobs::TrainingSummary {
        self.job.summary()
    }

    /// The summary with the dev baseline (sent when training starts).
    pub fn page_summary(&self) -> PageSummary<'_> {
        let baseline = self.job.trainer().dev_baseline();
        let select_by = self.job.trainer().select_by();
        let baseline_text = baseline.as_ref().map(|b| baseline_text(b, select_by));
        PageSummary { summary: self.job.summary(), baseline, baseline_text }
    }

    /// Up to `max_batches` more batches of the frozen pass on `kept`'s encoder (the
    /// request's backend); before the first, the trained part is placed by the one rule of
    /// both front ends (`jobs::TrainingJob::place`).
    pub async fn encode<'a>(&mut self, kept: &'a mut KeptModel, max_batches: usize) -> Result<EncodeProgress<'a>> {
        let started = (self.clock)();
        let (encoder, report) = kept.encoder(self.backend).await?;
        if !self.placed {
            self.placed = true;
            let gpu = match encoder {
                AnyEncoder::Gpu(gpu) => Some(gpu.context()),
                AnyEncoder::Cpu(_) => None,
            };
            if self.job.place(gpu)? {
                self.trained_on = "gpu";
            }
        }
        let finished = self.job.encode(encoder, max_batches.max(1)).await?;
        let (done, total) = self.job.inputs();
        self.measured.encode_seconds += (self.clock)() - started;
        self.measured.inputs_done = done;
        let left = time_left(&self.plan, &self.measured);
        Ok(EncodeProgress {
            done,
            total,
            finished,
            backend: report,
            fallback_in_words: report.fallback_in_words(),
            trained_on: self.trained_on,
            gpu_memory: (self.trained_on == "gpu").then(|| self.job.trainer().gpu_memory().describe()),
            stage: Stage::Frozen.text(),
            left,
        })
    }

    /// One epoch; `progress` sees its stages as they start (training, then dev
    /// evaluation) and its steps' progress. The report after it carries its log, or says
    /// that training is over (all epochs, or early stopping).
    pub async fn epoch(&mut self, progress: &mut dyn FnMut(&TrainProgress)) -> Result<TrainProgress> {
        let PageTraining { job, plan, measured, clock, .. } = self;
        let clock = *clock;
        let report = |stage: Stage, done: usize, total: usize, m: &Measured| TrainProgress {
            stage: stage.text(),
            done,
            total,
            left: time_left(plan, m),
            epoch: None,
            over: false,
        };
        if job.trainer().is_over() {
            return Ok(TrainProgress { over: true, left: None, ..report(Stage::Exporting, 0, 0, measured) });
        }
        let (k, n) = (job.curve().len() + 1, plan.epochs);
        let started = clock();
        measured.in_epoch = Some((0, 0.0));
        measured.in_dev = false;
        progress(&report(Stage::Training(k, n), 0, plan.train_examples, measured));
        let log = job
            .epoch(&mut |event| match event {
                TrainEvent::Step { examples, .. } => {
                    measured.in_epoch = Some((examples, clock() - started));
                    progress(&report(Stage::Training(k, n), examples, plan.train_examples, measured));
                }
                TrainEvent::Dev { .. } => {
                    measured.in_dev = true;
                    progress(&report(Stage::Dev(k, n), 0, plan.dev_examples, measured));
                }
                _ => {}
            })
            .await?
            .ok_or_else(|| Error::invalid("training was over"))?;
        measured.epochs_done += 1;
        measured.train_seconds += log.train_seconds;
        measured.dev_seconds += (clock() - started - log.train_seconds).max(0.0);
        measured.in_epoch = None;
        measured.in_dev = false;
        measured.since_best = job.trainer().since_best();
        let done = report(Stage::Dev(k, n), plan.dev_examples, plan.dev_examples, measured);
        Ok(TrainProgress { epoch: Some(log), ..done })
    }

    /// The best epoch's evaluator folder, and how the training ended.
    pub async fn finish(self, tokenizer_json: &[u8]) -> Result<(jobs::TrainedEvaluator, Outcome)> {
        let baseline = self.job.trainer().dev_baseline();
        let (epochs, patience) = (self.plan.epochs, self.plan.patience);
        let trained = self.job.finish(tokenizer_json).await?;
        let r = &trained.result;
        let outcome = outcome(epochs, patience, r.curve.len(), r.select_by, r.best_dev_metric, baseline);
        Ok((trained, outcome))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(value: serde_json::Value) -> TrainPageRequest {
        serde_json::from_value(value).unwrap()
    }

    use crate::train::{ClassWeights, Freeze, TrainOptions};

    #[test]
    fn the_form_left_empty_takes_the_trainers_defaults() {
        let (req, backend) =
            form(serde_json::json!({"train": {"name": "t.jsonl", "text": ""}})).to_request(false).unwrap();
        let d = TrainOptions::default();
        assert_eq!(
            (req.options.epochs, req.options.batch_size, req.options.learning_rate, req.options.seed),
            (d.epochs, d.batch_size, d.learning_rate, d.seed)
        );
        assert_eq!(req.options.freeze, Freeze::HeadOnly);
        assert_eq!((req.options.select_by, req.options.class_weights), (None, None), "the task's own defaults");
        assert!(matches!(req.dev, jobs::DevData::Split(f) if f == jobs::TrainForm::default().dev_split));
        // The page sends its Model section's backend; the form's own default is the CLI's.
        assert_eq!(backend, BackendChoice::Cpu);
        assert_eq!(FormDescription::new().unwrap().defaults.backend, "auto");
    }

    #[test]
    fn the_form_reads_its_fields_as_the_clis_flags() {
        let (req, backend) = form(serde_json::json!({
            "train": {"name": "t.jsonl", "text": ""}, "dev": {"name": "d.jsonl", "text": ""},
            "task": "nli", "freeze": "top:2", "select_by": "macro-f1", "class_weights": "none", "backend": "gpu",
            "epochs": 3, "lr": 0.01
        }))
        .to_request(false)
        .unwrap();
        assert_eq!(req.task, jobs::TrainTask::Proxy(crate::data::Task::Nli));
        assert_eq!(req.options.freeze, Freeze::TopLayers(2));
        assert_eq!(req.options.select_by, Some(SelectBy::MacroF1));
        assert!(matches!(req.options.class_weights, Some(ClassWeights::Equal)));
        assert_eq!((req.options.epochs, req.options.learning_rate), (3, 0.01));
        assert!(matches!(req.dev, jobs::DevData::File(ref f) if f.name == "d.jsonl"));
        assert_eq!(backend, BackendChoice::Gpu);
    }

    #[test]
    fn the_form_offers_the_score_task_and_reads_a_metrics_file_as_its_training_data() {
        // Every task of the table, the score task among them, with its label.
        let tasks = FormDescription::new().unwrap().tasks;
        assert_eq!(tasks.iter().map(|t| t.name).collect::<Vec<_>>(), jobs::TrainTask::NAMES);
        let score = tasks.iter().find(|t| t.name == "score").unwrap();
        assert_eq!(score.label, jobs::TrainTask::Score.label());
        // A metrics file (FORMATS.md section 6, two lines, one with two human scores, one
        // with a third dimension) offers the score task alone, without arguments, with its
        // dimensions in order of first appearance.
        let text = concat!(
            r#"{"id": "a", "system": "s", "candidate": "x", "references": ["y"], "human": {"overall": 3, "correctness": 4}}"#,
            "\n",
            r#"{"id": "b", "system": "s", "candidate": "z", "references": ["y"], "human": {"selection": 2}}"#,
            "\n"
        );
        let choices = jobs::training_choices(&NamedText::new("m.jsonl", text)).unwrap();
        assert_eq!((choices.format, choices.tasks.as_slice(), choices.instances), ("metrics", ["score"].as_slice(), 2));
        assert_eq!(choices.dimensions, ["overall", "correctness", "selection"]);
        assert_eq!(choices.default_argument, "none");
        // The form's request with it trains task score on that file and a dev file of the
        // same kind, with the options as `medrank train`'s flags name them.
        let (req, _) = form(serde_json::json!({
            "train": {"name": "m.jsonl", "text": text}, "dev": {"name": "d.jsonl", "text": text},
            "task": "score", "arguments": "none", "freeze": "head", "epochs": 2, "seed": 11, "length": "full"
        }))
        .to_request(false)
        .unwrap();
        assert_eq!(req.task, jobs::TrainTask::Score);
        assert_eq!((req.options.freeze, req.options.epochs, req.options.seed), (Freeze::HeadOnly, 2, 11));
        assert_eq!(req.options.length, crate::train::Length::Full);
        assert!(matches!(req.dev, jobs::DevData::File(ref f) if f.name == "d.jsonl"));
        // A metrics file without human scores has nothing to learn from: refused, named.
        let unscored = r#"{"id": "a", "system": "s", "candidate": "x", "references": ["y"]}"#;
        let e = jobs::training_choices(&NamedText::new("u.jsonl", unscored)).unwrap_err().to_string();
        assert!(e.contains("u.jsonl") && e.contains("no line has a human score"), "{e}");
    }

    #[test]
    fn an_incomplete_form_is_refused_with_what_to_add() {
        let err = |v| form(v).to_request(false).unwrap_err().to_string();
        assert_eq!(err(serde_json::json!({})), "add a training file");
        let train = serde_json::json!({"name": "t.jsonl", "text": ""});
        assert!(err(serde_json::json!({"train": train, "dev_split": 0.1, "task": "x"})).contains("unknown task `x`"));
    }
    #[test]
    fn a_recipes_work_counts_the_frozen_pass_once_and_the_trained_layers_every_epoch() {
        // Tiny BERT: hidden 32, feed-forward 64, 2 layers: an input of L tokens is
        // L (2*32 + 64 + L) units through every layer; 10 tokens: 10 * 138 = 1380, 20: 20 *
        // 148 = 2960.
        let c = crate::model::EncoderConfig::tiny(crate::model::Arch::Bert, 2, crate::model::HeadKind::None, &[]);
        let (train, dev) = ([10usize, 20].as_slice(), [10usize].as_slice());
        // The head alone: one frozen pass over every input (1380 + 2960 + 1380), epochs free.
        assert_eq!(training_work(&c, (train, dev), 3, 0), 5720.0);
        // Every layer: no frozen pass; each epoch 3 x 4340 (train, forward and backward) +
        // 1380 (dev) = 14400; 3 epochs 43200.
        assert_eq!(training_work(&c, (train, dev), 3, 2), 43200.0);
        // The top 1 of 2: half of the frozen pass, half of each epoch.
        assert_eq!(training_work(&c, (train, dev), 3, 1), 5720.0 / 2.0 + 43200.0 / 2.0);
    }

    /// 1000 frozen inputs for 400 training and 100 dev examples (2 inputs each), 20 epochs,
    /// patience 3, the top 1 of 6 layers training (5 frozen).
    fn plan() -> Plan {
        Plan {
            inputs: 1000,
            train_examples: 400,
            dev_examples: 100,
            epochs: 20,
            patience: 3,
            trained_layers: 1,
            layers: 6,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn during_the_frozen_pass_the_estimate_counts_every_epoch_from_the_prior() {
        // 250 inputs in 10 s: 0.04 s an input, 750 left -> 30 s. A trained-layer pass per
        // example: 0.04 s x 2 inputs x 1/5 of the layers = 0.016 s; training 3 times that,
        // 0.048 s. An epoch: 400 x 0.048 + 100 x 0.016 = 19.2 + 1.6 = 20.8 s; 20 of them
        // 416 s. All: 446 s, at most (patience 3 < 20 epochs).
        let m = Measured { inputs_done: 250, encode_seconds: 10.0, ..Default::default() };
        let left = time_left(&plan(), &m).unwrap();
        assert!(close(left.seconds, 446.0), "{}", left.seconds);
        assert!(left.at_most);
        assert_eq!(left.text, "at most about 7 min left (early stopping may end it sooner)");
        // Nothing measured yet: no estimate.
        assert_eq!(time_left(&plan(), &Measured::default()), None);
        // The head alone: the epochs count as nothing until one is timed (30 s).
        let head = Plan { trained_layers: 0, ..plan() };
        assert!(close(time_left(&head, &m).unwrap().seconds, 30.0));
    }

    #[test]
    fn after_an_epoch_the_estimate_uses_its_measured_rates() {
        // The issue's case: after epoch 1 the old estimate read the stage's fraction. Epoch
        // 1's steps took 8 s (0.02 s an example), its dev evaluation 1 s (0.01 s an
        // example): 9 s an epoch, 19 left -> 171 s.
        let m = Measured {
            inputs_done: 1000,
            encode_seconds: 40.0,
            epochs_done: 1,
            train_seconds: 8.0,
            dev_seconds: 1.0,
            ..Default::default()
        };
        let left = time_left(&plan(), &m).unwrap();
        assert!(close(left.seconds, 171.0), "{}", left.seconds);
        assert_eq!(left.text, "at most about 3 min left (early stopping may end it sooner)");
        // 100 examples into epoch 2: (400 - 100) x 0.02 + 1 = 7 s for it, 18 x 9 after.
        let m2 = Measured { in_epoch: Some((100, 2.5)), ..m.clone() };
        assert!(close(time_left(&plan(), &m2).unwrap().seconds, 169.0));
        // At epoch 20's dev evaluation: its 1 s is left, and nothing can stop it early.
        let last = Measured { epochs_done: 19, train_seconds: 152.0, dev_seconds: 19.0, in_dev: true, ..m };
        let left = time_left(&plan(), &last).unwrap();
        assert!(close(left.seconds, 1.0), "{}", left.seconds);
        assert_eq!((left.at_most, left.text.as_str()), (false, "about 1 s left"));
    }

    #[test]
    fn in_the_first_epoch_its_steps_rate_replaces_the_prior() {
        // 200 of 400 examples in 5 s (0.025 s each): 200 x 0.025 = 5 s of steps left; dev
        // still from the prior (100 x 0.016 = 1.6 s); then 19 epochs of 400 x 0.025 + 1.6
        // = 11.6 s: 5 + 1.6 + 220.4 = 227 s.
        let m = Measured { inputs_done: 1000, encode_seconds: 40.0, in_epoch: Some((200, 5.0)), ..Default::default() };
        assert!(close(time_left(&plan(), &m).unwrap().seconds, 227.0));
    }

    #[test]
    fn the_estimate_is_an_upper_bound_only_while_early_stopping_can_skip_an_epoch() {
        let at = |epochs_done, since_best| {
            let m = Measured {
                inputs_done: 1000,
                encode_seconds: 40.0,
                epochs_done,
                train_seconds: 8.0 * epochs_done as f64,
                dev_seconds: epochs_done as f64,
                since_best,
                ..Default::default()
            };
            time_left(&plan(), &m).unwrap().at_most
        };
        // 2 epochs left, patience 3: with the best just now, 3 more would be needed.
        assert!(!at(18, 0));
        // 2 epochs since the best: one more without improvement stops before epoch 20.
        assert!(at(18, 2));
        // 3 left and patience 3: the stop would come after the last epoch anyway; 4 left:
        // it can come after epoch 19.
        assert!(!at(17, 0));
        assert!(at(16, 0));
    }

    fn majority(metric: f64) -> Baseline {
        Baseline { kind: "majority", label: Some("false".into()), metric, accuracy: 0.625 }
    }

    #[test]
    fn the_outcome_says_where_training_stopped_early_and_warns_at_the_baseline() {
        let o = outcome(20, 3, 5, SelectBy::Accuracy, 0.625, Some(majority(0.625)));
        assert_eq!((o.epochs, o.ran, o.stopped_at), (20, 5, Some(5)));
        assert_eq!(o.stopped_text.as_deref(), Some("stopped early at epoch 5 of 20: no dev improvement for 3 epochs"));
        assert_eq!(
            o.baseline_warning.as_deref(),
            Some("dev accuracy 0.6250 = the majority-class baseline 0.6250: the model does no better than always predicting `false`")
        );
        assert_eq!(
            o.baseline_text.as_deref(),
            Some("always predicting `false`, the dev set's majority class, scores dev accuracy 0.6250 (the majority-class rate)")
        );
        // All epochs run, and better than the baseline by more than the tolerance: neither.
        let o = outcome(6, 6, 6, SelectBy::MacroF1, 0.70, Some(majority(5.0 / 13.0)));
        assert_eq!((o.stopped_at, o.stopped_text, o.baseline_warning), (None, None, None));
        assert_eq!(
            o.baseline_text.as_deref(),
            Some("always predicting `false`, the dev set's majority class, scores dev macro-F1 0.3846 and dev accuracy 0.6250 (the majority-class rate)")
        );
        // Within the tolerance counts as equal; below it says so.
        let near = outcome(6, 1, 2, SelectBy::Accuracy, 0.629, Some(majority(0.625)));
        assert!(near.baseline_warning.unwrap().starts_with("dev accuracy 0.6290 = "));
        assert_eq!(near.stopped_text.unwrap(), "stopped early at epoch 2 of 6: no dev improvement for 1 epoch");
        let below = outcome(6, 6, 6, SelectBy::Accuracy, 0.5, Some(majority(0.625)));
        assert!(below.baseline_warning.unwrap().starts_with("dev accuracy 0.5000 < the majority-class baseline"));
        // Loss: lower is better; chance for multiple choice.
        let chance = Baseline { kind: "chance", label: None, metric: 4f64.ln(), accuracy: 0.25 };
        let o = outcome(4, 4, 4, SelectBy::Loss, 1.5, Some(chance.clone()));
        assert_eq!(
            o.baseline_warning.as_deref(),
            Some("dev loss 1.5000 > chance 1.3863: the model does no better than guessing")
        );
        assert_eq!(outcome(4, 4, 4, SelectBy::Loss, 1.0, Some(chance)).baseline_warning, None);
    }
}
