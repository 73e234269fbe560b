//! Spearman's and Pearson's correlation with scipy's p-values.

use super::ranks::{average_ranks, Order};
use super::{check_paired, Stat};
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};
use statrs::function::beta::beta_reg;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Correlation {
    pub r: f64,
    /// Two-sided p-value for H0: no correlation.
    pub p_value: f64,
    pub n: usize,
}

/// Spearman's rho = Pearson's r on average ranks (correct with ties, unlike 1-6Σd²);
/// p from Student's t with n-2 df, as `scipy.stats.spearmanr`. Undefined when the lengths
/// differ, n < 3, NaN, or either side is constant.
pub fn spearman(x: &[f64], y: &[f64]) -> Stat<Correlation> {
    if let Some(reason) = check_inputs(x, y) {
        return Stat::Undefined(reason);
    }
    let rank_x = average_ranks(x, Order::LowerIsBetter);
    let rank_y = average_ranks(y, Order::LowerIsBetter);
    let r = pearson_r(&rank_x, &rank_y);
    let df = (x.len() - 2) as f64;
    let p_value = if r.abs() == 1.0 {
        0.0
    } else {
        let t = r * (df / ((r + 1.0) * (1.0 - r))).sqrt();
        let student = StudentsT::new(0.0, 1.0, df).expect("df >= 1");
        2.0 * student.sf(t.abs())
    };
    Stat::Defined(Correlation { r, p_value, n: x.len() })
}

/// Pearson's r; p from the exact null distribution (beta on [-1, 1] with a = b = n/2-1),
/// as `scipy.stats.pearsonr`. Undefined when the lengths differ, n < 3 (scipy returns
/// r = ±1, p = 1 for n = 2, which says nothing), NaN, or either side is constant.
pub fn pearson(x: &[f64], y: &[f64]) -> Stat<Correlation> {
    if let Some(reason) = check_inputs(x, y) {
        return Stat::Undefined(reason);
    }
    let r = pearson_r(x, y);
    let a = x.len() as f64 / 2.0 - 1.0;
    // 2 * P(R >= |r|) with (R + 1)/2 ~ Beta(a, a), i.e. 2 * I_{(1-|r|)/2}(a, a).
    let p_value = (2.0 * beta_reg(a, a, (1.0 - r.abs()) / 2.0)).min(1.0);
    Stat::Defined(Correlation { r, p_value, n: x.len() })
}

/// The reason a correlation of `x` and `y` is undefined, if it is.
fn check_inputs(x: &[f64], y: &[f64]) -> Option<String> {
    if let Some(reason) = check_paired(x, y) {
        return Some(reason);
    }
    if x.len() < 3 {
        return Some(format!("a correlation needs at least 3 pairs, got {}", x.len()));
    }
    for (values, name) in [(x, "x"), (y, "y")] {
        if values.iter().all(|&v| v == values[0]) {
            return Some(format!("{name} is constant"));
        }
    }
    None
}

