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
//!    documents BM25 indexed) ranks below every scored item; such documents are counted.
//! 3. **Combination.** A weighted sum of the dimensions' NRPs; weights default to equal and
//!    are normalised to sum 1 (the report lists the weights used). Undefined in any
//!    dimension with a positive weight -> undefined combined NRP.
//! 4. **Per (system, prompt).** The mean over queries of the per-query mean NRP (each query
//!    weighs the same, whatever its number of samples), with a seeded percentile bootstrap
//!    over queries, paired across (system, prompt) groups.
//! 5. **Expert agreement.** Per (query, annotator): Kendall's tau-b between the ranker's
//!    scores of the items the expert ranked and the *negated* expert ranks (1 = best), so
//!    agreement is positive; mean over queries with a Student-t interval.

use crate::data::{AnswerScore, Document, HumanRankings, Judgments, RunEntry, Topic};
use crate::eval::bm25::{Bm25Index, Bm25Params};
use crate::report::Provenance;
use crate::stats::bootstrap::Bootstrap;
use crate::stats::kendall::{tau_b, Kendall};
use crate::stats::ndcg::{ndcg_at_k, Gain};
use crate::stats::{describe, Interval, Stat};
use crate::{Error, Result, Warning};
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

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
        AnswerKey {
            qid: qid.into(),
            system: system.into(),
            prompt: prompt.into(),
            sample,
        }
    }
    pub fn of(answer: &crate::data::Answer) -> Self {
        AnswerKey::new(&answer.qid, &answer.system, &answer.prompt, answer.sample)
    }
    /// The item id an expert ranking uses for this answer: `system/prompt/sample`.
    pub fn item_id(&self) -> String {
        format!("{}/{}/{}", self.system, self.prompt, self.sample)
    }
}

/// One ranker's scores: documents per query and generated answers.
#[derive(Debug, Clone, PartialEq)]
pub struct RankerScores {
    pub name: String,
    /// qid -> docno -> score.
    pub documents: HashMap<String, HashMap<String, f64>>,
    pub answers: HashMap<AnswerKey, f64>,
}

impl RankerScores {
    /// From a TREC run (document scores) and a file of answer scores. Errors on a duplicate
    /// (qid, docno) or answer, and on scores that are not finite numbers.
    pub fn from_run(name: &str, run: &[RunEntry], answers: &[AnswerScore]) -> Result<Self> {
        let mut documents: HashMap<String, HashMap<String, f64>> = HashMap::new();
        for e in run {
            check_finite(name, e.score, || {
                format!("document {} of query {}", e.docno, e.qid)
            })?;
            if documents
                .entry(e.qid.clone())
                .or_default()
                .insert(e.docno.clone(), e.score)
                .is_some()
            {
                return Err(Error::invalid(format!(
                    "ranker `{name}`: document {} appears twice for query {}",
                    e.docno, e.qid
                )));
            }
        }
        let mut by_key = HashMap::with_capacity(answers.len());
        for a in answers {
            let key = AnswerKey::new(&a.qid, &a.system, &a.prompt, a.sample);
            check_finite(name, a.score, || {
                format!("answer {} of query {}", key.item_id(), a.qid)
            })?;
            if by_key.insert(key.clone(), a.score).is_some() {
                return Err(Error::invalid(format!(
                    "ranker `{name}`: answer {} of query {} is scored twice",
                    key.item_id(),
                    key.qid
                )));
            }
        }
        Ok(RankerScores {
            name: name.into(),
            documents,
            answers: by_key,
        })
    }
}

fn check_finite(ranker: &str, score: f64, what: impl Fn() -> String) -> Result<()> {
    if score.is_finite() {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "ranker `{ranker}`: the score of {} is {score}",
            what()
        )))
    }
}

