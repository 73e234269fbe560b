//! Seeded percentile bootstrap over units (instances, queries), paired by construction:
//! every statistic is computed on the same resampled units in each replicate, so
//! differences between systems can be read off the replicate matrix.
//!
//! Interval: the percentile method, the (1-c)/2 and (1+c)/2 quantiles of the replicates
//! with numpy's default quantile rule (see [`percentile`]).

use super::{check_no_nan, Interval, Stat};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

/// The confidence level of an interval must lie strictly between 0 and 1: the one check
/// (and message) every method and interval uses.
pub fn check_confidence(confidence: f64) -> Result<(), String> {
    if confidence > 0.0 && confidence < 1.0 {
        Ok(())
    } else {
        Err(format!("confidence must be in (0, 1), got {confidence}"))
    }
}

/// The most resamples a run takes: percentile intervals stop changing in their third
/// decimal long before, and each resample costs time and one statistic per system (a
/// larger count asked for is refused rather than left to exhaust the memory).
pub const MAX_RESAMPLES: usize = 1_000_000;

/// At least one resample and at most [`MAX_RESAMPLES`] (`--resamples`).
pub fn check_resamples(resamples: usize) -> Result<(), String> {
    if (1..=MAX_RESAMPLES).contains(&resamples) {
        Ok(())
    } else {
        Err(format!("resamples must be from 1 to {MAX_RESAMPLES}, got {resamples}"))
    }
}

/// [`check_confidence`] and [`check_resamples`]: every method checks its settings before
/// any work.
pub fn check_settings(resamples: usize, confidence: f64) -> Result<(), String> {
    check_confidence(confidence)?;
    check_resamples(resamples)
}

/// Settings of a bootstrap run: the one set of seed, resamples and confidence that every
/// method's options carry (flattened, so front ends send `seed`, `resamples`, `confidence`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Bootstrap {
    /// Number of resamples B.
    pub resamples: usize,
    /// Confidence level of the percentile interval, e.g. 0.95.
    pub confidence: f64,
    pub seed: u64,
}

impl Default for Bootstrap {
    /// The command line's defaults: 1000 resamples, 95 % intervals, seed 0.
    fn default() -> Self {
        Bootstrap { resamples: 1000, confidence: 0.95, seed: 0 }
    }
}

/// The replicates and the percentile interval of each statistic.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BootstrapResult {
    /// One interval per statistic (in the order the closure returns them).
    pub intervals: Vec<Stat<Interval>>,
    /// `replicates[b][s]` = statistic s on resample b (NaN where it was undefined).
    pub replicates: Vec<Vec<f64>>,
}

impl Bootstrap {
    /// Draws `resamples` samples of `n_units` unit indices with replacement and calls
    /// `statistics(indices)` on each; the closure returns one value per statistic (NaN =
    /// undefined on this resample). Undefined intervals: n_units = 0, resamples = 0,
    /// confidence outside (0, 1), or any NaN replicate of that statistic.
    ///
    /// Indices are drawn as `u32` from `ChaCha8Rng::seed_from_u64(seed)`, so a seed gives
    /// the same resamples on every platform (a `usize` draw would differ on wasm32).
    /// The closure must return the same number of values every time.
    pub fn run<F>(&self, n_units: usize, mut statistics: F) -> BootstrapResult
    where
        F: FnMut(&[usize]) -> Vec<f64>,
    {
        if n_units == 0 || self.resamples == 0 {
            return BootstrapResult { intervals: Vec::new(), replicates: Vec::new() };
        }
        let units = u32::try_from(n_units).expect("at most u32::MAX units can be resampled");
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut indices = vec![0usize; n_units];
        let mut replicates = Vec::with_capacity(self.resamples);
        for _ in 0..self.resamples {
            for index in indices.iter_mut() {
                *index = rng.gen_range(0..units) as usize;
            }
            replicates.push(statistics(&indices));
        }
        let count = replicates[0].len();
        assert!(
            replicates.iter().all(|r| r.len() == count),
            "the bootstrap closure returned different numbers of statistics"
        );
        let intervals = (0..count)
            .map(|s| {
                let column: Vec<f64> = replicates.iter().map(|r| r[s]).collect();
                self.interval(&column)
            })
            .collect();
        BootstrapResult { intervals, replicates }
    }