/// Pearson's r of non-constant samples, computed like scipy: centre, scale each side to
/// unit norm (after dividing by the largest deviation, so huge values cannot overflow),
/// dot product, clamp to [-1, 1].
fn pearson_r(x: &[f64], y: &[f64]) -> f64 {
    let unit_deviations = |values: &[f64]| -> Vec<f64> {
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        let deviations: Vec<f64> = values.iter().map(|v| v - mean).collect();
        let largest = deviations.iter().fold(0.0f64, |m, d| m.max(d.abs()));
        let norm = largest * deviations.iter().map(|d| (d / largest).powi(2)).sum::<f64>().sqrt();
        deviations.iter().map(|d| d / norm).collect()
    };
    let (ux, uy) = (unit_deviations(x), unit_deviations(y));
    ux.iter().zip(&uy).map(|(a, b)| a * b).sum::<f64>().clamp(-1.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn check(result: Stat<Correlation>, r: f64, p_value: f64) {
        let c = result.unwrap();
        assert_relative_eq!(c.r, r, max_relative = 1e-12);
        assert_relative_eq!(c.p_value, p_value, max_relative = 1e-9);
    }

    #[test]
    fn spearman_with_ties_uses_average_ranks() {
        // scipy 1.17.1: spearmanr([1,2,2,3,4,5,5,5,6,7], [2,1,3,3,5,4,6,6,8,7])
        // -> (0.9257365248800182, 0.00012157407536297869)
        // pearsonr of the same -> (0.9053918186901422, 0.00031225866901209365)
        let x = [1., 2., 2., 3., 4., 5., 5., 5., 6., 7.];
        let y = [2., 1., 3., 3., 5., 4., 6., 6., 8., 7.];
        check(spearman(&x, &y), 0.9257365248800182, 0.00012157407536297869);
        check(pearson(&x, &y), 0.9053918186901422, 0.00031225866901209365);
    }

    #[test]
    fn continuous_values() {
        // scipy 1.17.1: x = [2.5,0.3,1.7,4.4,3.1,0.9,2.2], y = [10.1,3.2,7.7,12.0,8.8,5.5,4.9]
        // spearmanr -> (0.8571428571428573, 0.013697326615325618)
        // pearsonr  -> (0.8802224111119548, 0.008931837750278301)
        let x = [2.5, 0.3, 1.7, 4.4, 3.1, 0.9, 2.2];
        let y = [10.1, 3.2, 7.7, 12.0, 8.8, 5.5, 4.9];
        check(spearman(&x, &y), 0.8571428571428573, 0.013697326615325618);
        check(pearson(&x, &y), 0.8802224111119548, 0.008931837750278301);
        // scipy 1.17.1: spearmanr([1,2,3,4,5],[5,3,4,1,2]) -> (-0.7999999999999999, 0.10408803866182788)
        // pearsonr of the same -> (-0.8, 0.10408803866182782)
        let (x, y) = ([1., 2., 3., 4., 5.], [5., 3., 4., 1., 2.]);
        check(spearman(&x, &y), -0.8, 0.10408803866182788);
        check(pearson(&x, &y), -0.8, 0.10408803866182782);
        // scipy 1.17.1: spearmanr([1,2,3],[1,3,2]) and pearsonr -> (0.5, 0.6666666666666666)
        check(spearman(&[1., 2., 3.], &[1., 3., 2.]), 0.5, 0.6666666666666666);
        check(pearson(&[1., 2., 3.], &[1., 3., 2.]), 0.5, 0.6666666666666666);
    }

    #[test]
    fn larger_sample() {
        // scipy 1.17.1, n = 500: x = [(i*7919) % 1009 for i in range(n)],
        // y = [((i*7919) % 1009)*0.01 + ((i*104729) % 2003) for i in range(n)]
        // spearmanr -> (-0.03355587822351289, 0.4540590787249613)
        // pearsonr  -> (-0.02869862969982391, 0.5220122912510634)
        let x: Vec<f64> = (0..500).map(|i| f64::from((i * 7919) % 1009)).collect();
        let y: Vec<f64> =
            (0..500).map(|i| f64::from((i * 7919) % 1009) * 0.01 + f64::from((i * 104729) % 2003)).collect();
        check(spearman(&x, &y), -0.03355587822351289, 0.4540590787249613);
        check(pearson(&x, &y), -0.02869862969982391, 0.5220122912510634);
    }

    #[test]
    fn hundred_thousand_pairs() {
        // scipy 1.17.1, n = 100000 (same data as kendall's test of this size):
        // spearmanr(x, y) -> (0.00657456872121995, 0.037612051264856006)
        let x: Vec<f64> = (0..100_000i64).map(|i| ((i * 7919) % 100_003 % 1000) as f64).collect();
        let y: Vec<f64> = (0..100_000i64)
            .map(|i| ((i * 104_729) % 100_019 % 1500 + ((i * 7919) % 100_003 % 1000) / 100) as f64)
            .collect();
        check(spearman(&x, &y), 0.00657456872121995, 0.037612051264856006);
    }

    #[test]
    fn perfect_association_has_p_zero() {
        // scipy 1.17.1: pearsonr([1,2,3,4,5],[2,4,6,8,10]) -> (1.0, 0.0). spearmanr prints
        // (0.9999999999999999, 1.4e-24) from rounding in np.corrcoef; exactly 1 and 0 here.
        let (x, y) = ([1., 2., 3., 4., 5.], [2., 4., 6., 8., 10.]);
        check(pearson(&x, &y), 1.0, 0.0);
        let s = spearman(&x, &y).unwrap();
        assert_relative_eq!(s.r, 1.0, max_relative = 1e-15);
        assert!(s.p_value < 1e-20);
    }

    #[test]
    fn degenerate_inputs_are_undefined() {
        for f in [spearman, pearson] {
            assert!(!f(&[1., 2.], &[2., 1.]).is_defined());
            assert!(!f(&[1., 1., 1.], &[1., 2., 3.]).is_defined());
            assert!(!f(&[1., 2., 3.], &[1., 2.]).is_defined());
            assert!(!f(&[1., 2., f64::NAN], &[1., 2., 3.]).is_defined());
        }
    }
}