/// BM25 as an NRP ranker: the documents' statistics come from `documents`; each query is
/// scored against the documents judged for it in any dimension (graded or "not able to
/// judge"), and each answer is scored as an external text against its query
/// ([`Bm25Index::score_external`]: answers do not change the collection statistics).
/// Judged documents missing from `documents` get no score (counted by [`nrp`]).
pub fn bm25_ranker(
    name: &str,
    topics: &[Topic],
    documents: &[Document],
    judgments: &[Judgments],
    answers: &[crate::data::Answer],
    params: Bm25Params,
) -> Result<RankerScores> {
    let mut position: HashMap<&str, usize> = HashMap::with_capacity(documents.len());
    for (i, d) in documents.iter().enumerate() {
        if position.insert(d.docno.as_str(), i).is_some() {
            return Err(Error::invalid(format!(
                "document {} appears twice in the collection",
                d.docno
            )));
        }
    }
    let mut queries: HashMap<&str, &str> = HashMap::with_capacity(topics.len());
    for t in topics {
        if queries.insert(t.qid.as_str(), t.query.as_str()).is_some() {
            return Err(Error::invalid(format!("topic {} appears twice", t.qid)));
        }
    }
    let docs: Vec<(&str, &str)> = documents
        .iter()
        .map(|d| (d.docno.as_str(), d.text.as_str()))
        .collect();
    let index = Bm25Index::new(&docs, params);

    // Judged documents per query, over every dimension.
    let mut judged: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for j in judgments {
        for (qid, grades) in &j.grades {
            judged
                .entry(qid)
                .or_default()
                .extend(grades.keys().map(String::as_str));
        }
        for (qid, docno) in &j.missing {
            judged.entry(qid).or_default().insert(docno);
        }
    }
    let mut scores: HashMap<String, HashMap<String, f64>> = HashMap::new();
    for (qid, docnos) in judged {
        let Some(query) = queries.get(qid) else {
            continue;
        };
        let matching: HashMap<usize, f64> = index
            .matching(query)
            .into_iter()
            .map(|h| (h.index, h.score))
            .collect();
        let per_doc = scores.entry(qid.to_string()).or_default();
        for docno in docnos {
            if let Some(&i) = position.get(docno) {
                per_doc.insert(docno.to_string(), matching.get(&i).copied().unwrap_or(0.0));
            }
        }
    }
    let mut answer_scores = HashMap::with_capacity(answers.len());
    for a in answers {
        let query = queries.get(a.qid.as_str()).ok_or_else(|| {
            Error::invalid(format!(
                "answer {}/{}/{} is for query {}, which is not among the topics",
                a.system, a.prompt, a.sample, a.qid
            ))
        })?;
        answer_scores.insert(AnswerKey::of(a), index.score_external(query, &a.text));
    }
    Ok(RankerScores {
        name: name.into(),
        documents: scores,
        answers: answer_scores,
    })
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

#[derive(Debug, Clone, PartialEq)]
pub struct NrpOptions {
    pub ties: TiePolicy,
    pub denominator: Denominator,
    /// (dimension, weight); empty = equal weights. Dimensions not named get weight 0.
    pub weights: Vec<(String, f64)>,
    /// (dimension, ranker name) to use instead of the best ranker by nDCG@10.
    pub forced_rankers: Vec<(String, String)>,
    pub seed: u64,
    pub resamples: usize,
    /// For the bootstrap intervals and the expert-agreement t-interval.
    pub confidence: f64,
}

impl Default for NrpOptions {
    fn default() -> Self {
        NrpOptions {
            ties: TiePolicy::Pessimistic,
            denominator: Denominator::JudgedDocuments,
            weights: Vec::new(),
            forced_rankers: Vec::new(),
            seed: 0,
            resamples: 1000,
            confidence: 0.95,
        }
    }
}

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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NrpReport {
    pub provenance: Provenance,
    pub ties: TiePolicy,
    pub denominator: Denominator,
    pub dimensions: Vec<DimensionReport>,
    /// Best mean first.
    pub groups: Vec<GroupNrp>,
    pub answers: Vec<AnswerNrp>,
    /// Answers whose combined NRP is undefined.
    pub undefined_answers: usize,
    /// One per distinct ranker chosen for a dimension, when expert rankings were given.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub expert_agreement: Vec<ExpertAgreement>,
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
    let ranked_lists: Vec<HashMap<&str, Vec<&str>>> =
        rankers.iter().map(ranked_documents).collect();
    let mut dimensions = Vec::with_capacity(judgments.len());
    let mut chosen: Vec<usize> = Vec::with_capacity(judgments.len());
    for (d, j) in judgments.iter().enumerate() {
        let validation: Vec<RankerValidation> = rankers
            .iter()
            .zip(&ranked_lists)
            .map(|(r, lists)| validate(r, lists, j))
            .collect();
        let forced = options
            .forced_rankers
            .iter()
            .find(|(dim, _)| *dim == j.dimension);
        let pick = match forced {
            Some((_, name)) => rankers
                .iter()
                .position(|r| &r.name == name)
                .expect("checked"),
            None => best_ranker(&validation).ok_or_else(|| {
                Error::invalid(format!(
                    "dimension {}: no ranker has a defined nDCG@{NDCG_CUTOFF} (no query has a \
                     relevant judged document); force a ranker for it",
                    j.dimension
                ))
            })?,
        };
        let unscored = validation[pick].unscored_judged_documents;
        if unscored > 0 {
            warnings.push(Warning::new(format!(
                "dimension {}: ranker `{}` has no score for {unscored} judged documents; they \
                 rank below every scored item",
                j.dimension, rankers[pick].name
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
        });
    }

    // 2. NRP per answer and dimension.
    let mut per_answer: Vec<Vec<Stat<f64>>> =
        vec![Vec::with_capacity(judgments.len()); answers.len()];
    for (d, j) in judgments.iter().enumerate() {
        let ranker = &rankers[chosen[d]];
        let sorted = sorted_judged_scores(ranker, j);
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
                Stat::Undefined(_) => Stat::undefined(format!(
                    "query {} has no judged document in dimension {}",
                    key.qid, j.dimension
                )),
                defined => defined,
            });
        }
        if !missing_scores.is_empty() {
            return Err(Error::invalid(format!(
                "ranker `{}` (chosen for {}) has no score for {} answers: {}{}",
                ranker.name,
                j.dimension,
                missing_scores.len(),
                missing_scores
                    .iter()
                    .take(NAMED)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                if missing_scores.len() > NAMED {
                    ", ..."
                } else {
                    ""
                }
            )));
        }
    }

    // 3. Weighted combination.
    let answer_reports: Vec<AnswerNrp> = answers
        .iter()
        .zip(per_answer)
        .map(|(key, per_dimension)| {
            let combined = combine(&per_dimension, &weights, judgments);
            AnswerNrp {
                key: key.clone(),
                per_dimension,
                combined,
            }
        })
        .collect();
    let undefined_answers = answer_reports
        .iter()
        .filter(|a| !a.combined.is_defined())
        .count();
    if undefined_answers > 0 {
        warnings.push(Warning::new(format!(
            "{undefined_answers} answers have an undefined NRP (their query has no judged \
             document in a weighted dimension); they are left out of the means"
        )));
    }

    // 4. Means per (system, prompt), bootstrap over queries.
    let groups = group_means(&answer_reports, judgments.len(), options);

    // 5. Expert agreement, once per distinct chosen ranker.
    let mut expert_agreement = Vec::new();
    if let Some(rankings) = expert {
        let mut seen = BTreeSet::new();
        for &r in &chosen {
            if seen.insert(r) {
                let agreement =
                    expert_agreement_of(&rankers[r], answers, rankings, options.confidence);
                if agreement.unscored_items > 0 {
                    warnings.push(Warning::new(format!(
                        "expert agreement: ranker `{}` has no score for {} ranked items; they \
                         are left out",
                        rankers[r].name, agreement.unscored_items
                    )));
                }
                expert_agreement.push(agreement);
            }
        }
    }

    let provenance = Provenance::new(options.seed)
        .convention(
            "nrp",
            match options.denominator {
                Denominator::JudgedDocuments => "1 - r/|D_q| (paper)",
                Denominator::JudgedDocumentsPlusAnswer => "1 - r/(|D_q|+1) (public code)",
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
                options.resamples, options.confidence
            ),
        )
        .convention(
            "expert_agreement",
            "Kendall tau-b(ranker score, -expert rank) per (query, annotator); mean with Student-t interval",
        );
    Ok(NrpReport {
        provenance,
        ties: options.ties,
        denominator: options.denominator,
        dimensions,
        groups,
        answers: answer_reports,
        undefined_answers,
        expert_agreement,
        warnings,
    })
}

