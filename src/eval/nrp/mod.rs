//! NRP, the normalized rank position of a generated answer (nrp-ranking-generated-answers.md,
//! methods.md §2): rank the answer *alone* among the documents an expert judged for its
//! query, with the ranker that best reproduces the expert judgements, and normalise.
//!
//! Steps and conventions (each one is also written into the report's provenance):
//! 1. **Ranker validation.** For each ranker and quality dimension: nDCG@10 with linear gain
//!    (`stats::ndcg`, trec_eval's conventions) of the ranker's ordering of its scored
//!    documents, mean over the queries with at least one relevant judged document (the
//!    others have no ideal DCG and are counted). Ties in score are broken like trec_eval
//!    (docno in descending string order). Documents judged "not able to judge" in a
//!    dimension are removed from that dimension's ranking: they are missing data, neither
//!    relevant nor irrelevant. The best mean nDCG picks the dimension's ranker (first ranker
//!    given wins a tie) unless the user forces one.
//! 2. **NRP per answer and dimension.** D_q = documents with a grade for q in the dimension
//!    (missing-data judgements excluded); r = documents of D_q scoring above the answer,
//!    where a tie counts as above (pessimistic, default), below (optimistic) or one half
//!    (average); `NRP = 1 - r/|D_q|`, or `1 - r/(|D_q|+1)` (the public code's list length
//!    including the answer) as an option. |D_q| = 0 -> undefined, counted. A judged
//!    document the ranker gave no score (absent from a run file, or absent from the
//!    documents BM25 indexed) ranks below every scored item (default), or is dropped from
//!    D_q and from the judgements its nDCG@10 is computed against ([`Unscored::Drop`], what
//!    the NRP paper's public code does: it only sees documents that have a score); either
//!    way such documents, and the queries that have them, are counted.
//! 3. **Combination.** A weighted sum of the dimensions' NRPs; weights default to equal and
//!    are normalised to sum 1 (the report lists the weights used). Undefined in any
//!    dimension with a positive weight -> undefined combined NRP.
//! 4. **Per (system, prompt).** The mean over queries of the per-query mean NRP (each query
//!    weighs the same, whatever its number of samples), with a seeded percentile bootstrap
//!    over queries, paired across (system, prompt) groups.
//! 5. **Expert agreement.** Per (query, annotator): Kendall's tau-b between the ranker's
//!    scores of the items the expert ranked and the *negated* expert ranks (1 = best), so
//!    agreement is positive; mean over queries with a Student-t interval. Computed for every
//!    ranker, with the paired bootstrap probability (resampling queries) that one ranker's
//!    mean tau-b exceeds another's.
//!
//! A ranker can also be a fusion of others ([`fusion`]: reciprocal rank fusion or a sum of
//! z-scores); it is then validated, chosen and compared like any other. Steps 1 and 2 fuse in
//! the *pool* scope (ranks or z-scores among the query's documents, an answer alone among
//! them: NRP needs a score comparable with every judged document); step 5 fuses in the scope
//! of [`NrpOptions::fusion_scope`], by default *items* (among the items the expert ranked).
//!
//! Files: this one holds the types, the options and [`nrp`], which runs the steps in order;
//! `scores` the rankers' inputs (run files, BM25), `validation` step 1, `placement` step 2,
//! `groups` step 4, `agreement` step 5, `fusion` rankers made of rankers.

mod agreement;
pub mod fusion;
mod groups;
mod placement;
#[cfg(test)]
mod scale;
mod scores;
#[cfg(test)]
mod tests;
mod validation;

pub use agreement::{AgreementComparison, ExpertAgreement, QueryAgreement};
pub use placement::Placement;
pub use scores::{bm25_ranker, judged_documents, RankedItem, RankerScores};

#[cfg(test)]
use crate::data::{AnswerScore, Document, RunEntry, Topic};
use crate::data::{HumanRankings, Judgments};
#[cfg(test)]
use crate::eval::bm25::{Bm25Index, Bm25Params};
use crate::report::Provenance;
use crate::stats::bootstrap::Bootstrap;
use crate::stats::{Interval, Stat};
use crate::{Error, Result, Warning};
use serde::Serialize;
#[cfg(test)]
use std::collections::BTreeMap;
use std::collections::{BTreeSet, HashMap};

/// Cutoff of the ranker validation.
pub const NDCG_CUTOFF: usize = 10;
/// At most this many offending items are named in one message.
const NAMED: usize = 10;

