//! Step 5: agreement of a ranker with the expert's rankings (Kendall tau-b).

use super::fusion::{self, Scope};
use super::{AnswerKey, NrpOptions, RankedItem, RankerScores};
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
    /// For a fusion ranker, the scope its scores of the ranked items were fused in
    /// (`fusion::Scope`); absent for any other ranker.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fusion_scope: Option<Scope>,
    pub per_query: Vec<QueryAgreement>,
    /// Mean tau-b over the (query, annotator) pairs where it is defined.
    pub mean_tau: Stat<f64>,
    /// Student-t interval of that mean.
    pub interval: Stat<Interval>,
    pub queries_undefined: usize,
    /// Ranked items the ranker has no score for (left out).
    pub unscored_items: usize,
}

/// The agreement of `ranker` with `rankings`; a fusion ranker's scores of each (query,
/// annotator)'s items are fused in `scope` ([`fusion::item_scores`]).
pub(super) fn expert_agreement_of(
    ranker: &RankerScores,
    answers: &[AnswerKey],
    rankings: &HumanRankings,
    scope: Scope,
    confidence: f64,
) -> ExpertAgreement {
    // Answer item ids per query, for lookup of `system/prompt/sample`.
    let mut answer_items: HashMap<(&str, String), &AnswerKey> = HashMap::new();
    for key in answers {
        answer_items.insert((key.qid.as_str(), key.item_id()), key);
    }
    // (qid, annotator) -> its items with their row and negated expert rank.
    type Block<'a> = ((&'a str, &'a str), Vec<(RankedItem<'a>, usize, f64)>);
    let mut blocks: Vec<Block> = Vec::new();
    let mut slot: HashMap<(&str, &str), usize> = HashMap::new();
    for (i, row) in rankings.rows.iter().enumerate() {
        let qid = row.instance.as_str();
        let answer = answer_items.get(&(qid, row.system.clone())).copied();
        let key = (qid, row.annotator.as_str());
        let s = *slot.entry(key).or_insert_with(|| {
            blocks.push((key, Vec::new()));
            blocks.len() - 1
        });
        blocks[s].1.push((RankedItem { qid, id: &row.system, answer }, i, -row.rank));
    }
    // Per block: the ranker's scores of its items; unscored items are left out, and a block
    // takes the place of its first scored row (blocks without one are left out).
    let mut unscored = 0;
    let mut per_query: Vec<(usize, QueryAgreement)> = Vec::new();
    for ((qid, annotator), rows) in blocks {
        let items: Vec<RankedItem> = rows.iter().map(|r| r.0).collect();
        let scores = fusion::item_scores(ranker, &items, scope);
        let (mut x, mut y, mut first) = (Vec::new(), Vec::new(), None);
        for (&(_, row, negated_rank), score) in rows.iter().zip(scores) {
            match score {
                Some(score) => {
                    first.get_or_insert(row);
                    x.push(score);
                    y.push(negated_rank);
                }
                None => unscored += 1,
            }
        }
        if let Some(first) = first {
            let agreement = QueryAgreement {
                qid: qid.into(),
                annotator: annotator.into(),
                items: x.len(),
                kendall_tau_b: tau_b(&x, &y),
            };
            per_query.push((first, agreement));
        }
    }
    per_query.sort_by_key(|(first, _)| *first);
    let per_query: Vec<QueryAgreement> = per_query.into_iter().map(|(_, q)| q).collect();
    let taus: Vec<f64> = per_query.iter().filter_map(|q| q.kendall_tau_b.value().map(|k| k.tau)).collect();
    ExpertAgreement {
        ranker: ranker.name.clone(),
        chosen_for: Vec::new(),
        fusion_scope: ranker.fusion.as_ref().map(|_| scope),
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