fn check_inputs(
    judgments: &[Judgments],
    rankers: &[RankerScores],
    answers: &[AnswerKey],
    options: &NrpOptions,
) -> Result<()> {
    if judgments.is_empty() {
        return Err(Error::invalid(
            "NRP needs judgements for at least one dimension",
        ));
    }
    if rankers.is_empty() {
        return Err(Error::invalid("NRP needs at least one ranker"));
    }
    let mut names = BTreeSet::new();
    for j in judgments {
        if !names.insert(j.dimension.as_str()) {
            return Err(Error::invalid(format!(
                "dimension {} is given twice",
                j.dimension
            )));
        }
    }
    let mut ranker_names = BTreeSet::new();
    for r in rankers {
        if !ranker_names.insert(r.name.as_str()) {
            return Err(Error::invalid(format!(
                "two rankers are named `{}`",
                r.name
            )));
        }
    }
    for (dimension, ranker) in &options.forced_rankers {
        if !names.contains(dimension.as_str()) {
            return Err(Error::invalid(format!(
                "forced ranker for unknown dimension {dimension}"
            )));
        }
        if !ranker_names.contains(ranker.as_str()) {
            return Err(Error::invalid(format!(
                "forced ranker `{ranker}` is not among the rankers"
            )));
        }
    }
    let mut seen = BTreeSet::new();
    for key in answers {
        if !seen.insert(key) {
            return Err(Error::invalid(format!(
                "answer {} of query {} is given twice",
                key.item_id(),
                key.qid
            )));
        }
    }
    crate::stats::bootstrap::check_confidence(options.confidence).map_err(Error::invalid)?;
    Ok(())
}

/// Weights per dimension (in `judgments` order), normalised to sum 1.
fn normalised_weights(judgments: &[Judgments], given: &[(String, f64)]) -> Result<Vec<f64>> {
    if given.is_empty() {
        return Ok(vec![1.0 / judgments.len() as f64; judgments.len()]);
    }
    for (dimension, w) in given {
        if !judgments.iter().any(|j| &j.dimension == dimension) {
            return Err(Error::invalid(format!(
                "weight for unknown dimension {dimension}"
            )));
        }
        if !(w.is_finite() && *w >= 0.0) {
            return Err(Error::invalid(format!(
                "weight of {dimension} must be >= 0, got {w}"
            )));
        }
    }
    let raw: Vec<f64> = judgments
        .iter()
        .map(|j| {
            given
                .iter()
                .filter(|(d, _)| *d == j.dimension)
                .map(|(_, w)| w)
                .sum()
        })
        .collect();
    let total: f64 = raw.iter().sum();
    if total <= 0.0 {
        return Err(Error::invalid("the dimension weights sum to 0"));
    }
    Ok(raw.iter().map(|w| w / total).collect())
}

