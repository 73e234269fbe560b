//! What a training run is asked for: what trains ([`Freeze`]), the optimiser's settings,
//! the metric that picks the epoch ([`SelectBy`]), the classes' loss weights
//! ([`ClassWeights`]), and the learning-rate schedule (linear warm-up, then linear decay).

use super::dropout::Dropout;
use crate::error::{Error, Result};
use crate::model::config::{EncoderConfig, HeadKind};
use serde::Serialize;

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
    /// ([`SelectBy::for_head`]), resolved when the [`Trainer`](super::Trainer) is made.
    pub select_by: Option<SelectBy>,
    /// How the classes' losses are weighted; `None`: balanced for classification, none for
    /// multiple choice, resolved when the [`Trainer`](super::Trainer) is made.
    pub class_weights: Option<ClassWeights>,
    /// Dropout of the trained layers and the classifier's input: none by default; `None`:
    /// the model's own ([`model_dropout`], the `finetune` recipe's), resolved when the
    /// [`Trainer`](super::Trainer) is made.
    pub dropout: Option<Dropout>,
    /// How long the inputs may be (the job layer tokenises with it).
    pub length: Length,
    /// The score task: what the model reads beside each candidate (the job layer encodes
    /// with it; the trained config.json keeps it).
    pub score_input: crate::model::score::ScoreInput,
    /// How the new head reads the last layer; `None`: the task's default (the mean of the
    /// tokens for the score task, the base model's own otherwise: the first token but for
    /// a ModernBERT saying `classifier_pooling: mean`), resolved when the
    /// [`Trainer`](super::Trainer) is made. The trained config.json keeps it.
    pub head_pooling: Option<crate::model::config::HeadPooling>,
    /// The recipe the options came from, when one did (recorded in the log).
    pub recipe: Option<AppliedRecipe>,
}

/// A recipe as a run applied it: which, why, and the options given explicitly instead of
/// its values.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AppliedRecipe {
    pub name: Recipe,
    /// `--recipe`, or the default where training runs (`finetune on a GPU`, `fast on the CPU`).
    pub chosen_by: String,
    /// What the recipe sets.
    pub values: RecipeValues,
    /// The options (flag names) given explicitly, which override its values.
    pub overridden: Vec<String>,
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
    /// The score task's: Spearman's rho with the human scores per batch, averaged over the
    /// batches, then over the dimensions (`super::scores`).
    Spearman,
}

impl SelectBy {
    /// `accuracy`, `macro-f1`, `loss` or `spearman` (`--select-by`).
    pub fn parse(s: &str) -> Result<SelectBy> {
        match s.trim() {
            "accuracy" => Ok(SelectBy::Accuracy),
            "macro-f1" | "macro_f1" => Ok(SelectBy::MacroF1),
            "loss" => Ok(SelectBy::Loss),
            "spearman" => Ok(SelectBy::Spearman),
            other => Err(Error::option("select_by", format!("{other}: expected accuracy, macro-f1, loss or spearman"))),
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
            SelectBy::Spearman => "Spearman",
        }
    }

    /// Whether `a` is strictly better than `b` (a NaN is never better).
    pub(super) fn better(self, a: f64, b: f64) -> bool {
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
            other => Err(Error::option("class_weights", format!("{other}: expected balanced or none"))),
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
            dropout: Some(Dropout::NONE),
            length: Length::Folder,
            score_input: crate::model::score::ScoreInput::default(),
            head_pooling: None,
            recipe: None,
        }
    }
}

/// A named set of training options (`--recipe`): what a user would otherwise have to know
/// to set one by one. Explicit options override a recipe's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Recipe {
    /// The head (or top layers) on features the frozen encoder computes once, a large rate
    /// for the new head, no dropout, the base folder's input limit: fast on a CPU.
    Fast,
    /// What Hugging Face's `Trainer` does: every layer trained at one small rate with
    /// linear warm-up and decay, no weight decay, the model's dropout, the model's full
    /// length.
    Finetune,
}

/// How long the training inputs may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Length {
    /// The base folder's limit: sentence-transformers' `max_seq_length` where the folder
    /// has one (256 for all-MiniLM-L6-v2), else the position table's.
    Folder,
    /// The position table's (`max_position_embeddings`, 512 for BERT-family models).
    Full,
}

impl Length {
    pub fn parse(s: &str) -> Result<Length> {
        match s.trim() {
            "folder" => Ok(Length::Folder),
            "full" => Ok(Length::Full),
            other => Err(Error::option("length", format!("{other}: expected folder or full"))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Length::Folder => "folder",
            Length::Full => "full",
        }
    }
}

/// What a recipe sets: every option it has a value for.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecipeValues {
    pub freeze: Freeze,
    pub learning_rate: f64,
    pub layer_learning_rate: f64,
    pub weight_decay: f64,
    pub warmup_ratio: f64,
    /// `None`: the model's own (`finetune`), resolved by [`RecipeValues::dropout_for`].
    pub dropout: Option<f64>,
    pub length: Length,
}

