//! Ranker scores: a run file with answer scores, or BM25 over the documents' texts.

use super::{AnswerKey, Error, Result};
use crate::data::{AnswerScore, Document, Judgments, RunEntry, Topic};
use crate::eval::bm25::{Bm25Index, Bm25Params};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One ranker's scores: documents per query and generated answers.
#[derive(Debug, Clone, PartialEq)]
pub struct RankerScores {
    pub name: String,
    /// qid -> docno -> score.
    pub documents: HashMap<String, HashMap<String, f64>>,
    pub answers: HashMap<AnswerKey, f64>,
    /// How a fusion ranker was made (`None` for any other ranker).
    pub fusion: Option<super::fusion::Fusion>,
}

/// An item of an expert ranking: `id` is a docno of query `qid` or, when it is not, the
/// generated answer `answer` (the id `system/prompt/sample`), if there is one.
#[derive(Debug, Clone, Copy)]
pub struct RankedItem<'a> {
    pub qid: &'a str,
    pub id: &'a str,
    pub answer: Option<&'a AnswerKey>,
}

impl RankerScores {
    /// A ranker that is not a fusion.
    pub fn new(
        name: &str,
        documents: HashMap<String, HashMap<String, f64>>,
        answers: HashMap<AnswerKey, f64>,
    ) -> RankerScores {
        RankerScores { name: name.into(), documents, answers, fusion: None }
    }

    /// This ranker's own score of an expert-ranked item: the document's, else the answer's.
    pub fn score_of(&self, item: &RankedItem) -> Option<f64> {
        self.documents
            .get(item.qid)
            .and_then(|docs| docs.get(item.id))
            .or_else(|| item.answer.and_then(|key| self.answers.get(key)))
            .copied()
    }

    /// From a TREC run (document scores) and a file of answer scores. Errors on a duplicate
    /// (qid, docno) or answer, and on scores that are not finite numbers.
    pub fn from_run(name: &str, run: &[RunEntry], answers: &[AnswerScore]) -> Result<Self> {
        let mut documents: HashMap<String, HashMap<String, f64>> = HashMap::new();
        for e in run {
            check_finite(name, e.score, || format!("document {} of query {}", e.docno, e.qid))?;
            if documents.entry(e.qid.clone()).or_default().insert(e.docno.clone(), e.score).is_some() {
                return Err(Error::invalid(format!(
                    "ranker `{name}`: document {} appears twice for query {}",
                    e.docno, e.qid
                )));
            }
        }
        let mut by_key = HashMap::with_capacity(answers.len());
        for a in answers {
            let key = AnswerKey::new(&a.qid, &a.system, &a.prompt, a.sample);
            check_finite(name, a.score, || format!("answer {} of query {}", key.item_id(), a.qid))?;
            if by_key.insert(key.clone(), a.score).is_some() {
                return Err(Error::invalid(format!(
                    "ranker `{name}`: answer {} of query {} is scored twice",
                    key.item_id(),
                    key.qid
                )));
            }
        }
        Ok(RankerScores::new(name, documents, by_key))
    }
}

fn check_finite(ranker: &str, score: f64, what: impl Fn() -> String) -> Result<()> {
    if score.is_finite() {
        Ok(())
    } else {
        Err(Error::invalid(format!("ranker `{ranker}`: the score of {} is {score}", what())))
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
            return Err(Error::invalid(format!("document {} appears twice in the collection", d.docno)));
        }
    }
    let mut queries: HashMap<&str, &str> = HashMap::with_capacity(topics.len());
    for t in topics {
        if queries.insert(t.qid.as_str(), t.query.as_str()).is_some() {
            return Err(Error::invalid(format!("topic {} appears twice", t.qid)));
        }
    }
    let docs: Vec<(&str, &str)> = documents.iter().map(|d| (d.docno.as_str(), d.text.as_str())).collect();
    let index = Bm25Index::new(&docs, params);

    let judged = judged_documents(judgments);
    let mut scores: HashMap<String, HashMap<String, f64>> = HashMap::new();
    for (qid, docnos) in judged {
        let Some(query) = queries.get(qid) else {
            continue;
        };
        let matching: HashMap<usize, f64> = index.matching(query).into_iter().map(|h| (h.index, h.score)).collect();
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
    Ok(RankerScores::new(name, scores, answer_scores))
}

/// The documents judged for each query, over every dimension (graded or "not able to
/// judge"): what a ranker must score.
pub fn judged_documents(judgments: &[Judgments]) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut judged: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for j in judgments {
        for (qid, grades) in &j.grades {
            judged.entry(qid).or_default().extend(grades.keys().map(String::as_str));
        }
        for (qid, docno) in &j.missing {
            judged.entry(qid).or_default().insert(docno);
        }
    }
    judged
}
