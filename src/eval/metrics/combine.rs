//! Several scorers combined into one, the BioASQ study's second result that works (Hijazi et
//! al., llm-eval-biomedical-summarisation.md: aggregating scorers reached Spearman 0.501
//! with the experts, against 0.3-0.4 for any one token metric):
//!
//! - **mean**: each scorer's values are normalised within each batch (ranks scaled to 0..1,
//!   or z-scores) and averaged. Nothing is fitted, so nothing can leak from the human scores.
//! - **fitted**: non-negative weights of the z-scored scorers, one set per human dimension,
//!   fitted by least squares to the z-scored human scores of a *separate* file (a dev split),
//!   then applied to the file being scored. The weights never see the scored rows' human
//!   scores: a test shuffles them and gets the same weights.
//!
//! Normalising within batches matches how agreement is computed (per batch, then averaged)
//! and puts scorers of different ranges (ROUGE's 0..1, SMOG's grade levels) on one scale.

use crate::stats::ranks::{average_ranks, Order};
use serde::{Deserialize, Serialize};

/// The scorers combined when none are named: every built-in metric but SMOG (a readability
/// grade: a higher value is not a better answer), and BERTScore when it was computed.
pub fn default_scorers(available: &[String]) -> Vec<String> {
    available.iter().filter(|name| name.as_str() != "smog" && !name.contains(':')).cloned().collect()
}

/// How a scorer's values are put on a common scale within a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Normalisation {
    /// Average ranks (ties share), scaled to (rank - 1) / (n - 1); a batch of one gives 0.5.
    Rank,
    /// (x - mean) / sd with the population sd (numpy's `std`, ddof 0); a constant scorer
    /// gives 0 throughout.
    Z,
}

impl Normalisation {
    pub const ALL: [Normalisation; 2] = [Normalisation::Rank, Normalisation::Z];

    pub fn name(self) -> &'static str {
        match self {
            Normalisation::Rank => "rank",
            Normalisation::Z => "z",
        }
    }
}

/// The values of one scorer normalised within each batch; `batches[i]` is candidate i's
/// batch. Candidates without a value keep none and do not count in their batch's n.
pub fn normalise(values: &[Option<f64>], batches: &[&str], how: Normalisation) -> Vec<Option<f64>> {
    assert_eq!(values.len(), batches.len());
    let mut out = vec![None; values.len()];
    let mut seen: Vec<&str> = Vec::new();
    for &batch in batches {
        if seen.contains(&batch) {
            continue;
        }
        seen.push(batch);
        let members: Vec<usize> = (0..values.len()).filter(|&i| batches[i] == batch && values[i].is_some()).collect();
        let x: Vec<f64> = members.iter().map(|&i| values[i].expect("filtered")).collect();
        let normalised = match how {
            Normalisation::Rank => {
                let ranks = average_ranks(&x, Order::LowerIsBetter);
                let n = x.len() as f64;
                ranks.iter().map(|r| if x.len() == 1 { 0.5 } else { (r - 1.0) / (n - 1.0) }).collect::<Vec<_>>()
            }
            Normalisation::Z => {
                let n = x.len() as f64;
                let mean = x.iter().sum::<f64>() / n;
                let sd = (x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
                x.iter().map(|v| if sd > 0.0 { (v - mean) / sd } else { 0.0 }).collect()
            }
        };
        for (&i, v) in members.iter().zip(normalised) {
            out[i] = Some(v);
        }
    }
    out
}

/// The mean of the scorers' normalised values per candidate; `None` for a candidate that
/// lacks a value of any scorer (a mean over fewer scorers would not be the same score).
pub fn mean_of(scorers: &[&[Option<f64>]], batches: &[&str], how: Normalisation) -> Vec<Option<f64>> {
    let normalised: Vec<Vec<Option<f64>>> = scorers.iter().map(|v| normalise(v, batches, how)).collect();
    (0..batches.len())
        .map(|i| {
            let values: Option<Vec<f64>> = normalised.iter().map(|n| n[i]).collect();
            values.map(|v| v.iter().sum::<f64>() / v.len() as f64)
        })
        .collect()
}

/// The weights w >= 0 that minimise |X w - y|^2 (`rows[i]` is row i of X): cyclic
/// coordinate descent, each step the exact minimiser along one weight clipped at 0, until
/// no weight moves by more than 1e-13. The problem is convex, so this reaches the
/// non-negative least-squares solution (scipy.optimize.nnls, Lawson-Hanson, finds the same).
pub fn nnls(rows: &[Vec<f64>], y: &[f64]) -> Vec<f64> {
    assert_eq!(rows.len(), y.len());
    let k = rows.first().map_or(0, Vec::len);
    let mut w = vec![0.0; k];
    // Residual r = y - X w, updated as weights move.
    let mut residual = y.to_vec();
    let column_norms: Vec<f64> = (0..k).map(|j| rows.iter().map(|r| r[j] * r[j]).sum()).collect();
    for _sweep in 0..100_000 {
        let mut largest_move: f64 = 0.0;
        for j in 0..k {
            if column_norms[j] == 0.0 {
                continue;
            }
            let gradient: f64 = rows.iter().zip(&residual).map(|(r, e)| r[j] * e).sum();
            let updated = (w[j] + gradient / column_norms[j]).max(0.0);
            let step = updated - w[j];
            if step != 0.0 {
                for (r, e) in rows.iter().zip(residual.iter_mut()) {
                    *e -= r[j] * step;
                }
                w[j] = updated;
                largest_move = largest_move.max(step.abs());
            }
        }
        if largest_move < 1e-13 {
            break;
        }
    }
    w
}

/// Weights fitted for one human dimension, in the order of the scorers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FittedWeights {
    pub dimension: String,
    pub weights: Vec<f64>,
    /// Rows of the fit file with every scorer's value and this dimension's human score.
    pub rows: usize,
}

