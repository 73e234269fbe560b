//! Training an evaluator (`medrank train`, the page's "Train an evaluator"): the data read
//! the same way for both front ends (a HiTZ MCQA file, an argument bundle, or a rubric file
//! with judged criteria for a criterion grader; a dev file or a seeded dev split of the
//! training file), then the step-wise [`Trainer`]: the CLI runs its
//! steps in one loop ([`train`]), the page's worker one call at a time so it can show
//! progress and stop. The trained evaluator is the model folder's files (config.json,
//! tokenizer.json, model.safetensors, train_log.json).

use super::NamedText;
use crate::data::tasks::{Head, Metric, TaskFacts, CRITERION, SCORE, TASKS};
use crate::data::Task;
use crate::model::config::{HeadPooling, SizeRange};
use crate::model::{HeadKind, TextModel};
use crate::report::Fingerprint;
use crate::train::{
    self as t, AppliedRecipe, ArgumentSource, DataCounts, Dropout, EpochLog, ExampleOptions, Freeze, Length, Recipe,
    SelectBy, TrainData, TrainEvent, TrainExample, TrainOptions, Trainer,
};
use crate::{Error, Result};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};

/// Where the dev examples (which pick the best epoch) come from.
#[derive(Debug, Clone, PartialEq)]
pub enum DevData {
    /// A file in the training file's format.
    File(NamedText),
    /// This fraction of the training file's examples, drawn with the training seed; the
    /// rest train.
    Split(f64),
}

/// What an evaluator learns: a proxy task of argument bundles (or HiTZ MCQA files),
/// `criterion`, grading rubric criteria (a rubric file with judged criteria; the grader
/// `medrank grade` runs), or `score`, a metric learned from human scores (a metrics JSONL
/// file whose lines carry them; `eval::metrics::learned` runs it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrainTask {
    Proxy(Task),
    Criterion,
    Score,
}

impl TrainTask {
    /// Every task's name, as `--task` and the page's form take them: the task table's rows.
    pub const NAMES: [&'static str; 5] = [TASKS[0].name, TASKS[1].name, TASKS[2].name, TASKS[3].name, TASKS[4].name];

    /// The task of a row of the task table.
    fn of(facts: &TaskFacts) -> TrainTask {
        match facts.task {
            Some(task) => TrainTask::Proxy(task),
            None if facts.name == SCORE.name => TrainTask::Score,
            None => TrainTask::Criterion,
        }
    }

    /// Every task, in the task table's order.
    pub fn all() -> impl Iterator<Item = TrainTask> {
        TASKS.iter().map(TrainTask::of)
    }

    pub fn parse(name: &str) -> Option<TrainTask> {
        crate::data::tasks::facts(name).map(TrainTask::of)
    }

    /// Its row of the task table: labels, head, metric, input, truncation.
    pub fn facts(self) -> &'static TaskFacts {
        match self {
            TrainTask::Proxy(task) => task.facts(),
            TrainTask::Criterion => &CRITERION,
            TrainTask::Score => &SCORE,
        }
    }

    pub fn name(self) -> &'static str {
        self.facts().name
    }

    /// The task in the page's words.
    pub fn label(self) -> &'static str {
        self.facts().label
    }

    /// The labels of the classification head (none for multiple choice).
    pub fn labels(self) -> Vec<String> {
        self.facts().labels.iter().map(|s| s.to_string()).collect()
    }
}

#[derive(Debug, Clone)]
pub struct TrainRequest {
    /// A HiTZ MCQA file (the argument already in the question), an argument bundle, or
    /// (task `criterion`) a rubric file with judged criteria.
    pub train: NamedText,
    pub dev: DevData,
    /// With a bundle: the proxy task whose instances train; `criterion` with a rubric file.
    pub task: TrainTask,
    /// With a bundle: `none`, `system:NAME` or `random:A,B,C` (as `--arguments`).
    pub arguments: String,
    pub options: TrainOptions,
    pub conventions: ExampleOptions,
    /// Record a trace of the first this many optimiser steps (0: none; `usize::MAX`: all),
    /// with the starting weights, for a reference implementation to replay
    /// (`medrank train --trace`, tests/reference/train_reference.py).
    pub trace_steps: usize,
}

/// `medrank train`'s options, named as its flags (the page's training form sends the same
/// names): `Default` is the one home of each default, for both front ends. The options a
/// recipe sets ([`Recipe::values`]) are empty here (`""` or `None`): the recipe's value,
/// unless given.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct TrainForm {
    /// The task: a proxy task of argument bundles, or `criterion` (a rubric file).
    pub task: String,
    /// With a bundle: `none`, `system:NAME` or `random:A,B,C`.
    pub arguments: String,
    /// `fast`, `finetune`, or empty for where training runs (`finetune` on a GPU, `fast` on
    /// the CPU: [`Recipe::for_gpu`]).
    pub recipe: String,
    /// `head`, `top:N`, `all`, or empty for the recipe's.
    pub freeze: String,
    pub epochs: usize,
    pub batch_size: usize,
    pub grad_accum: usize,
    /// The head's peak rate; `None`: the recipe's.
    pub lr: Option<f64>,
    /// The encoder layers' peak rate; `None`: the recipe's.
    pub layer_lr: Option<f64>,
    /// AdamW's weight decay; `None`: the recipe's.
    pub weight_decay: Option<f64>,
    pub warmup: f64,
    /// Dropout of hidden states and attention probabilities; `None`: the recipe's.
    pub dropout: Option<f64>,
    /// `folder`, `full`, or empty for the recipe's.
    pub length: String,
    /// The score task: what the model reads beside each candidate (`candidate`,
    /// `candidate+question`, `candidate+question+reference`), or empty for the default.
    pub score_input: String,
    /// How the new head reads the last layer (`cls`, `mean`), or empty for the task's
    /// default (`TrainOptions::head_pooling`).
    pub head_pooling: String,
    pub patience: usize,
    pub seed: u64,
    /// `accuracy`, `macro-f1`, `loss`, or empty for the task's metric.
    pub select_by: String,
    /// `balanced`, `none`, or empty for the task's default.
    pub class_weights: String,
    /// The share of the training file's examples that picks the best epoch when no dev
    /// file is given (the CLI's `--dev-split`; the page's choice of a split).
    pub dev_split: f64,
    pub keep_empty_options: bool,
    pub keep_not_enough_evidence: bool,
    /// Where the frozen encoder runs (`auto`, `cpu`, `gpu`); the trained layers follow it
    /// ([`TrainingJob::place`]), and the recipe's default with them.
    pub backend: String,
}

