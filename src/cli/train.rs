//! `medrank train`: proxy-task evaluators with candle's autograd.

use super::args::*;
use super::output::{OutputArgs, Outputs};
use crate::{Error, Result};
use clap::Args;
use std::path::{Path, PathBuf};

/// The defaults of `medrank train`'s options: the job layer's, which the page's training
/// form starts from too.
fn defaults() -> crate::jobs::TrainForm {
    crate::jobs::TrainForm::default()
}

#[derive(Args, Debug)]
pub struct TrainArgs {
    /// The base model folder (e.g. models/all-MiniLM-L6-v2).
    /// Or a Hugging Face Hub id, ORG/NAME[@REVISION] (README, "Models").
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Training data: a HiTZ MCQA file ({"question", "options", "correct_option"}, the
    /// argument already in the question), an argument bundle (then see --task, --arguments),
    /// or with --task criterion a rubric file whose criteria are judged (`met`, or people's
    /// `met_by`: the majority) and whose responses carry their text.
    #[arg(long, value_name = "FILE")]
    pub train: PathBuf,
    /// Development data in the same format; the epoch with the best dev metric (see
    /// --select-by) is kept.
    #[arg(long, value_name = "FILE", required_unless_present = "dev_split", conflicts_with = "dev_split")]
    pub dev: Option<PathBuf>,
    /// Instead of --dev: this fraction of the training file's examples (e.g. 0.2; between
    /// 0 and 1, both excluded), drawn with --seed, picks the best epoch; the rest train
    /// (the page offers the same split).
    #[arg(long, value_name = "FRACTION", value_parser = number(crate::train::dev_split))]
    pub dev_split: Option<f64>,
    /// Output folder: config.json, model.safetensors, tokenizer.json, train_log.json.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// With a bundle: the proxy task to train (its instances are used). `criterion`: a
    /// rubric criterion grader (labels met / not_met) from a rubric file, for `medrank grade`.
    /// `score`: a metric learned from human scores, from a metrics JSONL file (FORMATS.md
    /// section 6) whose lines carry `human` scores (one regression output per dimension;
    /// the model reads the candidate, then the question and the first reference).
    #[arg(long, default_value_t = defaults().task, value_parser = crate::jobs::TrainTask::NAMES)]
    pub task: String,
    /// With a bundle: the argument each training instance carries. `none` = the baseline
    /// evaluator; `system:NAME` = one system's arguments (e.g. system:expert, the
    /// expert-trained evaluator); `random:A,B,C` = one random system per instance among
    /// these, seeded (the LLM-trained evaluator).
    #[arg(long, default_value_t = defaults().arguments, value_name = "SOURCE", value_parser = arguments)]
    pub arguments: String,
    /// A named set of the options below: `fast` (the head, or --freeze top:N, on features
    /// the frozen encoder computes once; --lr 1e-3 for the head, --layer-lr 5e-5, weight
    /// decay 0.01, no dropout, the folder's input limit) or `finetune` (what Hugging Face's
    /// Trainer does: --freeze all, one rate 5e-5 with linear warm-up and decay, weight decay
    /// 0, the model's dropout (0.1 where its config says none), the model's full length).
    /// Default: finetune where training runs on a GPU (--backend gpu, or auto finding one),
    /// fast elsewhere. The options given explicitly override the recipe's values.
    #[arg(long, value_parser = crate::train::Recipe::NAMES)]
    pub recipe: Option<String>,
    /// What is trained: head (frozen encoder, features computed once), top:N (head + top N
    /// layers; the lower layers run once through the fast inference path), all. Default:
    /// the recipe's.
    #[arg(long, value_parser = freeze)]
    pub freeze: Option<String>,
    /// Epochs (1 to 10,000).
    #[arg(long, default_value_t = defaults().epochs, value_parser = count(1, crate::bounds::MAX_EPOCHS))]
    pub epochs: usize,
    /// Examples per micro-batch (1 to 1,024).
    #[arg(long, default_value_t = defaults().batch_size, value_parser = count(1, crate::bounds::MAX_BATCH))]
    pub batch_size: usize,
    /// Micro-batches per optimiser step (1 to 1,024).
    #[arg(long, default_value_t = defaults().grad_accum, value_parser = count(1, crate::bounds::MAX_GRAD_ACCUM))]
    pub grad_accum: usize,
    /// Peak learning rate of the head (a new head needs a large one): above 0, at most 1.
    /// Default: the recipe's (fast 1e-3, finetune 5e-5).
    #[arg(long, value_parser = number(crate::train::learning_rate))]
    pub lr: Option<f64>,
    /// Peak learning rate of the trained encoder layers (--freeze top:N or all): pretrained
    /// weights take a small one. Above 0, at most 1. Default: the recipe's (5e-5).
    #[arg(long, value_parser = number(crate::train::learning_rate))]
    pub layer_lr: Option<f64>,
    /// AdamW's decoupled weight decay (0 to 1). Default: the recipe's (fast 0.01, finetune 0).
    #[arg(long, value_parser = number(crate::train::weight_decay))]
    pub weight_decay: Option<f64>,
    /// Dropout of the trained layers' hidden states and attention probabilities and of the
    /// classifier's input (0 up to, not including, 1). Default: the recipe's (fast none,
    /// finetune the model's config.json: hidden_dropout_prob, attention_probs_dropout_prob).
    /// The GPU trainer applies none yet.
    #[arg(long, value_parser = number(crate::train::dropout))]
    pub dropout: Option<f64>,
    /// The longest input: folder (sentence-transformers' max_seq_length where the folder
    /// has one: 256 for all-MiniLM-L6-v2) or full (the position table's,
    /// max_position_embeddings). Default: the recipe's (fast folder, finetune full).
    #[arg(long, value_parser = ["folder", "full"])]
    pub length: Option<String>,
    /// Fraction of the steps spent warming up (0 to 1).
    #[arg(long, default_value_t = defaults().warmup, value_parser = number(crate::train::warmup_ratio))]
    pub warmup: f64,
    /// Stop after this many epochs without a better dev metric (1 to 10,000).
    #[arg(long, default_value_t = defaults().patience, value_parser = count(1, crate::bounds::MAX_EPOCHS))]
    pub patience: usize,
    /// The dev metric that picks the best epoch and decides early stopping: accuracy,
    /// macro-f1, loss or spearman. Default: the task's evaluation metric (accuracy for MCQA,
    /// macro-F1 for misinformation, NLI and criterion, so a model that predicts the majority
    /// class for everything is not picked for its accuracy; for score Spearman with the
    /// human scores per batch, averaged over batches and dimensions).
    #[arg(long, value_name = "METRIC", value_parser = ["accuracy", "macro-f1", "loss", "spearman"])]
    pub select_by: Option<String>,
    /// Loss weights of the classes: balanced (inverse frequency in the training data, the
    /// default for misinformation and NLI) or none (the only choice for MCQA).
    #[arg(long, value_name = "WEIGHTS", value_parser = ["balanced", "none"])]
    pub class_weights: Option<String>,
    /// Write a trace into this folder: the starting model (config.json, model.safetensors,
    /// tokenizer.json: the base model with the new head) and trace.json (the examples as
    /// token ids, then each recorded step's examples, learning rates and loss),
    /// which tests/reference/train_reference.py replays in PyTorch.
    #[arg(long, value_name = "DIR")]
    pub trace: Option<PathBuf>,
    /// With --trace: the optimiser steps to record, a number (1 to 1,000,000) or `all`.
    #[arg(long, value_name = "N|all", default_value = "20", requires = "trace")]
    pub trace_steps: String,
    /// Seed of the shuffling, the dev split and the new head (0 to 18446744073709551615).
    #[arg(long, default_value_t = defaults().seed)]
    pub seed: u64,
    /// Task score: what the model reads beside each candidate: candidate,
    /// candidate+question (the default) or candidate+question+reference (the first
    /// reference). The trained config.json keeps it, so predictions read the same.
    #[arg(long, value_name = "INPUT", value_parser = crate::model::score::ScoreInput::NAMES)]
    pub score_input: Option<String>,
    /// How the new head reads the last layer: cls (the first token's state, as Hugging
    /// Face's heads do) or mean (the mean of the real tokens' states). Default: mean for task
    /// score, the base model's own otherwise (cls, or a ModernBERT's classifier_pooling).
    /// The trained config.json keeps it (`medrank_head_pooling`; transformers reads a BERT
    /// family's head from the first token whatever it says). A mean-pooled head trains on
    /// the CPU.
    #[arg(long, value_name = "POOLING", value_parser = crate::model::config::HeadPooling::NAMES)]
    pub head_pooling: Option<String>,
    /// Keep empty MCQA options as candidates (by default, as in evaluation, an empty option
    /// is no candidate: the example has no input for it).
    #[arg(long)]
    pub keep_empty_options: bool,
    /// Keep misinformation instances labelled not_enough_evidence (by default, as in
    /// evaluation, they are dropped; the head keeps the label, never as a target).
    #[arg(long)]
    pub keep_not_enough_evidence: bool,
    /// Where the frozen encoder runs: cpu (the reference), gpu (wgpu; an error when there is
    /// no adapter) or auto (a hardware GPU when there is one). With --freeze top:N or all the
    /// trained layers follow it (on the GPU: the WGSL forward and backward kernels and AdamW;
    /// on the CPU: candle's autograd), as the page places them; the head alone trains on the
    /// CPU. The memory the GPU needs is printed before training starts.
    #[arg(long, default_value_t = defaults().backend, value_parser = ["auto", "cpu", "gpu"])]
    pub backend: String,
    /// Training runs in f32 (candle's autograd and the GPU trainer compute gradients in
    /// f32): only f32 is accepted. For an int8 evaluator, quantize the trained folder
    /// afterwards with `medrank quantize`.
    #[arg(long, default_value = "f32", value_parser = ["f32", "int8"])]
    pub precision: String,
}

/// A `value_parser` for a number that `check` accepts (the trainer's own bounds, so the
/// page's same options meet the same ones): NaN, an infinity or a value out of range is
/// refused naming the flag, before any model loads (exit 2).
fn number(
    check: fn(f64) -> std::result::Result<f64, String>,
) -> impl Fn(&str) -> std::result::Result<f64, String> + Clone + Send + Sync + 'static {
    move |s: &str| match s.trim().parse::<f64>() {
        Ok(v) => check(v),
        Err(_) => Err("expected a number".into()),
    }
}