/// Hugging Face's `TrainingArguments` defaults (the documentation of `TrainingArguments`,
/// and its dataclass fields in transformers 5.24, which `scripts/setup.sh reference`
/// installs: `learning_rate` 5e-5, `weight_decay` 0.0, `lr_scheduler_type` "linear",
/// `adam_beta1` 0.9, `adam_beta2` 0.999, `adam_epsilon` 1e-8), every parameter in one
/// group at that rate. Its warm-up default is none (`warmup_steps` 0; `warmup_ratio` 0.0 in
/// transformers 4); the recipe keeps this trainer's warm-up option (`--warmup`, 0.1).
pub const HF_LEARNING_RATE: f64 = 5e-5;
pub const HF_WEIGHT_DECAY: f64 = 0.0;

/// The dropout a config without `hidden_dropout_prob` / `attention_probs_dropout_prob` is
/// trained with: BERT's `BertConfig` defaults (0.1 each).
pub const DEFAULT_MODEL_DROPOUT: f64 = 0.1;

impl Recipe {
    pub const NAMES: [&'static str; 2] = ["fast", "finetune"];

    pub fn parse(s: &str) -> Result<Recipe> {
        match s.trim() {
            "fast" => Ok(Recipe::Fast),
            "finetune" => Ok(Recipe::Finetune),
            other => Err(Error::option("recipe", format!("{other}: expected fast or finetune"))),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Recipe::Fast => "fast",
            Recipe::Finetune => "finetune",
        }
    }

    /// The recipe where training runs: `finetune` on a GPU, `fast` on the CPU.
    pub fn for_gpu(on_gpu: bool) -> Recipe {
        if on_gpu {
            Recipe::Finetune
        } else {
            Recipe::Fast
        }
    }

    /// The options the recipe sets; `fast`'s are [`TrainOptions::default`]'s (the one home
    /// of those defaults).
    pub fn values(self) -> RecipeValues {
        let o = TrainOptions::default();
        match self {
            Recipe::Fast => RecipeValues {
                freeze: o.freeze,
                learning_rate: o.learning_rate,
                layer_learning_rate: o.layer_learning_rate,
                weight_decay: o.weight_decay,
                warmup_ratio: o.warmup_ratio,
                dropout: Some(0.0),
                length: Length::Folder,
            },
            Recipe::Finetune => RecipeValues {
                freeze: Freeze::All,
                learning_rate: HF_LEARNING_RATE,
                layer_learning_rate: HF_LEARNING_RATE,
                weight_decay: HF_WEIGHT_DECAY,
                warmup_ratio: o.warmup_ratio,
                dropout: None,
                length: Length::Full,
            },
        }
    }
}

/// A model's own dropout: its config's `hidden_dropout_prob` and
/// `attention_probs_dropout_prob`, each [`DEFAULT_MODEL_DROPOUT`] where absent.
pub fn model_dropout(config: &EncoderConfig) -> Dropout {
    Dropout {
        hidden: config.dropout.hidden.unwrap_or(DEFAULT_MODEL_DROPOUT),
        attention: config.dropout.attention.unwrap_or(DEFAULT_MODEL_DROPOUT),
    }
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

/// How many of the top layers `freeze` trains.
pub fn trained_layers(freeze: Freeze, n_layers: usize) -> usize {
    match freeze {
        Freeze::HeadOnly => 0,
        Freeze::TopLayers(n) => n.min(n_layers),
        Freeze::All => n_layers,
    }
}

/// A peak learning rate (`--lr`, `--layer-lr`): finite, above 0, at most 1. The `Err` says
/// what is expected; the flag's parser (exit 2) and [`check_options`] (the page) name it.
pub fn learning_rate(v: f64) -> Result<f64, String> {
    if v.is_finite() && v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err("expected a finite number above 0, at most 1".into())
    }
}

/// AdamW's weight decay (`--weight-decay`): from 0 to 1.
pub fn weight_decay(v: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err("expected a number from 0 to 1".into())
    }
}

/// The share of steps spent warming up (`--warmup`): from 0 to 1.
pub fn warmup_ratio(v: f64) -> Result<f64, String> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err("expected a fraction from 0 to 1".into())
    }
}