impl Default for TrainForm {
    fn default() -> Self {
        let o = TrainOptions::default();
        TrainForm {
            task: TrainTask::Proxy(Task::Mcqa).name().into(),
            arguments: "none".into(),
            recipe: String::new(),
            freeze: String::new(),
            epochs: o.epochs,
            batch_size: o.batch_size,
            grad_accum: o.grad_accum,
            lr: None,
            layer_lr: None,
            weight_decay: None,
            warmup: o.warmup_ratio,
            dropout: None,
            length: String::new(),
            score_input: String::new(),
            head_pooling: String::new(),
            patience: o.patience,
            seed: o.seed,
            select_by: String::new(),
            class_weights: String::new(),
            dev_split: 0.2,
            keep_empty_options: false,
            keep_not_enough_evidence: false,
            backend: super::kept::RunOptions::default().backend,
        }
    }
}

/// A form field's value, or `None` when it was left empty (the default).
fn non_empty(s: &str) -> Option<&str> {
    Some(s.trim()).filter(|s| !s.is_empty())
}

impl TrainForm {
    /// Where the frozen encoder runs (`--backend`).
    pub fn backend(&self) -> Result<crate::gpu::BackendChoice> {
        super::kept::parse_backend(&self.backend)
    }

    /// The recipe asked for, or (none asked for) the one where training runs.
    pub fn recipe(&self, on_gpu: bool) -> Result<Recipe> {
        non_empty(&self.recipe).map_or(Ok(Recipe::for_gpu(on_gpu)), Recipe::parse)
    }

    /// The request these options make for the `train` file and the dev examples, training
    /// on the GPU or not (`on_gpu`: which recipe is the default).
    pub fn request(&self, train: NamedText, dev: DevData, on_gpu: bool) -> Result<TrainRequest> {
        let task = TrainTask::parse(&self.task)
            .ok_or_else(|| Error::invalid(format!("unknown task `{}` ({})", self.task, TrainTask::NAMES.join(", "))))?;
        let recipe = self.recipe(on_gpu)?;
        let values = recipe.values();
        let mut overridden = Vec::new();
        let mut given = |flag: &str, is: bool| {
            if is {
                overridden.push(flag.to_string());
            }
        };
        given("--freeze", non_empty(&self.freeze).is_some());
        given("--lr", self.lr.is_some());
        given("--layer-lr", self.layer_lr.is_some());
        given("--weight-decay", self.weight_decay.is_some());
        given("--dropout", self.dropout.is_some());
        given("--length", non_empty(&self.length).is_some());
        let freeze = non_empty(&self.freeze).map_or(Ok(values.freeze), parse_freeze)?;
        let length = non_empty(&self.length).map_or(Ok(values.length), Length::parse)?;
        let dropout = self.dropout.or(values.dropout).map(|p| Dropout { hidden: p, attention: p });
        let score_input = match non_empty(&self.score_input) {
            None => crate::model::score::ScoreInput::default(),
            Some(_) if task != TrainTask::Score => {
                return Err(Error::option(
                    "score_input",
                    "applies to task score only (a metric learned from human scores)",
                ))
            }
            Some(name) => crate::model::score::ScoreInput::parse(name).ok_or_else(|| {
                Error::option(
                    "score_input",
                    format!("{name}: expected {}", crate::model::score::ScoreInput::NAMES.join(", ")),
                )
            })?,
        };
        let head_pooling = non_empty(&self.head_pooling)
            .map(|name| {
                HeadPooling::parse(name).ok_or_else(|| {
                    Error::option("head_pooling", format!("{name}: expected {}", HeadPooling::NAMES.join(", ")))
                })
            })
            .transpose()?;
        let chosen_by = match non_empty(&self.recipe) {
            Some(_) => "--recipe".to_string(),
            None => format!("the default where training runs ({})", if on_gpu { "a GPU" } else { "the CPU" }),
        };
        let options = TrainOptions {
            freeze,
            epochs: self.epochs,
            batch_size: self.batch_size,
            grad_accum: self.grad_accum,
            learning_rate: self.lr.unwrap_or(values.learning_rate),
            layer_learning_rate: self.layer_lr.unwrap_or(values.layer_learning_rate),
            weight_decay: self.weight_decay.unwrap_or(values.weight_decay),
            warmup_ratio: self.warmup,
            patience: self.patience,
            seed: self.seed,
            select_by: non_empty(&self.select_by).map(SelectBy::parse).transpose()?,
            class_weights: non_empty(&self.class_weights).map(crate::train::ClassWeights::parse).transpose()?,
            dropout,
            length,
            score_input,
            head_pooling,
            recipe: Some(AppliedRecipe { name: recipe, chosen_by, values, overridden }),
        };
        Ok(TrainRequest {
            train,
            dev,
            task,
            arguments: self.arguments.clone(),
            options,
            conventions: ExampleOptions {
                keep_empty_options: self.keep_empty_options,
                keep_not_enough_evidence: self.keep_not_enough_evidence,
            },
            trace_steps: 0,
        })
    }
}

/// A recipe as the page's form offers it: its name, what it does in words, and what it sets.
#[derive(Debug, Clone, Serialize)]
pub struct RecipeChoice {
    pub name: &'static str,
    pub label: &'static str,
    pub values: crate::train::RecipeValues,
}

/// Both recipes, for the page's form (the CLI's `--recipe` takes the same names).
pub fn recipe_choices() -> Vec<RecipeChoice> {
    [
        // Short: a select is as wide as its longest choice (the form must fit 768 px);
        // what each sets is in the README and the estimates' line.
        (Recipe::Fast, "fast: the head or top layers on cached features"),
        (Recipe::Finetune, "finetune: every layer, as Hugging Face's Trainer"),
    ]
    .into_iter()
    .map(|(r, label)| RecipeChoice { name: r.name(), label, values: r.values() })
    .collect()
}

/// `head`, `top:N` or `all` (`--freeze`).
pub fn parse_freeze(s: &str) -> Result<Freeze> {
    match s.trim() {
        "head" => Ok(Freeze::HeadOnly),
        "all" => Ok(Freeze::All),
        other => match other.strip_prefix("top:").and_then(|n| n.parse().ok()) {
            Some(n) if (1..=SizeRange::LAYERS.max).contains(&n) => Ok(Freeze::TopLayers(n)),
            _ => Err(Error::option(
                "freeze",
                format!("{other}: expected head, top:N (N from 1 to {}) or all", SizeRange::LAYERS.max),
            )),
        },
    }
}

/// The inverse of [`parse_freeze`]: `head`, `top:N` or `all`.
pub fn freeze_name(f: Freeze) -> String {
    match f {
        Freeze::HeadOnly => "head".into(),
        Freeze::TopLayers(n) => format!("top:{n}"),
        Freeze::All => "all".into(),
    }
}

