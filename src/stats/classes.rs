//! Single-label classification scores from a confusion matrix: accuracy, per-class
//! precision / recall / F1 and macro-F1, with scikit-learn's conventions (the one home of
//! these formulas: evaluation's task scores and training's dev metric both use them).
//!
//! - Per class: precision = TP / (TP + FP), recall = TP / (TP + FN), F1 = 2TP / (2TP + FP + FN);
//!   a ratio with a zero denominator is 0 (scikit-learn's `zero_division=0`).
//! - Macro-F1 averages the F1 of the classes that occur in the gold labels or the
//!   predictions (`f1_score(average="macro")` without `labels=`); a class that neither
//!   occurs nor is predicted does not count.

use serde::Serialize;

/// Counts of (gold, predicted) pairs over `n` classes: `counts[gold * n + predicted]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Confusion {
    n: usize,
    counts: Vec<u64>,
}

/// One class's scores.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassScores {
    pub label: String,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// Gold examples of the class.
    pub support: u64,
    /// Examples predicted as the class.
    pub predicted: u64,
}

impl Confusion {
    pub fn new(n_classes: usize) -> Confusion {
        Confusion { n: n_classes, counts: vec![0; n_classes * n_classes] }
    }

    /// A matrix over `n_classes` from (gold, predicted) pairs.
    pub fn of(n_classes: usize, pairs: impl IntoIterator<Item = (usize, usize)>) -> Confusion {
        let mut c = Confusion::new(n_classes);
        for (g, p) in pairs {
            c.add(g, p);
        }
        c
    }

    pub fn add(&mut self, gold: usize, predicted: usize) {
        assert!(gold < self.n && predicted < self.n, "class index out of range");
        self.counts[gold * self.n + predicted] += 1;
    }

    pub fn classes(&self) -> usize {
        self.n
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Rows = gold class, columns = predicted class.
    pub fn rows(&self) -> Vec<Vec<u64>> {
        self.counts.chunks(self.n.max(1)).map(<[u64]>::to_vec).take(self.n).collect()
    }

    fn tp_fp_fn(&self, k: usize) -> (u64, u64, u64) {
        let tp = self.counts[k * self.n + k];
        let predicted: u64 = (0..self.n).map(|g| self.counts[g * self.n + k]).sum();
        let gold: u64 = self.counts[k * self.n..(k + 1) * self.n].iter().sum();
        (tp, predicted - tp, gold - tp)
    }

    /// Correct / all; NaN when empty.
    pub fn accuracy(&self) -> f64 {
        let correct: u64 = (0..self.n).map(|k| self.counts[k * self.n + k]).sum();
        correct as f64 / self.total() as f64
    }

    /// Macro-F1 over the classes that occur in gold or predictions; NaN when empty.
    pub fn macro_f1(&self) -> f64 {
        let f1s: Vec<f64> = (0..self.n)
            .map(|k| self.tp_fp_fn(k))
            .filter(|(tp, fp, fn_)| tp + fp + fn_ > 0)
            .map(|(tp, fp, fn_)| 2.0 * tp as f64 / (2 * tp + fp + fn_) as f64)
            .collect();
        f1s.iter().sum::<f64>() / f1s.len() as f64
    }

    /// Scores of every class, named by `labels` (one per class).
    pub fn per_class(&self, labels: &[String]) -> Vec<ClassScores> {
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        (0..self.n)
            .map(|k| {
                let (tp, fp, fn_) = self.tp_fp_fn(k);
                ClassScores {
                    label: labels.get(k).cloned().unwrap_or_else(|| k.to_string()),
                    precision: ratio(tp, tp + fp),
                    recall: ratio(tp, tp + fn_),
                    f1: ratio(2 * tp, 2 * tp + fp + fn_),
                    support: tp + fn_,
                    predicted: tp + fp,
                }
            })
            .collect()
    }

    /// The one class every example was predicted as, when there is exactly one such class
    /// and the gold labels hold more than one class (a model that cannot tell them apart).
    pub fn single_predicted_class(&self) -> Option<usize> {
        let predicted: Vec<usize> =
            (0..self.n).filter(|&k| (0..self.n).any(|g| self.counts[g * self.n + k] > 0)).collect();
        let gold = (0..self.n).filter(|&g| self.counts[g * self.n..(g + 1) * self.n].iter().any(|&c| c > 0)).count();
        (predicted.len() == 1 && gold > 1).then(|| predicted[0])
    }

    /// The share of the most frequent gold class: the accuracy of always predicting it.
    pub fn majority_rate(&self) -> f64 {
        let most = (0..self.n).map(|g| self.counts[g * self.n..(g + 1) * self.n].iter().sum::<u64>()).max();
        most.unwrap_or(0) as f64 / self.total() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(n: usize) -> Vec<String> {
        (0..n).map(|k| format!("c{k}")).collect()
    }

    #[test]
    fn scores_equal_scikit_learn() {
        // y_true = [0,0,0,1,1,2], y_pred = [0,1,0,1,0,1]. scikit-learn 1.9.1:
        // f1_score(average="macro", zero_division=0) = 0.35555555555555557;
        // precision_recall_fscore_support: P [2/3, 1/3, 0], R [2/3, 0.5, 0], F1 [2/3, 0.4, 0],
        // support [3, 2, 1]. By hand: class 1 has tp 1, fp 2, fn 1 -> F1 2/(2+2+1) = 0.4.
        let c = Confusion::of(3, [(0, 0), (0, 1), (0, 0), (1, 1), (1, 0), (2, 1)]);
        assert!((c.macro_f1() - 0.355_555_555_555_555_57).abs() < 1e-15);
        assert_eq!(c.accuracy(), 0.5);
        let p = c.per_class(&labels(3));
        assert!((p[0].f1 - 2.0 / 3.0).abs() < 1e-15);
        assert!((p[1].precision - 1.0 / 3.0).abs() < 1e-15);
        assert_eq!((p[1].recall, p[1].f1), (0.5, 0.4));
        assert_eq!((p[2].precision, p[2].recall, p[2].f1, p[2].support, p[2].predicted), (0.0, 0.0, 0.0, 1, 0));
        assert_eq!(c.rows(), vec![vec![2, 1, 0], vec![1, 1, 0], vec![0, 1, 0]]);
    }

    #[test]
    fn absent_classes_do_not_count_in_macro_f1() {
        // Three classes, the third never gold nor predicted: macro over two (scikit-learn:
        // f1_score([0,0,0,1], [0,0,1,1], average="macro") = 0.7333333333333334).
        let c = Confusion::of(3, [(0, 0), (0, 0), (0, 1), (1, 1)]);
        assert!((c.macro_f1() - 0.733_333_333_333_333_4).abs() < 1e-15);
    }

    #[test]
    fn one_predicted_class_is_found() {
        // Majority-class predictor on 62/38 data: macro-F1 = (2*62/(2*62+38) + 0) / 2 = 0.3827...
        let c = Confusion::of(2, (0..100).map(|i| (usize::from(i >= 62), 0)));
        assert_eq!(c.single_predicted_class(), Some(0));
        assert!((c.macro_f1() - 124.0 / 162.0 / 2.0).abs() < 1e-15);
        assert_eq!(c.majority_rate(), 0.62);
        // One gold class and one predicted class: nothing to tell apart.
        assert_eq!(Confusion::of(2, [(1, 1), (1, 1)]).single_predicted_class(), None);
        assert_eq!(Confusion::of(2, [(0, 0), (1, 1)]).single_predicted_class(), None);
    }
}
