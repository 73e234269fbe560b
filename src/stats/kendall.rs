//! Kendall's tau-b with scipy's p-value, in O(n log n) (Knight's merge-sort algorithm).
//!
//! Knight (1966): sort the pairs by (x, y); then a pair of observations is discordant
//! exactly when its y values are out of order, so merge-sorting y counts the discordant
//! pairs while sorting. Ties are counted from runs of equal values.

use super::{check_paired, Stat};
use serde::Serialize;
use statrs::function::erf::erfc;
use std::cmp::Ordering;

/// How the p-value was obtained (scipy's `method='auto'` rule picks one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PValueMethod {
    /// Exact null distribution of the number of discordant pairs (no ties, n <= 33 or
    /// almost perfect (dis)agreement).
    Exact,
    /// Normal approximation with the tie-corrected variance.
    Asymptotic,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Kendall {
    pub tau: f64,
    /// Two-sided p-value for H0: tau = 0.
    pub p_value: f64,
    pub n: usize,
    pub method: PValueMethod,
}

/// Kendall's tau-b between paired samples, identical to `scipy.stats.kendalltau(x, y)`
/// (variant 'b', method 'auto', two-sided). Undefined when the lengths differ, n < 2,
/// any value is NaN, or x or y is all tied (tau-b divides by zero there).
pub fn tau_b(x: &[f64], y: &[f64]) -> Stat<Kendall> {
    if let Some(reason) = check_paired(x, y) {
        return Stat::Undefined(reason);
    }
    let n = x.len();
    if n < 2 {
        return Stat::undefined(format!("Kendall's tau needs at least 2 pairs, got {n}"));
    }
    let counts = PairCounts::of(x, y);
    let total = counts.total_pairs;
    if counts.x_ties.pairs == total || counts.y_ties.pairs == total {
        let side = if counts.x_ties.pairs == total { "x" } else { "y" };
        return Stat::undefined(format!("all values of {side} are tied"));
    }
    // concordant - discordant, from total = con + dis + x_ties + y_ties - joint_ties.
    let con_minus_dis = total as f64 - counts.x_ties.pairs as f64 - counts.y_ties.pairs as f64
        + counts.joint_tie_pairs as f64
        - 2.0 * counts.discordant as f64;
    let tau =
        con_minus_dis / ((total - counts.x_ties.pairs) as f64).sqrt() / ((total - counts.y_ties.pairs) as f64).sqrt();
    let tau = tau.clamp(-1.0, 1.0);

    let no_ties = counts.x_ties.pairs == 0 && counts.y_ties.pairs == 0;
    let near_perfect = counts.discordant.min(total - counts.discordant) <= 1;
    let (p_value, method) = if no_ties && (n <= 33 || near_perfect) {
        (exact_p_value(n as u64, total - counts.discordant), PValueMethod::Exact)
    } else {
        (asymptotic_p_value(n, con_minus_dis, &counts), PValueMethod::Asymptotic)
    };
    Stat::Defined(Kendall { tau, p_value, n, method })
}

/// Pair counts of a paired sample.
struct PairCounts {
    total_pairs: u64,
    discordant: u64,
    /// Pairs tied in both x and y.
    joint_tie_pairs: u64,
    x_ties: TieSums,
    y_ties: TieSums,
}

/// Sums over the tie groups (sizes t) of one variable, as scipy's `count_rank_tie`.
#[derive(Default)]
struct TieSums {
    /// Σ t(t-1)/2: tied pairs.
    pairs: u64,
    /// Σ t(t-1)(t-2) (variance term).
    v1: f64,
    /// Σ t(t-1)(2t+5) (variance term).
    v2: f64,
}

impl TieSums {
    /// Tie sums of a sorted slice (equal values are adjacent).
    fn of_sorted(sorted: &[f64]) -> Self {
        let mut sums = TieSums::default();
        for size in run_lengths(sorted, |a, b| a == b) {
            let t = size as u64;
            let tf = size as f64;
            sums.pairs += t * (t - 1) / 2;
            sums.v1 += tf * (tf - 1.0) * (tf - 2.0);
            sums.v2 += tf * (tf - 1.0) * (2.0 * tf + 5.0);
        }
        sums
    }
}