    /// The percentile interval of one statistic's replicates.
    fn interval(&self, replicates: &[f64]) -> Stat<Interval> {
        if let Err(reason) = check_confidence(self.confidence) {
            return Stat::Undefined(reason);
        }
        let undefined = replicates.iter().filter(|v| v.is_nan()).count();
        if undefined > 0 {
            return Stat::undefined(format!(
                "the statistic is undefined on {undefined} of {} resamples",
                replicates.len()
            ));
        }
        let tail = (1.0 - self.confidence) / 2.0;
        match (percentile(replicates, tail), percentile(replicates, 1.0 - tail)) {
            (Stat::Defined(lo), Stat::Defined(hi)) => Stat::Defined(Interval { lo, hi }),
            (Stat::Undefined(reason), _) | (_, Stat::Undefined(reason)) => Stat::Undefined(reason),
        }
    }
}

impl BootstrapResult {
    /// Fraction of resamples in which statistic `a` is larger than statistic `b` (ties
    /// count one half): a paired bootstrap "probability that a beats b". Undefined when
    /// there are no replicates or a replicate is NaN.
    pub fn win_rate(&self, a: usize, b: usize) -> Stat<f64> {
        if self.replicates.is_empty() {
            return Stat::undefined("no bootstrap replicates");
        }
        let mut wins = 0.0;
        for replicate in &self.replicates {
            let (Some(&x), Some(&y)) = (replicate.get(a), replicate.get(b)) else {
                return Stat::undefined(format!("no statistic {} in the replicates", a.max(b)));
            };
            wins += match x.partial_cmp(&y) {
                Some(Ordering::Greater) => 1.0,
                Some(Ordering::Equal) => 0.5,
                Some(Ordering::Less) => 0.0,
                None => return Stat::undefined("a statistic is undefined on some resamples"),
            };
        }
        Stat::Defined(wins / self.replicates.len() as f64)
    }
}