/// `none`, `system:NAME` or `random:A,B,C` (`--arguments`).
pub fn parse_arguments(s: &str) -> Result<ArgumentSource> {
    match s.trim() {
        "none" => Ok(ArgumentSource::None),
        s => match (s.strip_prefix("system:"), s.strip_prefix("random:")) {
            (Some(name), _) if !name.trim().is_empty() => Ok(ArgumentSource::System(name.trim().to_string())),
            (_, Some(list)) if list.split(',').all(|x| !x.trim().is_empty()) => {
                Ok(ArgumentSource::RandomOf(list.split(',').map(|x| x.trim().to_string()).collect()))
            }
            _ => Err(Error::option("arguments", format!("{s}: expected none, system:NAME or random:A,B,..."))),
        },
    }
}

/// The head a task trains (the task table's `head`).
pub fn head_of(task: TrainTask) -> HeadKind {
    match task.facts().head {
        Head::MultipleChoice => HeadKind::MultipleChoice,
        // A regression head is a sequence-classification head read as scores.
        Head::Classification | Head::Regression => HeadKind::SequenceClassification,
    }
}

/// The dev metric a task is scored by (the task table's `metric`): what picks the best epoch
/// unless `--select-by` says otherwise.
pub fn select_by_of(task: TrainTask) -> SelectBy {
    match task.facts().metric {
        Metric::Accuracy => SelectBy::Accuracy,
        Metric::MacroF1 => SelectBy::MacroF1,
        Metric::Spearman => SelectBy::Spearman,
    }
}

/// What reading the data found, shown by both front ends before training starts.
#[derive(Debug, Clone, Serialize)]
pub struct TrainingSummary {
    pub task: &'static str,
    pub arguments: String,
    pub freeze: Freeze,
    /// The dev metric that picks the best epoch (the task's, unless asked otherwise).
    pub select_by: SelectBy,
    /// The loss weight of each label (empty for multiple choice and scores; all 1 without
    /// weighting).
    pub class_weights: Vec<(String, f64)>,
    /// The score task's outputs: the training file's human score dimensions, in order of
    /// first appearance (empty for the other tasks).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dimensions: Vec<String>,
    pub train_examples: usize,
    pub dev_examples: usize,
    /// The dev split's fraction, when the dev examples came from the training file.
    pub dev_split: Option<f64>,
    /// Inputs the frozen encoder computes once (train and dev).
    pub inputs: usize,
    /// What was left out or not used, one sentence each (the CLI prints them as notes).
    pub notes: Vec<Note>,
    /// The readers' warnings, with their locations.
    pub warnings: Vec<String>,
}

