//! Friedman's test for k related samples (systems) over n blocks (instances).

use super::ranks::{average_ranks_and_ties, Order};
use super::{check_no_nan, Stat};
use serde::Serialize;
use statrs::distribution::{ChiSquared, ContinuousCDF};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Friedman {
    /// Tie-corrected Friedman chi-square statistic Q.
    pub statistic: f64,
    /// Degrees of freedom, k - 1.
    pub df: usize,
    pub p_value: f64,
    /// Number of blocks (rows).
    pub n: usize,
    /// Number of treatments (columns).
    pub k: usize,
    /// Each treatment's mean within-block rank (1 = lowest value), with its name.
    pub mean_ranks: Vec<MeanRank>,
}

/// A treatment (a system) and its mean within-block rank.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeanRank {
    pub system: String,
    pub mean_rank: f64,
}

/// `blocks[i][j]` = value of treatment j in block i. Ranks within each block (lowest value
/// = rank 1, ties get average ranks), tie-corrected Q, p from chi-square(k-1); equals
/// `scipy.stats.friedmanchisquare(*columns)`. Undefined when k < 3, n < 2 (scipy computes
/// n = 1, but Q is then always k-1), rows differ in length, NaN, or every block is all tied.
///
/// Q = [12/(n k (k+1)) Σ_j R_j² - 3 n (k+1)] / [1 - Σ(t³-t) / (n k (k²-1))], with R_j the
/// rank sum of treatment j and t the size of each tie group in any block.
///
/// The treatments are named by their column number, 1 to k; [`friedman_named`] names them.
pub fn friedman(blocks: &[Vec<f64>]) -> Stat<Friedman> {
    friedman_named(blocks, &[])
}