/// Which generated answer: query, model, prompt and sample.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct AnswerKey {
    pub qid: String,
    pub system: String,
    pub prompt: String,
    pub sample: u32,
}

impl AnswerKey {
    pub fn new(qid: &str, system: &str, prompt: &str, sample: u32) -> Self {
        AnswerKey { qid: qid.into(), system: system.into(), prompt: prompt.into(), sample }
    }
    pub fn of(answer: &crate::data::Answer) -> Self {
        AnswerKey::new(&answer.qid, &answer.system, &answer.prompt, answer.sample)
    }
    /// The item id an expert ranking uses for this answer: `system/prompt/sample`.
    pub fn item_id(&self) -> String {
        format!("{}/{}/{}", self.system, self.prompt, self.sample)
    }
}

/// How an answer whose score equals a document's score is placed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TiePolicy {
    /// Tied documents count as above the answer (the default: no benefit of the doubt).
    Pessimistic,
    /// Tied documents count as below the answer.
    Optimistic,
    /// Each tied document counts one half.
    Average,
}

/// What r is divided by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Denominator {
    /// |D_q|, the paper's formula: NRP in [0, 1].
    JudgedDocuments,
    /// |D_q| + 1, the public code's list length including the answer.
    JudgedDocumentsPlusAnswer,
}

/// What happens to a judged document the ranker gave no score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unscored {
    /// It stays in D_q and ranks below every scored item (the default).
    RankBelow,
    /// It is left out of D_q and of the judgements nDCG@10 is computed against, as in the
    /// NRP paper's public code.
    Drop,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NrpOptions {
    pub ties: TiePolicy,
    pub denominator: Denominator,
    pub unscored: Unscored,
    /// (dimension, weight); empty = equal weights. Dimensions not named get weight 0.
    pub weights: Vec<(String, f64)>,
    /// (dimension, ranker name) to use instead of the best ranker by nDCG@10.
    pub forced_rankers: Vec<(String, String)>,
    /// The bootstrap of the intervals; its confidence also sets the expert-agreement
    /// t-interval's.
    pub bootstrap: Bootstrap,
    /// Among which scores a fusion ranker's components are ranked (or z-scored) for the
    /// expert agreement; NRP and the ranker validation always use the pool.
    pub fusion_scope: fusion::Scope,
}

impl Default for NrpOptions {
    fn default() -> Self {
        NrpOptions {
            ties: TiePolicy::Pessimistic,
            denominator: Denominator::JudgedDocuments,
            unscored: Unscored::RankBelow,
            weights: Vec::new(),
            forced_rankers: Vec::new(),
            bootstrap: Bootstrap::default(),
            fusion_scope: fusion::Scope::default(),
        }
    }
}