impl TrainingSummary {
    /// A request's summary before its data is read.
    fn of(req: &TrainRequest) -> TrainingSummary {
        TrainingSummary {
            task: req.task.name(),
            arguments: req.arguments.trim().to_string(),
            freeze: req.options.freeze,
            select_by: SelectBy::Accuracy,
            class_weights: Vec::new(),
            dimensions: Vec::new(),
            train_examples: 0,
            dev_examples: 0,
            dev_split: None,
            inputs: 0,
            notes: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

/// A note on the data, with the instances it concerns apart: the CLI prints them after the
/// sentence, the page shows their count with the list in a disclosure (issue 28: hundreds
/// of ids inline).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Note {
    pub text: String,
    pub ids: Vec<String>,
}

impl From<String> for Note {
    fn from(text: String) -> Note {
        Note { text, ids: Vec::new() }
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)?;
        if !self.ids.is_empty() {
            write!(f, ": {}", self.ids.join(", "))?;
        }
        Ok(())
    }
}

/// A trained evaluator: its folder's files and what the training found.
#[derive(Debug, Clone, Serialize)]
pub struct TrainedEvaluator {
    /// The training's result (`train::TrainResult`: the curve, the best epoch and its dev
    /// figures, the warnings, the cut examples; not the model, which the files hold).
    #[serde(flatten)]
    pub result: t::TrainResult,
    /// A warning about the inputs cut to the model's token limit, when there are any.
    pub truncation_warning: Option<String>,
    /// The measured quality its `train_log.json` gives every result of it
    /// (`jobs::quality`): a model not to be trusted is not picked by the page.
    pub quality: super::quality::ModelQuality,
    /// config.json, model.safetensors, train_log.json, tokenizer.json.
    #[serde(skip)]
    pub files: Vec<(String, Vec<u8>)>,
    /// With a trace asked for: the starting model's folder (`config.json`,
    /// `model.safetensors`, `tokenizer.json`: the base model with the new head) and
    /// `trace.json`.
    #[serde(skip)]
    pub trace_files: Vec<(String, Vec<u8>)>,
}

/// A training under way: the data read, the trainer between two steps.
pub struct TrainingJob {
    trainer: Trainer,
    summary: TrainingSummary,
    options: TrainOptions,
    counts: (DataCounts, DataCounts),
    inputs: Vec<Fingerprint>,
    /// The base model's name (its folder, or `hf://ORG/NAME@COMMIT` for a Hub model): for
    /// messages and the log.
    base_model: String,
    /// The starting model's files, when a trace was asked for, and how many steps it records.
    initial_files: Option<Vec<(String, Vec<u8>)>>,
    trace_steps: usize,
    /// The longest input in tokens that training read.
    max_tokens: usize,
}

/// Whether a file is an argument bundle (its first record has a `task`) rather than a HiTZ
/// MCQA file.
fn is_bundle(text: &str) -> bool {
    text.lines().find(|l| !l.trim().is_empty()).is_some_and(|l| l.contains("\"task\""))
}

/// Whether a file is a rubric file (its first record has `criteria`, FORMATS.md §7).
fn is_rubric(text: &str) -> bool {
    text.lines().find(|l| !l.trim().is_empty()).is_some_and(|l| l.contains("\"criteria\""))
}

/// Whether a file is a metrics JSONL file (its first record has `candidate` and
/// `references`, FORMATS.md section 6): what task `score` trains on.
fn is_candidates(text: &str) -> bool {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .is_some_and(|l| l.contains("\"candidate\"") && l.contains("\"references\""))
}

/// The head's labels of a request: the task's own, or for task `score` the human score
/// dimensions of the training file in order of first appearance.
fn request_labels(req: &TrainRequest) -> Result<Vec<String>> {
    if req.task != TrainTask::Score {
        return Ok(req.task.labels());
    }
    Ok(score_file(&req.train)?.1)
}

/// A score task's training file read: its candidates and their human score dimensions in
/// order of first appearance, refused when it is not a metrics file or has no human score.
fn score_file(file: &NamedText) -> Result<(Vec<crate::data::candidates::Candidate>, Vec<String>)> {
    if !is_candidates(&file.text) {
        return Err(not_candidates(file));
    }
    let (candidates, _) = crate::data::candidates::parse_candidates(&file.name, &file.text)?;
    let dimensions = t::score_dimensions(&candidates);
    if dimensions.is_empty() {
        return Err(Error::in_file(
            &file.name,
            "no line has a human score (`human`): task score learns a metric from them",
        ));
    }
    Ok((candidates, dimensions))
}

fn not_candidates(file: &NamedText) -> Error {
    Error::in_file(
        &file.name,
        "task score trains on a metrics JSONL file (FORMATS.md section 6: candidates with their references and human scores)",
    )
}

/// Examples of one file, with notes on what was not used.
fn read_examples(
    file: &NamedText,
    req: &TrainRequest,
    source: &ArgumentSource,
    labels: &[String],
    base: &TextModel,
    summary: &mut TrainingSummary,
) -> Result<TrainData> {
    let task = match req.task {
        TrainTask::Score => {
            if !is_candidates(&file.text) {
                return Err(not_candidates(file));
            }
            if *source != ArgumentSource::None {
                return Err(Error::invalid("--arguments applies to bundles only, not to task score"));
            }
            let (candidates, warnings) = crate::data::candidates::parse_candidates(&file.name, &file.text)?;
            summary.warnings.extend(warnings.iter().map(|w| w.to_string()));
            return t::examples_from_candidates(
                &file.name,
                &candidates,
                labels,
                &base.tokenizer,
                req.options.score_input,
            );
        }
        TrainTask::Criterion => {
            if !is_rubric(&file.text) {
                return Err(Error::in_file(
                    &file.name,
                    "task criterion trains on a rubric file (FORMATS.md §7: responses with their text and judged criteria)",
                ));
            }
            if *source != ArgumentSource::None {
                return Err(Error::invalid("--arguments applies to bundles only, not to task criterion"));
            }
            return t::examples_from_rubric(&file.name, &file.text, &base.tokenizer);
        }
        TrainTask::Proxy(task) => task,
    };
    if is_rubric(&file.text) {
        return Err(Error::in_file(&file.name, "a rubric file trains a criterion grader: choose task criterion"));
    }
    if is_candidates(&file.text) {
        return Err(Error::in_file(
            &file.name,
            "a metrics JSONL file trains a metric learned from its human scores: choose task score",
        ));
    }
    if is_bundle(&file.text) {
        let (mut bundle, warnings) = crate::data::parse_bundle(&file.name, &file.text)?;
        summary.warnings.extend(warnings.iter().map(|w| w.to_string()));
        let before = bundle.instances.len();
        bundle.instances.retain(|i| i.problem.task() == task);
        if bundle.instances.is_empty() {
            return Err(Error::in_file(&file.name, format!("no {} instance to train on", task.name())));
        }
        if bundle.instances.len() < before {
            summary.notes.push(
                format!(
                    "{}: {} instances of other tasks are not used for task {}",
                    file.name,
                    before - bundle.instances.len(),
                    task.name()
                )
                .into(),
            );
        }
        t::examples_from_bundle(&bundle, source, labels, &base.tokenizer, req.options.seed, &req.conventions)
    } else {
        if task != Task::Mcqa || *source != ArgumentSource::None {
            return Err(Error::in_file(&file.name, "a HiTZ file is MCQA with its arguments already in the question: the task and the argument source apply to bundles only"));
        }
        t::read_hitz_mcqa(&file.name, &file.text, &base.tokenizer, &req.conventions)
    }
}

/// Splits `data` into (train, dev): `fraction` of the examples (at least one, at most all
/// but one), drawn with `seed`; both keep the file's order.
fn split(data: TrainData, fraction: f64, seed: u64, file: &str) -> Result<(TrainData, TrainData)> {
    t::dev_split(fraction).map_err(|why| Error::option("dev_split", format!("{fraction}: {why}")))?;
    let n = data.examples.len();
    if n < 2 {
        return Err(Error::in_file(file, format!("{n} example: too few to split off a dev set")));
    }
    let k = ((n as f64 * fraction).round() as usize).clamp(1, n - 1);
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(seed));
    let mut is_dev = vec![false; n];
    for &i in &order[..k] {
        is_dev[i] = true;
    }
    let (mut train, mut dev) = (TrainData::default(), TrainData::default());
    for (e, d) in data.examples.into_iter().zip(is_dev) {
        if d {
            dev.examples.push(e)
        } else {
            train.examples.push(e)
        }
    }
    // What the reader left out belongs to the file: the training part's counts keep it.
    train.counts = DataCounts { examples: n - k, ..data.counts };
    dev.counts = DataCounts { examples: k, ..Default::default() };
    Ok((train, dev))
}

/// `base` reading inputs as long as `length` says: `Full` the position table's limit
/// instead of the folder's (the trained model then records no lower limit, and every run
/// of it reads that far).
fn with_length(base: &TextModel, length: Length) -> std::borrow::Cow<'_, TextModel> {
    let positions = base.encoder.model.config.max_tokens();
    if length == Length::Full && base.tokenizer.max_tokens < positions {
        let mut m = base.clone();
        m.tokenizer.max_tokens = positions;
        std::borrow::Cow::Owned(m)
    } else {
        std::borrow::Cow::Borrowed(base)
    }
}

/// The training and dev examples of a request, read with `base`'s tokenizer, each left-out
/// kind noted in `summary`; with the input files' fingerprints.
fn read_sets(
    req: &TrainRequest,
    source: &ArgumentSource,
    labels: &[String],
    base: &TextModel,
    summary: &mut TrainingSummary,
) -> Result<(TrainData, TrainData, Vec<Fingerprint>)> {
    let mut inputs = vec![req.train.fingerprint()];
    let read = read_examples(&req.train, req, source, labels, base, summary)?;
    let (train_data, dev_data) = match &req.dev {
        DevData::File(dev) => {
            inputs.push(dev.fingerprint());
            (read, read_examples(dev, req, source, labels, base, summary)?)
        }
        DevData::Split(fraction) => {
            summary.dev_split = Some(*fraction);
            split(read, *fraction, req.options.seed, &req.train.name)?
        }
    };
    for (what, d) in [("training", &train_data), ("dev", &dev_data)] {
        // What the readers left out, each with its count (and ids, where they name some).
        let c = &d.counts;
        let left_out: [(usize, &str, &[String]); 6] = [
            (c.unscored.len(), "lines without a human score of the model's dimensions are left out", &c.unscored),
            (
                c.other_dimensions.len(),
                "human score dimensions the training file lacks are not used",
                &c.other_dimensions,
            ),
            (c.empty_options_left_out, "empty options are no candidate (--keep-empty-options keeps them)", &[]),
            (c.criteria_unjudged, "criteria nobody judged (no met, no met_by) are not examples", &[]),
            (c.criteria_tied.len(), "criteria whose people split evenly (met_by) are left out", &c.criteria_tied),
            (
                c.not_enough_evidence_dropped.len(),
                "not_enough_evidence instances dropped, as evaluation drops them (--keep-not-enough-evidence keeps them)",
                &c.not_enough_evidence_dropped,
            ),
        ];
        for (n, text, ids) in left_out.into_iter().filter(|(n, _, _)| *n > 0) {
            summary.notes.push(Note { text: format!("{what} data: {n} {text}"), ids: ids.to_vec() });
        }
        if d.examples.is_empty() {
            return Err(Error::invalid(format!("no {what} example is left to train on")));
        }
        if req.task == TrainTask::Score {
            // Which examples lose tokens, not only how many: a learned metric that read half
            // an answer scores half an answer.
            let cut: Vec<String> = d
                .examples
                .iter()
                .filter(|e| e.inputs.iter().any(|i| i.tokens_cut() > 0))
                .map(|e| e.id.clone())
                .collect();
            if !cut.is_empty() {
                let text = format!(
                    "{what} data: {} of {} examples are cut to the model's {}-token limit ({})",
                    cut.len(),
                    d.examples.len(),
                    base.tokenizer.max_tokens,
                    req.task.facts().truncation
                );
                summary.notes.push(Note { text, ids: cut });
            }
        }
    }
    Ok((train_data, dev_data, inputs))
}

