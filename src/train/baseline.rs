//! What a model that learnt nothing scores on dev: the line a training curve's dev metric
//! must beat (issue 28: a model that predicts one class looked like it had learnt).
//!
//! - Classification: the constant predictor of the dev set's most frequent gold label (the
//!   lowest label index on a tie), scored with the selecting metric's own formula
//!   ([`Confusion`]): its accuracy is the majority-class rate, its macro-F1 that of the
//!   one class it predicts over the classes that occur (`2p / (1 + p)` over the number of
//!   gold classes, with `p` the majority rate).
//! - Multiple choice (the options differ per question, so no class is "the majority"):
//!   chance, a uniform guess among each question's options: accuracy the mean of
//!   `1 / options`, loss the mean of `ln(options)` (the cross-entropy of uniform
//!   probabilities).
//! - A classification head selected by loss has no baseline here (a constant predictor's
//!   class-weighted loss depends on the probabilities it would give).

use super::options::SelectBy;
use crate::stats::classes::Confusion;
use serde::Serialize;

/// The baseline of a dev set for the metric that picks the best epoch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Baseline {
    /// `majority` (always predicting [`Baseline::label`]) or `chance` (a uniform guess).
    pub kind: &'static str,
    /// The label always predicted (classification).
    pub label: Option<String>,
    /// The selecting metric's value for that predictor.
    pub metric: f64,
    /// Its dev accuracy (the majority-class rate, or chance accuracy).
    pub accuracy: f64,
}

/// Within this of the baseline a dev metric counts as no better: half a point of the
/// metric, below which the two figures rounded to two decimals (as a reader compares
/// them) read the same.
pub const BASELINE_TOLERANCE: f64 = 0.005;

impl Baseline {
    /// How far `metric` (of the selecting metric `select_by`) is better than the baseline:
    /// negative when worse (for loss, lower is better).
    pub fn lead(&self, select_by: SelectBy, metric: f64) -> f64 {
        match select_by {
            SelectBy::Loss => self.metric - metric,
            _ => metric - self.metric,
        }
    }

    /// Whether a model scoring `metric` on dev does no better than this baseline (within
    /// [`BASELINE_TOLERANCE`]): its results are no better than guessing.
    pub fn not_beaten_by(&self, select_by: SelectBy, metric: f64) -> bool {
        // A NaN metric beats nothing (it compares to nothing).
        self.lead(select_by, metric).partial_cmp(&BASELINE_TOLERANCE) != Some(std::cmp::Ordering::Greater)
    }
}

/// The classification baseline: `golds` are the dev examples' label indices.
pub fn majority_baseline(labels: &[String], golds: &[usize], select_by: SelectBy) -> Option<Baseline> {
    if golds.is_empty() || labels.is_empty() {
        return None;
    }
    let mut counts = vec![0usize; labels.len()];
    for &g in golds {
        counts[g] += 1;
    }
    // The first most frequent label (max_by_key keeps the last of equals: reverse).
    let majority = (0..labels.len()).rev().max_by_key(|&k| counts[k]).expect("labels");
    let confusion = Confusion::of(labels.len(), golds.iter().map(|&g| (g, majority)));
    let metric = match select_by {
        SelectBy::Accuracy => confusion.accuracy(),
        SelectBy::MacroF1 => confusion.macro_f1(),
        SelectBy::Loss | SelectBy::Spearman => return None,
    };
    Some(Baseline { kind: "majority", label: Some(labels[majority].clone()), metric, accuracy: confusion.accuracy() })
}

/// The multiple-choice baseline: `options` is each dev question's number of options.
pub fn chance_baseline(options: &[usize], select_by: SelectBy) -> Option<Baseline> {
    if options.is_empty() || options.contains(&0) {
        return None;
    }
    let mean = |f: &dyn Fn(f64) -> f64| options.iter().map(|&k| f(k as f64)).sum::<f64>() / options.len() as f64;
    let accuracy = mean(&|k| 1.0 / k);
    let metric = match select_by {
        SelectBy::Accuracy => accuracy,
        SelectBy::Loss => mean(&|k| k.ln()),
        SelectBy::MacroF1 | SelectBy::Spearman => return None,
    };
    Some(Baseline { kind: "chance", label: None, metric, accuracy })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Vec<String> {
        ["false", "true"].iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_majority_baseline_scores_the_constant_predictor() {
        // 8 dev examples, 5 `false` (0) and 3 `true` (1): always `false` is right 5 times of
        // 8 (0.625). Its macro-F1: class `false` has tp 5, fp 3, fn 0 -> F1 10/13; class
        // `true` occurs in gold, is never predicted -> F1 0; the mean is 5/13 = 0.384615...
        let golds = [0, 1, 0, 0, 1, 0, 1, 0];
        let acc = majority_baseline(&labels(), &golds, SelectBy::Accuracy).unwrap();
        assert_eq!(
            (acc.kind, acc.label.as_deref(), acc.metric, acc.accuracy),
            ("majority", Some("false"), 0.625, 0.625)
        );
        let f1 = majority_baseline(&labels(), &golds, SelectBy::MacroF1).unwrap();
        assert!((f1.metric - 5.0 / 13.0).abs() < 1e-15, "{}", f1.metric);
        assert_eq!(f1.accuracy, 0.625);
        assert_eq!(majority_baseline(&labels(), &golds, SelectBy::Loss), None);
    }

    #[test]
    fn a_tie_picks_the_first_label_and_a_single_class_scores_one() {
        let tie = majority_baseline(&labels(), &[1, 0, 1, 0], SelectBy::Accuracy).unwrap();
        assert_eq!((tie.label.as_deref(), tie.metric), (Some("false"), 0.5));
        // Only `true` in gold: always `true` is right every time, F1 1 over the one class.
        let one = majority_baseline(&labels(), &[1, 1, 1], SelectBy::MacroF1).unwrap();
        assert_eq!((one.label.as_deref(), one.metric, one.accuracy), (Some("true"), 1.0, 1.0));
        assert_eq!(majority_baseline(&labels(), &[], SelectBy::Accuracy), None);
    }

    #[test]
    fn chance_is_a_uniform_guess_among_each_questions_options() {
        // Questions of 4, 4 and 5 options: accuracy (1/4 + 1/4 + 1/5) / 3 = 0.7 / 3; loss
        // (2 ln 4 + ln 5) / 3.
        let acc = chance_baseline(&[4, 4, 5], SelectBy::Accuracy).unwrap();
        assert!((acc.metric - 0.7 / 3.0).abs() < 1e-15 && acc.metric == acc.accuracy);
        assert_eq!((acc.kind, acc.label.clone()), ("chance", None));
        let loss = chance_baseline(&[4, 4, 5], SelectBy::Loss).unwrap();
        assert!((loss.metric - (2.0 * 4f64.ln() + 5f64.ln()) / 3.0).abs() < 1e-15);
        assert_eq!(chance_baseline(&[4], SelectBy::MacroF1), None);
    }
}
