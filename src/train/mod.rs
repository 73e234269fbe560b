//! Training evaluators (`medrank train`, the page's "Train an evaluator"): AdamW, linear
//! warm-up then linear decay, seeded shuffling, gradient accumulation, early stopping on a
//! dev set, and a choice of what to train (the head on a frozen encoder, the top N layers,
//! or everything), with candle's autograd on the CPU or WGSL kernels on a GPU.
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
//! input once through the fast inference path (`model::cpu`) and trains the head on the
//! cached first-token states. `top:N` runs the lower layers through the same path once and
//! caches each input's states after them (real tokens only, in f16: half the memory, the
//! difference far below what one step changes); each step then runs only the top N layers
//! through candle's autograd, the last of them for the first token alone (all a head reads).
//! candle runs most ops on one thread, so a micro-batch is split into one shard per core,
//! each shard does its forward and backward pass on its own thread, and the gradients are
//! summed. The head and the encoder layers have their own learning rates (a new head needs
//! a large one, pretrained layers a small one).
//! Dropout (none by default; the `finetune` recipe's [`Recipe`] takes the model's own) is
//! drawn from a counter-based hash of (seed, step, layer, site, input, element)
//! ([`dropout`]), so it is as reproducible as the rest and independent of how a step is
//! sharded; it applies to the trained part only (frozen layers run once, without it) and
//! never to dev passes or evaluation.
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
//!
//! Files, one concern each (`train` reads `model` and `gpu`; neither reads `train`):
//! - `examples.rs` the examples from a HiTZ MCQA file or a bundle, and what is left out
//! - `options.rs`  what trains, the optimiser's settings, the selecting metric, the class
//!   weights, the learning-rate schedule
//! - `trainer.rs`  the one loop ([`Trainer`], [`train`])
//! - `result.rs`   what it reports: the curve, events, trace steps, the result
//! - `scores.rs`   the score task's regression head: standardised targets, masked MSE,
//!   Spearman and kappa per batch (why regression, and why no baseline)
//! - `frozen.rs`   the frozen pass, computed once before the first epoch
//! - `engine.rs`   what the loop asks of an engine (a step, the dev pass, the best weights)
//! - `cpu.rs`      the CPU engine: candle's autograd, one shard per core
//! - `dropout.rs`  dropout masks from a counter-based hash (the same on every engine)
//! - `gpu/`        the GPU engine ([`gpu::GpuTrainer`]) and its gradient check
//! - `export.rs`   the trained evaluator's folder ([`trained_files`])

mod baseline;
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
mod cpu;
pub mod dropout;
mod engine;
mod examples;
mod export;
mod frozen;
pub mod gpu;
mod options;
mod result;
mod scores;
mod trainer;

pub use baseline::{chance_baseline, majority_baseline, Baseline, BASELINE_TOLERANCE};
pub use dropout::Dropout;
pub use examples::{
    examples_from_bundle, examples_from_candidates, examples_from_rubric, examples_from_rubric_count, read_hitz_mcqa,
    score_dimensions, task_labels, ArgumentSource, DataCounts, ExampleOptions, ScoreTargets, TrainData, TrainExample,
};
pub use export::{trained_files, trained_files_with};
pub use options::{
    dev_split, dropout, learning_rate, model_dropout, schedule, scheduled_lr, trained_layers, warmup_ratio,
    weight_decay, AppliedRecipe, ClassWeights, Freeze, Length, Recipe, RecipeValues, SelectBy, TrainOptions,
    DEFAULT_LAYER_LR,
};
pub use result::{EpochLog, StepRecord, TrainEvent, TrainResult};
pub use scores::{score_figures, DimensionFigures, ScoreFigures};
#[cfg(not(target_arch = "wasm32"))]
pub use trainer::{native_clock, train, train_with_events};
pub use trainer::{with_new_head, Trainer};