/// One ranker's validation on one dimension.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankerValidation {
    pub ranker: String,
    /// Mean nDCG@10 over the queries where it is defined.
    pub mean_ndcg_at_10: Stat<f64>,
    pub queries: usize,
    /// Queries with no relevant judged document (no ideal DCG), left out of the mean.
    pub queries_undefined: usize,
    /// Judged (query, document) pairs of this dimension that the ranker did not score.
    pub unscored_judged_documents: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DimensionReport {
    pub dimension: String,
    pub ranker: String,
    /// True when the user forced the ranker instead of the best by nDCG@10.
    pub forced: bool,
    /// Normalised weight in the combined NRP.
    pub weight: f64,
    pub validation: Vec<RankerValidation>,
    /// Answers whose score ties at least one judged document's score.
    pub answers_with_ties: usize,
    /// (answer, document) pairs with equal scores.
    pub tied_pairs: usize,
    /// Answers whose query has no judged document in this dimension (NRP undefined).
    pub undefined_answers: usize,
    /// Judged documents of this dimension the chosen ranker has no score for (ranked below
    /// or dropped, as `NrpReport::unscored` says), and the queries that have any.
    pub unscored_documents: usize,
    pub unscored_queries: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerNrp {
    #[serde(flatten)]
    pub key: AnswerKey,
    /// One per dimension, in the order of `NrpReport::dimensions`.
    pub per_dimension: Vec<Stat<f64>>,
    pub combined: Stat<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupNrp {
    pub system: String,
    pub prompt: String,
    pub answers: usize,
    /// Queries with at least one answer whose combined NRP is defined.
    pub queries: usize,
    /// Mean over queries of the per-query mean combined NRP.
    pub mean: Stat<f64>,
    pub interval: Stat<Interval>,
    /// The same mean, per dimension.
    pub per_dimension_mean: Vec<Stat<f64>>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NrpReport {
    pub provenance: Provenance,
    pub ties: TiePolicy,
    pub denominator: Denominator,
    pub unscored: Unscored,
    pub dimensions: Vec<DimensionReport>,
    /// Best mean first.
    pub groups: Vec<GroupNrp>,
    pub answers: Vec<AnswerNrp>,
    /// Answers whose combined NRP is undefined.
    pub undefined_answers: usize,
    /// One per ranker (in the order given), when expert rankings were given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expert_agreement: Vec<ExpertAgreement>,
    /// Each pair of rankers (in the order given): the paired bootstrap probability that the
    /// first agrees better with the expert than the second.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub agreement_comparisons: Vec<AgreementComparison>,
    pub warnings: Vec<Warning>,
}

/// Compute NRP for every answer in `answers` (see the module doc). `judgments` holds one
/// entry per quality dimension; `rankers` the candidate rankers' scores; `expert` optional
/// rankings with instance = qid and system = docno or `system/prompt/sample`.
pub fn nrp(
    judgments: &[Judgments],
    rankers: &[RankerScores],
    answers: &[AnswerKey],
    options: &NrpOptions,
    expert: Option<&HumanRankings>,
) -> Result<NrpReport> {
    check_inputs(judgments, rankers, answers, options)?;
    let weights = normalised_weights(judgments, &options.weights)?;
    let mut warnings = Vec::new();

    // 1. Ranker validation, then the ranker of each dimension.
    let ranked_lists: Vec<HashMap<&str, Vec<&str>>> = rankers.iter().map(validation::ranked_documents).collect();
    let mut dimensions = Vec::with_capacity(judgments.len());
    let mut chosen: Vec<usize> = Vec::with_capacity(judgments.len());
    for (d, j) in judgments.iter().enumerate() {
        let validation: Vec<RankerValidation> = rankers
            .iter()
            .zip(&ranked_lists)
            .map(|(r, lists)| validation::validate(r, lists, j, options.unscored))
            .collect();
        let forced = options.forced_rankers.iter().find(|(dim, _)| *dim == j.dimension);
        let pick = match forced {
            Some((_, name)) => rankers.iter().position(|r| &r.name == name).expect("checked"),
            None => validation::best_ranker(&validation).ok_or_else(|| {
                Error::invalid(format!(
                    "dimension {}: no ranker has a defined nDCG@{NDCG_CUTOFF} (no query has a \
                     relevant judged document); force a ranker for it",
                    j.dimension
                ))
            })?,
        };
        let (unscored, unscored_queries) = placement::unscored(&rankers[pick], j);
        if unscored > 0 {
            warnings.push(Warning::new(format!(
                "dimension {}: ranker `{}` has no score for {unscored} judged documents of \
                 {unscored_queries} queries; {}",
                j.dimension,
                rankers[pick].name,
                match options.unscored {
                    Unscored::RankBelow => "they rank below every scored item",
                    Unscored::Drop => "they are left out of D_q and of nDCG@10",
                }
            )));
        }
        chosen.push(pick);
        dimensions.push(DimensionReport {
            dimension: j.dimension.clone(),
            ranker: rankers[pick].name.clone(),
            forced: forced.is_some(),
            weight: weights[d],
            validation,
            answers_with_ties: 0,
            tied_pairs: 0,
            undefined_answers: 0,
            unscored_documents: unscored,
            unscored_queries,
        });
    }

    // 2. NRP per answer and dimension.
    let mut per_answer: Vec<Vec<Stat<f64>>> = vec![Vec::with_capacity(judgments.len()); answers.len()];
    for (d, j) in judgments.iter().enumerate() {
        let ranker = &rankers[chosen[d]];
        let sorted = placement::sorted_judged_scores(ranker, j, options.unscored);
        let mut missing_scores = Vec::new();
        for (a, key) in answers.iter().enumerate() {
            let Some(&score) = ranker.answers.get(key) else {
                missing_scores.push(format!("{} (query {})", key.item_id(), key.qid));
                continue;
            };
            let empty: Vec<f64> = Vec::new();
            let place = Placement::of(score, sorted.get(key.qid.as_str()).unwrap_or(&empty));
            if place.tied > 0 {
                dimensions[d].answers_with_ties += 1;
                dimensions[d].tied_pairs += place.tied;
            }
            let value = place.nrp(options.ties, options.denominator);
            if !value.is_defined() {
                dimensions[d].undefined_answers += 1;
            }
            per_answer[a].push(match value {
                Stat::Undefined(_) => {
                    Stat::undefined(format!("query {} has no judged document in dimension {}", key.qid, j.dimension))
                }
                defined => defined,
            });
        }
        if !missing_scores.is_empty() {
            return Err(Error::invalid(format!(
                "ranker `{}` (chosen for {}) has no score for {} answers: {}{}",
                ranker.name,
                j.dimension,
                missing_scores.len(),
                missing_scores.iter().take(NAMED).cloned().collect::<Vec<_>>().join(", "),
                if missing_scores.len() > NAMED { ", ..." } else { "" }
            )));
        }
    }

    // 3. Weighted combination.
    let answer_reports: Vec<AnswerNrp> = answers
        .iter()
        .zip(per_answer)
        .map(|(key, per_dimension)| {
            let combined = combine(&per_dimension, &weights, judgments);
            AnswerNrp { key: key.clone(), per_dimension, combined }
        })
        .collect();
    let undefined_answers = answer_reports.iter().filter(|a| !a.combined.is_defined()).count();
    if undefined_answers > 0 {
        warnings.push(Warning::new(format!(
            "{undefined_answers} answers have an undefined NRP (their query has no judged \
             document in a weighted dimension); they are left out of the means"
        )));
    }

    // 4. Means per (system, prompt), bootstrap over queries.
    let groups = groups::group_means(&answer_reports, judgments.len(), options);

    // 5. Expert agreement of every ranker, and which agrees better.
    let mut expert_agreement = Vec::new();
    let mut agreement_comparisons = Vec::new();
    if let Some(rankings) = expert {
        for (r, ranker) in rankers.iter().enumerate() {
            let mut agreement = agreement::expert_agreement_of(
                ranker,
                answers,
                rankings,
                options.fusion_scope,
                options.bootstrap.confidence,
            );
            agreement.chosen_for =
                dimensions.iter().zip(&chosen).filter(|(_, &c)| c == r).map(|(d, _)| d.dimension.clone()).collect();
            if agreement.unscored_items > 0 {
                warnings.push(Warning::new(format!(
                    "expert agreement: ranker `{}` has no score for {} ranked items; they \
                     are left out",
                    ranker.name, agreement.unscored_items
                )));
            }
            expert_agreement.push(agreement);
        }
        agreement_comparisons = agreement::compare(&expert_agreement, options);
    }

    let mut provenance = Provenance::new(options.bootstrap.seed)
        .convention(
            "nrp",
            match options.denominator {
                Denominator::JudgedDocuments => "1 - r/|D_q| (paper)",
                Denominator::JudgedDocumentsPlusAnswer => "1 - r/(|D_q|+1) (the list length with the answer, as in the public code)",
            },
        )
        .convention(
            "ties",
            match options.ties {
                TiePolicy::Pessimistic => "pessimistic: a document tied with the answer counts as above it",
                TiePolicy::Optimistic => "optimistic: a document tied with the answer counts as below it",
                TiePolicy::Average => "average: a document tied with the answer counts one half",
            },
        )
        .convention("d_q", "documents with a grade for the query in the dimension; 'not able to judge' excluded")
        .convention(
            "unscored",
            match options.unscored {
                Unscored::RankBelow => "a judged document the ranker did not score stays in D_q and ranks below every scored item",
                Unscored::Drop => "a judged document the ranker did not score is left out of D_q and of nDCG@10's judgements (the public code)",
            },
        )
        .convention(
            "ranker_validation",
            "nDCG@10, linear gain, trec_eval tie-break (docno descending), 'not able to judge' \
             documents removed from the ranking, mean over queries with a relevant document",
        )
        .convention(
            "weights",
            dimensions.iter().map(|d| format!("{}={}", d.dimension, d.weight)).collect::<Vec<_>>().join(", "),
        )
        .convention(
            "group_mean",
            format!(
                "mean over queries of per-query mean NRP; percentile bootstrap over queries, {} \
                 resamples, confidence {}, paired across (system, prompt)",
                options.bootstrap.resamples, options.bootstrap.confidence
            ),
        )
        .convention(
            "expert_agreement",
            format!(
                "Kendall tau-b(ranker score, -expert rank) per (query, annotator); mean with \
                 Student-t interval; every ranker; P(one agrees better than another) = share of \
                 {} paired bootstrap resamples of queries in which its mean tau-b is higher \
                 (equal counts one half)",
                options.bootstrap.resamples
            ),
        );
    if rankers.iter().any(|r| r.fusion.is_some()) {
        provenance =
            provenance.convention("fusion_scope", fusion_scope_convention(options.fusion_scope, expert.is_some()));
    }
    Ok(NrpReport {
        provenance,
        ties: options.ties,
        denominator: options.denominator,
        unscored: options.unscored,
        dimensions,
        groups,
        answers: answer_reports,
        undefined_answers,
        expert_agreement,
        agreement_comparisons,
        warnings,
    })
}

/// Which scope each step fused in, for the provenance.
fn fusion_scope_convention(scope: fusion::Scope, expert: bool) -> String {
    let pool = "NRP and ranker validation: pool (each component's rank or z-score among its scores of the query's documents, an answer placed alone among them)";
    if expert {
        format!("{pool}; expert agreement: {}", scope.describe())
    } else {
        pool.into()
    }
}

fn check_inputs(
    judgments: &[Judgments],
    rankers: &[RankerScores],
    answers: &[AnswerKey],
    options: &NrpOptions,
) -> Result<()> {
    if judgments.is_empty() {
        return Err(Error::invalid("NRP needs judgements for at least one dimension"));
    }
    if rankers.is_empty() {
        return Err(Error::invalid("NRP needs at least one ranker"));
    }
    let mut names = BTreeSet::new();
    for j in judgments {
        if !names.insert(j.dimension.as_str()) {
            return Err(Error::invalid(format!("dimension {} is given twice", j.dimension)));
        }
    }
    let mut ranker_names = BTreeSet::new();
    for r in rankers {
        if !ranker_names.insert(r.name.as_str()) {
            return Err(Error::invalid(format!("two rankers are named `{}`", r.name)));
        }
    }
    for (dimension, ranker) in &options.forced_rankers {
        if !names.contains(dimension.as_str()) {
            return Err(Error::invalid(format!("forced ranker for unknown dimension {dimension}")));
        }
        if !ranker_names.contains(ranker.as_str()) {
            return Err(Error::invalid(format!("forced ranker `{ranker}` is not among the rankers")));
        }
    }
    let mut seen = BTreeSet::new();
    for key in answers {
        if !seen.insert(key) {
            return Err(Error::invalid(format!("answer {} of query {} is given twice", key.item_id(), key.qid)));
        }
    }
    crate::stats::bootstrap::check_settings(options.bootstrap.resamples, options.bootstrap.confidence)
        .map_err(Error::invalid)?;
    Ok(())
}

/// Weights per dimension (in `judgments` order), normalised to sum 1.
fn normalised_weights(judgments: &[Judgments], given: &[(String, f64)]) -> Result<Vec<f64>> {
    if given.is_empty() {
        return Ok(vec![1.0 / judgments.len() as f64; judgments.len()]);
    }
    for (dimension, w) in given {
        if !judgments.iter().any(|j| &j.dimension == dimension) {
            return Err(Error::invalid(format!("--weight {dimension}={w}: weight for unknown dimension {dimension}")));
        }
        let max = crate::bounds::MAX_WEIGHT;
        if !(0.0..=max).contains(w) {
            return Err(Error::invalid(format!("--weight {dimension}={w}: a weight must be from 0 to {max}")));
        }
    }
    let raw: Vec<f64> =
        judgments.iter().map(|j| given.iter().filter(|(d, _)| *d == j.dimension).map(|(_, w)| w).sum()).collect();
    let total: f64 = raw.iter().sum();
    if total <= 0.0 {
        return Err(Error::invalid("--weight: the dimension weights sum to 0 (give one dimension a positive weight)"));
    }
    Ok(raw.iter().map(|w| w / total).collect())
}

fn combine(per_dimension: &[Stat<f64>], weights: &[f64], judgments: &[Judgments]) -> Stat<f64> {
    let mut total = 0.0;
    for ((value, &w), j) in per_dimension.iter().zip(weights).zip(judgments) {
        if w == 0.0 {
            continue;
        }
        match value {
            Stat::Defined(v) => total += w * v,
            Stat::Undefined(_) => return Stat::undefined(format!("NRP is undefined in dimension {}", j.dimension)),
        }
    }
    Stat::Defined(total)
}
