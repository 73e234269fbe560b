//! How well an automatic metric agrees with human scores: Spearman's rho, quadratic
//! weighted kappa (only with binning the user chose) and pairwise-ranking agreement. The
//! statistics themselves come from `crate::stats`; this file decides what is compared.

use crate::stats::kappa::{cohen, Weights};
use crate::stats::Stat;
use serde::{Deserialize, Serialize};

/// A label scale for quadratic weighted kappa, e.g. 1..=5, with the cut points that bin
/// a metric's real-valued scores onto it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KappaBins {
    /// Lowest label (e.g. 1).
    pub min: i64,
    /// Highest label (e.g. 5).
    pub max: i64,
    /// Ascending cut points, one fewer than the labels: a score `v` gets the label
    /// `min + #{cut points <= v}`. E.g. for 1..5 and ROUGE F: [0.2, 0.4, 0.6, 0.8].
    pub cut_points: Vec<f64>,
}

impl KappaBins {
    /// Checks the scale and the cut points; the message says what to fix.
    pub fn validate(&self) -> Result<(), String> {
        if self.max <= self.min {
            return Err(format!("label scale {}..{} needs max > min", self.min, self.max));
        }
        // Every label of the scale is listed (kappa's weights span them): -9e18..9e18 used
        // to overflow the count, and a wide scale to exhaust the memory.
        let steps = self.max.checked_sub(self.min).filter(|s| *s <= crate::bounds::MAX_KAPPA_STEPS);
        let Some(steps) = steps else {
            return Err(format!(
                "label scale {}..{} has more than {} steps; a human label scale is short (e.g. 1..5)",
                self.min,
                self.max,
                crate::bounds::MAX_KAPPA_STEPS
            ));
        };
        let labels = steps as usize + 1;
        if self.cut_points.len() != labels - 1 {
            return Err(format!(
                "{} labels ({}..{}) need {} cut points, got {}",
                labels,
                self.min,
                self.max,
                labels - 1,
                self.cut_points.len()
            ));
        }
        if self.cut_points.iter().any(|c| !c.is_finite()) || self.cut_points.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("cut points must be finite and strictly ascending, got {:?}", self.cut_points));
        }
        Ok(())
    }

    /// The label of a metric score.
    pub fn label(&self, value: f64) -> i64 {
        self.min + self.cut_points.iter().filter(|&&c| c <= value).count() as i64
    }

    /// Every label of the scale, in order (kappa's weights span all of them).
    pub fn labels(&self) -> Vec<i64> {
        (self.min..=self.max).collect()
    }
}

/// Quadratic weighted kappa between binned metric scores and human scores. Undefined
/// (with the reason) when a human score is not a whole number on the scale: averaged
/// human scores cannot be put on a label scale without a rule, and we do not invent one.
pub fn quadratic_kappa(metric: &[f64], human: &[f64], bins: &KappaBins) -> Stat<f64> {
    let mut human_labels = Vec::with_capacity(human.len());
    for &h in human {
        if h.fract() != 0.0 || h < bins.min as f64 || h > bins.max as f64 {
            return Stat::undefined(format!("human score {h} is not a whole number in {}..{}", bins.min, bins.max));
        }
        human_labels.push(h as i64);
    }
    let metric_labels: Vec<i64> = metric.iter().map(|&v| bins.label(v)).collect();
    cohen(&metric_labels, &human_labels, &bins.labels(), Weights::Quadratic)
}

/// One candidate as pairwise agreement sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored<'a> {
    /// The item (question) id: only candidates of the same item are compared.
    pub item: &'a str,
    /// Position of the candidate's system in the input's system order: it orients each
    /// pair (the earlier system is "first").
    pub system: usize,
    pub metric: f64,
    pub human: f64,
}

/// Agreement of the metric's and the humans' preferences over pairs of candidates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairwiseAgreement {
    /// All pairs of candidates for the same item.
    pub pairs: usize,
    /// Pairs the humans scored equally: left out (there is no preference to reproduce).
    pub human_ties: usize,
    /// Pairs compared (`pairs - human_ties`).
    pub compared: usize,
    /// Compared pairs the metric scored equally: they count as disagreements.
    pub metric_ties: usize,
    /// Compared pairs ordered the same way by metric and humans.
    pub agreements: usize,
    /// agreements / compared; undefined when nothing is compared.
    pub accuracy: Stat<f64>,
    /// Cohen's kappa over the compared pairs, each labelled "first better", "second
    /// better" or (metric only) "tie"; accuracy is its observed agreement.
    pub kappa: Stat<f64>,
}

/// Pairwise-ranking accuracy and Cohen's kappa (see [`PairwiseAgreement`]).
///
/// Convention: pairs are the candidates of the same item, oriented by system order (the
/// system that appears first in the input is "first"); a pair enters only when the
/// humans prefer one candidate; the metric's preference is -1 / +1, or 0 on a tie, which
/// never matches a human preference.
pub fn pairwise(candidates: &[Scored]) -> PairwiseAgreement {
    let (mut pairs, mut human_ties, mut metric_ties) = (0, 0, 0);
    let mut human_labels = Vec::new();
    let mut metric_labels = Vec::new();
    for (i, a) in candidates.iter().enumerate() {
        for b in &candidates[i + 1..] {
            if a.item != b.item || a.system == b.system {
                continue;
            }
            pairs += 1;
            let (first, second) = if a.system < b.system { (a, b) } else { (b, a) };
            let human = preference(first.human, second.human);
            if human == 0 {
                human_ties += 1;
                continue;
            }
            let metric = preference(first.metric, second.metric);
            metric_ties += usize::from(metric == 0);
            human_labels.push(human);
            metric_labels.push(metric);
        }
    }
    let compared = human_labels.len();
    let agreements = human_labels.iter().zip(&metric_labels).filter(|(h, m)| h == m).count();
    let accuracy = if compared == 0 {
        Stat::undefined("no pair of candidates with a human preference")
    } else {
        Stat::Defined(agreements as f64 / compared as f64)
    };
    let kappa = if compared == 0 {
        Stat::undefined("no pair of candidates with a human preference")
    } else {
        cohen(&metric_labels, &human_labels, &[-1, 0, 1], Weights::None)
    };
    PairwiseAgreement { pairs, human_ties, compared, metric_ties, agreements, accuracy, kappa }
}

