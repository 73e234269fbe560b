//! Step 1: each ranker's nDCG@10 against a dimension's judgements, and the best ranker.

use super::{RankerScores, RankerValidation, Unscored, NDCG_CUTOFF};
use crate::data::Judgments;
use crate::stats::ndcg::{ndcg_at_k, Gain};
use crate::stats::{describe, Stat};
use std::collections::{BTreeMap, HashMap, HashSet};

/// Each query's documents in the ranker's order: score descending, ties by docno descending
/// (trec_eval's `comp_sim_docno`).
pub(super) fn ranked_documents(ranker: &RankerScores) -> HashMap<&str, Vec<&str>> {
    ranker
        .documents
        .iter()
        .map(|(qid, docs)| {
            let mut list: Vec<(&str, f64)> = docs.iter().map(|(d, &s)| (d.as_str(), s)).collect();
            list.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| b.0.cmp(a.0)));
            (qid.as_str(), list.into_iter().map(|(d, _)| d).collect())
        })
        .collect()
}

/// nDCG@10 of `ranker` on each query of `j`. With [`Unscored::Drop`] the judgements it is
/// computed against are only the documents the ranker scored (the ideal ranking shrinks).
pub(super) fn validate(
    ranker: &RankerScores,
    lists: &HashMap<&str, Vec<&str>>,
    j: &Judgments,
    policy: Unscored,
) -> RankerValidation {
    let mut missing_by_query: HashMap<&str, HashSet<&str>> = HashMap::new();
    for (qid, docno) in &j.missing {
        missing_by_query.entry(qid).or_default().insert(docno);
    }
    let mut values = Vec::new();
    let mut undefined = 0;
    let mut unscored = 0;
    for (qid, grades) in &j.grades {
        let scored = ranker.documents.get(qid);
        unscored += grades.keys().filter(|d| scored.is_none_or(|s| !s.contains_key(*d))).count();
        let empty = Vec::new();
        let list = lists.get(qid.as_str()).unwrap_or(&empty);
        let skip = missing_by_query.get(qid.as_str());
        let ranked: Vec<&str> = list.iter().copied().filter(|d| skip.is_none_or(|m| !m.contains(d))).collect();
        let kept: BTreeMap<String, i64>;
        let grades = match policy {
            Unscored::RankBelow => grades,
            Unscored::Drop => {
                kept = grades
                    .iter()
                    .filter(|(d, _)| scored.is_some_and(|s| s.contains_key(*d)))
                    .map(|(d, &g)| (d.clone(), g))
                    .collect();
                &kept
            }
        };
        match ndcg_at_k(&ranked, grades, NDCG_CUTOFF, Gain::Linear) {
            Stat::Defined(v) => values.push(v),
            Stat::Undefined(_) => undefined += 1,
        }
    }
    RankerValidation {
        ranker: ranker.name.clone(),
        mean_ndcg_at_10: describe::mean(&values),
        queries: j.grades.len(),
        queries_undefined: undefined,
        unscored_judged_documents: unscored,
    }
}

/// The ranker with the highest defined mean nDCG; the first one wins a tie.
pub(super) fn best_ranker(validation: &[RankerValidation]) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, v) in validation.iter().enumerate() {
        if let Some(&m) = v.mean_ndcg_at_10.value() {
            if best.is_none_or(|(_, b)| m > b) {
                best = Some((i, m));
            }
        }
    }
    best.map(|(i, _)| i)
}