/// Each query's documents in the ranker's order: score descending, ties by docno descending
/// (trec_eval's `comp_sim_docno`).
fn ranked_documents(ranker: &RankerScores) -> HashMap<&str, Vec<&str>> {
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

fn validate(
    ranker: &RankerScores,
    lists: &HashMap<&str, Vec<&str>>,
    j: &Judgments,
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
        unscored += grades
            .keys()
            .filter(|d| scored.is_none_or(|s| !s.contains_key(*d)))
            .count();
        let empty = Vec::new();
        let list = lists.get(qid.as_str()).unwrap_or(&empty);
        let skip = missing_by_query.get(qid.as_str());
        let ranked: Vec<&str> = list
            .iter()
            .copied()
            .filter(|d| skip.is_none_or(|m| !m.contains(d)))
            .collect();
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
fn best_ranker(validation: &[RankerValidation]) -> Option<usize> {
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

/// Per query, the ranker's scores of D_q in ascending order (unscored documents as -inf).
fn sorted_judged_scores<'a>(ranker: &RankerScores, j: &'a Judgments) -> HashMap<&'a str, Vec<f64>> {
    j.grades
        .iter()
        .map(|(qid, grades)| {
            let scored = ranker.documents.get(qid);
            let mut scores: Vec<f64> = grades
                .keys()
                .map(|d| {
                    scored
                        .and_then(|s| s.get(d))
                        .copied()
                        .unwrap_or(f64::NEG_INFINITY)
                })
                .collect();
            scores.sort_by(f64::total_cmp);
            (qid.as_str(), scores)
        })
        .collect()
}

fn combine(per_dimension: &[Stat<f64>], weights: &[f64], judgments: &[Judgments]) -> Stat<f64> {
    let mut total = 0.0;
    for ((value, &w), j) in per_dimension.iter().zip(weights).zip(judgments) {
        if w == 0.0 {
            continue;
        }
        match value {
            Stat::Defined(v) => total += w * v,
            Stat::Undefined(_) => {
                return Stat::undefined(format!("NRP is undefined in dimension {}", j.dimension))
            }
        }
    }
    Stat::Defined(total)
}

fn group_means(answers: &[AnswerNrp], n_dimensions: usize, options: &NrpOptions) -> Vec<GroupNrp> {
    // Queries are the bootstrap units; both queries and groups in sorted order.
    let queries: Vec<&str> = answers
        .iter()
        .map(|a| a.key.qid.as_str())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let query_index: HashMap<&str, usize> =
        queries.iter().enumerate().map(|(i, q)| (*q, i)).collect();

    // (group, query) -> sums and counts of the combined NRP and of each dimension's NRP.
    // Sparse: a group holds only the queries it answered.
    #[derive(Clone)]
    struct Cell {
        answers: usize,
        combined: (f64, usize),
        per_dim: Vec<(f64, usize)>,
    }
    let mut cells: BTreeMap<(&str, &str), BTreeMap<usize, Cell>> = BTreeMap::new();
    for a in answers {
        let q = query_index[a.key.qid.as_str()];
        let cell = cells
            .entry((a.key.system.as_str(), a.key.prompt.as_str()))
            .or_default()
            .entry(q)
            .or_insert_with(|| Cell {
                answers: 0,
                combined: (0.0, 0),
                per_dim: vec![(0.0, 0); n_dimensions],
            });
        cell.answers += 1;
        if let Some(v) = a.combined.value() {
            cell.combined.0 += v;
            cell.combined.1 += 1;
        }
        for (d, value) in a.per_dimension.iter().enumerate() {
            if let Some(v) = value.value() {
                cell.per_dim[d].0 += v;
                cell.per_dim[d].1 += 1;
            }
        }
    }
    let query_mean = |(sum, count): (f64, usize)| (count > 0).then(|| sum / count as f64);
    // Per group: (query, per-query mean combined NRP) where defined.
    let per_query: Vec<Vec<(usize, f64)>> = cells
        .values()
        .map(|by_query| {
            by_query
                .iter()
                .filter_map(|(&q, c)| query_mean(c.combined).map(|m| (q, m)))
                .collect()
        })
        .collect();

    // Each resample: how often every query was drawn, then a weighted mean per group.
    // Costs O(queries + (group, query) pairs) per resample.
    let weighted_mean = |values: &[(usize, f64)], times: &dyn Fn(usize) -> f64| -> f64 {
        let (mut sum, mut n) = (0.0, 0.0);
        for &(q, v) in values {
            let t = times(q);
            sum += t * v;
            n += t;
        }
        if n == 0.0 {
            f64::NAN
        } else {
            sum / n
        }
    };
    let mut drawn = vec![0u32; queries.len()];
    let boot = Bootstrap {
        resamples: options.resamples,
        confidence: options.confidence,
        seed: options.seed,
    }
    .run(queries.len(), |idx| {
        drawn.iter_mut().for_each(|t| *t = 0);
        for &q in idx {
            drawn[q] += 1;
        }
        per_query
            .iter()
            .map(|values| weighted_mean(values, &|q| drawn[q] as f64))
            .collect()
    });

    let once = |_: usize| 1.0;
    let mut groups: Vec<GroupNrp> = cells
        .iter()
        .enumerate()
        .map(|(g, ((system, prompt), by_query))| {
            let per_dimension_mean = (0..n_dimensions)
                .map(|d| {
                    let values: Vec<(usize, f64)> = by_query
                        .iter()
                        .filter_map(|(&q, c)| query_mean(c.per_dim[d]).map(|m| (q, m)))
                        .collect();
                    to_stat(weighted_mean(&values, &once))
                })
                .collect();
            GroupNrp {
                system: system.to_string(),
                prompt: prompt.to_string(),
                answers: by_query.values().map(|c| c.answers).sum(),
                queries: per_query[g].len(),
                mean: to_stat(weighted_mean(&per_query[g], &once)),
                interval: boot.intervals[g].clone(),
                per_dimension_mean,
            }
        })
        .collect();
    // Best first; undefined means last; ties keep (system, prompt) order.
    let key = |g: &GroupNrp| g.mean.value().copied().unwrap_or(f64::NEG_INFINITY);
    groups.sort_by(|a, b| key(b).total_cmp(&key(a)));
    groups
}

fn to_stat(value: f64) -> Stat<f64> {
    if value.is_nan() {
        Stat::undefined("no answer with a defined NRP")
    } else {
        Stat::Defined(value)
    }
}

fn expert_agreement_of(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Answer, HumanRank};
    use approx::assert_relative_eq;

    /// D_q scores [0.1, 0.5, 0.5, 0.9, 2.0], answer 0.5: 2 documents above, 2 tied.
    /// pessimistic r = 4: 1 - 4/5 = 0.2, or 1 - 4/6 = 1/3 with |D_q| + 1;
    /// optimistic  r = 2: 1 - 2/5 = 0.6, or 1 - 2/6 = 2/3;
    /// average     r = 3: 1 - 3/5 = 0.4, or 1 - 3/6 = 0.5.
    #[test]
    fn nrp_by_hand_for_each_tie_policy_and_denominator() {
        let sorted = [0.1, 0.5, 0.5, 0.9, 2.0];
        let place = Placement::of(0.5, &sorted);
        assert_eq!(
            place,
            Placement {
                above: 2,
                tied: 2,
                judged: 5
            }
        );
        let cases = [
            (TiePolicy::Pessimistic, 0.2, 1.0 / 3.0),
            (TiePolicy::Optimistic, 0.6, 2.0 / 3.0),
            (TiePolicy::Average, 0.4, 0.5),
        ];
        for (ties, paper, public_code) in cases {
            assert_relative_eq!(
                place.nrp(ties, Denominator::JudgedDocuments).unwrap(),
                paper,
                epsilon = 1e-12
            );
            let plus = place
                .nrp(ties, Denominator::JudgedDocumentsPlusAnswer)
                .unwrap();
            assert_relative_eq!(plus, public_code, epsilon = 1e-12);
        }
        // Above everything: 1 either way. Below everything: 0, or 1/6 with |D_q| + 1.
        let top = Placement::of(3.0, &sorted);
        assert_eq!(
            top.nrp(TiePolicy::Pessimistic, Denominator::JudgedDocuments),
            Stat::Defined(1.0)
        );
        let bottom = Placement::of(0.0, &sorted);
        assert_eq!(
            bottom.nrp(TiePolicy::Optimistic, Denominator::JudgedDocuments),
            Stat::Defined(0.0)
        );
        assert_relative_eq!(
            bottom
                .nrp(
                    TiePolicy::Pessimistic,
                    Denominator::JudgedDocumentsPlusAnswer
                )
                .unwrap(),
            1.0 / 6.0,
            epsilon = 1e-12
        );
        // Unscored documents (-inf) are below any answer.
        assert_eq!(Placement::of(-5.0, &[f64::NEG_INFINITY, 1.0]).above, 1);
        assert!(!Placement::of(1.0, &[])
            .nrp(TiePolicy::Average, Denominator::JudgedDocuments)
            .is_defined());
    }

    fn judgments(
        dimension: &str,
        grades: &[(&str, &str, i64)],
        missing: &[(&str, &str)],
    ) -> Judgments {
        let mut map: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        for (q, d, g) in grades {
            map.entry(q.to_string())
                .or_default()
                .insert(d.to_string(), *g);
        }
        Judgments {
            dimension: dimension.into(),
            grades: map,
            missing: missing
                .iter()
                .map(|(q, d)| (q.to_string(), d.to_string()))
                .collect(),
        }
    }

    fn ranker(
        name: &str,
        docs: &[(&str, &str, f64)],
        answers: &[(&AnswerKey, f64)],
    ) -> RankerScores {
        let run: Vec<RunEntry> = docs
            .iter()
            .map(|(q, d, s)| RunEntry {
                qid: q.to_string(),
                docno: d.to_string(),
                rank: 0,
                score: *s,
                tag: name.into(),
            })
            .collect();
        let scores: Vec<AnswerScore> = answers
            .iter()
            .map(|(k, s)| AnswerScore {
                qid: k.qid.clone(),
                system: k.system.clone(),
                prompt: k.prompt.clone(),
                sample: k.sample,
                score: *s,
            })
            .collect();
        RankerScores::from_run(name, &run, &scores).unwrap()
    }

    fn keys() -> Vec<AnswerKey> {
        vec![
            AnswerKey::new("q1", "sysA", "p1", 0),
            AnswerKey::new("q1", "sysA", "p1", 1),
            AnswerKey::new("q1", "sysB", "p1", 0),
            AnswerKey::new("q2", "sysA", "p1", 0),
            AnswerKey::new("q2", "sysB", "p1", 0),
        ]
    }

    /// Relevance: q1 {d1: 2, d2: 1, d3: 0, d4: 0}, q2 {d5: 1, d6: 0}.
    /// Credibility: q1 {d1: 1, d2: 0, d3: 1}, d4 "not able to judge"; nothing for q2.
    /// Ranker `bad` (listed first) orders documents backwards, `good` forwards.
    fn setup() -> (Vec<Judgments>, Vec<RankerScores>, Vec<AnswerKey>) {
        let j = vec![
            judgments(
                "relevance",
                &[
                    ("q1", "d1", 2),
                    ("q1", "d2", 1),
                    ("q1", "d3", 0),
                    ("q1", "d4", 0),
                    ("q2", "d5", 1),
                    ("q2", "d6", 0),
                ],
                &[],
            ),
            judgments(
                "credibility",
                &[("q1", "d1", 1), ("q1", "d2", 0), ("q1", "d3", 1)],
                &[("q1", "d4")],
            ),
        ];
        let k = keys();
        let good = ranker(
            "good",
            &[
                ("q1", "d1", 4.0),
                ("q1", "d2", 3.0),
                ("q1", "d3", 2.0),
                ("q1", "d4", 1.0),
                ("q2", "d5", 2.0),
                ("q2", "d6", 1.0),
            ],
            &[
                (&k[0], 3.0),
                (&k[1], 5.0),
                (&k[2], 0.5),
                (&k[3], 1.5),
                (&k[4], 2.0),
            ],
        );
        let bad = ranker(
            "bad",
            &[
                ("q1", "d1", 1.0),
                ("q1", "d2", 2.0),
                ("q1", "d3", 3.0),
                ("q1", "d4", 4.0),
                ("q2", "d5", 1.0),
                ("q2", "d6", 2.0),
            ],
            &[
                (&k[0], 2.0),
                (&k[1], 0.5),
                (&k[2], 3.5),
                (&k[3], 9.0),
                (&k[4], 9.0),
            ],
        );
        (j, vec![bad, good], k)
    }

    fn options() -> NrpOptions {
        NrpOptions {
            resamples: 200,
            seed: 3,
            ..NrpOptions::default()
        }
    }

    #[test]
    fn rankers_are_validated_by_ndcg_and_chosen_per_dimension() {
        let (j, rankers, k) = setup();
        let report = nrp(&j, &rankers, &k, &options(), None).unwrap();
        let rel = &report.dimensions[0];
        // good: perfect order, nDCG 1 on both queries. bad on relevance, by hand:
        // q1 ranks d4, d3, d2, d1 (gains 0, 0, 1, 2): (1/log2 4 + 2/log2 5)/(2 + 1/log2 3)
        //    = 0.5174418337467067; q2 ranks d6, d5: (1/log2 3)/1 = 0.6309297535714575;
        // mean 0.5741857936590822.
        assert_relative_eq!(
            *rel.validation[0].mean_ndcg_at_10.value().unwrap(),
            0.5741857936590822,
            epsilon = 1e-12
        );
        assert_eq!(*rel.validation[1].mean_ndcg_at_10.value().unwrap(), 1.0);
        assert_eq!((rel.ranker.as_str(), rel.forced), ("good", false));
        // Credibility: with d4 (not able to judge) removed, both rankers score
        // (1 + 1/log2 4)/(1 + 1/log2 3) = 0.9197207891481876 on q1; the tie goes to the
        // ranker listed first, `bad`.
        let cred = &report.dimensions[1];
        for v in &cred.validation {
            assert_relative_eq!(
                *v.mean_ndcg_at_10.value().unwrap(),
                0.9197207891481876,
                epsilon = 1e-12
            );
            assert_eq!(v.queries, 1);
        }
        assert_eq!(cred.ranker, "bad");
        // Forcing a ranker overrides the choice.
        let forced = NrpOptions {
            forced_rankers: vec![("relevance".into(), "bad".into())],
            ..options()
        };
        let report = nrp(&j, &rankers, &k, &forced, None).unwrap();
        assert_eq!(
            (
                report.dimensions[0].ranker.as_str(),
                report.dimensions[0].forced
            ),
            ("bad", true)
        );
        let unknown = NrpOptions {
            forced_rankers: vec![("relevance".into(), "monoT5".into())],
            ..options()
        };
        assert!(nrp(&j, &rankers, &k, &unknown, None).is_err());
    }

    /// Relevance with `good` (D_q1 scores 1, 2, 3, 4; D_q2 scores 1, 2), pessimistic:
    ///   q1/sysA/0 = 3.0: 1 above + 1 tie -> r = 2 -> 1 - 2/4 = 0.5
    ///   q1/sysA/1 = 5.0: r = 0 -> 1;  q1/sysB/0 = 0.5: r = 4 -> 0
    ///   q2/sysA/0 = 1.5: r = 1 -> 0.5; q2/sysB/0 = 2.0: tie -> r = 1 -> 0.5
    /// Credibility with `bad` (D_q1 = d1, d2, d3 scored 1, 2, 3):
    ///   q1/sysA/0 = 2.0: 1 above + 1 tie -> 1 - 2/3 = 1/3; q1/sysA/1 = 0.5 -> 0;
    ///   q1/sysB/0 = 3.5 -> 1; q2: no judged document -> undefined.
    /// Equal weights 1/2: q1/sysA/0 = 0.25 + 1/6 = 0.4166..., q1/sysA/1 = 0.5,
    /// q1/sysB/0 = 0.5; sysA mean over its one defined query = (0.41667 + 0.5)/2.
    #[test]
    fn answers_get_nrp_per_dimension_combined_with_weights() {
        let (j, rankers, k) = setup();
        let report = nrp(&j, &rankers, &k, &options(), None).unwrap();
        let rel: Vec<f64> = report
            .answers
            .iter()
            .map(|a| *a.per_dimension[0].value().unwrap())
            .collect();
        assert_eq!(rel, [0.5, 1.0, 0.0, 0.5, 0.5]);
        assert_eq!(
            (
                report.dimensions[0].answers_with_ties,
                report.dimensions[0].tied_pairs
            ),
            (2, 2)
        );
        let cred = &report.answers[0].per_dimension[1];
        assert_relative_eq!(*cred.value().unwrap(), 1.0 / 3.0, epsilon = 1e-12);
        // Queries with no judged document: undefined with a reason, and counted.
        match &report.answers[3].per_dimension[1] {
            Stat::Undefined(reason) => {
                assert!(reason.contains("q2") && reason.contains("credibility"))
            }
            other => panic!("expected undefined, got {other:?}"),
        }
        assert_eq!(report.dimensions[1].undefined_answers, 2);
        assert_eq!(report.undefined_answers, 2);
        assert!(!report.answers[4].combined.is_defined());
        assert_relative_eq!(
            *report.answers[0].combined.value().unwrap(),
            0.25 + 1.0 / 6.0,
            epsilon = 1e-12
        );
        assert_eq!(report.answers[1].combined, Stat::Defined(0.5));
        let groups: Vec<(&str, f64, usize)> = report
            .groups
            .iter()
            .map(|g| (g.system.as_str(), *g.mean.value().unwrap(), g.queries))
            .collect();
        assert_eq!(groups[0], ("sysB", 0.5, 1));
        assert_eq!(groups[1].0, "sysA");
        assert_relative_eq!(groups[1].1, (0.25 + 1.0 / 6.0 + 0.5) / 2.0, epsilon = 1e-12);

        // Weights relevance 3, credibility 0 -> normalised (1, 0): combined = relevance NRP,
        // defined for q2 too. sysA: q1 (0.5 + 1)/2 = 0.75, q2 0.5 -> 0.625; sysB: (0 + 0.5)/2.
        let weighted = NrpOptions {
            weights: vec![("relevance".into(), 3.0)],
            ..options()
        };
        let report = nrp(&j, &rankers, &k, &weighted, None).unwrap();
        assert_eq!(
            (report.dimensions[0].weight, report.dimensions[1].weight),
            (1.0, 0.0)
        );
        assert_eq!(report.undefined_answers, 0);
        let means: Vec<(&str, f64)> = report
            .groups
            .iter()
            .map(|g| (g.system.as_str(), *g.mean.value().unwrap()))
            .collect();
        assert_eq!(means, [("sysA", 0.625), ("sysB", 0.25)]);
        for g in &report.groups {
            let ci = g.interval.value().unwrap();
            assert!(ci.contains(*g.mean.value().unwrap()));
        }
        let bad_weights = NrpOptions {
            weights: vec![("relevance".into(), -1.0)],
            ..options()
        };
        assert!(nrp(&j, &rankers, &k, &bad_weights, None).is_err());
    }

    #[test]
    fn tie_policy_and_denominator_options_reach_the_answers() {
        let (j, rankers, k) = setup();
        // q1/sysA/0 on relevance: 1 above, 1 tied among 4.
        for (ties, denominator, want) in [
            (TiePolicy::Optimistic, Denominator::JudgedDocuments, 0.75),
            (TiePolicy::Average, Denominator::JudgedDocuments, 0.625),
            (
                TiePolicy::Pessimistic,
                Denominator::JudgedDocumentsPlusAnswer,
                0.6,
            ),
        ] {
            let o = NrpOptions {
                ties,
                denominator,
                ..options()
            };
            let report = nrp(&j, &rankers, &k, &o, None).unwrap();
            assert_relative_eq!(
                *report.answers[0].per_dimension[0].value().unwrap(),
                want,
                epsilon = 1e-12
            );
            assert_eq!(report.ties, ties);
        }
    }

    #[test]
    fn a_missing_answer_score_is_an_error_naming_it() {
        let (j, mut rankers, k) = setup();
        rankers[1].answers.remove(&k[2]);
        let err = nrp(&j, &rankers, &k, &options(), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("sysB/p1/0 (query q1)"), "{err}");
        let mut twice = k.clone();
        twice.push(k[0].clone());
        assert!(nrp(&j, &rankers, &twice, &options(), None).is_err());
    }

    /// Expert ranks vs ranker `good`:
    /// q1: items sysA/p1/0, sysA/p1/1, d1, sysB/p1/0 ranked 2, 1, 3, 4, scored 3, 5, 4, 0.5;
    ///     scipy 1.17.1 kendalltau([3, 5, 4, 0.5], [-2, -1, -3, -4]) -> 0.6666666666666669
    /// q2: items sysA/p1/0, d5, d6 ranked 1, 2, 3, scored 1.5, 2, 1;
    ///     kendalltau([1.5, 2, 1], [-1, -2, -3]) -> 0.33333333333333337
    /// mean 0.5000000000000001; scipy.stats.t.interval(0.95, 1, loc=mean, scale=sem)
    ///     -> (-1.6177007893624498, 2.6177007893624498)
    #[test]
    fn expert_agreement_matches_scipy() {
        let (j, rankers, k) = setup();
        let rows: Vec<HumanRank> = [
            ("q1", "sysA/p1/0", 2.0),
            ("q1", "sysA/p1/1", 1.0),
            ("q1", "d1", 3.0),
            ("q1", "sysB/p1/0", 4.0),
            ("q1", "not-scored", 5.0),
            ("q2", "sysA/p1/0", 1.0),
            ("q2", "d5", 2.0),
            ("q2", "d6", 3.0),
        ]
        .iter()
        .enumerate()
        .map(|(i, (q, item, rank))| HumanRank {
            instance: q.to_string(),
            annotator: "md".into(),
            system: item.to_string(),
            rank: *rank,
            line: i + 2,
        })
        .collect();
        let expert = HumanRankings {
            name: "expert.csv".into(),
            rows,
            instances: vec!["q1".into(), "q2".into()],
            annotators: vec!["md".into()],
            systems: vec![],
        };
        let report = nrp(&j, &rankers, &k, &options(), Some(&expert)).unwrap();
        // Relevance chose `good`, credibility `bad`: one agreement per distinct ranker.
        assert_eq!(report.expert_agreement.len(), 2);
        let good = report
            .expert_agreement
            .iter()
            .find(|a| a.ranker == "good")
            .unwrap();
        assert_eq!(good.unscored_items, 1);
        let taus: Vec<f64> = good
            .per_query
            .iter()
            .map(|q| q.kendall_tau_b.value().unwrap().tau)
            .collect();
        assert_relative_eq!(taus[0], 0.6666666666666669, epsilon = 1e-12);
        assert_relative_eq!(taus[1], 0.33333333333333337, epsilon = 1e-12);
        assert_relative_eq!(
            *good.mean_tau.value().unwrap(),
            0.5000000000000001,
            epsilon = 1e-12
        );
        let ci = good.interval.value().unwrap();
        assert_relative_eq!(ci.lo, -1.6177007893624498, epsilon = 1e-9);
        assert_relative_eq!(ci.hi, 2.6177007893624498, epsilon = 1e-9);
    }

    #[test]
    fn bm25_ranker_scores_judged_documents_and_answers_with_collection_statistics() {
        let topics = vec![Topic {
            qid: "q1".into(),
            query: "insulin glucose".into(),
        }];
        let doc = |d: &str, t: &str| Document {
            docno: d.into(),
            text: t.into(),
        };
        let documents = vec![
            doc("d1", "insulin lowers glucose"),
            doc("d2", "glucose meters"),
            doc("d3", "knee surgery"),
            doc("unjudged", "insulin insulin insulin"),
        ];
        let j = vec![judgments(
            "relevance",
            &[
                ("q1", "d1", 2),
                ("q1", "d2", 1),
                ("q1", "d3", 0),
                ("q1", "lost", 1),
            ],
            &[],
        )];
        let answer = Answer {
            qid: "q1".into(),
            system: "gpt".into(),
            prompt: "plain".into(),
            sample: 0,
            text: "Insulin lowers glucose.".into(),
        };
        let r = bm25_ranker(
            "bm25",
            &topics,
            &documents,
            &j,
            std::slice::from_ref(&answer),
            Bm25Params::default(),
        )
        .unwrap();
        let index = Bm25Index::new(
            &documents
                .iter()
                .map(|d| (d.docno.as_str(), d.text.as_str()))
                .collect::<Vec<_>>(),
            Bm25Params::default(),
        );
        let dense = index.score("insulin glucose");
        let q1 = &r.documents["q1"];
        assert_eq!(q1.len(), 3, "only judged documents that exist are scored");
        assert_eq!((q1["d1"], q1["d2"], q1["d3"]), (dense[0], dense[1], 0.0));
        // The answer has d1's words and length: the same score.
        assert_eq!(r.answers[&AnswerKey::of(&answer)], dense[0]);
        // Used by NRP: "lost" has no text, so it is unscored (below everything) and counted.
        let report = nrp(&j, &[r], &[AnswerKey::of(&answer)], &options(), None).unwrap();
        assert_eq!(
            report.dimensions[0].validation[0].unscored_judged_documents,
            1
        );
        // Pessimistic: d1 ties the answer -> r = 1 of 4 -> 0.75.
        assert_eq!(report.answers[0].combined, Stat::Defined(0.75));
        assert_eq!(report.warnings.len(), 1);
    }
}