/// `--freeze`: read by the job layer's `parse_freeze`, as the page's field is.
fn freeze(s: &str) -> std::result::Result<String, String> {
    crate::jobs::parse_freeze(s).map(|_| s.to_string()).map_err(|e| e.to_string())
}

/// `--arguments`: read by the job layer's `parse_arguments`, as the page's field is.
fn arguments(s: &str) -> std::result::Result<String, String> {
    crate::jobs::parse_arguments(s).map(|_| s.to_string()).map_err(|e| e.to_string())
}

pub(super) fn train(a: TrainArgs) -> Result<()> {
    use crate::jobs::{self, DevData};
    use crate::train::TrainEvent;
    if precision(Some(&a.precision))? == Some(crate::model::Precision::Int8) {
        return Err(Error::invalid(format!(
            "--precision int8: training runs in f32 (gradients through int8 products are not computed); train without --precision, then quantize the trained folder with `medrank quantize` ({} will hold the f32 evaluator)",
            a.out.display()
        )));
    }
    let inputs: Vec<&Path> =
        [Some(a.model.as_path()), Some(a.train.as_path()), a.dev.as_deref()].into_iter().flatten().collect();
    let outs: Vec<&Path> = [Some(a.out.as_path()), a.trace.as_deref()].into_iter().flatten().collect();
    let mut outputs = Outputs::plan(&inputs, &OutputArgs::default(), &[], &outs)?;
    let trace_steps = match (&a.trace, a.trace_steps.trim()) {
        (None, _) => 0,
        (Some(_), "all") => usize::MAX,
        (Some(_), n) => match n.parse::<usize>() {
            Ok(n) if (1..=crate::bounds::MAX_TRACE_STEPS).contains(&n) => n,
            _ => {
                return Err(Error::invalid(format!(
                    "--trace-steps {n}: expected a whole number from 1 to {}, or all",
                    crate::bounds::MAX_TRACE_STEPS
                )))
            }
        },
    };
    let base = super::hub::model_files(&a.model, false)?;
    let model = crate::model::TextModel::from_files(&base)?;
    let tokenizer_json = base.tokenizer_json.clone();
    let form = jobs::TrainForm {
        task: a.task.clone(),
        arguments: a.arguments.clone(),
        recipe: a.recipe.clone().unwrap_or_default(),
        freeze: a.freeze.clone().unwrap_or_default(),
        epochs: a.epochs,
        batch_size: a.batch_size,
        grad_accum: a.grad_accum,
        lr: a.lr,
        layer_lr: a.layer_lr,
        weight_decay: a.weight_decay,
        warmup: a.warmup,
        dropout: a.dropout,
        length: a.length.clone().unwrap_or_default(),
        score_input: a.score_input.clone().unwrap_or_default(),
        head_pooling: a.head_pooling.clone().unwrap_or_default(),
        patience: a.patience,
        seed: a.seed,
        select_by: a.select_by.clone().unwrap_or_default(),
        class_weights: a.class_weights.clone().unwrap_or_default(),
        dev_split: a.dev_split.unwrap_or(defaults().dev_split),
        keep_empty_options: a.keep_empty_options,
        keep_not_enough_evidence: a.keep_not_enough_evidence,
        backend: a.backend.clone(),
    };
    let dev = match &a.dev {
        Some(dev) => DevData::File(named(dev)?),
        None => DevData::Split(form.dev_split),
    };
    // Where the frozen encoder runs decides the default recipe: opened first.
    let encoder = jobs::open_training_encoder(&model, form.backend()?)?;
    let mut req = form.request(named(&a.train)?, dev, jobs::gpu_of(&encoder).is_some())?;
    req.trace_steps = trace_steps;
    let mut dev_examples = 0;
    let started = &mut |s: &jobs::TrainingSummary| {
        dev_examples = s.dev_examples;
        for w in &s.warnings {
            eprintln!("warning: {w}");
        }
        for n in &s.notes {
            eprintln!("note: {n}");
        }
        let dev = match s.dev_split {
            Some(f) => format!(" (a {f} split of the training file)"),
            None => String::new(),
        };
        eprintln!(
            "training on {} examples, picking the epoch with the best dev {} on {} dev examples{dev} ({:?})",
            s.train_examples,
            s.select_by.name(),
            s.dev_examples,
            s.freeze
        );
    };
    let result = jobs::train(&req, &model, &tokenizer_json, &encoder, started, &mut |event| match event {
        TrainEvent::Cached { inputs, seconds } => {
            eprintln!("  frozen layers computed once for {inputs} inputs in {seconds:.0} s")
        }
        TrainEvent::Step { epoch, examples, of, examples_per_second } => {
            eprintln!("  epoch {epoch:>2}  {examples}/{of} examples  {examples_per_second:.1} examples/s")
        }
        TrainEvent::Dev { .. } => {}
        TrainEvent::Epoch(log) => {
            let dev = match &log.dev_scores {
                // A score model: agreement with the human scores (it has no accuracy).
                Some(f) => format!("dev Spearman {}  dev kappa {}", figure(f.spearman), figure(f.kappa)),
                None => {
                    let f1 = log.dev_macro_f1.map(|f| format!("  dev macro-F1 {f:.4}")).unwrap_or_default();
                    format!("dev accuracy {:.4}{f1}", log.dev_accuracy)
                }
            };
            eprintln!(
                "  epoch {:>2}  steps {:>5}  train loss {:.4}  dev loss {:.4}  {dev}  lr {:.2e}  {:.1} examples/s",
                log.epoch, log.steps, log.train_loss, log.dev_loss, log.learning_rate, log.examples_per_second
            )
        }
    })?;
    if let Some(w) = &result.truncation_warning {
        eprintln!("warning: {w}");
    }
    for w in &result.result.warnings {
        eprintln!("warning: {w}");
    }
    for (name, bytes) in &result.files {
        outputs.file(&a.out.join(name), bytes)?;
    }
    if let Some(dir) = &a.trace {
        for (name, bytes) in &result.trace_files {
            outputs.file(&dir.join(name), bytes)?;
        }
    }
    outputs.commit()?;
    let trained = &result.result;
    let accuracy = if trained.select_by == crate::train::SelectBy::Accuracy || trained.best_dev_accuracy.is_nan() {
        String::new()
    } else {
        format!(", dev accuracy {:.4}", trained.best_dev_accuracy)
    };
    // A criterion grader grades rubric files, a score model scores metrics files; the
    // others evaluate bundles.
    let (what, usage) = if a.task == "criterion" {
        ("criterion grader", format!("medrank grade --grader {} --rubric FILE", a.out.display()))
    } else if a.task == "score" {
        ("learned metric", format!("medrank metrics --learned {} --input FILE", a.out.display()))
    } else {
        ("evaluator", format!("medrank evaluate --model {}", a.out.display()))
    };
    println!(
        "best epoch {} with dev {} {:.4}{accuracy} ({} dev examples); the {what} is in {} (use: {usage})",
        trained.best_epoch,
        trained.select_by.name(),
        trained.best_dev_metric,
        dev_examples,
        a.out.display(),
    );
    Ok(())
}

