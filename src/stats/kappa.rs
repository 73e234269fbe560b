//! Cohen's kappa, optionally weighted, as `sklearn.metrics.cohen_kappa_score`.
//!
//! kappa = 1 - Σ w_ij O_ij / Σ w_ij E_ij, with O the confusion matrix of the two raters,
//! E = outer(row totals, column totals) / N the chance agreement, and w the disagreement
//! weights over positions in the label scale.

use super::Stat;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weights {
    /// Plain kappa: any disagreement weighs 1.
    None,
    /// |i - j| where i, j are positions in `labels`.
    Linear,
    /// (i - j)² where i, j are positions in `labels`.
    Quadratic,
}

/// Agreement between raters `a` and `b` over the label scale `labels` (in scale order).
/// Weights are over the whole given scale, not only the labels observed. Undefined when the
/// lengths differ, nothing is rated, a rating is not in `labels` (sklearn silently drops
/// such pairs; we refuse), or expected disagreement is 0.
pub fn cohen(a: &[i64], b: &[i64], labels: &[i64], weights: Weights) -> Stat<f64> {
    if a.len() != b.len() {
        return Stat::undefined(format!("the raters rated different numbers of items ({} vs {})", a.len(), b.len()));
    }
    if a.is_empty() {
        return Stat::undefined("no rated items");
    }
    if let Some(duplicate) = labels.iter().enumerate().find(|(i, l)| labels[..*i].contains(l)) {
        return Stat::undefined(format!("label {} appears twice in the scale", duplicate.1));
    }
    let position = |label: i64| labels.iter().position(|&l| l == label);
    let size = labels.len();
    let mut confusion = vec![vec![0.0f64; size]; size];
    for (item, (&x, &y)) in a.iter().zip(b).enumerate() {
        match (position(x), position(y)) {
            (Some(i), Some(j)) => confusion[i][j] += 1.0,
            _ => {
                let outside = if position(x).is_none() { x } else { y };
                return Stat::undefined(format!("item {item}: rating {outside} is not in the label scale {labels:?}"));
            }
        }
    }
    let row_totals: Vec<f64> = confusion.iter().map(|row| row.iter().sum()).collect();
    let column_totals: Vec<f64> = (0..size).map(|j| confusion.iter().map(|row| row[j]).sum()).collect();
    let total = a.len() as f64;

    let weight = |i: usize, j: usize| -> f64 {
        let distance = i.abs_diff(j) as f64;
        match weights {
            Weights::None => f64::from(u8::from(i != j)),
            Weights::Linear => distance,
            Weights::Quadratic => distance * distance,
        }
    };
    let (mut observed, mut expected) = (0.0, 0.0);
    for i in 0..size {
        for j in 0..size {
            observed += weight(i, j) * confusion[i][j];
            expected += weight(i, j) * row_totals[i] * column_totals[j] / total;
        }
    }
    if expected == 0.0 {
        return Stat::undefined("expected disagreement is 0 (both raters used a single label)");
    }
    Stat::Defined(1.0 - observed / expected)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    const SCALE: [i64; 5] = [1, 2, 3, 4, 5];

    fn check(a: &[i64], b: &[i64], labels: &[i64], expected: [f64; 3]) {
        for (weights, want) in [Weights::None, Weights::Linear, Weights::Quadratic].into_iter().zip(expected) {
            assert_relative_eq!(cohen(a, b, labels, weights).unwrap(), want, max_relative = 1e-12);
        }
    }

    #[test]
    fn five_point_scale() {
        // scikit-learn 1.9.1: cohen_kappa_score(a, b, labels=[1,2,3,4,5], weights=w) for
        // w = None, "linear", "quadratic" -> 0.4642857142857142, 0.7, 0.8648648648648649
        let a = [1, 2, 3, 4, 5, 3, 2, 4, 5, 1, 3, 3];
        let b = [1, 3, 3, 4, 4, 3, 2, 5, 5, 2, 2, 3];
        check(&a, &b, &SCALE, [0.4642857142857142, 0.7, 0.8648648648648649]);
    }

    #[test]
    fn weights_span_the_whole_scale_not_only_observed_labels() {
        // Ratings use 1, 2 and 5 only; 3 and 4 are on the scale but never used.
        // scikit-learn 1.9.1, labels=[1,2,3,4,5]: 0.23809523809523814, 0.4385964912280702,
        // 0.5628415300546448; without labels (positions 1,2,5 -> 0,1,2) linear and quadratic
        // give 0.40740740740740744 and 0.5897435897435898 instead.
        let a = [1, 2, 5, 5, 1, 2, 2, 5];
        let b = [1, 5, 5, 2, 2, 2, 1, 5];
        check(&a, &b, &SCALE, [0.23809523809523814, 0.4385964912280702, 0.5628415300546448]);
        check(&a, &b, &[1, 2, 5], [0.23809523809523814, 0.40740740740740744, 0.5897435897435898]);
    }

    #[test]
    fn binary_labels() {
        // scikit-learn 1.9.1: cohen_kappa_score([0,1,1,0,1,0,0,1], [0,1,0,0,1,1,0,1]) -> 0.5
        let kappa = cohen(&[0, 1, 1, 0, 1, 0, 0, 1], &[0, 1, 0, 0, 1, 1, 0, 1], &[0, 1], Weights::None);
        assert_relative_eq!(kappa.unwrap(), 0.5, max_relative = 1e-12);
    }

    #[test]
    fn degenerate_inputs_are_undefined() {
        let undefined = |s: Stat<f64>| match s {
            Stat::Undefined(reason) => reason,
            Stat::Defined(v) => panic!("expected undefined, got {v}"),
        };
        let reason = undefined(cohen(&[1, 2, 7], &[1, 2, 3], &SCALE, Weights::Linear));
        assert!(reason.contains("item 2") && reason.contains('7'), "{reason}");
        undefined(cohen(&[3, 3], &[3, 3], &SCALE, Weights::Quadratic));
        undefined(cohen(&[1, 2], &[1], &SCALE, Weights::None));
        undefined(cohen(&[], &[], &SCALE, Weights::None));
        undefined(cohen(&[1, 2], &[1, 2], &[1, 2, 2], Weights::None));
    }
}