/// A dropout probability (`--dropout`): from 0 (none) up to, not including, 1.
pub fn dropout(v: f64) -> Result<f64, String> {
    if (0.0..1.0).contains(&v) {
        Ok(v)
    } else {
        Err("expected a probability from 0 up to (not including) 1".into())
    }
}

/// The share of the training file that picks the epoch (`--dev-split`): between 0 and 1,
/// both excluded.
pub fn dev_split(v: f64) -> Result<f64, String> {
    if v > 0.0 && v < 1.0 {
        Ok(v)
    } else {
        Err("expected a fraction between 0 and 1 (both excluded)".into())
    }
}

/// Options that would train nothing, train on numbers that are not numbers, or exceed
/// their bounds (`crate::bounds`: the page sends epochs, batch size and patience too) are
/// refused, naming the option (never coerced to something else): each front end words it
/// (`Error::Option`: the CLI's flag, the page's field). A rate or decay above 1 makes
/// AdamW's steps (about the rate) and decay (rate x decay) larger than the weights.
pub(super) fn check_options(o: &TrainOptions) -> Result<()> {
    use crate::bounds::{check_count, MAX_BATCH, MAX_EPOCHS, MAX_GRAD_ACCUM};
    // The bound's words without a flag: "0: expected a whole number from 1 to 10000".
    let count = |option: &'static str, value, max| {
        check_count("", value, 1, max).map_err(|e| Error::option(option, e.trim_start()))
    };
    count("epochs", o.epochs, MAX_EPOCHS)?;
    count("batch_size", o.batch_size, MAX_BATCH)?;
    count("grad_accum", o.grad_accum, MAX_GRAD_ACCUM)?;
    count("patience", o.patience, MAX_EPOCHS)?;
    type Check = fn(f64) -> Result<f64, String>;
    let checks: [(&'static str, f64, Check); 6] = [
        ("lr", o.learning_rate, learning_rate),
        ("layer_lr", o.layer_learning_rate, learning_rate),
        ("weight_decay", o.weight_decay, weight_decay),
        ("warmup", o.warmup_ratio, warmup_ratio),
        ("dropout", o.dropout.unwrap_or_default().hidden, dropout),
        ("dropout", o.dropout.unwrap_or_default().attention, dropout),
    ];
    for (option, v, check) in checks {
        check(v).map_err(|why| Error::option(option, format!("{v}: {why}")))?;
    }
    Ok(())
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
            (
                TrainOptions { dropout: Some(Dropout { hidden: 1.0, attention: 0.1 }), ..o.clone() },
                "--dropout 1: expected a probability from 0 up to (not including) 1",
            ),
        ] {
            let e = check_options(&bad).unwrap_err();
            // Named by the option, worded as the CLI's flag by the error's own text.
            assert!(matches!(e, Error::Option { .. }), "{e:?}");
            assert!(e.to_string().contains(flag), "{e}");
        }
        check_options(&o).unwrap();
    }

    #[test]
    fn the_recipes_set_what_they_say() {
        // fast: today's defaults, no dropout, the folder's length.
        let (fast, o) = (Recipe::Fast.values(), TrainOptions::default());
        assert_eq!((fast.freeze, fast.learning_rate, fast.weight_decay), (o.freeze, o.learning_rate, o.weight_decay));
        assert_eq!((fast.dropout, fast.length), (Some(0.0), Length::Folder));
        assert_eq!((o.dropout, o.length), (Some(Dropout::NONE), Length::Folder));
        // finetune: Hugging Face's TrainingArguments (lr 5e-5 for everything, weight decay
        // 0, linear decay), warm-up as --warmup, every layer, the model's dropout, full length.
        let ft = Recipe::Finetune.values();
        assert_eq!((ft.freeze, ft.learning_rate, ft.layer_learning_rate), (Freeze::All, 5e-5, 5e-5));
        assert_eq!((ft.weight_decay, ft.warmup_ratio, ft.length), (0.0, o.warmup_ratio, Length::Full));
        assert_eq!(ft.dropout, None, "the model's own");
        let mut c = EncoderConfig::tiny(crate::model::config::Arch::Bert, 1, HeadKind::None, &[]);
        assert_eq!(model_dropout(&c), Dropout { hidden: 0.1, attention: 0.1 }, "BERT's default where absent");
        c.dropout.hidden = Some(0.2);
        c.dropout.attention = Some(0.0);
        assert_eq!(model_dropout(&c), Dropout { hidden: 0.2, attention: 0.0 });
        assert_eq!(Recipe::for_gpu(true), Recipe::Finetune);
        assert_eq!(Recipe::for_gpu(false), Recipe::Fast);
        assert!(Recipe::parse("slow").unwrap_err().to_string().contains("--recipe slow: expected fast or finetune"));
    }
}
