//! Step 2: where an answer lands among the scores of D_q.

use super::{Denominator, RankerScores, TiePolicy, Unscored};
use crate::data::Judgments;
use crate::stats::Stat;
use serde::Serialize;
use std::collections::HashMap;

/// Where an answer lands among the sorted scores of D_q, and its NRP.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Placement {
    /// Documents scoring strictly higher.
    pub above: usize,
    /// Documents with exactly the answer's score.
    pub tied: usize,
    pub judged: usize,
}

impl Placement {
    /// Place `answer` among `sorted_scores` (ascending). O(log n).
    pub fn of(answer: f64, sorted_scores: &[f64]) -> Placement {
        let below_or_equal = sorted_scores.partition_point(|&s| s <= answer);
        let below = sorted_scores.partition_point(|&s| s < answer);
        Placement {
            above: sorted_scores.len() - below_or_equal,
            tied: below_or_equal - below,
            judged: sorted_scores.len(),
        }
    }

    /// The zero-based rank position r under a tie policy.
    pub fn rank(&self, ties: TiePolicy) -> f64 {
        match ties {
            TiePolicy::Pessimistic => (self.above + self.tied) as f64,
            TiePolicy::Optimistic => self.above as f64,
            TiePolicy::Average => self.above as f64 + self.tied as f64 / 2.0,
        }
    }

    /// `1 - r/|D_q|` (or `/(|D_q|+1)`); undefined when nothing was judged.
    pub fn nrp(&self, ties: TiePolicy, denominator: Denominator) -> Stat<f64> {
        if self.judged == 0 {
            return Stat::undefined("no judged document for this query in this dimension");
        }
        let n = match denominator {
            Denominator::JudgedDocuments => self.judged as f64,
            Denominator::JudgedDocumentsPlusAnswer => self.judged as f64 + 1.0,
        };
        Stat::Defined(1.0 - self.rank(ties) / n)
    }
}

/// Per query, the ranker's scores of D_q in ascending order: unscored documents as -inf, or
/// left out with [`Unscored::Drop`].
pub(super) fn sorted_judged_scores<'a>(
    ranker: &RankerScores,
    j: &'a Judgments,
    unscored: Unscored,
) -> HashMap<&'a str, Vec<f64>> {
    j.grades
        .iter()
        .map(|(qid, grades)| {
            let scored = ranker.documents.get(qid);
            let mut scores: Vec<f64> = grades
                .keys()
                .filter_map(|d| match (scored.and_then(|s| s.get(d)), unscored) {
                    (Some(&s), _) => Some(s),
                    (None, Unscored::RankBelow) => Some(f64::NEG_INFINITY),
                    (None, Unscored::Drop) => None,
                })
                .collect();
            scores.sort_by(f64::total_cmp);
            (qid.as_str(), scores)
        })
        .collect()
}

/// Judged documents of `j` that `ranker` has no score for, and the queries that have any.
pub(super) fn unscored(ranker: &RankerScores, j: &Judgments) -> (usize, usize) {
    let (mut documents, mut queries) = (0, 0);
    for (qid, grades) in &j.grades {
        let scored = ranker.documents.get(qid);
        let n = grades.keys().filter(|d| scored.is_none_or(|s| !s.contains_key(*d))).count();
        documents += n;
        queries += usize::from(n > 0);
    }
    (documents, queries)
}