/// The q-quantile (q in [0, 1]) of `values` with numpy's default rule (`method="linear"`,
/// Hyndman & Fan type 7): h = (n-1)q, v[⌊h⌋] + (h-⌊h⌋)(v[⌊h⌋+1] - v[⌊h⌋]) on sorted values.
/// Undefined for no values, NaN, or q outside [0, 1].
pub fn percentile(values: &[f64], q: f64) -> Stat<f64> {
    if values.is_empty() {
        return Stat::undefined("the quantile of no values");
    }
    if !(0.0..=1.0).contains(&q) {
        return Stat::undefined(format!("quantile level must be in [0, 1], got {q}"));
    }
    if let Some(reason) = check_no_nan(values, "values") {
        return Stat::Undefined(reason);
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let h = (sorted.len() - 1) as f64 * q;
    let below = h.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    let fraction = h - below as f64;
    // numpy's _lerp form, exact at both ends.
    let (a, b) = (sorted[below], sorted[above]);
    let value = if fraction >= 0.5 { b - (b - a) * (1.0 - fraction) } else { a + (b - a) * fraction };
    Stat::Defined(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn resamples_are_bounded_on_both_sides() {
        assert!(check_resamples(1).is_ok() && check_resamples(MAX_RESAMPLES).is_ok());
        for bad in [0, MAX_RESAMPLES + 1, usize::MAX] {
            let e = check_settings(bad, 0.95).unwrap_err();
            assert!(e.contains("resamples must be from 1 to 1000000"), "{e}");
        }
    }

    fn mean_of(values: &[f64], indices: &[usize]) -> f64 {
        indices.iter().map(|&i| values[i]).sum::<f64>() / indices.len() as f64
    }

    #[test]
    fn percentile_matches_numpy_linear_rule() {
        // numpy 2.4.6: np.quantile(v, q) for the v below
        // q = 0.025 -> 0.0825, 0.975 -> 0.945, 0.5 -> 0.55, 0.3 -> 0.31, 0 -> 0.07, 1 -> 0.98
        let v = [0.31, 0.12, 0.98, 0.55, 0.55, 0.07, 0.73, 0.41, 0.66, 0.29, 0.84];
        for (q, want) in [(0.025, 0.0825), (0.975, 0.945), (0.5, 0.55), (0.3, 0.31), (0.0, 0.07), (1.0, 0.98)] {
            assert_relative_eq!(percentile(&v, q).unwrap(), want, max_relative = 1e-14);
        }
        assert!(!percentile(&[], 0.5).is_defined());
        assert!(!percentile(&v, 1.5).is_defined());
        assert!(!percentile(&[1.0, f64::NAN], 0.5).is_defined());
    }

    #[test]
    fn same_seed_same_replicates() {
        let data = [3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0];
        let settings = Bootstrap { resamples: 200, confidence: 0.95, seed: 11 };
        let first = settings.run(data.len(), |ix| vec![mean_of(&data, ix)]);
        let second = settings.run(data.len(), |ix| vec![mean_of(&data, ix)]);
        assert_eq!(first, second);
        let other = Bootstrap { seed: 12, ..settings }.run(data.len(), |ix| vec![mean_of(&data, ix)]);
        assert_ne!(first.replicates, other.replicates);
        // The interval is the numpy-rule percentile of the replicate column.
        let column: Vec<f64> = first.replicates.iter().map(|r| r[0]).collect();
        let interval = first.intervals[0].clone().unwrap();
        assert_eq!(interval.lo, percentile(&column, (1.0 - 0.95) / 2.0).unwrap());
        assert_eq!(interval.hi, percentile(&column, 1.0 - (1.0 - 0.95) / 2.0).unwrap());
    }

    #[test]
    fn resampled_indices_are_pinned_across_platforms() {
        // Pinned output of ChaCha8Rng::seed_from_u64(42) with u32 draws (rand 0.8,
        // rand_chacha 0.3). If this changes, every seeded report changes: bump deliberately.
        let mut drawn = Vec::new();
        Bootstrap { resamples: 2, confidence: 0.9, seed: 42 }.run(5, |ix| {
            drawn.push(ix.to_vec());
            vec![0.0]
        });
        assert_eq!(drawn, PINNED_DRAWS);
    }
    const PINNED_DRAWS: [[usize; 5]; 2] = [[1, 3, 2, 3, 1], [3, 1, 1, 4, 3]];

    #[test]
    fn constant_data_gives_a_zero_width_interval() {
        let data = [0.7; 10];
        let result =
            Bootstrap { resamples: 500, confidence: 0.95, seed: 1 }.run(data.len(), |ix| vec![mean_of(&data, ix)]);
        let interval = result.intervals[0].clone().unwrap();
        assert_eq!(interval.width(), 0.0);
        assert_relative_eq!(interval.lo, 0.7, max_relative = 1e-15);
    }

    #[test]
    fn two_values_have_known_bounds() {
        // Means of 2 draws from {0, 1}: 0 (p 1/4), 0.5 (p 1/2), 1 (p 1/4). With 4000 resamples
        // the 2.5% and 97.5% quantiles fall inside the outer quarters: exactly 0 and 1.
        let data = [0.0, 1.0];
        let result = Bootstrap { resamples: 4000, confidence: 0.95, seed: 3 }.run(2, |ix| vec![mean_of(&data, ix)]);
        let interval = result.intervals[0].clone().unwrap();
        assert_eq!((interval.lo, interval.hi), (0.0, 1.0));
        // And the middle value shows up about half the time (binomial sd ~ 0.008).
        let halves = result.replicates.iter().filter(|r| r[0] == 0.5).count() as f64 / 4000.0;
        assert!((halves - 0.5).abs() < 0.04, "{halves}");
    }

    #[test]
    fn paired_statistics_share_resamples() {
        // System b is system a plus 0.1 on every unit: on every (shared) resample b wins.
        let a = [0.2, 0.9, 0.4, 0.6, 0.1, 0.8];
        let b: Vec<f64> = a.iter().map(|v| v + 0.1).collect();
        let result = Bootstrap { resamples: 300, confidence: 0.9, seed: 5 }
            .run(a.len(), |ix| vec![mean_of(&a, ix), mean_of(&b, ix)]);
        assert_eq!(result.win_rate(1, 0).unwrap(), 1.0);
        assert_eq!(result.win_rate(0, 1).unwrap(), 0.0);
        assert_eq!(result.win_rate(0, 0).unwrap(), 0.5);
        assert!(!result.win_rate(0, 2).is_defined());
        let (ia, ib) = (result.intervals[0].clone().unwrap(), result.intervals[1].clone().unwrap());
        assert_relative_eq!(ib.lo - ia.lo, 0.1, epsilon = 1e-12);
        assert_relative_eq!(ib.hi - ia.hi, 0.1, epsilon = 1e-12);
    }

    #[test]
    fn undefined_replicates_make_the_interval_undefined() {
        let result = Bootstrap { resamples: 50, confidence: 0.95, seed: 9 }
            .run(4, |ix| vec![if ix.contains(&0) { f64::NAN } else { 1.0 }, 2.0]);
        assert!(!result.intervals[0].is_defined());
        assert!(result.intervals[1].is_defined());
        assert!(!result.win_rate(0, 1).is_defined());
        let bad = Bootstrap { resamples: 10, confidence: 1.0, seed: 9 }.run(4, |_| vec![1.0]);
        assert!(!bad.intervals[0].is_defined());
        let empty = Bootstrap { resamples: 10, confidence: 0.95, seed: 9 }.run(0, |_| vec![1.0]);
        assert!(empty.intervals.is_empty() && empty.replicates.is_empty());
    }
}
