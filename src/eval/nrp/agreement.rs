//! Step 5: agreement of a ranker with the expert's rankings (Kendall tau-b).

use super::{AnswerKey, RankerScores};
use crate::data::HumanRankings;
use crate::stats::kendall::{tau_b, Kendall};
use crate::stats::{describe, Interval, Stat};
use serde::Serialize;
use std::collections::HashMap;


#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueryAgreement {
    pub qid: String,
    pub annotator: String,
    pub items: usize,
    pub kendall_tau_b: Stat<Kendall>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExpertAgreement {
    pub ranker: String,
    pub per_query: Vec<QueryAgreement>,
    /// Mean tau-b over the (query, annotator) pairs where it is defined.
    pub mean_tau: Stat<f64>,
    /// Student-t interval of that mean.
    pub interval: Stat<Interval>,
    pub queries_undefined: usize,
    /// Ranked items the ranker has no score for (left out).
    pub unscored_items: usize,
}

pub(super) fn expert_agreement_of(
    ranker: &RankerScores,
    answers: &[AnswerKey],
    rankings: &HumanRankings,
    confidence: f64,
) -> ExpertAgreement {
    // Answer item ids per query, for lookup of `system/prompt/sample`.
    let mut answer_items: HashMap<(&str, String), &AnswerKey> = HashMap::new();
    for key in answers {
        answer_items.insert((key.qid.as_str(), key.item_id()), key);
    }
    // (qid, annotator) -> (ranker score, -expert rank), in file order of first appearance.
    type Block<'a> = ((&'a str, &'a str), Vec<(f64, f64)>);
    let mut pairs: Vec<Block> = Vec::new();
    let mut slot: HashMap<(&str, &str), usize> = HashMap::new();
    let mut unscored = 0;
    for row in &rankings.rows {
        let qid = row.instance.as_str();
        let score = ranker
            .documents
            .get(qid)
            .and_then(|docs| docs.get(&row.system))
            .copied()
            .or_else(|| {
                answer_items
                    .get(&(qid, row.system.clone()))
                    .and_then(|k| ranker.answers.get(*k))
                    .copied()
            });
        let Some(score) = score else {
            unscored += 1;
            continue;
        };
        let key = (qid, row.annotator.as_str());
        let s = *slot.entry(key).or_insert_with(|| {
            pairs.push((key, Vec::new()));
            pairs.len() - 1
        });
        pairs[s].1.push((score, -row.rank));
    }
    let per_query: Vec<QueryAgreement> = pairs
        .into_iter()
        .map(|((qid, annotator), items)| {
            let (x, y): (Vec<f64>, Vec<f64>) = items.iter().copied().unzip();
            QueryAgreement {
                qid: qid.into(),
                annotator: annotator.into(),
                items: items.len(),
                kendall_tau_b: tau_b(&x, &y),
            }
        })
        .collect();
    let taus: Vec<f64> = per_query
        .iter()
        .filter_map(|q| q.kendall_tau_b.value().map(|k| k.tau))
        .collect();
    ExpertAgreement {
        ranker: ranker.name.clone(),
        queries_undefined: per_query.len() - taus.len(),
        mean_tau: describe::mean(&taus),
        interval: describe::t_interval(&taus, confidence),
        per_query,
        unscored_items: unscored,
    }
}