/// A figure to 4 decimals, or "undefined".
fn figure(v: Option<f64>) -> String {
    v.map_or_else(|| "undefined".to_string(), |v| format!("{v:.4}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::parse_flags;

    #[test]
    fn the_flags_left_out_are_the_job_layers_defaults() {
        let a: TrainArgs =
            parse_flags(&["train", "--model", "m", "--train", "t.jsonl", "--dev", "d.jsonl", "--out", "o"]);
        let d = crate::jobs::TrainForm::default();
        assert_eq!((a.task, a.arguments, a.backend), (d.task, d.arguments, d.backend));
        assert_eq!(
            (a.epochs, a.batch_size, a.grad_accum, a.patience, a.seed),
            (d.epochs, d.batch_size, d.grad_accum, d.patience, d.seed)
        );
        assert_eq!(a.warmup, d.warmup);
        // What a recipe sets is left to it, as the form's empty fields.
        assert_eq!((a.recipe, a.freeze, a.length), (None, None, None));
        assert_eq!((a.lr, a.layer_lr, a.weight_decay, a.dropout), (None, None, None, None));
        assert_eq!((d.lr, d.layer_lr, d.weight_decay, d.dropout), (None, None, None, None));
        assert_eq!((a.select_by, a.class_weights), (None, None), "the task's own, as the form's empty choice");
    }

    #[test]
    fn a_recipe_is_refused_unless_named_and_explicit_flags_override_it() {
        let e = crate::cli::args::try_parse_flags::<TrainArgs>(&[
            "train", "--model", "m", "--train", "t", "--dev", "d", "--out", "o", "--recipe", "slow",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("--recipe") && e.contains("slow"), "{e}");
        let e = crate::cli::args::try_parse_flags::<TrainArgs>(&[
            "train",
            "--model",
            "m",
            "--train",
            "t",
            "--dev",
            "d",
            "--out",
            "o",
            "--dropout",
            "1",
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("--dropout") && e.contains("expected a probability from 0 up to (not including) 1"), "{e}");
    }
}