impl PairCounts {
    fn of(x: &[f64], y: &[f64]) -> Self {
        let n = x.len();
        let mut pairs: Vec<(f64, f64)> = x.iter().copied().zip(y.iter().copied()).collect();
        // No NaN here (checked), so partial_cmp never fails; -0.0 and 0.0 tie as in numpy.
        let by_value = |a: &f64, b: &f64| a.partial_cmp(b).unwrap_or(Ordering::Equal);
        pairs.sort_by(|a, b| by_value(&a.0, &b.0).then_with(|| by_value(&a.1, &b.1)));

        let xs: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let x_ties = TieSums::of_sorted(&xs);
        let joint_tie_pairs = run_lengths(&pairs, |a, b| a.0 == b.0 && a.1 == b.1)
            .into_iter()
            .map(|t| (t as u64) * (t as u64 - 1) / 2)
            .sum();

        let mut ys: Vec<f64> = pairs.iter().map(|p| p.1).collect();
        let discordant = sort_counting_inversions(&mut ys);
        let y_ties = TieSums::of_sorted(&ys);

        PairCounts { total_pairs: (n as u64) * (n as u64 - 1) / 2, discordant, joint_tie_pairs, x_ties, y_ties }
    }
}

/// Lengths of the runs of adjacent equal items.
fn run_lengths<T>(items: &[T], equal: impl Fn(&T, &T) -> bool) -> Vec<usize> {
    let mut lengths = Vec::new();
    let mut start = 0;
    while start < items.len() {
        let mut end = start + 1;
        while end < items.len() && equal(&items[end], &items[start]) {
            end += 1;
        }
        lengths.push(end - start);
        start = end;
    }
    lengths
}

/// Sorts `values` ascending (stable bottom-up merge sort) and returns the number of pairs
/// i < j with values[i] > values[j] (strict: equal values are not inversions).
fn sort_counting_inversions(values: &mut Vec<f64>) -> u64 {
    let n = values.len();
    let mut buffer = vec![0.0; n];
    let mut inversions = 0u64;
    let mut width = 1;
    while width < n {
        let mut start = 0;
        while start < n {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (mut left, mut right, mut out) = (start, mid, start);
            while left < mid && right < end {
                if values[left] <= values[right] {
                    buffer[out] = values[left];
                    left += 1;
                } else {
                    // values[right] is smaller than every remaining left value.
                    inversions += (mid - left) as u64;
                    buffer[out] = values[right];
                    right += 1;
                }
                out += 1;
            }
            buffer[out..out + (mid - left)].copy_from_slice(&values[left..mid]);
            out += mid - left;
            buffer[out..out + (end - right)].copy_from_slice(&values[right..end]);
            start = end;
        }
        std::mem::swap(values, &mut buffer);
        width *= 2;
    }
    inversions
}

/// Two-sided exact p-value of `concordant` concordant pairs among n untied observations
/// (Kendall 1970), following scipy's `_kendall_p_exact`: the null distribution of the
/// number of inversions counted with the recurrence of Mahonian numbers, left tail doubled.
/// `tau_b` calls it for n <= 33, or for any n when c <= 1 (closed forms), so n! never
/// overflows in the general branch.
fn exact_p_value(n: u64, concordant: u64) -> f64 {
    let total = n * (n - 1) / 2;
    let c = concordant.min(total - concordant) as usize;
    let p = if n <= 2 {
        1.0
    } else if c == 0 {
        if n < 171 {
            2.0 / factorial(n)
        } else {
            0.0
        }
    } else if c == 1 {
        if n < 172 {
            2.0 / factorial(n - 1)
        } else {
            0.0
        }
    } else if 4 * c as u64 == n * (n - 1) {
        1.0
    } else {
        // counts[j] = number of permutations of the first m items with j inversions (j <= c),
        // built up for m = 3..n by a running sum over a window of width m.
        let mut counts = vec![0.0f64; c + 1];
        counts[0] = 1.0;
        counts[1] = 1.0;
        for m in 3..=n as usize {
            for j in 1..=c {
                counts[j] += counts[j - 1];
            }
            if m <= c {
                for j in (m..=c).rev() {
                    counts[j] -= counts[j - m];
                }
            }
        }
        debug_assert!(n < 171, "n! overflows f64");
        2.0 * counts.iter().sum::<f64>() / factorial(n)
    };
    p.clamp(0.0, 1.0)
}

fn factorial(n: u64) -> f64 {
    (1..=n).map(|k| k as f64).product()
}

