//! What training reports: the curve (one [`EpochLog`] per epoch), the events a front end
//! shows as they come, the steps a trace records, and the result (the picked epoch's model).

use super::examples::DataCounts;
use super::options::SelectBy;
use crate::model::load::LoadedModel;
use crate::stats::classes::ClassScores;
use serde::Serialize;

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
    /// The value of the metric that picks the best epoch ([`TrainOptions::select_by`](super::TrainOptions::select_by)).
    pub dev_metric: f64,
    /// Classification: precision, recall and F1 of every label on dev.
    pub dev_classes: Option<Vec<ClassScores>>,
    /// Classification: the dev confusion matrix in label order, rows gold, columns predicted.
    pub dev_confusion: Option<Vec<Vec<u64>>>,
    /// The score task: Spearman and quadratic kappa with the human scores, per dimension
    /// (per batch, averaged). Its `dev_accuracy` is NaN (written null): a regression has no
    /// accuracy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dev_scores: Option<super::scores::ScoreFigures>,
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
        // A score model's accuracy is NaN on both sides: the same.
        let accuracy = self.dev_accuracy == o.dev_accuracy || (self.dev_accuracy.is_nan() && o.dev_accuracy.is_nan());
        (self.epoch, self.steps, self.train_loss, self.learning_rate)
            == (o.epoch, o.steps, o.train_loss, o.learning_rate)
            && accuracy
            && (self.dev_macro_f1, &self.dev_confusion, &self.dev_scores)
                == (o.dev_macro_f1, &o.dev_confusion, &o.dev_scores)
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

/// What training reports as it goes.
#[derive(Debug, Clone)]
pub enum TrainEvent<'a> {
    /// The frozen part was computed for every input: (inputs, seconds).
    Cached { inputs: usize, seconds: f64 },
    /// Progress inside an epoch (about every 10 s).
    Step { epoch: usize, examples: usize, of: usize, examples_per_second: f64 },
    /// An epoch's training steps are done; its dev evaluation starts.
    Dev { epoch: usize },
    /// An epoch ended.
    Epoch(&'a EpochLog),
}

/// What a training found; serialised (the front ends' report of a training) without the
/// model and the traced steps.
#[derive(Debug, Clone, Serialize)]
pub struct TrainResult {
    /// The encoder with the trained head, weights of the best dev epoch.
    #[serde(skip)]
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
    /// What a model that learnt nothing scores on dev with the selecting metric (the
    /// majority class for classification, chance for multiple choice): the line a result
    /// of this model must be above to be trusted (`jobs::quality`).
    pub dev_baseline: Option<super::Baseline>,
    /// The dev accuracy of a uniform guess: 1 / labels (classification), the mean of
    /// 1 / options (multiple choice).
    pub dev_chance_accuracy: Option<f64>,
    /// What the user must know about the picked model (it predicts one class for all).
    pub warnings: Vec<String>,
    /// The first optimiser steps, when a trace was asked for ([`Trainer::trace_steps`](super::Trainer::trace_steps)).
    #[serde(skip)]
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
    /// The score task: each dev example's predicted scores at the picked epoch (human
    /// scale, the head's label order), as the saved model gives them; empty otherwise.
    #[serde(skip)]
    pub dev_predictions: Vec<Vec<f64>>,
}