/// Fits one dimension: `scorers` are the fit file's scorer columns, `human` its human scores
/// of the dimension; both z-normalised within the fit file's batches before the fit (so the
/// weights need no intercept and compare across scorers). `None` without a usable row.
pub fn fit(
    dimension: &str,
    scorers: &[&[Option<f64>]],
    human: &[Option<f64>],
    batches: &[&str],
) -> Option<FittedWeights> {
    // Rows with every scorer's value and a human score: normalise over exactly those.
    let usable: Vec<usize> =
        (0..human.len()).filter(|&i| human[i].is_some() && scorers.iter().all(|s| s[i].is_some())).collect();
    if usable.is_empty() {
        return None;
    }
    let keep = |values: &[Option<f64>]| usable.iter().map(|&i| values[i]).collect::<Vec<_>>();
    let usable_batches: Vec<&str> = usable.iter().map(|&i| batches[i]).collect();
    let z: Vec<Vec<Option<f64>>> =
        scorers.iter().map(|s| normalise(&keep(s), &usable_batches, Normalisation::Z)).collect();
    let target: Vec<f64> =
        normalise(&keep(human), &usable_batches, Normalisation::Z).into_iter().map(|v| v.expect("kept")).collect();
    let rows: Vec<Vec<f64>> = (0..usable.len()).map(|i| z.iter().map(|col| col[i].expect("kept")).collect()).collect();
    Some(FittedWeights { dimension: dimension.to_string(), weights: nnls(&rows, &target), rows: usable.len() })
}

