//! Step 5: agreement of a ranker with the expert's rankings (Kendall tau-b).

use super::{AnswerKey, NrpOptions, RankerScores};
use crate::data::HumanRankings;
use crate::stats::kendall::{tau_b, Kendall};
use crate::stats::{describe, Interval, Stat};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

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
    /// The dimensions this ranker serves (empty: validated and compared only).
    pub chosen_for: Vec<String>,
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
            .or_else(|| answer_items.get(&(qid, row.system.clone())).and_then(|k| ranker.answers.get(*k)).copied());
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
    let taus: Vec<f64> = per_query.iter().filter_map(|q| q.kendall_tau_b.value().map(|k| k.tau)).collect();
    ExpertAgreement {
        ranker: ranker.name.clone(),
        chosen_for: Vec::new(),
        queries_undefined: per_query.len() - taus.len(),
        mean_tau: describe::mean(&taus),
        interval: describe::t_interval(&taus, confidence),
        per_query,
        unscored_items: unscored,
    }
}

/// Two rankers' agreement with the expert, compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgreementComparison {
    pub ranker: String,
    pub other: String,
    /// Share of bootstrap resamples of queries in which `ranker`'s mean tau-b is higher than
    /// `other`'s (equal counts one half); `other` agrees better with 1 minus this.
    pub probability_better: Stat<f64>,
}

/// Every pair (i < j) of `agreements`, compared by a paired bootstrap over the queries: each
/// resample draws queries with replacement, and every ranker's mean tau-b is recomputed over
/// the (query, annotator) pairs of the drawn queries (a query drawn twice counts twice), so
/// all rankers are measured on the same resampled queries. Seeded by `options.bootstrap.seed`.
pub(super) fn compare(agreements: &[ExpertAgreement], options: &NrpOptions) -> Vec<AgreementComparison> {
    if agreements.len() < 2 {
        return Vec::new();
    }
    // Per ranker, per query (sorted qids): sum and count of the defined taus.
    let mut queries: BTreeMap<&str, usize> = BTreeMap::new();
    for a in agreements {
        for q in &a.per_query {
            queries.insert(q.qid.as_str(), 0);
        }
    }
    for (i, v) in queries.values_mut().enumerate() {
        *v = i;
    }
    let sums: Vec<Vec<(f64, f64)>> = agreements
        .iter()
        .map(|a| {
            let mut per_query = vec![(0.0, 0.0); queries.len()];
            for q in &a.per_query {
                if let Some(k) = q.kendall_tau_b.value() {
                    let cell = &mut per_query[queries[q.qid.as_str()]];
                    cell.0 += k.tau;
                    cell.1 += 1.0;
                }
            }
            per_query
        })
        .collect();
    let mut drawn = vec![0.0; queries.len()];
    let boot = options.bootstrap.run(queries.len(), |idx| {
        drawn.iter_mut().for_each(|t| *t = 0.0);
        for &q in idx {
            drawn[q] += 1.0;
        }
        sums.iter()
            .map(|per_query| {
                let (mut sum, mut n) = (0.0, 0.0);
                for (&t, &(s, c)) in drawn.iter().zip(per_query) {
                    sum += t * s;
                    n += t * c;
                }
                if n == 0.0 {
                    f64::NAN
                } else {
                    sum / n
                }
            })
            .collect()
    });
    let mut out = Vec::new();
    for i in 0..agreements.len() {
        for j in i + 1..agreements.len() {
            out.push(AgreementComparison {
                ranker: agreements[i].ranker.clone(),
                other: agreements[j].ranker.clone(),
                probability_better: boot.win_rate(i, j),
            });
        }
    }
    out
}
