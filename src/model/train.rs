//! Training evaluators with candle's autograd: AdamW, linear warm-up then linear decay,
//! seeded shuffling, gradient accumulation, early stopping on a dev set, and a choice of
//! what to train (the head on a frozen encoder, the top N layers, or everything).
//!
//! The epoch kept is the one with the best dev value of the task's evaluation metric
//! ([`SelectBy`]: accuracy for multiple choice, macro-F1 for classification), and the
//! classes' losses are weighted by inverse frequency ([`ClassWeights`]): on imbalanced data
//! accuracy and an unweighted loss both favour a model that predicts the majority class for
//! everything, which ranks every system the same. A kept model that still predicts one
//! class is reported as a warning. Each step can be recorded ([`StepRecord`]) so that an
//! independent implementation replays it (tests/reference/train_reference.py).
//!
//! Speed on a CPU: what is frozen is computed once. Head-only training encodes every
//! input once through the fast inference path (`super::cpu`) and trains the head on the
//! cached first-token states. `top:N` runs the lower layers through the same path once and
//! caches each input's states after them (real tokens only, in f16: half the memory, the
//! difference far below what one step changes); each step then runs only the top N layers
//! through candle's autograd, the last of them for the first token alone (all a head reads).
//! candle runs most ops on one thread, so a micro-batch is split into one shard per core,
//! each shard does its forward and backward pass on its own thread, and the gradients are
//! summed. The head and the encoder layers have their own learning rates (a new head needs
//! a large one, pretrained layers a small one).
//! Dropout is not used (deterministic, and the frozen-feature path could not apply it).
//!
//! Training runs in steps ([`Trainer`]: a few batches of the frozen pass, one epoch, finish)
//! so the page's worker can report progress and stop between them; [`train`] runs the same
//! steps in one call, so both front ends give the same curve.
//!
//! Conventions shared with evaluation: an empty MCQA option (`data::is_empty_option`) is no
//! candidate (the example has no input for it, and its softmax runs over the others);
//! misinformation instances labelled `not_enough_evidence` are dropped, as evaluation drops
//! them. The head keeps all three labels (evaluation maps them by name) and
//! `not_enough_evidence` is then never a target, so training pushes it down. Both are
//! counted, and [`ExampleOptions`] keeps them.
//!
//! Which evaluator a training file makes (methods.md §1): *baseline* = examples without an
//! argument; *expert-trained* = the gold/expert argument; *LLM-trained* = one random LLM
//! argument per instance (seeded). [`examples_from_bundle`] builds each from a bundle;
//! HiTZ CasiMedicos files (argument already appended to the question) are read by
//! [`read_hitz_mcqa`].
//!
//! Measured on the vendored CasiMedicos data (all-MiniLM-L6-v2, empty options left out;
//! commands and figures in the README and BENCHMARKS.md): dev accuracy 0.589 head only,
//! 0.618 with `--freeze top:1` after one epoch, 0.714 with `top:2` after one; the zero-training similarity evaluator
//! reached 0.582 on the same dev file.

use super::config::{EncoderConfig, HeadKind};
use super::embed::{length_batches, TextModel};
use super::encoder::{forward, layers_forward};
use super::evaluate::{classification_parts, mcqa_parts};
use super::heads::head_forward;
use super::load::{random_model, Dense, HeadWeights, LoadedModel};
use super::tokenize::{Encoded, TextTokenizer};
use crate::data::{Bundle, Problem, Task};
use crate::error::{Error, Result};
use crate::stats::classes::{ClassScores, Confusion};
use candle_core::{Device, IndexOp, Tensor, Var, D};
use candle_nn::{AdamW, Optimizer, ParamsAdamW};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// One training example: the encoder inputs and the index of the right one.
/// Multiple choice: one input per candidate option (empty options are left out unless
/// kept, so the count varies), `gold` = index among the inputs. Classification: one
/// input, `gold` = label index.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainExample {
    pub id: String,
    pub inputs: Vec<Encoded>,
    pub gold: usize,
}

/// What the example readers leave out (the conventions evaluation follows too).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ExampleOptions {
    /// Keep empty MCQA options as candidates (default: not candidates, as in evaluation).
    pub keep_empty_options: bool,
    /// Keep misinformation instances labelled `not_enough_evidence` (default: dropped, as
    /// evaluation drops them).
    pub keep_not_enough_evidence: bool,
}

/// Examples and what was left out of them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrainData {
    pub examples: Vec<TrainExample>,
    pub counts: DataCounts,
}

/// What a reader left out, with ids, for the log.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DataCounts {
    pub examples: usize,
    /// Empty MCQA options that are no candidate (no input).
    pub empty_options_left_out: usize,
    /// Misinformation instances labelled `not_enough_evidence`, dropped (their ids).
    pub not_enough_evidence_dropped: Vec<String>,
}

/// Inputs of one MCQA item: one per candidate option, the gold index among them, and how
/// many empty options were left out. An empty gold option is an error.
fn mcqa_inputs(
    question: &str,
    argument: &str,
    options: &[(String, String)],
    answer: &str,
    keep_empty: bool,
    tokenizer: &TextTokenizer,
    at: &dyn Fn(&str, String) -> Error,
) -> Result<(Vec<Encoded>, usize, usize)> {
    let gold_key = options
        .iter()
        .position(|(k, _)| k == answer)
        .ok_or_else(|| at("answer", format!("`{answer}` is not an option key")))?;
    let (mut inputs, mut gold, mut left_out) = (Vec::new(), None, 0);
    for (i, (key, text)) in options.iter().enumerate() {
        if !keep_empty && crate::data::is_empty_option(text) {
            if i == gold_key {
                return Err(at(
                    "options",
                    format!("the correct option `{key}` is empty (--keep-empty-options keeps empty options)"),
                ));
            }
            left_out += 1;
            continue;
        }
        if i == gold_key {
            gold = Some(inputs.len());
        }
        let (first, second) = mcqa_parts(question, argument, text);
        inputs.push(tokenizer.encode_parts(&first, &second).map_err(|e| at("options", e.to_string()))?);
    }
    Ok((inputs, gold.expect("the gold option is kept"), left_out))
}

/// Read a HiTZ CasiMedicos MCQA file (`{"question", "options": {"1": ..}, "correct_option"}`
/// per line; the argument is already appended to the question) into examples. The file is
/// parsed by the same reader as the Ranking-Over-Scoring importer (`data::parse_hitz`).
pub fn read_hitz_mcqa(
    file: &str,
    text: &str,
    tokenizer: &TextTokenizer,
    options: &ExampleOptions,
) -> Result<TrainData> {
    let (items, _warnings) = crate::data::parse_hitz(file, text)?;
    let mut out = TrainData::default();
    for item in items {
        let at = |field: &str, msg: String| Error::input(file, item.line, field, msg);
        let (inputs, gold, left_out) = mcqa_inputs(
            &item.question,
            "",
            &item.options,
            &item.correct_option,
            options.keep_empty_options,
            tokenizer,
            &at,
        )?;
        out.counts.empty_options_left_out += left_out;
        out.examples.push(TrainExample { id: format!("{file}:{}", item.line), inputs, gold });
    }
    out.counts.examples = out.examples.len();
    Ok(out)
}

/// Which argument each training instance carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgumentSource {
    /// No argument: the baseline evaluator.
    None,
    /// One named system's argument (e.g. the expert/gold one): the expert-trained evaluator.
    System(String),
    /// One random system per instance among these (seeded): the LLM-trained evaluator.
    RandomOf(Vec<String>),
}