/// The fitted combination of the file being scored: its scorers z-normalised within its own
/// batches, weighted by `fitted.weights`. `None` where a scorer has no value.
pub fn apply(fitted: &FittedWeights, scorers: &[&[Option<f64>]], batches: &[&str]) -> Vec<Option<f64>> {
    let z: Vec<Vec<Option<f64>>> = scorers.iter().map(|s| normalise(s, batches, Normalisation::Z)).collect();
    (0..batches.len())
        .map(|i| {
            let mut total = 0.0;
            for (column, w) in z.iter().zip(&fitted.weights) {
                total += w * column[i]?;
            }
            Some(total)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[Option<f64>], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x.unwrap() - y).abs() < 1e-12)
    }

    #[test]
    fn normalised_within_each_batch() {
        // Batch a: 0.2, 0.5, 0.5, 0.9 -> average ranks 1, 2.5, 2.5, 4 -> (r-1)/3 = 0, .5, .5, 1.
        // Batch b: 3, 1 -> ranks 2, 1 -> 1, 0. Batch c alone -> 0.5.
        let values = [Some(0.2), Some(3.0), Some(0.5), Some(0.5), Some(1.0), Some(0.9), Some(7.0)];
        let batches = ["a", "b", "a", "a", "b", "a", "c"];
        let ranks = normalise(&values, &batches, Normalisation::Rank);
        assert!(close(&ranks, &[0.0, 1.0, 0.5, 0.5, 0.0, 1.0, 0.5]), "{ranks:?}");
        // numpy 2.4.6: a = np.array([.2, .5, .5, .9]); ((a - a.mean()) / a.std()) ->
        // [-1.3065491598369758, -0.10050378152592129, -0.10050378152592129, 1.507556722888818]
        // b = [3, 1] -> [1, -1]; c (one value, sd 0) -> 0.
        let z = normalise(&values, &batches, Normalisation::Z);
        let expected =
            [-1.3065491598369758, 1.0, -0.10050378152592129, -0.10050378152592129, -1.0, 1.507556722888818, 0.0];
        assert!(close(&z, &expected), "{z:?}");
        // A missing value stays missing and does not count in its batch.
        let with_gap = normalise(&[Some(1.0), None, Some(3.0)], &["a", "a", "a"], Normalisation::Rank);
        assert_eq!(with_gap, vec![Some(0.0), None, Some(1.0)]);
    }

    #[test]
    fn the_mean_of_normalised_scorers() {
        // Scorer 1 ranks (one batch of 3): 10, 30, 20 -> 0, 1, .5; scorer 2: .3, .1, .2 -> 1, 0, .5.
        // Means: .5, .5, .5. A candidate missing one scorer's value has no mean.
        let one = [Some(10.0), Some(30.0), Some(20.0), Some(5.0)];
        let two = [Some(0.3), Some(0.1), Some(0.2), None];
        let batches = ["x", "x", "x", "x"];
        let m = mean_of(&[&one, &two], &batches, Normalisation::Rank);
        // With the 4th candidate in scorer 1's batch: 10, 30, 20, 5 -> ranks 2, 4, 3, 1 ->
        // 1/3, 1, 2/3, 0; scorer 2 (three values) -> 1, 0, .5.
        assert!(close(&m[..3], &[(1.0 / 3.0 + 1.0) / 2.0, 0.5, (2.0 / 3.0 + 0.5) / 2.0]), "{m:?}");
        assert_eq!(m[3], None);
    }

    #[test]
    fn nnls_equals_scipy() {
        // scipy 1.17.1: scipy.optimize.nnls(A, b) with
        // A = [[1, 0.5, 2], [0.3, 1, -1], [2, 2, 0.1], [-1, 0.2, 1], [0.5, -0.4, 0.7]],
        // b = [1.5, 0.2, 2.9, -0.4, 0.6]
        // -> x = [0.9066725271038386, 0.44130759162216354, 0.2959542200193144]
        //    (residual norm 0.3926754297794566)
        let a = vec![
            vec![1.0, 0.5, 2.0],
            vec![0.3, 1.0, -1.0],
            vec![2.0, 2.0, 0.1],
            vec![-1.0, 0.2, 1.0],
            vec![0.5, -0.4, 0.7],
        ];
        let b = [1.5, 0.2, 2.9, -0.4, 0.6];
        let w = nnls(&a, &b);
        let expected = [0.9066725271038386, 0.44130759162216354, 0.2959542200193144];
        assert!(w.iter().zip(expected).all(|(x, y)| (x - y).abs() < 1e-9), "{w:?}");
        // A scorer that goes against the target gets weight 0, not a negative one:
        // scipy nnls([[1, -1], [2, -2.1], [3, -2.9]], [1, 2, 3]) -> [1.000000000000001,
        // 1.1e-15], i.e. [1, 0].
        let w = nnls(&[vec![1.0, -1.0], vec![2.0, -2.1], vec![3.0, -2.9]], &[1.0, 2.0, 3.0]);
        assert!((w[0] - 1.0).abs() < 1e-9 && w[1].abs() < 1e-9, "{w:?}");
    }
}
