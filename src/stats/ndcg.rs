//! nDCG@k with trec_eval's conventions.

use super::Stat;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gain {
    /// gain = grade (trec_eval / pytrec_eval `ndcg_cut`).
    Linear,
    /// gain = 2^grade - 1 (Burges et al.).
    Exponential,
}

impl Gain {
    /// The gain of a judged grade; negative grades count as not relevant (trec_eval).
    fn of(self, grade: i64) -> f64 {
        let grade = grade.max(0) as f64;
        match self {
            Gain::Linear => grade,
            Gain::Exponential => grade.exp2() - 1.0,
        }
    }
}

/// nDCG of the first `k` documents of `ranked` (ids in the ranker's order). Unjudged
/// documents and negative grades gain 0; the ideal DCG uses all judged grades of the query;
/// the document at 1-based rank r is discounted by log2(r + 1). Undefined when k = 0, the
/// ideal DCG is 0 (no relevant judged document) or a document appears twice in `ranked`.
pub fn ndcg_at_k<S: AsRef<str>>(ranked: &[S], grades: &BTreeMap<String, i64>, k: usize, gain: Gain) -> Stat<f64> {
    if k == 0 {
        return Stat::undefined("nDCG@0 is not defined");
    }
    let mut seen = BTreeSet::new();
    if let Some(repeated) = ranked.iter().map(AsRef::as_ref).find(|&id| !seen.insert(id)) {
        return Stat::undefined(format!("document `{repeated}` appears twice in the ranking"));
    }
    let mut ideal_gains: Vec<f64> = grades.values().map(|&g| gain.of(g)).collect();
    ideal_gains.sort_by(|a, b| b.total_cmp(a));
    let ideal = dcg(ideal_gains.into_iter().take(k));
    if ideal == 0.0 {
        return Stat::undefined("no judged document of this query is relevant (ideal DCG is 0)");
    }
    let gains = ranked.iter().take(k).map(|id| grades.get(id.as_ref()).map_or(0.0, |&g| gain.of(g)));
    Stat::Defined(dcg(gains) / ideal)
}

/// Σ gain_r / log2(r + 1) over 1-based ranks r.
fn dcg(gains: impl Iterator<Item = f64>) -> f64 {
    gains.enumerate().map(|(i, g)| g / (i as f64 + 2.0).log2()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    /// One query: d6 has a negative grade; d7 and d8 are unjudged; d9 is judged but not
    /// retrieved (it still counts in the ideal DCG).
    fn example() -> (Vec<&'static str>, BTreeMap<String, i64>) {
        let grades = [("d1", 2), ("d2", 0), ("d3", 1), ("d4", 2), ("d5", 1), ("d6", -1), ("d9", 1)];
        let ranked = vec!["d3", "d7", "d1", "d6", "d2", "d4", "d8", "d5"];
        (ranked, grades.iter().map(|(d, g)| (d.to_string(), *g)).collect())
    }

    #[test]
    fn linear_gain_matches_trec_eval() {
        // pytrec_eval-terrier 0.5.11 (trec_eval), qrels as in `example`, run scores 100, 99, ...
        // in the ranked order: ndcg_cut_3 0.5316519652587917, ndcg_cut_5 0.43673949858938643,
        // ndcg_cut_10 0.6611972329358607.
        let (ranked, grades) = example();
        for (k, want) in [(3, 0.5316519652587917), (5, 0.43673949858938643), (10, 0.6611972329358607)] {
            assert_relative_eq!(ndcg_at_k(&ranked, &grades, k, Gain::Linear).unwrap(), want, max_relative = 1e-12);
        }
    }

    #[test]
    fn exponential_gain_by_hand() {
        // Gains 2^g - 1: ranked -> [1, 0, 3, 0, 0, 3, 0, 1]; ideal -> [3, 3, 1, 1, 1, 0, 0].
        // @3: (1 + 0 + 3/2) / (3 + 3/log2 3 + 1/2) = 2.5 / 5.392789... = 0.4635819942403664
        // @8: Σ g_r / log2(r+1) over both lists = 0.6254246636935508 (python3, math.log2)
        let (ranked, grades) = example();
        assert_relative_eq!(
            ndcg_at_k(&ranked, &grades, 3, Gain::Exponential).unwrap(),
            0.4635819942403664,
            max_relative = 1e-12
        );
        assert_relative_eq!(
            ndcg_at_k(&ranked, &grades, 8, Gain::Exponential).unwrap(),
            0.6254246636935508,
            max_relative = 1e-12
        );
    }

    #[test]
    fn perfect_ranking_is_one() {
        let (_, grades) = example();
        let ranked = ["d1", "d4", "d3", "d5", "d9"];
        assert_relative_eq!(ndcg_at_k(&ranked, &grades, 10, Gain::Linear).unwrap(), 1.0);
        let owned: Vec<String> = ranked.iter().map(|s| s.to_string()).collect();
        assert_relative_eq!(ndcg_at_k(&owned, &grades, 5, Gain::Exponential).unwrap(), 1.0);
    }

    #[test]
    fn degenerate_inputs_are_undefined() {
        let (ranked, grades) = example();
        assert!(!ndcg_at_k(&ranked, &grades, 0, Gain::Linear).is_defined());
        assert!(!ndcg_at_k(&["d1", "d3", "d1"], &grades, 10, Gain::Linear).is_defined());
        let irrelevant: BTreeMap<String, i64> = [("d1".to_string(), 0), ("d2".to_string(), -1)].into();
        assert!(!ndcg_at_k(&ranked, &irrelevant, 10, Gain::Linear).is_defined());
        // Nothing retrieved but relevant documents exist: a defined 0.
        assert_eq!(ndcg_at_k::<&str>(&[], &grades, 10, Gain::Linear).unwrap(), 0.0);
    }
}