/// Training examples from a bundle (instances lacking the chosen system are an error).
pub fn examples_from_bundle(
    bundle: &Bundle,
    source: &ArgumentSource,
    labels: &[String],
    tokenizer: &TextTokenizer,
    seed: u64,
    options: &ExampleOptions,
) -> Result<TrainData> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = TrainData::default();
    for inst in &bundle.instances {
        let argument: &str = match source {
            ArgumentSource::None => "",
            ArgumentSource::System(s) => inst.argument(s).ok_or_else(|| {
                Error::input(&bundle.name, inst.line, "arguments", format!("no argument of system `{s}`"))
            })?,
            ArgumentSource::RandomOf(systems) => {
                let present: Vec<&str> = systems.iter().filter_map(|s| inst.argument(s)).collect();
                present
                    .choose(&mut rng)
                    .copied()
                    .ok_or_else(|| Error::input(&bundle.name, inst.line, "arguments", format!("none of {systems:?}")))?
            }
        };
        let at = |field: &str, msg: String| Error::input(&bundle.name, inst.line, field, msg);
        match &inst.problem {
            Problem::Mcqa { question, options: opts, answer } => {
                let (inputs, gold, left_out) =
                    mcqa_inputs(question, argument, opts, answer, options.keep_empty_options, tokenizer, &at)?;
                out.counts.empty_options_left_out += left_out;
                out.examples.push(TrainExample { id: inst.id.clone(), inputs, gold });
            }
            problem => {
                if !options.keep_not_enough_evidence
                    && matches!(problem, Problem::Misinformation { .. })
                    && problem.gold() == "not_enough_evidence"
                {
                    out.counts.not_enough_evidence_dropped.push(inst.id.clone());
                    continue;
                }
                let (f, s) = classification_parts(problem, argument)?;
                let gold = labels
                    .iter()
                    .position(|l| l == problem.gold())
                    .ok_or_else(|| at("label", format!("`{}` not in {labels:?}", problem.gold())))?;
                let encoded = tokenizer.encode_parts(&f, &s).map_err(|e| at("text", e.to_string()))?;
                out.examples.push(TrainExample { id: inst.id.clone(), inputs: vec![encoded], gold });
            }
        }
    }
    out.counts.examples = out.examples.len();
    Ok(out)
}

/// What is trained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Freeze {
    /// Only the head (and the pooler it reads): the encoder is frozen.
    HeadOnly,
    /// The head and the top N transformer layers.
    TopLayers(usize),
    /// Everything, embeddings included.
    All,
}

#[derive(Debug, Clone, Serialize)]
pub struct TrainOptions {
    pub freeze: Freeze,
    pub epochs: usize,
    /// Examples per micro-batch.
    pub batch_size: usize,
    /// Micro-batches per optimiser step.
    pub grad_accum: usize,
    /// Peak learning rate of the head (and the pooler it reads).
    pub learning_rate: f64,
    /// Peak learning rate of the trained encoder layers (and embeddings with `All`).
    pub layer_learning_rate: f64,
    pub weight_decay: f64,
    /// Fraction of all steps spent warming up linearly from 0.
    pub warmup_ratio: f64,
    /// Stop after this many epochs without a better dev metric.
    pub patience: usize,
    pub seed: u64,
    /// The dev metric that picks the best epoch; `None`: the task's evaluation metric
    /// ([`SelectBy::for_head`]), resolved when the [`Trainer`] is made.
    pub select_by: Option<SelectBy>,
    /// How the classes' losses are weighted; `None`: balanced for classification, none for
    /// multiple choice, resolved when the [`Trainer`] is made.
    pub class_weights: Option<ClassWeights>,
}

/// The dev metric that picks the best epoch and decides early stopping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SelectBy {
    /// Share of dev examples right (MCQA's evaluation metric).
    Accuracy,
    /// Macro-F1 over the labels in gold or predictions, as evaluation scores
    /// misinformation (`stats::classes`): a model that predicts one class scores low here,
    /// however frequent that class is.
    MacroF1,
    /// Mean dev loss (class-weighted as in training); lower is better.
    Loss,
}

impl SelectBy {
    /// `accuracy`, `macro-f1` or `loss` (`--select-by`).
    pub fn parse(s: &str) -> Result<SelectBy> {
        match s.trim() {
            "accuracy" => Ok(SelectBy::Accuracy),
            "macro-f1" | "macro_f1" => Ok(SelectBy::MacroF1),
            "loss" => Ok(SelectBy::Loss),
            other => Err(Error::invalid(format!("--select-by {other}: expected accuracy, macro-f1 or loss"))),
        }
    }

    /// The task's evaluation metric: accuracy for multiple choice, macro-F1 for
    /// classification (misinformation and NLI, as the Ranking-Over-Scoring paper).
    pub fn for_head(kind: HeadKind) -> SelectBy {
        if kind == HeadKind::MultipleChoice {
            SelectBy::Accuracy
        } else {
            SelectBy::MacroF1
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            SelectBy::Accuracy => "accuracy",
            SelectBy::MacroF1 => "macro-F1",
            SelectBy::Loss => "loss",
        }
    }

    /// Whether `a` is strictly better than `b` (a NaN is never better).
    fn better(self, a: f64, b: f64) -> bool {
        match self {
            SelectBy::Loss => a < b,
            _ => a > b,
        }
    }
}

/// How each class's examples weigh in the loss (classification only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassWeights {
    /// Inverse frequency in the training examples, `n / (k * n_c)` over the k classes that
    /// occur (scikit-learn's `class_weight="balanced"`): each class weighs as much in
    /// total, so predicting the majority class for everything no longer minimises the loss.
    Balanced,
    /// Every example weighs 1.
    #[serde(rename = "none")]
    Equal,
}

impl ClassWeights {
    /// `balanced` or `none` (`--class-weights`).
    pub fn parse(s: &str) -> Result<ClassWeights> {
        match s.trim() {
            "balanced" => Ok(ClassWeights::Balanced),
            "none" => Ok(ClassWeights::Equal),
            other => Err(Error::invalid(format!("--class-weights {other}: expected balanced or none"))),
        }
    }

    /// One weight per label from the training examples' gold labels; labels that never
    /// occur get 1 (they are never a target).
    pub fn weights(self, n_labels: usize, golds: impl Iterator<Item = usize>) -> Vec<f64> {
        let mut counts = vec![0usize; n_labels];
        for g in golds {
            counts[g] += 1;
        }
        let n: usize = counts.iter().sum();
        let k = counts.iter().filter(|&&c| c > 0).count();
        counts
            .iter()
            .map(|&c| match self {
                ClassWeights::Balanced if c > 0 => n as f64 / (k * c) as f64,
                _ => 1.0,
            })
            .collect()
    }
}

/// Default peak learning rate of the encoder layers: pretrained weights move little
/// (BERT's fine-tuning range is 2e-5..5e-5; the top layers alone take the upper end).
pub const DEFAULT_LAYER_LR: f64 = 5e-5;

impl Default for TrainOptions {
    fn default() -> Self {
        TrainOptions {
            freeze: Freeze::HeadOnly,
            epochs: 20,
            batch_size: 16,
            grad_accum: 1,
            learning_rate: 1e-3,
            layer_learning_rate: DEFAULT_LAYER_LR,
            weight_decay: 0.01,
            warmup_ratio: 0.1,
            patience: 4,
            seed: 42,
            select_by: None,
            class_weights: None,
        }
    }
}

/// One point of the training curve (after each epoch).
#[derive(Debug, Clone, Serialize)]
pub struct EpochLog {
    pub epoch: usize,
    pub steps: usize,
    /// Mean training loss over the epoch (class-weighted when the classes are: the
    /// objective that was minimised).
    pub train_loss: f64,
    pub dev_accuracy: f64,
    /// Classification: macro-F1 over the labels in gold or predictions, as evaluation.
    pub dev_macro_f1: Option<f64>,
    /// Mean dev loss, weighted as in training.
    pub dev_loss: f64,
    /// The value of the metric that picks the best epoch ([`TrainOptions::select_by`]).
    pub dev_metric: f64,
    /// Classification: precision, recall and F1 of every label on dev.
    pub dev_classes: Option<Vec<ClassScores>>,
    /// Classification: the dev confusion matrix in label order, rows gold, columns predicted.
    pub dev_confusion: Option<Vec<Vec<u64>>>,
    /// The head's learning rate at the epoch's last step (the layers' follows the same
    /// schedule from `layer_learning_rate`).
    pub learning_rate: f64,
    /// Wall-clock seconds of the epoch's training steps (dev evaluation not included).
    pub train_seconds: f64,
    /// Training examples per second over those steps.
    pub examples_per_second: f64,
}

/// Equal curves: the same numbers; the wall-clock figures are not compared.
impl PartialEq for EpochLog {
    fn eq(&self, o: &Self) -> bool {
        (self.epoch, self.steps, self.train_loss, self.dev_accuracy, self.learning_rate)
            == (o.epoch, o.steps, o.train_loss, o.dev_accuracy, o.learning_rate)
            && (self.dev_macro_f1, &self.dev_confusion) == (o.dev_macro_f1, &o.dev_confusion)
    }
}

/// One optimiser step as a trace records it (`medrank train --trace`): what a reference
/// implementation needs to replay it with the same batches.
#[derive(Debug, Clone, Serialize)]
pub struct StepRecord {
    /// 0-based over the whole training.
    pub step: usize,
    pub epoch: usize,
    /// The step's training examples (indices into the training set), in the drawn order.
    pub examples: Vec<usize>,
    pub lr: f64,
    pub layer_lr: f64,
    /// The step's objective with the weights before its update: the sum over its examples
    /// of the gold class's weight times the cross-entropy, over the number of examples.
    pub loss: f64,
}