/// The token counts of a request's training and dev inputs (every candidate of a
/// multiple-choice example), as training would read them: what an estimate of its time
/// counts.
pub fn input_lengths(req: &TrainRequest, base: &TextModel) -> Result<(Vec<usize>, Vec<usize>)> {
    let base = &*with_length(base, req.options.length);
    let mut summary = TrainingSummary::of(req);
    let source = parse_arguments(&req.arguments)?;
    let (train, dev, _) = read_sets(req, &source, &request_labels(req)?, base, &mut summary)?;
    let lens = |d: &TrainData| d.examples.iter().flat_map(|e| e.inputs.iter().map(|i| i.len())).collect();
    Ok((lens(&train), lens(&dev)))
}

impl TrainingJob {
    /// Reads and checks the data, tokenises it with `base`'s tokenizer and sets up the
    /// trainer (a new seeded head). `clock` gives seconds (for examples/s only).
    pub fn start(req: &TrainRequest, base: &TextModel, clock: fn() -> f64) -> Result<TrainingJob> {
        let folder_limit = base.tokenizer.max_tokens;
        let base = &*with_length(base, req.options.length);
        let source = parse_arguments(&req.arguments)?;
        let labels = request_labels(req)?;
        let mut summary = TrainingSummary::of(req);
        if req.task == TrainTask::Score {
            summary.dimensions = labels.clone();
        }
        let positions = base.encoder.model.config.max_tokens();
        summary.notes.push(length_note(req.options.length, base.tokenizer.max_tokens, folder_limit, positions).into());
        if let Some(r) = &req.options.recipe {
            summary.notes.push(recipe_note(r, &req.options).into());
        }
        let (train_data, dev_data, inputs) = read_sets(req, &source, &labels, base, &mut summary)?;
        summary.train_examples = train_data.examples.len();
        summary.dev_examples = dev_data.examples.len();
        let counts = (train_data.counts, dev_data.counts);
        let mut occurring = vec![false; labels.len()];
        for e in &train_data.examples {
            if let Some(o) = occurring.get_mut(e.gold) {
                *o = true;
            }
        }
        // The task's metric picks the epoch unless the request names another.
        let options =
            TrainOptions { select_by: req.options.select_by.or(Some(select_by_of(req.task))), ..req.options.clone() };
        let mut trainer =
            Trainer::new(base, head_of(req.task), &labels, train_data.examples, dev_data.examples, options, clock)?;
        summary.inputs = trainer.inputs().1;
        summary.select_by = trainer.select_by();
        summary.class_weights = labels.iter().cloned().zip(trainer.class_weights().iter().copied()).collect();
        if let Some(weights) = weights_note(&summary.class_weights, &occurring) {
            summary.notes.push(weights.into());
        }
        let initial_files = (req.trace_steps > 0).then(|| trainer.current_files()).transpose()?;
        trainer.trace_steps(req.trace_steps);
        // The log records the options as training uses them (the task's defaults resolved).
        let options = trainer.options().clone();
        let base_model = base.name.clone();
        Ok(TrainingJob {
            trainer,
            summary,
            options,
            counts,
            inputs,
            base_model,
            initial_files,
            trace_steps: req.trace_steps,
            max_tokens: base.tokenizer.max_tokens,
        })
    }

    pub fn summary(&self) -> &TrainingSummary {
        &self.summary
    }

    /// Inputs whose frozen part is computed, of all.
    pub fn inputs(&self) -> (usize, usize) {
        self.trainer.inputs()
    }

    /// Seconds the frozen pass took (once it is complete).
    pub fn cache_seconds(&self) -> f64 {
        self.trainer.cache_seconds()
    }

    /// Up to `max_batches` batches of the frozen pass on `encoder` (the base model's, on
    /// the CPU or the GPU); true once every input is done.
    pub async fn encode<E: crate::model::Encoder>(&mut self, encoder: &E, max_batches: usize) -> Result<bool> {
        self.trainer.encode_batches(encoder, max_batches).await
    }

    /// Where the trained part runs, the one rule of both front ends, decided before the
    /// frozen pass: trained layers (the top ones, or all with the embeddings) go to the GPU
    /// that runs the frozen encoder (`gpu`: its context; the same device, its states already
    /// there); the head alone, a head on the mean of the tokens, or the frozen encoder on
    /// the CPU, keeps them on the CPU. Returns whether they run on the GPU.
    pub fn place(&mut self, gpu: Option<&crate::gpu::context::GpuContext>) -> Result<bool> {
        let trains_layers = !matches!(self.summary.freeze, Freeze::HeadOnly);
        let Some(ctx) = gpu.filter(|_| trains_layers) else { return Ok(false) };
        if self.trainer.options().head_pooling == Some(HeadPooling::Mean) {
            // The GPU trainer's last layer computes the first token only.
            self.summary.notes.push(
                "the head reads the mean of the tokens, which the GPU trainer does not compute: every trained \
                 layer runs on the CPU (--head-pooling cls would train on the GPU)"
                    .to_string()
                    .into(),
            );
            return Ok(false);
        }
        let adapter = ctx.adapter.to_string();
        self.trainer.train_on_gpu(ctx.clone())?;
        self.options = self.trainer.options().clone();
        let memory = self.trainer.gpu_memory().describe();
        self.summary.notes.push(format!("the trained layers run on {adapter}; they need {memory}").into());
        Ok(true)
    }