#[cfg(test)]
mod scale {
    use super::*;

    /// The bench size: 1,000,000 qrels lines (1,000 queries × 1,000 judged documents, one
    /// dimension) and 100,000 answers (1,000 queries × 10 groups × 10 samples), two rankers.
    /// Run with `cargo test --release --lib eval::nrp::scale -- --ignored`.
    #[test]
    #[ignore]
    fn nrp_on_a_million_qrels_and_100000_answers() {
        let mut grades: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
        let mut docs: HashMap<String, HashMap<String, f64>> = HashMap::new();
        let mut docs2: HashMap<String, HashMap<String, f64>> = HashMap::new();
        for q in 0..1000 {
            let qid = format!("q{q}");
            let g = grades.entry(qid.clone()).or_default();
            let s = docs.entry(qid.clone()).or_default();
            let s2 = docs2.entry(qid.clone()).or_default();
            for d in 0..1000 {
                let docno = format!("d{q}-{d}");
                g.insert(docno.clone(), ((d * 31 + q) % 3) as i64);
                s.insert(docno.clone(), ((d * 17 + q) % 101) as f64);
                s2.insert(docno, ((d * 13 + q) % 7) as f64);
            }
        }
        let judgments = vec![Judgments {
            dimension: "relevance".into(),
            grades,
            missing: vec![],
        }];
        let mut keys = Vec::new();
        let mut answers = HashMap::new();
        for q in 0..1000 {
            for g in 0..10 {
                for sample in 0..10 {
                    let key = AnswerKey::new(&format!("q{q}"), &format!("s{g}"), "p", sample);
                    answers.insert(key.clone(), ((q + g * 7 + sample as usize) % 103) as f64);
                    keys.push(key);
                }
            }
        }
        let rankers = vec![
            RankerScores {
                name: "one".into(),
                documents: docs,
                answers: answers.clone(),
            },
            RankerScores {
                name: "two".into(),
                documents: docs2,
                answers,
            },
        ];
        let start = std::time::Instant::now();
        let report = nrp(&judgments, &rankers, &keys, &NrpOptions::default(), None).unwrap();
        eprintln!(
            "nrp on 1,000,000 qrels and 100,000 answers: {:?}",
            start.elapsed()
        );
        assert_eq!(report.answers.len(), 100_000);
    }
}