/// One epoch's dev figures (see [`EpochLog`]).
struct DevScores {
    accuracy: f64,
    macro_f1: Option<f64>,
    classes: Option<Vec<ClassScores>>,
    confusion: Option<Vec<Vec<u64>>>,
    loss: f64,
    metric: f64,
}

/// What training reports as it goes.
#[derive(Debug, Clone)]
pub enum TrainEvent<'a> {
    /// The frozen part was computed for every input: (inputs, seconds).
    Cached { inputs: usize, seconds: f64 },
    /// Progress inside an epoch (about every 10 s).
    Step { epoch: usize, examples: usize, of: usize, examples_per_second: f64 },
    /// An epoch ended.
    Epoch(&'a EpochLog),
}

#[derive(Debug, Clone)]
pub struct TrainResult {
    /// The encoder with the trained head, weights of the best dev epoch.
    pub model: LoadedModel,
    pub curve: Vec<EpochLog>,
    pub best_epoch: usize,
    pub best_dev_accuracy: f64,
    /// The metric that picked the best epoch, and its value there.
    pub select_by: SelectBy,
    pub best_dev_metric: f64,
    /// Classification: the share of the most frequent dev label (what always predicting it
    /// scores in accuracy).
    pub dev_majority_rate: Option<f64>,
    /// What the user must know about the picked model (it predicts one class for all).
    pub warnings: Vec<String>,
    /// The first optimiser steps, when a trace was asked for ([`Trainer::trace_steps`]).
    pub steps: Vec<StepRecord>,
    /// The loss weight of each label (empty for multiple choice).
    pub class_weights: Vec<f64>,
    /// Encoder layers that trained (the top ones).
    pub trained_layers: usize,
    /// Examples with at least one cut input (train, dev).
    pub truncated: (usize, usize),
    /// Seconds spent computing the frozen part once (features or lower-layer states).
    pub cache_seconds: f64,
    /// Threads the training steps ran on.
    pub threads: usize,
    /// What the example readers left out (train, dev); the caller fills it in for the log.
    pub data: Option<(DataCounts, DataCounts)>,
}

/// Learning rate at optimiser step `step` (0-based) of `total`: linear warm-up over
/// `warmup` steps, then linear decay to 0.
pub fn scheduled_lr(base: f64, step: usize, warmup: usize, total: usize) -> f64 {
    if step < warmup {
        base * (step + 1) as f64 / warmup as f64
    } else {
        base * (total.saturating_sub(step)) as f64 / (total - warmup).max(1) as f64
    }
}

/// The schedule's length for `examples` training examples: (optimiser steps in all,
/// warm-up steps). A step takes `batch_size * grad_accum` examples; the last of an epoch
/// may take fewer.
pub fn schedule(examples: usize, opts: &TrainOptions) -> (usize, usize) {
    let total = examples.div_ceil(opts.batch_size * opts.grad_accum) * opts.epochs;
    (total, ((total as f64) * opts.warmup_ratio).round() as usize)
}

/// Start from `base` (a plain encoder or one with a head) and add a fresh seeded head of
/// the given kind when it has none.
pub fn with_new_head(base: &LoadedModel, kind: HeadKind, labels: &[String], seed: u64) -> Result<LoadedModel> {
    if kind == HeadKind::None {
        return Err(Error::invalid("choose a head kind to train"));
    }
    let mut m = base.clone();
    if m.head.is_some() && m.config.head == kind && m.config.labels == labels {
        return Ok(m);
    }
    let cfg = EncoderConfig { head: kind, labels: labels.to_vec(), ..m.config.clone() };
    let fresh = random_model(EncoderConfig { num_layers: 0, ..cfg.clone() }, seed)?;
    m.head = fresh.head;
    if m.weights.pooler.is_none() {
        m.weights.pooler = fresh.weights.pooler;
    }
    m.config = cfg;
    Ok(m)
}

/// Replace the trainable tensors with variables; returns them for the optimisers:
/// (head and pooler, encoder layers and embeddings).
fn make_trainable(model: &mut LoadedModel, freeze: Freeze) -> Result<(Vec<Var>, Vec<Var>)> {
    fn var(vars: &mut Vec<Var>, t: &mut Tensor) -> Result<()> {
        let v = Var::from_tensor(t)?;
        *t = v.as_tensor().clone();
        vars.push(v);
        Ok(())
    }
    fn dense(vars: &mut Vec<Var>, d: &mut Dense) -> Result<()> {
        var(vars, &mut d.weight)?;
        var(vars, &mut d.bias)
    }
    let mut vars = Vec::new();
    match model.head.as_mut().ok_or_else(|| Error::invalid("no head to train"))? {
        HeadWeights::PooledLinear { classifier } => {
            dense(&mut vars, classifier)?;
            if let Some(p) = model.weights.pooler.as_mut() {
                dense(&mut vars, p)?;
            }
        }
        HeadWeights::RobertaClassifier { dense: d, out_proj } => {
            dense(&mut vars, d)?;
            dense(&mut vars, out_proj)?;
        }
        HeadWeights::DistilClassifier { pre_classifier, classifier } => {
            dense(&mut vars, pre_classifier)?;
            dense(&mut vars, classifier)?;
        }
    }
    let head_vars = std::mem::take(&mut vars);
    let n_layers = model.weights.layers.len();
    let top = trained_layers(freeze, n_layers);
    for layer in model.weights.layers.iter_mut().skip(n_layers - top) {
        for d in [
            &mut layer.query,
            &mut layer.key,
            &mut layer.value,
            &mut layer.attn_out,
            &mut layer.ffn_in,
            &mut layer.ffn_out,
        ] {
            dense(&mut vars, d)?;
        }
        for n in [&mut layer.attn_norm, &mut layer.ffn_norm] {
            var(&mut vars, &mut n.weight)?;
            var(&mut vars, &mut n.bias)?;
        }
    }
    if freeze == Freeze::All {
        let w = &mut model.weights;
        var(&mut vars, &mut w.word_embeddings)?;
        var(&mut vars, &mut w.position_embeddings)?;
        if let Some(t) = w.token_type_embeddings.as_mut() {
            var(&mut vars, t)?;
        }
        var(&mut vars, &mut w.embedding_norm.weight)?;
        var(&mut vars, &mut w.embedding_norm.bias)?;
    }
    Ok((head_vars, vars))
}

/// How many of the top layers `freeze` trains.
fn trained_layers(freeze: Freeze, n_layers: usize) -> usize {
    match freeze {
        Freeze::HeadOnly => 0,
        Freeze::TopLayers(n) => n.min(n_layers),
        Freeze::All => n_layers,
    }
}

/// What the frozen part of the encoder gives each input, computed once per set.
enum Frozen {
    /// Head only: first-token states after every layer, `[n_inputs, hidden]`.
    FirstTokens(Tensor),
    /// Top N: each input's states after the frozen lower layers, real tokens only,
    /// `len x hidden` in f16.
    Lower(Vec<Vec<half::f16>>),
    /// Everything trains: nothing is frozen.
    Nothing,
}

/// A set's frozen part, indexed by its inputs in one flat list (example by example).
struct Prepared {
    /// First input of each example in the flat list.
    starts: Vec<usize>,
    frozen: Frozen,
}

/// Inputs per batch of the frozen pass (the inference path's batching).
const CACHE_BATCH: usize = 32;

/// The frozen pass over one set while it is being computed, a few batches at a time.
struct SetCache {
    starts: Vec<usize>,
    lens: Vec<usize>,
    /// Head only: first-token rows, `n_inputs x hidden`.
    rows: Vec<f32>,
    /// Top N: each input's real-token states after the lower layers.
    states: Vec<Vec<half::f16>>,
}

impl SetCache {
    fn new(set: &[TrainExample]) -> SetCache {
        let mut starts = Vec::with_capacity(set.len());
        let mut at = 0;
        for e in set {
            starts.push(at);
            at += e.inputs.len();
        }
        let lens = set.iter().flat_map(|e| e.inputs.iter().map(Encoded::len)).collect();
        SetCache { starts, lens, rows: Vec::new(), states: Vec::new() }
    }
}

/// Inputs of examples `idx` (in that order) as rows of the set's flat input list.
fn flat_rows(set: &[TrainExample], p: &Prepared, idx: &[usize]) -> Vec<usize> {
    idx.iter().flat_map(|&i| p.starts[i]..p.starts[i] + set[i].inputs.len()).collect()
}