    /// One epoch; `None` once training is over (see [`Trainer::run_epoch`]).
    pub async fn epoch(&mut self, progress: &mut dyn FnMut(TrainEvent<'_>)) -> Result<Option<EpochLog>> {
        let model = &self.base_model;
        self.trainer.run_epoch(progress).await.map_err(|e| e.naming_input(model, |i| format!("example #{}", i + 1)))
    }

    /// The epochs logged so far.
    pub fn curve(&self) -> &[EpochLog] {
        self.trainer.curve()
    }

    /// The trainer, to read its plan and state (the page's time estimate and baseline).
    pub fn trainer(&self) -> &Trainer {
        &self.trainer
    }

    /// The trained evaluator's folder: the best epoch's weights, the base model's
    /// `tokenizer_json`, and the log (options, data, inputs' fingerprints, curve).
    pub async fn finish(self, tokenizer_json: &[u8]) -> Result<TrainedEvaluator> {
        // A trace lists the examples as token ids: keep them before the trainer is consumed.
        let traced = self.initial_files.is_some().then(|| {
            let (train, dev) = self.trainer.examples();
            (train.to_vec(), dev.to_vec())
        });
        let mut result = self.trainer.finish().await?;
        result.data = Some(self.counts);
        let s = &self.summary;
        let extra = serde_json::json!({
            "task": s.task,
            "arguments": s.arguments,
            "dev_split": s.dev_split,
            "base_model": self.base_model,
            "inputs": self.inputs,
            // The longest input training read (the recipe's or --length's).
            "max_tokens": self.max_tokens,
        });
        let mut files = t::trained_files_with(&result, &self.options, extra)?;
        files.push(("tokenizer.json".into(), tokenizer_json.to_vec()));
        let trace_files = match (self.initial_files, traced) {
            (Some(initial), Some((train, dev))) => {
                let mut out = initial;
                out.push(("tokenizer.json".into(), tokenizer_json.to_vec()));
                let all = self.trace_steps == usize::MAX;
                out.push(("trace.json".into(), trace_json(&self.summary, &self.options, &result, all, &train, &dev)));
                out
            }
            _ => Vec::new(),
        };
        let (cut_train, cut_dev) = result.truncated;
        let truncation_warning = (cut_train + cut_dev > 0).then(|| {
            let what = TrainTask::parse(self.summary.task).map_or("", |t| t.facts().truncation);
            format!("{cut_train} training and {cut_dev} dev examples had inputs cut to the model's token limit ({what}); train_log.json records the counts")
        });
        let log =
            files.iter().find(|(name, _)| name == "train_log.json").map(|(_, b)| b.as_slice()).unwrap_or_default();
        let quality = super::quality::ModelQuality::from_train_log("train_log.json", log)?;
        Ok(TrainedEvaluator { result, truncation_warning, quality, files, trace_files })
    }
}

/// What length the inputs are cut to, in words: the CLI's note and the page's.
fn length_note(length: Length, used: usize, folder: usize, positions: usize) -> String {
    match length {
        Length::Full if folder < positions => format!(
            "inputs up to {used} tokens, the model's full length (max_position_embeddings; the folder's own limit is {folder})"
        ),
        Length::Full => format!("inputs up to {used} tokens, the model's full length (max_position_embeddings)"),
        Length::Folder if folder < positions => format!(
            "inputs up to {used} tokens, the folder's limit (sentence-transformers' max_seq_length; --length full reads up to {positions})"
        ),
        Length::Folder => format!("inputs up to {used} tokens, the model's full length (max_position_embeddings)"),
    }
}

/// The recipe and what it set, in words.
fn recipe_note(r: &AppliedRecipe, o: &TrainOptions) -> String {
    let dropout = match o.dropout {
        Some(d) => format!("dropout {} (attention {})", d.hidden, d.attention),
        None => "the model's dropout".to_string(),
    };
    let given = if r.overridden.is_empty() { String::new() } else { format!("; given: {}", r.overridden.join(", ")) };
    format!(
        "recipe {} ({}): --freeze {}, --lr {}, --layer-lr {}, --weight-decay {}, --warmup {}, {dropout}, --length {}{given}",
        r.name.name(),
        r.chosen_by,
        freeze_name(o.freeze),
        o.learning_rate,
        o.layer_learning_rate,
        o.weight_decay,
        o.warmup_ratio,
        o.length.name()
    )
}

/// A note on the classes' loss weights, when they are not all 1 (labels that no training
/// example has are never a target: they are not listed).
fn weights_note(weights: &[(String, f64)], occurring: &[bool]) -> Option<String> {
    if weights.iter().all(|(_, w)| *w == 1.0) {
        return None;
    }
    let list: Vec<String> =
        weights.iter().zip(occurring).filter(|(_, &o)| o).map(|((l, w), _)| format!("{l} {w:.3}")).collect();
    Some(format!(
        "the classes' losses are weighted by inverse frequency in the training data (--class-weights balanced): {}",
        list.join(", ")
    ))
}

/// `trace.json` (the format is in tests/reference/README.md): what a reference
/// implementation needs to replay the recorded steps from the starting model beside it.
fn trace_json(
    summary: &TrainingSummary,
    options: &TrainOptions,
    result: &t::TrainResult,
    all_steps: bool,
    train: &[TrainExample],
    dev: &[TrainExample],
) -> Vec<u8> {
    let examples = |set: &[TrainExample]| -> Vec<serde_json::Value> {
        set.iter()
            .map(|e| {
                let inputs: Vec<serde_json::Value> = e
                    .inputs
                    .iter()
                    .map(|i| serde_json::json!({"input_ids": i.ids, "token_type_ids": i.type_ids}))
                    .collect();
                let mut example = serde_json::json!({"id": e.id, "gold": e.gold, "inputs": inputs});
                if let Some(s) = &e.scores {
                    // The human scores (null where the line has none) and their batch.
                    example["scores"] = serde_json::json!(s.scores);
                    example["batch"] = serde_json::json!(s.batch);
                }
                example
            })
            .collect()
    };
    let (total, warmup) = t::schedule(train.len(), options);
    let task = TrainTask::parse(summary.task);
    let head = match task {
        Some(TrainTask::Score) => "regression",
        Some(t) if head_of(t) == HeadKind::MultipleChoice => "multiple_choice",
        _ => "sequence_classification",
    };
    let labels: Vec<&str> = if summary.dimensions.is_empty() {
        summary.class_weights.iter().map(|(l, _)| l.as_str()).collect()
    } else {
        summary.dimensions.iter().map(String::as_str).collect()
    };
    let weights: Option<Vec<f64>> =
        (!summary.class_weights.is_empty()).then(|| summary.class_weights.iter().map(|(_, w)| *w).collect());
    let value = serde_json::json!({
        "head": head,
        "labels": labels,
        "freeze": freeze_name(summary.freeze),
        "trained_layers": result.trained_layers,
        // The pooler (BERT's head reads it) trains with the new head, at --lr.
        "pooler_trains_with": "head",
        "options": options,
        "total_steps": total,
        "warmup_steps": warmup,
        "class_weights": weights,
        // The score task's standardisation of the targets (also in config.json).
        "score_scale": result.model.config.score_scale,
        "select_by": result.select_by,
        "patience": options.patience,
        "steps_traced": if all_steps { serde_json::json!("all") } else { serde_json::json!(result.steps.len()) },
        "examples": examples(train),
        "dev_examples": examples(dev),
        "steps": result.steps,
    });
    serde_json::to_vec(&value).expect("serialisable")
}

/// Training from start to end (`medrank train`): the same steps the page runs one at a
/// time, the frozen encoder `encoder` (opened by [`open_training_encoder`]) and the trained
/// part where [`TrainingJob::place`] puts it. `events` sees the summary's start, the frozen
/// pass and every epoch.
#[cfg(not(target_arch = "wasm32"))]
pub fn train(
    req: &TrainRequest,
    base: &TextModel,
    tokenizer_json: &[u8],
    encoder: &crate::gpu::AnyEncoder,
    started: &mut dyn FnMut(&TrainingSummary),
    events: &mut dyn FnMut(TrainEvent),
) -> Result<TrainedEvaluator> {
    let mut job = TrainingJob::start(req, base, t::native_clock)?;
    job.place(gpu_of(encoder))?;
    started(job.summary());
    // The frozen pass, all at once (the page runs it a few batches per step).
    pollster::block_on(job.encode(encoder, usize::MAX))?;
    if job.trainer.has_frozen_pass() {
        events(TrainEvent::Cached { inputs: job.inputs().1, seconds: job.cache_seconds() });
    }
    // The GPU engine waits on read-backs: block on them here (the page awaits them).
    while pollster::block_on(job.epoch(events))?.is_some() {}
    pollster::block_on(job.finish(tokenizer_json))
}

/// The frozen encoder of a training on `backend` (`gpu::open_encoder`: Auto takes a
/// hardware GPU when there is one), opened before the request is made: where it runs
/// decides the default recipe.
#[cfg(not(target_arch = "wasm32"))]
pub fn open_training_encoder(base: &TextModel, backend: crate::gpu::BackendChoice) -> Result<crate::gpu::AnyEncoder> {
    Ok(pollster::block_on(crate::gpu::open_encoder(base.encoder.model.clone(), backend))?.0)
}

/// The GPU an encoder runs on, if it runs on one: where the trained layers go.
pub fn gpu_of(encoder: &crate::gpu::AnyEncoder) -> Option<&crate::gpu::context::GpuContext> {
    match encoder {
        crate::gpu::AnyEncoder::Gpu(gpu) => Some(gpu.context()),
        crate::gpu::AnyEncoder::Cpu(_) => None,
    }
}

/// What the page's training form offers for one file: whether it is an argument bundle or a
/// HiTZ MCQA file, the tasks of its instances and the systems whose arguments it holds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct TrainingChoices {
    /// "bundle", "hitz", "rubric" or "metrics".
    pub format: &'static str,
    pub tasks: Vec<&'static str>,
    pub systems: Vec<String>,
    /// The arguments its instances can carry (`--arguments`).
    pub arguments: Vec<ArgumentChoice>,
    /// The choice the page's form starts at ([`default_argument`]).
    pub default_argument: String,
    pub instances: usize,
    /// A metrics file's human score dimensions (the score task's outputs, in order of
    /// first appearance); empty for the other formats.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dimensions: Vec<String>,
}