/// -1 when the first is better (higher), +1 when the second is, 0 on a tie.
fn preference(first: f64, second: f64) -> i64 {
    if first > second {
        -1
    } else if second > first {
        1
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(item: &'static str, system: usize, metric: f64, human: f64) -> Scored<'static> {
        Scored { item, system, metric, human }
    }

    #[test]
    fn pairwise_counts_ties_as_stated() {
        // Item q1: systems 0, 1, 2 -> pairs (0,1) (0,2) (1,2).
        //   human 5, 3, 3: (0,1) first better, (0,2) first better, (1,2) human tie (left out).
        //   metric .9, .5, .9: (0,1) first better = agree; (0,2) metric tie = disagree.
        // Item q2: systems 0, 1: human 2 < 4 (second better), metric .1 < .2 agree.
        // Compared 3, agreements 2, metric ties 1 -> accuracy 2/3.
        let c = [
            s("q1", 0, 0.9, 5.0),
            s("q1", 1, 0.5, 3.0),
            s("q1", 2, 0.9, 3.0),
            s("q2", 0, 0.1, 2.0),
            s("q2", 1, 0.2, 4.0),
        ];
        let p = pairwise(&c);
        assert_eq!((p.pairs, p.human_ties, p.compared, p.metric_ties, p.agreements), (4, 1, 3, 1, 2));
        assert!((p.accuracy.clone().unwrap() - 2.0 / 3.0).abs() < 1e-15);
        // Labels (metric, human): (-1,-1), (0,-1), (1,1).
        // scikit-learn 1.9.1: cohen_kappa_score([-1, 0, 1], [-1, -1, 1]) -> 0.5
        assert!((p.kappa.clone().unwrap() - 0.5).abs() < 1e-12, "{:?}", p.kappa);
    }

    #[test]
    fn pairwise_orients_by_system_not_by_input_order() {
        // The same pair listed in either order gives the same labels.
        let forward = pairwise(&[s("q", 0, 0.2, 1.0), s("q", 1, 0.8, 5.0), s("r", 0, 0.7, 4.0), s("r", 1, 0.3, 2.0)]);
        let backward = pairwise(&[s("q", 1, 0.8, 5.0), s("q", 0, 0.2, 1.0), s("r", 1, 0.3, 2.0), s("r", 0, 0.7, 4.0)]);
        assert_eq!(forward, backward);
        // Labels: q second better (both), r first better (both): perfect agreement.
        assert_eq!(forward.accuracy.unwrap(), 1.0);
        assert_eq!(forward.kappa.unwrap(), 1.0);
    }

    #[test]
    fn nothing_to_compare_is_undefined() {
        let p = pairwise(&[s("q", 0, 0.2, 3.0), s("q", 1, 0.8, 3.0), s("r", 0, 0.5, 1.0)]);
        assert_eq!((p.pairs, p.human_ties, p.compared), (1, 1, 0));
        assert!(!p.accuracy.is_defined() && !p.kappa.is_defined());
    }

    #[test]
    fn binning_and_quadratic_kappa() {
        let bins = KappaBins { min: 1, max: 5, cut_points: vec![0.2, 0.4, 0.6, 0.8] };
        bins.validate().unwrap();
        assert_eq!([0.0, 0.2, 0.39, 0.4, 0.99].map(|v| bins.label(v)), [1, 2, 2, 3, 5]);
        // Metric labels [1, 2, 3, 5, 4]; human [1, 3, 3, 4, 4].
        // scikit-learn 1.9.1: cohen_kappa_score([1,2,3,5,4], [1,3,3,4,4], labels=[1,2,3,4,5],
        // weights="quadratic") -> 0.875
        let k = quadratic_kappa(&[0.1, 0.3, 0.5, 0.9, 0.7], &[1.0, 3.0, 3.0, 4.0, 4.0], &bins);
        assert!((k.clone().unwrap() - 0.875).abs() < 1e-12, "{k:?}");
        assert!(!quadratic_kappa(&[0.1], &[3.5], &bins).is_defined());
        assert!(!quadratic_kappa(&[0.1], &[6.0], &bins).is_defined());
        assert!(KappaBins { min: 1, max: 5, cut_points: vec![0.2, 0.4] }.validate().is_err());
        assert!(KappaBins { min: 1, max: 3, cut_points: vec![0.4, 0.2] }.validate().is_err());
        // A scale beyond 100 steps is refused before its labels are listed: i64::MIN..
        // i64::MAX overflowed the label count (a panic), 1..10^12 would list 10^12 labels.
        for (min, max) in [(i64::MIN, i64::MAX), (1, 1_000_000_000_000), (0, 101)] {
            let e = KappaBins { min, max, cut_points: vec![] }.validate().unwrap_err();
            assert_eq!(
                e,
                format!("label scale {min}..{max} has more than 100 steps; a human label scale is short (e.g. 1..5)")
            );
        }
        assert!(KappaBins { min: 0, max: 100, cut_points: (1..=100).map(f64::from).collect() }.validate().is_ok());
    }
}