/// Logits `[n_inputs, n_out]` of the inputs of examples `idx` (in that order), through the
/// trainable part of `model`: the head alone, or the top layers then the head.
fn logits_of(
    model: &LoadedModel,
    tok: &TextTokenizer,
    set: &[TrainExample],
    p: &Prepared,
    idx: &[usize],
    lower: usize,
) -> Result<Tensor> {
    let flat = flat_rows(set, p, idx);
    let cfg = &model.config;
    let cls = match &p.frozen {
        Frozen::FirstTokens(f) => {
            let rows: Vec<u32> = flat.iter().map(|&r| r as u32).collect();
            f.index_select(&Tensor::new(rows.as_slice(), &Device::Cpu)?, 0)?
        }
        Frozen::Lower(states) => {
            let h = cfg.hidden_size;
            let s = flat.iter().map(|&r| states[r].len() / h).max().unwrap_or(0);
            let mut x = vec![0f32; flat.len() * s * h];
            let mut mask = vec![0u32; flat.len() * s];
            for (k, &r) in flat.iter().enumerate() {
                let len = states[r].len() / h;
                for (dst, src) in x[k * s * h..].iter_mut().zip(&states[r]) {
                    *dst = src.to_f32();
                }
                mask[k * s..k * s + len].fill(1);
            }
            let x = Tensor::from_vec(x, (flat.len(), s, h), &Device::Cpu)?;
            let top = layers_forward(cfg, &model.weights.layers[lower..], x, &mask, true)?;
            top.i((.., 0, ..))?.contiguous()?
        }
        Frozen::Nothing => {
            let items: Vec<&Encoded> = idx.iter().flat_map(|&i| set[i].inputs.iter()).collect();
            let h = forward(cfg, &model.weights, &tok.batch(&items), cfg.num_layers)?;
            h.i((.., 0, ..))?.contiguous()?
        }
    };
    head_forward(model.head.as_ref().expect("head"), model.weights.pooler.as_ref(), &cls)
}

/// Summed cross-entropy, each example's term times its gold class's weight (`weights`:
/// one per label; empty = all 1, as for multiple choice), and the predicted index of each of
/// `examples`, given logits of their inputs (in example order, inputs concatenated). A
/// multiple-choice example's softmax runs over its own inputs, however many it has; the
/// first of equal scores is the prediction.
fn loss_and_predictions(
    examples: &[&TrainExample],
    logits: &Tensor,
    multiple_choice: bool,
    weights: &[f64],
) -> Result<(Tensor, Vec<usize>)> {
    let mut losses = Vec::new();
    let mut predicted = Vec::with_capacity(examples.len());
    let mut row = 0;
    let values: Vec<Vec<f32>> = logits.to_vec2()?;
    for ex in examples {
        let (scores, v) = if multiple_choice {
            let n = ex.inputs.len();
            let s = logits.narrow(0, row, n)?.flatten_all()?;
            let v: Vec<f32> = values[row..row + n].iter().map(|r| r[0]).collect();
            row += n;
            (s, v)
        } else {
            let s = logits.i(row)?;
            let v = values[row].clone();
            row += 1;
            (s, v)
        };
        let logp = candle_nn::ops::log_softmax(&scores, D::Minus1)?;
        let term = logp.i(ex.gold)?.neg()?;
        losses.push(match weights.get(ex.gold) {
            Some(&w) if w != 1.0 => (term * w)?,
            _ => term,
        });
        predicted.push(v.iter().enumerate().fold(0, |b, (i, x)| if *x > v[b] { i } else { b }));
    }
    Ok((Tensor::stack(&losses, 0)?.sum_all()?, predicted))
}

/// Contiguous shards of `idx` (sorted by input length first, so a shard pads little), at
/// most `n` of them, sizes differing by at most one.
fn shards(set: &[TrainExample], idx: &[usize], n: usize) -> Vec<Vec<usize>> {
    let mut sorted = idx.to_vec();
    sorted.sort_by_key(|&i| set[i].inputs.iter().map(Encoded::len).max().unwrap_or(0));
    let n = n.clamp(1, sorted.len().max(1));
    let (q, r) = (sorted.len() / n, sorted.len() % n);
    let mut out = Vec::with_capacity(n);
    let mut at = 0;
    for k in 0..n {
        let take = q + usize::from(k < r);
        out.push(sorted[at..at + take].to_vec());
        at += take;
    }
    out.retain(|s| !s.is_empty());
    out
}

/// Seconds on a monotonic clock, natively (the page passes the browser's clock instead:
/// `std::time::Instant` does not exist in wasm).
#[cfg(not(target_arch = "wasm32"))]
pub fn native_clock() -> f64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64()
}

/// Train a head (and optionally layers) on `train`, pick the epoch with the best dev metric
/// ([`TrainOptions::select_by`]) on `dev`. `kind`: `MultipleChoice` for MCQA, `SequenceClassification` with `labels`
/// otherwise. `progress` sees each epoch's log line.
#[cfg(not(target_arch = "wasm32"))]
pub fn train(
    base: &TextModel,
    kind: HeadKind,
    labels: &[String],
    train_set: &[TrainExample],
    dev_set: &[TrainExample],
    opts: &TrainOptions,
    progress: &mut dyn FnMut(&EpochLog),
) -> Result<TrainResult> {
    train_with_events(base, kind, labels, train_set, dev_set, opts, None, &mut |e| {
        if let TrainEvent::Epoch(log) = e {
            progress(log)
        }
    })
}

/// [`train`], reporting the cache, progress inside epochs (with examples/s) and epochs:
/// the [`Trainer`]'s steps run to the end, the frozen pass on the CPU encoder, the trained
/// part with candle's autograd or, given `gpu`, on that GPU ([`Trainer::train_on_gpu`]).
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::too_many_arguments)]
pub fn train_with_events(
    base: &TextModel,
    kind: HeadKind,
    labels: &[String],
    train_set: &[TrainExample],
    dev_set: &[TrainExample],
    opts: &TrainOptions,
    gpu: Option<crate::gpu::context::GpuContext>,
    progress: &mut dyn FnMut(TrainEvent),
) -> Result<TrainResult> {
    let mut trainer =
        Trainer::new(base, kind, labels, train_set.to_vec(), dev_set.to_vec(), opts.clone(), native_clock)?;
    super::embed::run_ready(trainer.encode_batches(&base.encoder, usize::MAX))?;
    if trainer.lower > 0 {
        progress(TrainEvent::Cached { inputs: trainer.inputs().1, seconds: trainer.cache_seconds });
    }
    if let Some(ctx) = gpu {
        trainer.train_on_gpu(ctx)?;
    }
    while pollster::block_on(trainer.run_epoch(progress))?.is_some() {}
    pollster::block_on(trainer.finish())
}

/// Training in steps, so a front end can report progress and stop between them (the page's
/// worker must return to its message loop): [`Trainer::encode_batches`] until the frozen
/// part is computed for every input, then [`Trainer::run_epoch`] until it returns `None`
/// (the epochs are done, or the dev metric stopped improving), then [`Trainer::finish`].
/// [`train`] runs the same steps in one call.
pub struct Trainer {
    multiple_choice: bool,
    opts: TrainOptions,
    /// The head's labels (empty for multiple choice) and their loss weights.
    labels: Vec<String>,
    class_weights: Vec<f64>,
    /// Steps to record for a trace, and those recorded.
    trace_steps: usize,
    step_log: Vec<StepRecord>,
    model: LoadedModel,
    head_vars: Vec<Var>,
    layer_vars: Vec<Var>,
    tokenizer: TextTokenizer,
    train_set: Vec<TrainExample>,
    dev_set: Vec<TrainExample>,
    /// Layers that stay frozen (computed once).
    lower: usize,
    /// The frozen pass under way: (train, dev), batches still to run as (set, inputs).
    caches: [SetCache; 2],
    pending: std::collections::VecDeque<(usize, Vec<usize>)>,
    inputs_done: usize,
    inputs_total: usize,
    cache_started: Option<f64>,
    cache_seconds: f64,
    prepared: Option<[Prepared; 2]>,
    threads: usize,
    clock: fn() -> f64,
    rng: ChaCha8Rng,
    order: Vec<usize>,
    curve: Vec<EpochLog>,
    best: Option<(f64, usize, Vec<Tensor>)>,
    /// AdamW of the head, and of the layers when they train.
    optimisers: Option<(AdamW, Option<AdamW>)>,
    step: usize,
    since_best: usize,
    stopped: bool,
    /// The GPU engine, when asked for ([`Trainer::train_on_gpu`]).
    gpu: Option<GpuEngine>,
}

