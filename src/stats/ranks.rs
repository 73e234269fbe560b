//! Ranks of values, ties handled explicitly.
//!
//! NaN policy (panic-free): a NaN is never compared; it gets rank NaN (`average_ranks`) or
//! `None` (`competition_ranks`) and the other values are ranked among themselves.

use std::cmp::Ordering;

/// Which end of the scale is rank 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// The largest value gets rank 1 (scores, accuracies).
    HigherIsBetter,
    /// The smallest value gets rank 1 (ranks, errors; scipy's `rankdata` convention).
    LowerIsBetter,
}

/// 1-based ranks; tied values share the average of the ranks they span
/// (`scipy.stats.rankdata(method="average")` for `LowerIsBetter`). O(n log n).
pub fn average_ranks(values: &[f64], order: Order) -> Vec<f64> {
    average_ranks_and_ties(values, order).0
}

/// Standard competition ranks ("1, 2, 2, 4") for display; `None` for NaN.
pub fn competition_ranks(values: &[f64], order: Order) -> Vec<Option<usize>> {
    let mut ranks = vec![None; values.len()];
    for group in tie_groups(values, order) {
        for &i in &group.members {
            ranks[i] = Some(group.first_rank);
        }
    }
    ranks
}

/// Average ranks plus the size of every tie group of two or more values (the tie
/// corrections of Friedman's and other rank tests need them).
pub(crate) fn average_ranks_and_ties(values: &[f64], order: Order) -> (Vec<f64>, Vec<usize>) {
    let mut ranks = vec![f64::NAN; values.len()];
    let mut tie_sizes = Vec::new();
    for group in tie_groups(values, order) {
        let size = group.members.len();
        // Ranks first_rank ..= first_rank + size - 1, averaged.
        let average = group.first_rank as f64 + (size as f64 - 1.0) / 2.0;
        for &i in &group.members {
            ranks[i] = average;
        }
        if size > 1 {
            tie_sizes.push(size);
        }
    }
    (ranks, tie_sizes)
}

/// Equal values, best first, with the 1-based rank of the first of them.
struct TieGroup {
    first_rank: usize,
    members: Vec<usize>,
}

/// Groups the non-NaN values into runs of equal values in rank order.
fn tie_groups(values: &[f64], order: Order) -> Vec<TieGroup> {
    let mut indices: Vec<usize> = (0..values.len()).filter(|&i| !values[i].is_nan()).collect();
    let compare = |a: &usize, b: &usize| -> Ordering {
        // -0.0 == 0.0 must tie, so compare with partial_cmp (no NaN is left here).
        let by_value = values[*a].partial_cmp(&values[*b]).unwrap_or(Ordering::Equal);
        match order {
            Order::LowerIsBetter => by_value,
            Order::HigherIsBetter => by_value.reverse(),
        }
    };
    indices.sort_by(compare);
    let mut groups: Vec<TieGroup> = Vec::new();
    let mut position = 0;
    while position < indices.len() {
        let mut end = position + 1;
        while end < indices.len() && values[indices[end]] == values[indices[position]] {
            end += 1;
        }
        groups.push(TieGroup { first_rank: position + 1, members: indices[position..end].to_vec() });
        position = end;
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_ranks_match_scipy_rankdata() {
        // scipy 1.17.1: scipy.stats.rankdata([3, 1, 4, 1, 5, 9, 2, 6, 5, 3])
        // -> [4.5, 1.5, 6., 1.5, 7.5, 10., 3., 9., 7.5, 4.5]
        let values = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0, 5.0, 3.0];
        assert_eq!(
            average_ranks(&values, Order::LowerIsBetter),
            vec![4.5, 1.5, 6.0, 1.5, 7.5, 10.0, 3.0, 9.0, 7.5, 4.5]
        );
        // scipy 1.17.1: scipy.stats.rankdata([-v for v in values])
        // -> [6.5, 9.5, 5., 9.5, 3.5, 1., 8., 2., 3.5, 6.5]
        assert_eq!(
            average_ranks(&values, Order::HigherIsBetter),
            vec![6.5, 9.5, 5.0, 9.5, 3.5, 1.0, 8.0, 2.0, 3.5, 6.5]
        );
    }

    #[test]
    fn competition_ranks_skip_after_ties() {
        // scipy 1.17.1: scipy.stats.rankdata([-0.9, -0.7, -0.7, -0.2], method="min")
        // -> [1, 2, 2, 4]
        let scores = [0.9, 0.7, 0.7, 0.2];
        assert_eq!(competition_ranks(&scores, Order::HigherIsBetter), vec![Some(1), Some(2), Some(2), Some(4)]);
    }

    #[test]
    fn nan_gets_no_rank_and_others_rank_among_themselves() {
        let values = [2.0, f64::NAN, 1.0, 2.0];
        let ranks = average_ranks(&values, Order::LowerIsBetter);
        assert!(ranks[1].is_nan());
        assert_eq!([ranks[0], ranks[2], ranks[3]], [2.5, 1.0, 2.5]);
        assert_eq!(competition_ranks(&values, Order::LowerIsBetter), vec![Some(2), None, Some(1), Some(2)]);
    }

    #[test]
    fn ties_are_reported_and_zero_signs_tie() {
        let (ranks, ties) = average_ranks_and_ties(&[0.0, -0.0, 5.0, 5.0, 5.0, 1.0], Order::LowerIsBetter);
        assert_eq!(ranks, vec![1.5, 1.5, 5.0, 5.0, 5.0, 3.0]);
        assert_eq!(ties, vec![2, 3]);
        assert!(average_ranks(&[], Order::LowerIsBetter).is_empty());
    }
}