/// Two-sided p-value from the normal approximation of concordant - discordant with the
/// tie-corrected variance (Kendall 1970; scipy's formula).
fn asymptotic_p_value(n: usize, con_minus_dis: f64, counts: &PairCounts) -> f64 {
    let size = n as f64;
    let m = size * (size - 1.0);
    let (x, y) = (&counts.x_ties, &counts.y_ties);
    let variance = (m * (2.0 * size + 5.0) - x.v2 - y.v2) / 18.0
        + (2.0 * x.pairs as f64 * y.pairs as f64) / m
        + x.v1 * y.v1 / (9.0 * m * (size - 2.0));
    let z = con_minus_dis / variance.sqrt();
    // 2 * P(Z > |z|) = erfc(|z| / sqrt 2).
    erfc(z.abs() / std::f64::consts::SQRT_2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn check(x: &[f64], y: &[f64], tau: f64, p_value: f64, method: PValueMethod) {
        let result = tau_b(x, y).unwrap();
        assert_relative_eq!(result.tau, tau, max_relative = 1e-12, epsilon = 1e-15);
        assert_relative_eq!(result.p_value, p_value, max_relative = 1e-9, epsilon = 1e-300);
        assert_eq!(result.method, method);
        assert_eq!(result.n, x.len());
    }

    fn as_f64(values: &[i64]) -> Vec<f64> {
        values.iter().map(|&v| v as f64).collect()
    }

    #[test]
    fn ties_use_the_tie_corrected_normal_approximation() {
        // scipy 1.17.1 docstring: kendalltau([12, 2, 1, 12, 2], [1, 4, 7, 1, 0])
        // -> (-0.4714045207910316, 0.28274545993277467)
        check(
            &[12.0, 2.0, 1.0, 12.0, 2.0],
            &[1.0, 4.0, 7.0, 1.0, 0.0],
            -0.4714045207910316,
            0.28274545993277467,
            PValueMethod::Asymptotic,
        );
        // scipy 1.17.1: kendalltau([1,1,2,2,3,3], [1,2,1,2,1,2]) -> (0.0, 1.0)
        check(&[1., 1., 2., 2., 3., 3.], &[1., 2., 1., 2., 1., 2.], 0.0, 1.0, PValueMethod::Asymptotic);
    }

    #[test]
    fn small_untied_samples_use_the_exact_distribution() {
        // scipy 1.17.1: kendalltau(range(1, 11), [3,1,2,5,4,8,10,6,9,7])
        // -> (0.6, 0.016666115520282188)
        check(
            &as_f64(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]),
            &as_f64(&[3, 1, 2, 5, 4, 8, 10, 6, 9, 7]),
            0.6,
            0.016666115520282188,
            PValueMethod::Exact,
        );
        // scipy 1.17.1: kendalltau([1,2,3,4], [2,4,1,3]) -> (0.0, 1.0)  (4c = n(n-1) branch)
        check(&[1., 2., 3., 4.], &[2., 4., 1., 3.], 0.0, 1.0, PValueMethod::Exact);
        // scipy 1.17.1: x = range(25); y = 24 - x with y[3]<->y[4] and y[7]<->y[9] swapped:
        // kendalltau(x, y) -> (-0.973333333333333, 2.594768550459063e-21)
        let x: Vec<f64> = (0..25).map(f64::from).collect();
        let mut y: Vec<f64> = (0..25).map(|i| f64::from(24 - i)).collect();
        y.swap(3, 4);
        y.swap(7, 9);
        check(&x, &y, -0.973333333333333, 2.594768550459063e-21, PValueMethod::Exact);
    }

    #[test]
    fn large_untied_samples() {
        // scipy 1.17.1: x = [(i*17) % 41 for i in range(40)],
        // y = [(i*i*7 + 3*i) % 101 + i/1000 for i in range(40)] (no ties, n > 33)
        // kendalltau(x, y) -> (0.1512820512820513, 0.1691866115840288)
        let x: Vec<f64> = (0..40).map(|i| f64::from((i * 17) % 41)).collect();
        let y: Vec<f64> = (0..40).map(|i| f64::from((i * i * 7 + 3 * i) % 101) + f64::from(i) / 1000.0).collect();
        check(&x, &y, 0.1512820512820513, 0.1691866115840288, PValueMethod::Asymptotic);

        // scipy 1.17.1: x = range(50), y = x with y[10]<->y[11]: one discordant pair, so the
        // exact p even though n > 33 -> (0.9983673469387755, 3.287949416633158e-63)
        let x: Vec<f64> = (0..50).map(f64::from).collect();
        let mut y = x.clone();
        y.swap(10, 11);
        check(&x, &y, 0.9983673469387755, 3.287949416633158e-63, PValueMethod::Exact);

        // scipy 1.17.1: x = y = range(200) -> (1.0, 0.0); with y[0]<->y[1]
        // -> (0.9998994974874371, 0.0)  (n!/2 overflows, scipy returns 0)
        let x: Vec<f64> = (0..200).map(f64::from).collect();
        check(&x, &x, 1.0, 0.0, PValueMethod::Exact);
        let mut y = x.clone();
        y.swap(0, 1);
        check(&x, &y, 0.9998994974874371, 0.0, PValueMethod::Exact);
    }

    #[test]
    fn many_ties_large_n() {
        // scipy 1.17.1, n = 3000:
        // x = [(i*7919) % 1009 % 50 for i in range(n)]
        // y = [((i*104729) % 2003) % 70 + ((i*7919) % 1009 % 50)//10 for i in range(n)]
        // kendalltau(x, y) -> (0.04523140824113113, 0.00025905532540029135)
        let xi: Vec<i64> = (0..3000).map(|i| (i * 7919) % 1009 % 50).collect();
        let yi: Vec<i64> = (0..3000).map(|i| ((i * 104729) % 2003) % 70 + ((i * 7919) % 1009 % 50) / 10).collect();
        check(&as_f64(&xi), &as_f64(&yi), 0.04523140824113113, 0.00025905532540029135, PValueMethod::Asymptotic);
    }

    #[test]
    fn hundred_thousand_pairs() {
        // The size `medrank bench` times. scipy 1.17.1, n = 100000:
        // x = [(i*7919) % 100003 % 1000 for i in range(n)]
        // y = [(i*104729) % 100019 % 1500 + ((i*7919) % 100003 % 1000)//100 for i in range(n)]
        // kendalltau(x, y) -> (0.004365513200426061, 0.038545610081974394)
        let x: Vec<i64> = (0..100_000).map(|i| (i * 7919) % 100_003 % 1000).collect();
        let y: Vec<i64> =
            (0..100_000).map(|i| (i * 104_729) % 100_019 % 1500 + ((i * 7919) % 100_003 % 1000) / 100).collect();
        check(&as_f64(&x), &as_f64(&y), 0.004365513200426061, 0.038545610081974394, PValueMethod::Asymptotic);
    }

    /// tau-b straight from its definition, O(n²).
    fn naive_tau_b(x: &[f64], y: &[f64]) -> f64 {
        let (mut s, mut untied_x, mut untied_y) = (0i64, 0i64, 0i64);
        for i in 0..x.len() {
            for j in i + 1..x.len() {
                let dx = (x[i] - x[j]).signum() as i64 * i64::from(x[i] != x[j]);
                let dy = (y[i] - y[j]).signum() as i64 * i64::from(y[i] != y[j]);
                s += dx * dy;
                untied_x += dx.abs();
                untied_y += dy.abs();
            }
        }
        s as f64 / ((untied_x as f64) * (untied_y as f64)).sqrt()
    }

    #[test]
    fn merge_sort_count_equals_the_definition() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for round in 0..50 {
            let n = rng.gen_range(2..300u32) as usize;
            let levels = 1 + round % 12; // few levels = many ties
            let x: Vec<f64> = (0..n).map(|_| rng.gen_range(0..levels) as f64).collect();
            let y: Vec<f64> = (0..n).map(|_| rng.gen_range(0..levels + 3) as f64).collect();
            match tau_b(&x, &y) {
                Stat::Defined(k) => {
                    assert_relative_eq!(k.tau, naive_tau_b(&x, &y), epsilon = 1e-12)
                }
                Stat::Undefined(_) => assert!(naive_tau_b(&x, &y).is_nan()),
            }
        }
    }

    #[test]
    fn degenerate_inputs_are_undefined() {
        assert!(!tau_b(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]).is_defined());
        assert!(!tau_b(&[1.0, 2.0, 3.0], &[4.0, 4.0, 4.0]).is_defined());
        assert!(!tau_b(&[1.0], &[2.0]).is_defined());
        assert!(!tau_b(&[], &[]).is_defined());
        assert!(!tau_b(&[1.0, 2.0], &[1.0]).is_defined());
        assert!(!tau_b(&[1.0, f64::NAN, 3.0], &[1.0, 2.0, 3.0]).is_defined());
    }

    #[test]
    fn inversion_count() {
        let mut values = vec![3.0, 1.0, 2.0, 2.0, 0.0];
        // (3,1) (3,2) (3,2) (3,0) (1,0) (2,0) (2,0) = 7; the two 2s are not an inversion.
        assert_eq!(sort_counting_inversions(&mut values), 7);
        assert_eq!(values, vec![0.0, 1.0, 2.0, 2.0, 3.0]);
    }
}