impl Trainer {
    /// A new head of `kind` on `base` (with `labels` for classification) and the trainable
    /// variables `opts.freeze` asks for; nothing is computed yet. `clock` gives seconds (for
    /// the examples/s figures only).
    pub fn new(
        base: &TextModel,
        kind: HeadKind,
        labels: &[String],
        train_set: Vec<TrainExample>,
        dev_set: Vec<TrainExample>,
        opts: TrainOptions,
        clock: fn() -> f64,
    ) -> Result<Trainer> {
        if train_set.is_empty() || dev_set.is_empty() {
            return Err(Error::invalid("training needs non-empty train and dev sets"));
        }
        if let Some(e) = train_set.iter().chain(&dev_set).find(|e| e.inputs.is_empty()) {
            return Err(Error::invalid(format!("example {} has no input", e.id)));
        }
        let mut opts = opts;
        check_options(&opts)?;
        let multiple_choice = kind == HeadKind::MultipleChoice;
        let select_by = *opts.select_by.get_or_insert(SelectBy::for_head(kind));
        let weighting = *opts.class_weights.get_or_insert(if multiple_choice {
            ClassWeights::Equal
        } else {
            ClassWeights::Balanced
        });
        if multiple_choice && (select_by == SelectBy::MacroF1 || weighting == ClassWeights::Balanced) {
            return Err(Error::invalid(
                "multiple choice has no classes (the options differ per question): use --select-by accuracy or loss and --class-weights none",
            ));
        }
        let class_weights = if multiple_choice {
            Vec::new()
        } else {
            weighting.weights(labels.len(), train_set.iter().map(|e| e.gold))
        };
        let mut model = with_new_head(&base.encoder.model, kind, labels, opts.seed)?;
        let n_layers = model.config.num_layers;
        if let Freeze::TopLayers(n) = opts.freeze {
            if n == 0 || n > n_layers {
                return Err(Error::invalid(format!(
                    "--freeze top:{n}: this model has {n_layers} layers (top:1 to top:{n_layers}; head or all otherwise)"
                )));
            }
        }
        let lower = n_layers - trained_layers(opts.freeze, n_layers);
        let (head_vars, layer_vars) = make_trainable(&mut model, opts.freeze)?;
        let caches = [SetCache::new(&train_set), SetCache::new(&dev_set)];
        // The frozen pass in the order the one-call trainer ran it: the train set's length
        // batches, then the dev set's.
        let mut pending = std::collections::VecDeque::new();
        if lower > 0 {
            for (s, c) in caches.iter().enumerate() {
                pending.extend(length_batches(&c.lens, CACHE_BATCH).into_iter().map(|b| (s, b)));
            }
        }
        let inputs_total = caches.iter().map(|c| c.lens.len()).sum();
        let order = (0..train_set.len()).collect();
        Ok(Trainer {
            multiple_choice,
            rng: ChaCha8Rng::seed_from_u64(opts.seed),
            opts,
            labels: labels.to_vec(),
            class_weights,
            trace_steps: 0,
            step_log: Vec::new(),
            model,
            head_vars,
            layer_vars,
            tokenizer: base.tokenizer.clone(),
            train_set,
            dev_set,
            lower,
            caches,
            pending,
            inputs_done: 0,
            inputs_total,
            cache_started: None,
            cache_seconds: 0.0,
            prepared: None,
            threads: super::cpu::worker_threads().max(1),
            clock,
            order,
            curve: Vec::new(),
            best: None,
            optimisers: None,
            step: 0,
            since_best: 0,
            stopped: false,
            gpu: None,
        })
    }

    /// Inputs whose frozen part is computed, of all (train and dev).
    pub fn inputs(&self) -> (usize, usize) {
        if self.lower == 0 {
            (self.inputs_total, self.inputs_total)
        } else {
            (self.inputs_done, self.inputs_total)
        }
    }

    /// Seconds the frozen pass took.
    pub fn cache_seconds(&self) -> f64 {
        self.cache_seconds
    }

    /// Whether the frozen layers run at all (not with `Freeze::All`).
    pub fn has_frozen_pass(&self) -> bool {
        self.lower > 0
    }

    /// Runs up to `max_batches` batches of the frozen pass on `encoder` (the base model's:
    /// the CPU path, or the GPU); true once every input is done.
    pub async fn encode_batches<E: super::encoder::Encoder>(
        &mut self,
        encoder: &E,
        max_batches: usize,
    ) -> Result<bool> {
        if self.prepared.is_some() {
            return Ok(true);
        }
        let started = *self.cache_started.get_or_insert_with(self.clock);
        let h = self.model.config.hidden_size;
        let num_layers = self.model.config.num_layers;
        for _ in 0..max_batches {
            let Some((s, group)) = self.pending.pop_front() else { break };
            let set = if s == 0 { &self.train_set } else { &self.dev_set };
            let cache = &mut self.caches[s];
            let inputs: Vec<&Encoded> = set.iter().flat_map(|e| e.inputs.iter()).collect();
            let items: Vec<&Encoded> = group.iter().map(|&i| inputs[i]).collect();
            let batch = self.tokenizer.batch(&items);
            if self.lower >= num_layers {
                let states = encoder.encode(&batch, num_layers).await?;
                cache.rows.resize(cache.lens.len() * h, 0.0);
                for (k, &i) in group.iter().enumerate() {
                    cache.rows[i * h..(i + 1) * h].copy_from_slice(states.token(k, 0));
                }
            } else {
                let hidden = encoder.encode(&batch, self.lower).await?;
                cache.states.resize(cache.lens.len(), Vec::new());
                for (k, &i) in group.iter().enumerate() {
                    let row = &hidden.data[k * hidden.seq_len * h..(k * hidden.seq_len + cache.lens[i]) * h];
                    cache.states[i] = row.iter().map(|&x| half::f16::from_f32(x)).collect();
                }
            }
            self.inputs_done += group.len();
        }
        if !self.pending.is_empty() {
            return Ok(false);
        }
        let prepared = |c: &mut SetCache| -> Result<Prepared> {
            let frozen = if self.lower == 0 {
                Frozen::Nothing
            } else if self.lower >= num_layers {
                let n = c.lens.len();
                Frozen::FirstTokens(Tensor::from_vec(std::mem::take(&mut c.rows), (n, h), &Device::Cpu)?)
            } else {
                Frozen::Lower(std::mem::take(&mut c.states))
            };
            Ok(Prepared { starts: std::mem::take(&mut c.starts), frozen })
        };
        let [t, d] = &mut self.caches;
        self.prepared = Some([prepared(t)?, prepared(d)?]);
        self.cache_seconds = (self.clock)() - started;
        Ok(true)
    }

    /// The epochs logged so far.
    pub fn curve(&self) -> &[EpochLog] {
        &self.curve
    }

    /// Training examples and dev examples.
    pub fn sizes(&self) -> (usize, usize) {
        (self.train_set.len(), self.dev_set.len())
    }

    /// Runs the trained layers and the head on the GPU (`crate::gpu::train::GpuTrainer`:
    /// WGSL forward and backward kernels, AdamW on the device) instead of candle's autograd.
    /// Only `top:N`, whose lower layers come from this trainer's frozen pass.
    pub fn train_on_gpu(&mut self, ctx: crate::gpu::context::GpuContext) -> Result<()> {
        let n_layers = self.model.config.num_layers;
        if !matches!(self.opts.freeze, Freeze::TopLayers(n) if n > 0) || self.lower == 0 || self.lower >= n_layers {
            return Err(Error::invalid(format!(
                "--backend gpu trains the top layers: use it with --freeze top:N (N from 1 to {}), not {:?}",
                n_layers - 1,
                self.opts.freeze
            )));
        }
        self.gpu = Some(GpuEngine::Ready(Box::new(ctx)));
        Ok(())
    }