/// One argument a training instance can carry, as `--arguments` takes it, in words, and
/// what training with it measures (one line; the page shows it under the choice).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArgumentChoice {
    pub value: String,
    pub label: String,
    pub explain: String,
}

/// The arguments a file with arguments of `systems` offers: one system's (the expert's
/// first), a random system's per instance, or none (the baseline evaluator).
pub fn argument_choices(systems: &[String]) -> Vec<ArgumentChoice> {
    let choice = |value: String, label: String, explain: &str| ArgumentChoice { value, label, explain: explain.into() };
    let controls = crate::data::controls::Control::all_names();
    let mut ordered: Vec<&String> = systems.iter().filter(|s| *s == "expert").collect();
    ordered.extend(systems.iter().filter(|s| *s != "expert"));
    let mut out: Vec<ArgumentChoice> = ordered
        .into_iter()
        .map(|s| {
            let explain = if s == "expert" {
                "the expert's argument on every instance: the evaluator learns to read a sound argument, so a ranking with it tells the systems' arguments apart by what they give it"
            } else if controls.contains(s) {
                "a control case's argument on every instance: an evaluator that learns from it measures the control, not the systems"
            } else {
                "this system's argument on every instance: the evaluator learns to read arguments like this system's"
            };
            choice(format!("system:{s}"), format!("{s}'s argument"), explain)
        })
        .collect();
    // A random system's per instance: among the real systems, and among all of them when
    // the file has control cases too.
    let real: Vec<String> = systems.iter().filter(|s| !controls.contains(s)).cloned().collect();
    for (group, explain) in [
        (&real, "a different system's argument on each instance: the evaluator learns from arguments of every quality"),
        (
            &systems.to_vec(),
            "a different system's argument on each instance, the control cases' among them: the evaluator also learns from arguments made to mislead",
        ),
    ] {
        if group.len() > 1 && !out.iter().any(|c| c.value == format!("random:{}", group.join(","))) {
            let value = format!("random:{}", group.join(","));
            out.push(choice(value, format!("a random system's per instance ({})", group.join(", ")), explain));
        }
    }
    out.push(choice(
        "none".into(),
        "none (the baseline evaluator)".into(),
        "no argument: the evaluator learns from the question alone and never learns to read an argument, so a ranking with it cannot tell good arguments from bad (the paper's baseline, to compare against)",
    ));
    out
}

/// The argument a file's training starts at: what it carries (the expert's where there is
/// one, else a random real system's per instance, or its one system's), never the control
/// cases; none only when the file has no arguments (issue 47: the baseline evaluator as the
/// default ranked the expert last).
pub fn default_argument(systems: &[String]) -> String {
    let controls = crate::data::controls::Control::all_names();
    let real: Vec<&String> = systems.iter().filter(|s| !controls.contains(s)).collect();
    if systems.iter().any(|s| s == "expert") {
        "system:expert".into()
    } else if real.len() == 1 {
        format!("system:{}", real[0])
    } else if real.len() > 1 {
        // `random:` over the real systems: one of the choices when there are no controls.
        format!("random:{}", real.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(","))
    } else {
        "none".into()
    }
}

