//! Krippendorff's alpha, coincidence-matrix formulation (Krippendorff 2011,
//! "Computing Krippendorff's Alpha-Reliability").
//!
//! alpha = 1 - D_o / D_e, with D_o = Σ_ck o_ck δ²_ck / n (observed disagreement, from the
//! coincidence matrix o of pairable values) and D_e = Σ_ck n_c n_k δ²_ck / (n (n-1))
//! (expected disagreement, from the marginals n_c; n = Σ_c n_c). Cost: O(Σ_u m_u² + V²) for
//! units with m_u values and V distinct values.

use super::Stat;
use std::cmp::Ordering;

/// Level of measurement, which picks the distance between two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Nominal,
    /// Distance from the marginals: (Σ_{g=c..k} n_g - (n_c + n_k)/2)².
    Ordinal,
    Interval,
    Ratio,
}

/// `reliability[coder][unit]`, `None` = missing. Units with fewer than two values cannot be
/// paired and drop out. Undefined when no unit has two values, when there is no variation
/// among the pairable values, on NaN, or when coders' rows differ in length.
pub fn alpha(reliability: &[Vec<Option<f64>>], level: Level) -> Stat<f64> {
    let units = match pairable_units(reliability) {
        Ok(units) => units,
        Err(reason) => return Stat::Undefined(reason),
    };
    if units.is_empty() {
        return Stat::undefined("no unit has values from two or more coders");
    }

    // The distinct values in order (the value domain), and each value's marginal count n_c.
    let mut domain: Vec<f64> = units.iter().flatten().copied().collect();
    domain.sort_by(|a, b| a.partial_cmp(b).unwrap_or(Ordering::Equal));
    domain.dedup();
    if domain.len() < 2 {
        return Stat::undefined("no variation: every pairable value is the same");
    }
    let index_of = |v: f64| domain.partition_point(|&d| d < v);
    let mut marginals = vec![0.0; domain.len()];
    for &v in units.iter().flatten() {
        marginals[index_of(v)] += 1.0;
    }
    let distance = Distance::new(level, &domain, &marginals);

    // Observed: every ordered pair of values from different coders within a unit, weighed
    // 1/(m_u - 1), so that each unit contributes m_u pairable values in total.
    let mut observed = 0.0;
    for unit in &units {
        let indices: Vec<usize> = unit.iter().map(|&v| index_of(v)).collect();
        let mut unit_sum = 0.0;
        for (a, &i) in indices.iter().enumerate() {
            for &j in &indices[a + 1..] {
                unit_sum += 2.0 * distance.squared(i, j);
            }
        }
        observed += unit_sum / (unit.len() as f64 - 1.0);
    }
    let mut expected = 0.0;
    for i in 0..domain.len() {
        for j in i + 1..domain.len() {
            expected += 2.0 * marginals[i] * marginals[j] * distance.squared(i, j);
        }
    }
    if expected == 0.0 {
        return Stat::undefined("no variation: expected disagreement is 0");
    }
    let n: f64 = marginals.iter().sum();
    Stat::Defined(1.0 - (n - 1.0) * observed / expected)
}

/// The values of every unit coded by at least two coders.
fn pairable_units(reliability: &[Vec<Option<f64>>]) -> Result<Vec<Vec<f64>>, String> {
    let Some(first) = reliability.first() else {
        return Ok(Vec::new());
    };
    let unit_count = first.len();
    for (coder, row) in reliability.iter().enumerate() {
        if row.len() != unit_count {
            return Err(format!("coder {coder} has {} units, coder 0 has {unit_count}", row.len()));
        }
        if let Some(unit) = row.iter().position(|v| v.is_some_and(f64::is_nan)) {
            return Err(format!("coder {coder}, unit {unit} is NaN (use None for missing)"));
        }
    }
    Ok((0..unit_count)
        .map(|unit| reliability.iter().filter_map(|row| row[unit]).collect::<Vec<f64>>())
        .filter(|values| values.len() >= 2)
        .collect())
}

/// δ² between values of the domain, addressed by their index in it.
struct Distance<'a> {
    level: Level,
    domain: &'a [f64],
    marginals: &'a [f64],
    /// cumulative[i] = Σ_{g < i} n_g (ordinal metric).
    cumulative: Vec<f64>,
}

impl<'a> Distance<'a> {
    fn new(level: Level, domain: &'a [f64], marginals: &'a [f64]) -> Self {
        let mut cumulative = vec![0.0; marginals.len() + 1];
        for (i, n) in marginals.iter().enumerate() {
            cumulative[i + 1] = cumulative[i] + n;
        }
        Distance { level, domain, marginals, cumulative }
    }