    /// One epoch: the optimiser steps over the shuffled training set, then the dev
    /// figures (accuracy, loss; macro-F1, per-class scores and the confusion matrix for
    /// classification). `None` once training is over (all epochs run, or `patience` epochs without
    /// a better dev metric); an error before the frozen pass is complete. Async only for
    /// the GPU engine's read-backs; on the CPU it never waits.
    pub async fn run_epoch(&mut self, progress: &mut dyn FnMut(TrainEvent<'_>)) -> Result<Option<EpochLog>> {
        let epochs = self.opts.epochs;
        if self.stopped || self.curve.len() >= epochs {
            return Ok(None);
        }
        if self.prepared.is_none() {
            return Err(Error::invalid("the frozen layers are not computed yet for every input"));
        }
        let opts = self.opts.clone();
        let per_step = opts.batch_size * opts.grad_accum;
        let (total, warmup) = schedule(self.train_set.len(), &opts);
        self.start_engine()?;
        let epoch = self.curve.len() + 1;
        self.order.shuffle(&mut self.rng);
        let order = self.order.clone();
        let mut loss_sum = 0.0;
        let mut lr = opts.learning_rate;
        let clock = self.clock;
        let started = clock();
        let mut last_report = started;
        let mut done = 0;
        for chunk in order.chunks(per_step) {
            lr = scheduled_lr(opts.learning_rate, self.step, warmup, total);
            let layer_lr = scheduled_lr(opts.layer_learning_rate, self.step, warmup, total);
            let step_loss = match &mut self.gpu {
                Some(GpuEngine::Training(gpu)) => {
                    let [train_p, _] = self.prepared.as_ref().expect("checked above");
                    let cached = crate::gpu::train::Cached::new(&self.train_set, lower_states_of(train_p))?;
                    let mut sum = 0.0;
                    for micro in chunk.chunks(opts.batch_size) {
                        let examples: Vec<(usize, usize, f32)> = micro
                            .iter()
                            .map(|&i| {
                                let e = &self.train_set[i];
                                (e.inputs.len(), e.gold, self.class_weights.get(e.gold).copied().unwrap_or(1.0) as f32)
                            })
                            .collect();
                        let losses = gpu.accumulate(&cached.inputs(micro), &examples, chunk.len()).await?;
                        sum += losses.iter().map(|&l| l as f64).sum::<f64>();
                    }
                    gpu.step(lr, layer_lr);
                    sum
                }
                _ => self.cpu_step(chunk, lr, layer_lr)?,
            };
            loss_sum += step_loss;
            if self.step_log.len() < self.trace_steps {
                self.step_log.push(StepRecord {
                    step: self.step,
                    epoch,
                    examples: chunk.to_vec(),
                    lr,
                    layer_lr,
                    loss: step_loss / chunk.len() as f64,
                });
            }
            self.step += 1;
            done += chunk.len();
            if clock() - last_report >= 10.0 {
                last_report = clock();
                let rate = done as f64 / (last_report - started).max(1e-9);
                progress(TrainEvent::Step {
                    epoch,
                    examples: done,
                    of: self.train_set.len(),
                    examples_per_second: rate,
                });
            }
        }
        let train_seconds = clock() - started;
        let (predicted, dev_loss) = match &self.gpu {
            Some(GpuEngine::Training(gpu)) => {
                let [_, dev_p] = self.prepared.as_ref().expect("checked above");
                let cached = crate::gpu::train::Cached::new(&self.dev_set, lower_states_of(dev_p))?;
                crate::gpu::train::dev_outcome(gpu, &cached, opts.batch_size, self.multiple_choice, &self.class_weights)
                    .await?
            }
            _ => self.cpu_dev_outcome()?,
        };
        let dev = self.dev_scores(&predicted, dev_loss);
        let log = EpochLog {
            epoch,
            steps: self.step,
            train_loss: loss_sum / self.train_set.len() as f64,
            dev_accuracy: dev.accuracy,
            dev_macro_f1: dev.macro_f1,
            dev_loss: dev.loss,
            dev_metric: dev.metric,
            dev_classes: dev.classes,
            dev_confusion: dev.confusion,
            learning_rate: lr,
            train_seconds,
            examples_per_second: self.train_set.len() as f64 / train_seconds.max(1e-9),
        };
        progress(TrainEvent::Epoch(&log));
        self.curve.push(log.clone());
        let select_by = self.select_by();
        if self.best.as_ref().is_none_or(|(best, _, _)| select_by.better(log.dev_metric, *best)) {
            let snapshot = match &self.gpu {
                Some(GpuEngine::Training(gpu)) => {
                    gpu.keep_best();
                    Vec::new()
                }
                _ => self.vars().iter().map(|v| v.as_tensor().copy()).collect::<candle_core::Result<Vec<_>>>()?,
            };
            self.best = Some((log.dev_metric, epoch, snapshot));
            self.since_best = 0;
        } else {
            self.since_best += 1;
            if self.since_best >= self.opts.patience {
                self.stopped = true;
            }
        }
        Ok(Some(log))
    }

    /// The head's and the trained layers' variables, in that order.
    fn vars(&self) -> Vec<Var> {
        self.head_vars.iter().chain(&self.layer_vars).cloned().collect()
    }

    /// Before the first epoch: candle's AdamW (they keep their moments across epochs), or
    /// the GPU trainer with the model's weights uploaded.
    fn start_engine(&mut self) -> Result<()> {
        let opts = &self.opts;
        if let Some(GpuEngine::Ready(_)) = &self.gpu {
            let Some(GpuEngine::Ready(ctx)) = self.gpu.take() else { unreachable!("matched above") };
            let adamw =
                |lr: f64| crate::gpu::ops::AdamWConfig { lr, weight_decay: opts.weight_decay, ..Default::default() };
            let trainer = crate::gpu::train::GpuTrainer::new(
                *ctx,
                &self.model,
                self.lower,
                adamw(opts.learning_rate),
                adamw(opts.layer_learning_rate),
            )?;
            self.gpu = Some(GpuEngine::Training(Box::new(trainer)));
        }
        if self.gpu.is_none() && self.optimisers.is_none() {
            let params = |lr: f64| ParamsAdamW { lr, weight_decay: opts.weight_decay, ..Default::default() };
            let head = AdamW::new(self.head_vars.clone(), params(opts.learning_rate))?;
            let layers = if self.layer_vars.is_empty() {
                None
            } else {
                Some(AdamW::new(self.layer_vars.clone(), params(opts.layer_learning_rate)))
            }
            .transpose()?;
            self.optimisers = Some((head, layers));
        }
        Ok(())
    }

    /// One optimiser step with candle's autograd over the examples `chunk`, one shard per
    /// thread, each with its own forward and backward pass; the loss is scaled so the summed
    /// gradient is the mean over the whole step. Returns the summed loss.
    fn cpu_step(&mut self, chunk: &[usize], lr: f64, layer_lr: f64) -> Result<f64> {
        use rayon::prelude::*;
        let [train_p, _] = self.prepared.as_ref().expect("the frozen pass is done");
        let (model, tok, lower, threads) = (&self.model, &self.tokenizer, self.lower, self.threads);
        let (train_set, multiple_choice) = (&self.train_set, self.multiple_choice);
        let weights = self.class_weights.as_slice();
        let vars = self.vars();
        let mut loss_sum = 0.0;
        let mut acc: Option<candle_core::backprop::GradStore> = None;
        for micro in chunk.chunks(self.opts.batch_size) {
            let parts = shards(train_set, micro, threads);
            let results = parts
                .par_iter()
                .map(|part| -> Result<(candle_core::backprop::GradStore, f64)> {
                    let logits = logits_of(model, tok, train_set, train_p, part, lower)?;
                    let exs: Vec<&TrainExample> = part.iter().map(|&i| &train_set[i]).collect();
                    let (loss, _) = loss_and_predictions(&exs, &logits, multiple_choice, weights)?;
                    let value = loss.to_scalar::<f32>()? as f64;
                    Ok(((loss / chunk.len() as f64)?.backward()?, value))
                })
                .collect::<Vec<_>>();
            for r in results {
                let (grads, value) = r?;
                loss_sum += value;
                acc = Some(match acc {
                    None => grads,
                    Some(mut a) => {
                        for v in &vars {
                            if let Some(g) = grads.get(v.as_tensor()) {
                                let sum = match a.get(v.as_tensor()) {
                                    Some(prev) => (prev + g)?,
                                    None => g.clone(),
                                };
                                a.insert(v.as_tensor(), sum);
                            }
                        }
                        a
                    }
                });
            }
        }
        let grads = acc.expect("non-empty chunk");
        let (head_opt, layer_opt) = self.optimisers.as_mut().expect("made by start_engine");
        head_opt.set_learning_rate(lr);
        head_opt.step(&grads)?;
        if let Some(o) = layer_opt.as_mut() {
            o.set_learning_rate(layer_lr);
            o.step(&grads)?;
        }
        Ok(loss_sum)
    }

    /// Each dev example's predicted index with the current weights (no gradients kept) and
    /// the summed (weighted) dev loss; shards in parallel.
    fn cpu_dev_outcome(&self) -> Result<(Vec<usize>, f64)> {
        use rayon::prelude::*;
        let [_, dev_p] = self.prepared.as_ref().expect("the frozen pass is done");
        // The fields the threads need, not `self`: the GPU engine's handles are not `Sync` in wasm.
        let (model, tok, dev_set, lower, multiple_choice) =
            (&self.model, &self.tokenizer, &self.dev_set, self.lower, self.multiple_choice);
        let weights = self.class_weights.as_slice();
        let dev_idx: Vec<usize> = (0..dev_set.len()).collect();
        let dev_parts = shards(dev_set, &dev_idx, dev_set.len().div_ceil(self.opts.batch_size.max(1)));
        let parts = dev_parts
            .par_iter()
            .map(|part| -> Result<(Vec<usize>, f64)> {
                let logits = logits_of(model, tok, dev_set, dev_p, part, lower)?.detach();
                let exs: Vec<&TrainExample> = part.iter().map(|&i| &dev_set[i]).collect();
                let (loss, predicted) = loss_and_predictions(&exs, &logits, multiple_choice, weights)?;
                Ok((predicted, loss.to_scalar::<f32>()? as f64))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut predicted = vec![0; dev_set.len()];
        let mut loss = 0.0;
        for (part, (p, l)) in dev_parts.iter().zip(parts) {
            for (&i, p) in part.iter().zip(p) {
                predicted[i] = p;
            }
            loss += l;
        }
        Ok((predicted, loss))
    }

    /// An epoch's dev figures from each dev example's predicted index and the summed loss:
    /// (accuracy, macro-F1, per-class scores, confusion matrix, mean loss, selecting metric).
    fn dev_scores(&self, predicted: &[usize], loss_sum: f64) -> DevScores {
        let n = self.dev_set.len();
        let correct = self.dev_set.iter().zip(predicted).filter(|(e, &p)| e.gold == p).count();
        let accuracy = correct as f64 / n as f64;
        let loss = loss_sum / n as f64;
        let confusion = (!self.multiple_choice)
            .then(|| Confusion::of(self.labels.len(), self.dev_set.iter().zip(predicted).map(|(e, &p)| (e.gold, p))));
        let macro_f1 = confusion.as_ref().map(Confusion::macro_f1);
        let metric = match self.select_by() {
            SelectBy::Accuracy => accuracy,
            SelectBy::MacroF1 => macro_f1.unwrap_or(f64::NAN),
            SelectBy::Loss => loss,
        };
        DevScores {
            accuracy,
            macro_f1,
            classes: confusion.as_ref().map(|c| c.per_class(&self.labels)),
            confusion: confusion.as_ref().map(Confusion::rows),
            loss,
            metric,
        }
    }

    /// The metric that picks the best epoch (resolved in [`Trainer::new`]).
    pub fn select_by(&self) -> SelectBy {
        self.opts.select_by.expect("resolved in Trainer::new")
    }

    /// The options as training uses them (defaults resolved for the task).
    pub fn options(&self) -> &TrainOptions {
        &self.opts
    }

    /// One weight per label (empty for multiple choice).
    pub fn class_weights(&self) -> &[f64] {
        &self.class_weights
    }

    /// Records the first `steps` optimiser steps (examples, learning rates, loss) for a
    /// trace that a reference implementation replays (`medrank train --trace`).
    pub fn trace_steps(&mut self, steps: usize) {
        self.trace_steps = steps;
    }

    /// The training and dev examples (token ids and gold), as the trainer holds them.
    pub fn examples(&self) -> (&[TrainExample], &[TrainExample]) {
        (&self.train_set, &self.dev_set)
    }

    /// The model's files with the weights it holds now (before the first epoch: the
    /// starting point, new head included): `config.json` and `model.safetensors`.
    pub fn current_files(&self) -> Result<Vec<(String, Vec<u8>)>> {
        let mut model = self.model.clone();
        model.weights = detach_weights(&model.weights)?;
        if let Some(h) = model.head.as_mut() {
            *h = detach_head(h)?;
        }
        Ok(vec![
            ("config.json".into(), model.config.to_json().into_bytes()),
            ("model.safetensors".into(), super::load::to_safetensors(&model)?),
        ])
    }

    /// The best epoch's weights as a plain model (no variables), with the curve.
    pub async fn finish(self) -> Result<TrainResult> {
        let select_by = self.select_by();
        let (best_dev_metric, best_epoch, snapshot) =
            self.best.ok_or_else(|| Error::invalid("no epoch was trained"))?;
        let picked = &self.curve[best_epoch - 1];
        let best_dev_accuracy = picked.dev_accuracy;
        let confusion = picked.dev_confusion.as_ref().map(|rows| Confusion::of(rows.len(), rows_to_pairs(rows)));
        let dev_majority_rate = confusion.as_ref().map(Confusion::majority_rate);
        let mut warnings = Vec::new();
        if let Some(k) = confusion.as_ref().and_then(Confusion::single_predicted_class) {
            warnings.push(format!(
                "the picked epoch {best_epoch} predicts `{}` for every one of the {} dev examples (dev accuracy {best_dev_accuracy:.4} = the majority-class rate {:.4}): this evaluator cannot tell the classes apart, so every system and control would tie. Try --freeze top:N, more epochs or more training data",
                self.labels[k],
                self.dev_set.len(),
                dev_majority_rate.unwrap_or(f64::NAN)
            ));
        }
        let steps = self.step_log;
        let (model, threads) = match &self.gpu {
            Some(GpuEngine::Training(gpu)) => {
                gpu.restore_best();
                (gpu.to_model(&self.model).await?, 0)
            }
            _ => {
                for (v, t) in self.head_vars.iter().chain(&self.layer_vars).zip(snapshot) {
                    v.set(&t)?;
                }
                // Detach: the saved model holds plain tensors, not variables.
                let mut model = self.model.clone();
                model.weights = detach_weights(&model.weights)?;
                if let Some(h) = model.head.as_mut() {
                    *h = detach_head(h)?;
                }
                (model, self.threads)
            }
        };
        let cut = |set: &[TrainExample]| set.iter().filter(|e| e.inputs.iter().any(|i| i.tokens_cut() > 0)).count();
        Ok(TrainResult {
            model,
            curve: self.curve,
            best_epoch,
            best_dev_accuracy,
            select_by,
            best_dev_metric,
            dev_majority_rate,
            warnings,
            steps,
            class_weights: self.class_weights,
            trained_layers: self.model.config.num_layers - self.lower,
            truncated: (cut(&self.train_set), cut(&self.dev_set)),
            cache_seconds: self.cache_seconds,
            threads,
            data: None,
        })
    }
}

/// The (gold, predicted) pairs a confusion matrix counts, one per example.
fn rows_to_pairs(rows: &[Vec<u64>]) -> impl Iterator<Item = (usize, usize)> + '_ {
    rows.iter()
        .enumerate()
        .flat_map(|(g, row)| row.iter().enumerate().flat_map(move |(p, &c)| std::iter::repeat_n((g, p), c as usize)))
}

/// Options that would train nothing, train on numbers that are not numbers, or exceed
/// their bounds (`crate::bounds`: the page sends epochs, batch size and patience too) are
/// refused, naming the flag (never coerced to something else). A rate or decay above 1
/// makes AdamW's steps (about the rate) and decay (rate x decay) larger than the weights.
fn check_options(o: &TrainOptions) -> Result<()> {
    use crate::bounds::{check_count, MAX_BATCH, MAX_EPOCHS, MAX_GRAD_ACCUM};
    check_count("--epochs", o.epochs, 1, MAX_EPOCHS).map_err(Error::invalid)?;
    check_count("--batch-size", o.batch_size, 1, MAX_BATCH).map_err(Error::invalid)?;
    check_count("--grad-accum", o.grad_accum, 1, MAX_GRAD_ACCUM).map_err(Error::invalid)?;
    check_count("--patience", o.patience, 1, MAX_EPOCHS).map_err(Error::invalid)?;
    for (v, flag) in [(o.learning_rate, "--lr"), (o.layer_learning_rate, "--layer-lr")] {
        if !(v.is_finite() && v > 0.0 && v <= 1.0) {
            return Err(Error::invalid(format!("{flag} {v}: expected a finite number above 0, at most 1")));
        }
    }
    if !(0.0..=1.0).contains(&o.weight_decay) {
        return Err(Error::invalid(format!("--weight-decay {}: expected a number from 0 to 1", o.weight_decay)));
    }
    if !(0.0..=1.0).contains(&o.warmup_ratio) {
        return Err(Error::invalid(format!("--warmup {}: expected a fraction from 0 to 1", o.warmup_ratio)));
    }
    Ok(())
}

/// Where the trained part runs when it is not candle's autograd.
enum GpuEngine {
    /// Asked for; the trainer is made at the first epoch (the frozen pass comes first).
    Ready(Box<crate::gpu::context::GpuContext>),
    Training(Box<crate::gpu::train::GpuTrainer>),
}

/// The lower layers' states of a prepared set (`top:N`).
fn lower_states_of(p: &Prepared) -> &[Vec<half::f16>] {
    match &p.frozen {
        Frozen::Lower(states) => states,
        _ => &[],
    }
}

fn detach_dense(d: &Dense) -> Result<Dense> {
    Ok(Dense { weight: d.weight.copy()?.detach(), bias: d.bias.copy()?.detach() })
}

fn detach_head(h: &HeadWeights) -> Result<HeadWeights> {
    Ok(match h {
        HeadWeights::PooledLinear { classifier } => HeadWeights::PooledLinear { classifier: detach_dense(classifier)? },
        HeadWeights::RobertaClassifier { dense, out_proj } => {
            HeadWeights::RobertaClassifier { dense: detach_dense(dense)?, out_proj: detach_dense(out_proj)? }
        }
        HeadWeights::DistilClassifier { pre_classifier, classifier } => HeadWeights::DistilClassifier {
            pre_classifier: detach_dense(pre_classifier)?,
            classifier: detach_dense(classifier)?,
        },
    })
}

fn detach_weights(w: &super::load::EncoderWeights) -> Result<super::load::EncoderWeights> {
    let t = |x: &Tensor| -> Result<Tensor> { Ok(x.copy()?.detach()) };
    let n = |x: &super::load::Norm| -> Result<super::load::Norm> {
        Ok(super::load::Norm { weight: t(&x.weight)?, bias: t(&x.bias)? })
    };
    Ok(super::load::EncoderWeights {
        word_embeddings: t(&w.word_embeddings)?,
        position_embeddings: t(&w.position_embeddings)?,
        token_type_embeddings: w.token_type_embeddings.as_ref().map(t).transpose()?,
        embedding_norm: n(&w.embedding_norm)?,
        layers: w
            .layers
            .iter()
            .map(|l| {
                Ok(super::load::LayerWeights {
                    query: detach_dense(&l.query)?,
                    key: detach_dense(&l.key)?,
                    value: detach_dense(&l.value)?,
                    attn_out: detach_dense(&l.attn_out)?,
                    attn_norm: n(&l.attn_norm)?,
                    ffn_in: detach_dense(&l.ffn_in)?,
                    ffn_out: detach_dense(&l.ffn_out)?,
                    ffn_norm: n(&l.ffn_norm)?,
                })
            })
            .collect::<Result<_>>()?,
        pooler: w.pooler.as_ref().map(detach_dense).transpose()?,
    })
}

/// The files a trained evaluator folder holds (the CLI writes them next to a copy of the
/// base model's `tokenizer.json`): `config.json`, `model.safetensors`, `train_log.json`.
pub fn trained_files(result: &TrainResult, options: &TrainOptions) -> Result<Vec<(String, Vec<u8>)>> {
    trained_files_with(result, options, serde_json::json!({}))
}

/// [`trained_files`] with more entries in the log after the options (`jobs::train` adds
/// the task, the argument source, the dev split and the inputs' fingerprints).
pub fn trained_files_with(
    result: &TrainResult,
    options: &TrainOptions,
    extra: serde_json::Value,
) -> Result<Vec<(String, Vec<u8>)>> {
    let mut log = serde_json::json!({ "options": options });
    if let (Some(log), serde_json::Value::Object(extra)) = (log.as_object_mut(), extra) {
        log.extend(extra);
    }
    let rest = serde_json::json!({
        "best_epoch": result.best_epoch,
        "select_by": result.select_by,
        "best_dev_metric": result.best_dev_metric,
        "best_dev_accuracy": result.best_dev_accuracy,
        "dev_majority_rate": result.dev_majority_rate,
        "class_weights": result.class_weights,
        "warnings": result.warnings,
        "truncated_examples": {"train": result.truncated.0, "dev": result.truncated.1},
        "data": result.data.as_ref().map(|(t, d)| serde_json::json!({"train": t, "dev": d})),
        "threads": result.threads,
        "cache_seconds": result.cache_seconds,
        "curve": result.curve,
    });
    if let (Some(log), serde_json::Value::Object(rest)) = (log.as_object_mut(), rest) {
        log.extend(rest);
    }
    Ok(vec![
        ("config.json".into(), result.model.config.to_json().into_bytes()),
        ("model.safetensors".into(), super::load::to_safetensors(&result.model)?),
        ("train_log.json".into(), serde_json::to_vec_pretty(&log).expect("serialisable")),
    ])
}

/// The label list a task's classification head uses.
pub fn task_labels(task: Task) -> Vec<String> {
    match task {
        Task::Mcqa => Vec::new(),
        Task::Misinformation => Task::MISINFORMATION_LABELS.iter().map(|s| s.to_string()).collect(),
        Task::Nli => Task::NLI_LABELS.iter().map(|s| s.to_string()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_warms_up_then_decays_linearly() {
        // 10 steps, 2 warm-up: 0.5, 1.0, then (10-s)/8: 1.0, 0.875, ..., 0.125.
        let lrs: Vec<f64> = (0..10).map(|s| scheduled_lr(1.0, s, 2, 10)).collect();
        assert_eq!(lrs[0], 0.5);
        assert_eq!(lrs[1], 1.0);
        assert_eq!(lrs[2], 1.0);
        assert_eq!(lrs[3], 0.875);
        assert_eq!(lrs[9], 0.125);
    }

    #[test]
    fn balanced_class_weights_are_inverse_frequency() {
        // scikit-learn 1.9.1: compute_class_weight("balanced", classes=[0, 1],
        // y=[0, 0, 0, 1]) -> [0.66666667, 2.0] (n / (k * n_c) = 4 / (2 * 3), 4 / (2 * 1)).
        // A third label that never occurs is never a target: weight 1, and k stays 2.
        let w = ClassWeights::Balanced.weights(3, [0, 0, 0, 1].into_iter());
        assert_eq!(w, vec![4.0 / 6.0, 2.0, 1.0]);
        assert_eq!(ClassWeights::Equal.weights(3, [0, 0, 0, 1].into_iter()), vec![1.0; 3]);
    }

    #[test]
    fn the_selecting_metric_compares_the_right_way() {
        assert!(SelectBy::MacroF1.better(0.5, 0.4) && !SelectBy::MacroF1.better(0.4, 0.4));
        assert!(SelectBy::Loss.better(0.3, 0.4) && !SelectBy::Loss.better(0.5, 0.4));
        assert!(!SelectBy::Accuracy.better(f64::NAN, 0.1), "a NaN is never better");
        assert_eq!(SelectBy::parse("macro-f1").unwrap(), SelectBy::MacroF1);
        assert!(SelectBy::parse("f1").unwrap_err().to_string().contains("--select-by f1"));
    }

    #[test]
    fn options_that_train_nothing_are_refused_with_their_flag() {
        let o = TrainOptions::default();
        for (bad, flag) in [
            (TrainOptions { epochs: 0, ..o.clone() }, "--epochs 0"),
            (TrainOptions { batch_size: 0, ..o.clone() }, "--batch-size 0"),
            (TrainOptions { grad_accum: 0, ..o.clone() }, "--grad-accum 0"),
            (TrainOptions { learning_rate: f64::NAN, ..o.clone() }, "--lr NaN"),
            (TrainOptions { learning_rate: f64::INFINITY, ..o.clone() }, "--lr inf"),
            (TrainOptions { layer_learning_rate: -1.0, ..o.clone() }, "--layer-lr -1"),
            (TrainOptions { weight_decay: f64::NAN, ..o.clone() }, "--weight-decay NaN"),
            (TrainOptions { warmup_ratio: 1.5, ..o.clone() }, "--warmup 1.5"),
            // Bounded above too: the page sends epochs, batch size and patience.
            (
                TrainOptions { epochs: usize::MAX, ..o.clone() },
                "--epochs 18446744073709551615: expected a whole number from 1 to 10000",
            ),
            (
                TrainOptions { batch_size: 1025, ..o.clone() },
                "--batch-size 1025: expected a whole number from 1 to 1024",
            ),
            (TrainOptions { patience: 0, ..o.clone() }, "--patience 0: expected a whole number from 1 to 10000"),
            (
                TrainOptions { learning_rate: 1.8e19, ..o.clone() },
                "--lr 18000000000000000000: expected a finite number above 0, at most 1",
            ),
            (TrainOptions { weight_decay: 2.0, ..o.clone() }, "--weight-decay 2: expected a number from 0 to 1"),
        ] {
            let e = check_options(&bad).unwrap_err().to_string();
            assert!(e.contains(flag), "{e}");
        }
        check_options(&o).unwrap();
    }
}