/// [`friedman`] with the treatments' names (column j is `names[j]`), which the mean ranks
/// carry; undefined when there are names but not k of them.
pub fn friedman_named(blocks: &[Vec<f64>], names: &[&str]) -> Stat<Friedman> {
    let n = blocks.len();
    if n < 2 {
        return Stat::undefined(format!("Friedman's test needs at least 2 blocks, got {n}"));
    }
    let k = blocks[0].len();
    if k < 3 {
        return Stat::undefined(format!("Friedman's test needs at least 3 treatments, got {k}"));
    }
    if !names.is_empty() && names.len() != k {
        return Stat::undefined(format!("{} treatment names for {k} treatments", names.len()));
    }
    let mut rank_sums = vec![0.0; k];
    let mut tie_term = 0.0;
    for (i, block) in blocks.iter().enumerate() {
        if block.len() != k {
            return Stat::undefined(format!("block {i} has {} values, block 0 has {k}", block.len()));
        }
        if let Some(reason) = check_no_nan(block, &format!("block {i}")) {
            return Stat::Undefined(reason);
        }
        let (ranks, tie_sizes) = average_ranks_and_ties(block, Order::LowerIsBetter);
        rank_sums.iter_mut().zip(&ranks).for_each(|(sum, rank)| *sum += rank);
        tie_term += tie_sizes.iter().map(|&t| (t * t * t - t) as f64).sum::<f64>();
    }
    let (nf, kf) = (n as f64, k as f64);
    let correction = 1.0 - tie_term / (kf * (kf * kf - 1.0) * nf);
    if correction <= 0.0 {
        return Stat::undefined("every block is all tied: nothing to compare");
    }
    let sum_of_squares: f64 = rank_sums.iter().map(|r| r * r).sum();
    let statistic = (12.0 / (kf * nf * (kf + 1.0)) * sum_of_squares - 3.0 * nf * (kf + 1.0)) / correction;
    let chi_square = ChiSquared::new(kf - 1.0).expect("k >= 3");
    // Rounding can leave Q a hair below 0 when all mean ranks are equal.
    let p_value = chi_square.sf(statistic.max(0.0));
    Stat::Defined(Friedman {
        statistic,
        df: k - 1,
        p_value,
        n,
        k,
        mean_ranks: rank_sums
            .iter()
            .enumerate()
            .map(|(j, r)| MeanRank {
                system: names.get(j).map_or_else(|| (j + 1).to_string(), |s| s.to_string()),
                mean_rank: r / nf,
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn rows(values: &[&[i32]]) -> Vec<Vec<f64>> {
        values.iter().map(|row| row.iter().map(|&v| f64::from(v)).collect()).collect()
    }

    fn check(blocks: &[Vec<f64>], statistic: f64, p_value: f64, mean_ranks: &[f64]) {
        let result = friedman(blocks).unwrap();
        assert_relative_eq!(result.statistic, statistic, max_relative = 1e-12);
        assert_relative_eq!(result.p_value, p_value, max_relative = 1e-9);
        assert_eq!((result.n, result.k, result.df), (blocks.len(), blocks[0].len(), blocks[0].len() - 1));
        assert_eq!(result.mean_ranks.len(), mean_ranks.len());
        for (j, (got, want)) in result.mean_ranks.iter().zip(mean_ranks).enumerate() {
            assert_relative_eq!(got.mean_rank, want, max_relative = 1e-12);
            assert_eq!(got.system, (j + 1).to_string(), "unnamed columns are numbered");
        }
    }

    // References: scipy 1.17.1, friedmanchisquare(*zip(*blocks)); mean ranks from
    // numpy.mean([scipy.stats.rankdata(b) for b in blocks], axis=0).

    #[test]
    fn no_ties() {
        // -> (2.3333333333333286, 0.31140322391459846), mean ranks [1.5, 2.1667, 2.3333]
        let blocks = rows(&[&[1, 2, 3], &[2, 3, 1], &[1, 3, 2], &[1, 2, 3], &[3, 1, 2], &[1, 2, 3]]);
        check(&blocks, 2.3333333333333286, 0.31140322391459846, &[1.5, 2.1666666666666665, 2.3333333333333335]);
    }

    #[test]
    fn ties_are_corrected() {
        // -> (0.9285714285714299, 0.8185279603939758), mean ranks [2.4, 2.5, 2.2, 2.9]
        let blocks = rows(&[&[1, 2, 2, 4], &[3, 3, 1, 2], &[1, 1, 1, 2], &[4, 3, 2, 1], &[2, 2, 3, 3]]);
        check(&blocks, 0.9285714285714299, 0.8185279603939758, &[2.4, 2.5, 2.2, 2.9]);
    }

    #[test]
    fn human_ranks_of_five_systems() {
        // 8 annotators' ranks of 5 systems (1 = best)
        // -> (26.100000000000023, 3.0208790365833713e-05), mean ranks [1.5, 1.75, 2.875, 4.125, 4.75]
        let blocks = rows(&[
            &[1, 2, 3, 4, 5],
            &[2, 1, 3, 5, 4],
            &[1, 3, 2, 4, 5],
            &[1, 2, 4, 3, 5],
            &[2, 1, 3, 4, 5],
            &[1, 2, 3, 5, 4],
            &[3, 1, 2, 4, 5],
            &[1, 2, 3, 4, 5],
        ]);
        check(&blocks, 26.100000000000023, 3.0208790365833713e-05, &[1.5, 1.75, 2.875, 4.125, 4.75]);
    }

    #[test]
    fn scipy_docstring_example() {
        // scipy 1.17.1 docstring: rng = np.random.default_rng(seed=18); x = rng.random((6, 10));
        // friedmanchisquare(*x) -> (11.428571428571416, 0.043514520866727614).
        // The 10 blocks below are x.T as printed by numpy (repr of each float).
        let blocks = vec![
            vec![
                0.39930576921757277,
                0.3135961212232181,
                0.12627089153186732,
                0.3877198766122869,
                0.12568122438938212,
                0.13479392130211454,
            ],
            vec![
                0.7174146792882161,
                0.736208582684992,
                0.6261661110164428,
                0.8803162171689392,
                0.017030679587323405,
                0.7518887981315341,
            ],
            vec![
                0.2808233280360034,
                0.9073890330483316,
                0.7870918106860966,
                0.3966226006308633,
                0.19065815440365053,
                0.3403127631976096,
            ],
            vec![
                0.08272491799811632,
                0.8886019451763878,
                0.007401039324559711,
                0.8735156582383974,
                0.3947450036018292,
                0.34810314430632605,
            ],
            vec![
                0.9697713192928598,
                0.9483208818699419,
                0.9210438272143748,
                0.329883372394726,
                0.702652232808359,
                0.34536527792533567,
            ],
            vec![
                0.5639267453679521,
                0.025403921371643712,
                0.13063117741306152,
                0.6257195233685541,
                0.7002320567102865,
                0.24064815208125068,
            ],
            vec![
                0.6443209621512465,
                0.738038585199121,
                0.3757060727228546,
                0.8498178219391873,
                0.21424216482941294,
                0.9414348490092841,
            ],
            vec![
                0.5768714635026091,
                0.672600076568488,
                0.5506985468849066,
                0.11982762900615784,
                0.22450501945692458,
                0.9410719527077351,
            ],
            vec![
                0.475360969729936,
                0.6251876404890218,
                0.6082554438218213,
                0.17089799748489698,
                0.05188254944884241,
                0.9324555355719036,
            ],
            vec![
                0.122401989847857,
                0.6376241879130656,
                0.5494286088431224,
                0.7282635027404526,
                0.022502278414340382,
                0.7200590122145583,
            ],
        ];
        let result = friedman(&blocks).unwrap();
        assert_relative_eq!(result.statistic, 11.428571428571416, max_relative = 1e-12);
        assert_relative_eq!(result.p_value, 0.043514520866727614, max_relative = 1e-9);
    }

    #[test]
    fn mean_ranks_carry_the_names_of_their_systems() {
        // Ranks per block (lower value = rank 1): [1,2,3], [2,1,3], so the mean ranks are
        // a 1.5, b 1.5, c 3.
        let result = friedman_named(&rows(&[&[10, 20, 30], &[20, 10, 30]]), &["a", "b", "c"]).unwrap();
        let named: Vec<(&str, f64)> = result.mean_ranks.iter().map(|m| (m.system.as_str(), m.mean_rank)).collect();
        assert_eq!(named, [("a", 1.5), ("b", 1.5), ("c", 3.0)]);
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(json["mean_ranks"][2], serde_json::json!({"system": "c", "mean_rank": 3.0}));
        assert!(!friedman_named(&rows(&[&[1, 2, 3], &[2, 1, 3]]), &["a", "b"]).is_defined());
    }

    #[test]
    fn degenerate_inputs_are_undefined() {
        assert!(!friedman(&rows(&[&[1, 2], &[2, 1]])).is_defined()); // k = 2
        assert!(!friedman(&rows(&[&[1, 2, 3]])).is_defined()); // n = 1
        assert!(!friedman(&rows(&[&[1, 1, 1], &[2, 2, 2]])).is_defined()); // all tied
        assert!(!friedman(&rows(&[&[1, 2, 3], &[1, 2]])).is_defined()); // ragged
        assert!(!friedman(&[vec![1.0, f64::NAN, 2.0], vec![1.0, 2.0, 3.0]]).is_defined());
        assert!(!friedman(&[]).is_defined());
    }
}