    fn squared(&self, i: usize, j: usize) -> f64 {
        if i == j {
            return 0.0;
        }
        let (c, k) = (self.domain[i], self.domain[j]);
        match self.level {
            Level::Nominal => 1.0,
            Level::Ordinal => {
                let (low, high) = (i.min(j), i.max(j));
                let between = self.cumulative[high + 1] - self.cumulative[low];
                (between - (self.marginals[low] + self.marginals[high]) / 2.0).powi(2)
            }
            Level::Interval => (c - k).powi(2),
            // 0 when c + k = 0, as in the `krippendorff` package.
            Level::Ratio => {
                if c + k == 0.0 {
                    0.0
                } else {
                    ((c - k) / (c + k)).powi(2)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    const M: f64 = f64::NAN; // missing, in the tables below

    fn data(rows: &[&[f64]]) -> Vec<Vec<Option<f64>>> {
        rows.iter().map(|row| row.iter().map(|&v| if v.is_nan() { None } else { Some(v) }).collect()).collect()
    }

    fn check(reliability: &[Vec<Option<f64>>], expected: [f64; 4]) {
        let levels = [Level::Nominal, Level::Ordinal, Level::Interval, Level::Ratio];
        for (level, want) in levels.into_iter().zip(expected) {
            let got = alpha(reliability, level).unwrap();
            assert_relative_eq!(got, want, max_relative = 1e-12);
        }
    }

    #[test]
    fn three_coders_fifteen_units() {
        // The `krippendorff` package's docstring / Wikipedia example (3 coders, 15 units).
        // krippendorff 0.9.0: alpha(reliability_data=d, level_of_measurement=L) ->
        // nominal 0.691358024691358, ordinal 0.8067214199413153,
        // interval 0.8108448928121059, ratio 0.8089436707842471
        // (the 0.691 / 0.811 quoted in methods.md come from this table).
        let d = data(&[
            &[M, M, M, M, M, 3., 4., 1., 2., 1., 1., 3., 3., M, 3.],
            &[1., M, 2., 1., 3., 3., 4., 3., M, M, M, M, M, M, M],
            &[M, M, 2., 1., 3., 4., 4., M, 2., 1., 1., 3., 3., M, 4.],
        ]);
        check(&d, [0.691358024691358, 0.8067214199413153, 0.8108448928121059, 0.8089436707842471]);
    }

    #[test]
    fn krippendorff_2011_four_coders_twelve_units() {
        // Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", example C:
        // nominal .743, ordinal .815, interval .849, ratio .797. Full precision from
        // krippendorff 0.9.0: 0.743421052631579, 0.8153875037548814,
        // 0.8491071428571428, 0.7974027747116121.
        let d = data(&[
            &[1., 2., 3., 3., 2., 1., 4., 1., 2., M, M, M],
            &[1., 2., 3., 3., 2., 2., 4., 1., 2., 5., M, 3.],
            &[M, 3., 3., 3., 2., 3., 4., 2., 2., 5., 1., M],
            &[1., 2., 3., 3., 2., 4., 4., 1., 2., 5., 1., M],
        ]);
        check(&d, [0.743421052631579, 0.8153875037548814, 0.8491071428571428, 0.7974027747116121]);
    }

    #[test]
    fn non_integer_values() {
        // krippendorff 0.9.0 on this table -> nominal 0.30612244897959195,
        // ordinal 0.9661295911295912, interval 0.9755291785638436, ratio 0.9763686773877672
        let d = data(&[
            &[1.5, 2.0, 7.25, M, 3.0, 0.5, 9.0],
            &[1.5, 2.5, 7.0, 4.0, 3.5, M, 8.0],
            &[2.0, 2.0, 6.0, 4.0, M, 0.5, 9.5],
        ]);
        check(&d, [0.30612244897959195, 0.9661295911295912, 0.9755291785638436, 0.9763686773877672]);
    }

    #[test]
    fn perfect_agreement_is_one() {
        let d = data(&[&[1., 2., 3., M], &[1., 2., 3., 4.]]);
        assert_eq!(alpha(&d, Level::Nominal).unwrap(), 1.0);
    }

    #[test]
    fn degenerate_inputs_are_undefined() {
        // No variation at all.
        assert!(!alpha(&data(&[&[2., 2., 2.], &[2., 2., M]]), Level::Ordinal).is_defined());
        // No unit with two values (the 5 in unit 3 is not pairable).
        assert!(!alpha(&data(&[&[1., M, 5.], &[M, 2., M]]), Level::Nominal).is_defined());
        assert!(!alpha(&[], Level::Interval).is_defined());
        assert!(!alpha(&[vec![Some(1.0)], vec![Some(1.0), Some(2.0)]], Level::Nominal).is_defined());
        assert!(!alpha(&[vec![Some(f64::NAN)], vec![Some(1.0)]], Level::Nominal).is_defined());
    }
}