/// The choices one training file allows (it is read with the trainer's own readers).
pub fn training_choices(file: &NamedText) -> Result<TrainingChoices> {
    if is_rubric(&file.text) {
        let examples = t::examples_from_rubric_count(&file.name, &file.text)?;
        return Ok(TrainingChoices {
            format: "rubric",
            tasks: vec!["criterion"],
            systems: Vec::new(),
            arguments: argument_choices(&[]),
            default_argument: default_argument(&[]),
            instances: examples,
            dimensions: Vec::new(),
        });
    }
    if is_candidates(&file.text) {
        // Task score's file: read as its training reads it, refused as it would be there.
        let (candidates, dimensions) = score_file(file)?;
        return Ok(TrainingChoices {
            format: "metrics",
            tasks: vec![SCORE.name],
            systems: Vec::new(),
            arguments: argument_choices(&[]),
            default_argument: default_argument(&[]),
            instances: candidates.len(),
            dimensions,
        });
    }
    if is_bundle(&file.text) {
        let (bundle, _) = crate::data::parse_bundle(&file.name, &file.text)?;
        let tasks = crate::data::common::first_appearance(bundle.instances.iter().map(|i| i.problem.task().name()));
        Ok(TrainingChoices {
            format: "bundle",
            tasks,
            arguments: argument_choices(&bundle.systems),
            default_argument: default_argument(&bundle.systems),
            systems: bundle.systems.clone(),
            instances: bundle.instances.len(),
            dimensions: Vec::new(),
        })
    } else {
        let (items, _) = crate::data::parse_hitz(&file.name, &file.text)?;
        Ok(TrainingChoices {
            format: "hitz",
            tasks: vec!["mcqa"],
            systems: Vec::new(),
            arguments: argument_choices(&[]),
            default_argument: default_argument(&[]),
            instances: items.len(),
            dimensions: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn training_defaults_to_the_arguments_the_file_carries_with_the_baseline_last() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        // The expert's where there is one (issue 47: the baseline evaluator as the default
        // ranked the expert last), the control cases never by default.
        let systems = names(&["gpt-4o", "expert", "label_only"]);
        assert_eq!(default_argument(&systems), "system:expert");
        let values: Vec<String> = argument_choices(&systems).into_iter().map(|c| c.value).collect();
        assert_eq!(
            values,
            [
                "system:expert",
                "system:gpt-4o",
                "system:label_only",
                "random:gpt-4o,expert",
                "random:gpt-4o,expert,label_only",
                "none"
            ]
        );
        assert_eq!(default_argument(&names(&["gpt-4o", "llama", "noise"])), "random:gpt-4o,llama");
        assert_eq!(default_argument(&names(&["gpt-4o", "noise"])), "system:gpt-4o");
        assert_eq!(default_argument(&names(&["noise"])), "none");
        assert_eq!(default_argument(&[]), "none");
        // Every choice says what training with it measures.
        assert!(argument_choices(&systems).iter().all(|c| !c.explain.is_empty()));
    }

    #[test]
    fn every_task_of_the_table_trains_its_head_labels_and_metric() {
        let names: Vec<&str> = TrainTask::all().map(TrainTask::name).collect();
        assert_eq!(names, TrainTask::NAMES);
        for task in TrainTask::all() {
            assert_eq!(TrainTask::parse(task.name()), Some(task));
            let facts = task.facts();
            assert_eq!(task.labels(), facts.labels.iter().map(|l| l.to_string()).collect::<Vec<_>>());
            // The trainer's own fallback for the metric (no task known) agrees with the table
            // (a score head's is Spearman, which the trainer picks by the examples' scores).
            if task != TrainTask::Score {
                assert_eq!(SelectBy::for_head(head_of(task)), select_by_of(task), "{}", task.name());
            }
        }
        assert_eq!(TrainTask::parse("criterion"), Some(TrainTask::Criterion));
        assert_eq!(crate::model::grade::CRITERION_LABELS, TrainTask::Criterion.facts().labels);
        assert_eq!(head_of(TrainTask::Proxy(Task::Mcqa)), HeadKind::MultipleChoice);
    }

    fn options(form: TrainForm, on_gpu: bool) -> TrainOptions {
        form.request(NamedText::new("t", ""), DevData::Split(0.2), on_gpu).unwrap().options
    }

    #[test]
    fn the_recipe_follows_where_training_runs_and_explicit_options_override_it() {
        // Nothing asked for: fast on the CPU (today's defaults), finetune on a GPU.
        let cpu = options(TrainForm::default(), false);
        let d = TrainOptions::default();
        assert_eq!((cpu.freeze, cpu.learning_rate, cpu.weight_decay), (d.freeze, d.learning_rate, d.weight_decay));
        assert_eq!((cpu.dropout, cpu.length), (Some(Dropout::NONE), Length::Folder));
        let recipe = cpu.recipe.as_ref().unwrap();
        assert_eq!(
            (recipe.name, recipe.chosen_by.as_str()),
            (Recipe::Fast, "the default where training runs (the CPU)")
        );
        let gpu = options(TrainForm::default(), true);
        assert_eq!((gpu.freeze, gpu.learning_rate, gpu.layer_learning_rate), (Freeze::All, 5e-5, 5e-5));
        assert_eq!((gpu.weight_decay, gpu.warmup_ratio, gpu.length), (0.0, d.warmup_ratio, Length::Full));
        assert_eq!(gpu.dropout, None, "the model's own, resolved by the trainer");
        assert_eq!(gpu.recipe.as_ref().unwrap().name, Recipe::Finetune);
        // Asked for by name, on the CPU; an explicit option wins and is listed.
        let form = TrainForm {
            recipe: "finetune".into(),
            freeze: "top:2".into(),
            dropout: Some(0.0),
            lr: Some(1e-4),
            ..Default::default()
        };
        let o = options(form, false);
        assert_eq!((o.freeze, o.learning_rate, o.layer_learning_rate), (Freeze::TopLayers(2), 1e-4, 5e-5));
        assert_eq!((o.dropout, o.weight_decay, o.length), (Some(Dropout::NONE), 0.0, Length::Full));
        let r = o.recipe.unwrap();
        assert_eq!((r.name, r.chosen_by.as_str()), (Recipe::Finetune, "--recipe"));
        assert_eq!(r.overridden, ["--freeze", "--lr", "--dropout"]);
        // fast asked for on a GPU stays fast.
        assert_eq!(options(TrainForm { recipe: "fast".into(), ..Default::default() }, true).freeze, Freeze::HeadOnly);
        let bad = TrainForm { recipe: "slow".into(), ..Default::default() };
        let e = bad.request(NamedText::new("t", ""), DevData::Split(0.2), false).unwrap_err().to_string();
        assert!(e.contains("--recipe slow: expected fast or finetune"), "{e}");
    }
}
