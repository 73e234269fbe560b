//! Neural NRP rankers as jobs: a dense bi-encoder, a cross-encoder or monoT5 scores, per
//! query, the documents judged for it (in any dimension) and the generated answers to it,
//! giving the same `eval::nrp::RankerScores` as a run file or BM25. Validation by nDCG@10
//! then decides per dimension whether it beats the other rankers.

use crate::data::{Answer, Document, Judgments, Topic};
use crate::eval::nrp::{AnswerKey, RankerScores};
use crate::model::rankers::{cross_encoder_scores, dense_scores, RankQuery, Window};
use crate::model::{run_ready, TextModel};
use crate::{Error, Result, Warning};
use std::collections::HashMap;

/// A model that ranks.
pub enum NeuralRanker {
    /// cosine(embed(query), embed(text)) with the model's pooling.
    Dense(TextModel),
    /// The one-logit (or two-class) head over `query [SEP] text`.
    CrossEncoder(TextModel),
    /// P("true") at the first decoder step of a monoT5 model.
    MonoT5(std::cell::RefCell<crate::model::monot5::MonoT5>),
}

impl NeuralRanker {
    pub fn kind(&self) -> &'static str {
        match self {
            NeuralRanker::Dense(_) => "dense bi-encoder (cosine)",
            NeuralRanker::CrossEncoder(_) => "cross-encoder (logit)",
            NeuralRanker::MonoT5(_) => "monoT5 (P(true))",
        }
    }

    /// The arithmetic it runs: the model's precision for the rankers on our CPU encoder;
    /// monoT5 (candle's T5) runs f32 only.
    pub fn precision(&self) -> crate::model::Precision {
        match self {
            NeuralRanker::Dense(m) | NeuralRanker::CrossEncoder(m) => m.encoder.model.precision,
            NeuralRanker::MonoT5(_) => crate::model::Precision::F32,
        }
    }

    /// The model's folder, for messages.
    fn model_name(&self) -> String {
        match self {
            NeuralRanker::Dense(m) | NeuralRanker::CrossEncoder(m) => m.name.clone(),
            NeuralRanker::MonoT5(_) => "monoT5".to_string(),
        }
    }

    fn score(&self, query: &str, texts: &[&str], window: Option<Window>) -> Result<(Vec<f64>, usize)> {
        let request = RankQuery { query, docs: texts, window, batch_size: crate::model::embed::DEFAULT_BATCH };
        let out = match self {
            NeuralRanker::Dense(m) => run_ready(dense_scores(&m.encoder, &m.tokenizer, &m.pooling, &request))?,
            NeuralRanker::CrossEncoder(m) => {
                if m.encoder.model.head.is_none() {
                    return Err(Error::model(format!(
                        "{}: a cross-encoder needs a classification head (one logit); this model has none",
                        m.name
                    )));
                }
                run_ready(cross_encoder_scores(&m.encoder, &m.tokenizer, &request))?
            }
            NeuralRanker::MonoT5(m) => {
                let mut m = m.borrow_mut();
                match window {
                    // The same max-over-windows rule as the other rankers.
                    Some(w) => {
                        let mut scores = Vec::with_capacity(texts.len());
                        let mut cut = 0;
                        for t in texts {
                            let pieces = crate::model::rankers::windows(t, w);
                            let refs: Vec<&str> = pieces.iter().map(String::as_str).collect();
                            let s = m.score(query, &refs)?;
                            cut += s.cut_inputs;
                            scores.push(s.scores.into_iter().fold(f64::NEG_INFINITY, f64::max));
                        }
                        crate::model::rankers::RankerScores { scores, cut_inputs: cut }
                    }
                    None => m.score(query, texts)?,
                }
            }
        };
        Ok((out.scores, out.cut_inputs))
    }
}

/// Scores of `ranker` for every judged document (by query) and every answer. Documents
/// missing from `documents` get no score (NRP counts them); long texts are cut (counted in
/// a warning) unless `window` splits them (then the best window counts).
#[allow(clippy::too_many_arguments)]
pub fn neural_ranker_scores(
    name: &str,
    ranker: &NeuralRanker,
    topics: &[Topic],
    documents: &[Document],
    judgments: &[Judgments],
    answers: &[Answer],
    window: Option<Window>,
    warnings: &mut Vec<Warning>,
) -> Result<RankerScores> {
    let texts: HashMap<&str, &str> = documents.iter().map(|d| (d.docno.as_str(), d.text.as_str())).collect();
    let judged = crate::eval::nrp::judged_documents(judgments);
    let mut answers_of: HashMap<&str, Vec<&Answer>> = HashMap::new();
    for a in answers {
        answers_of.entry(a.qid.as_str()).or_default().push(a);
    }
    let mut documents_scores: HashMap<String, HashMap<String, f64>> = HashMap::new();
    let mut answer_scores: HashMap<AnswerKey, f64> = HashMap::new();
    let mut cut = 0;
    for topic in topics {
        let docnos: Vec<&str> = judged
            .get(topic.qid.as_str())
            .map(|s| s.iter().copied().filter(|d| texts.contains_key(d)).collect())
            .unwrap_or_default();
        let query_answers = answers_of.get(topic.qid.as_str()).cloned().unwrap_or_default();
        let mut items: Vec<&str> = docnos.iter().map(|d| texts[d]).collect();
        items.extend(query_answers.iter().map(|a| a.text.as_str()));
        if items.is_empty() {
            continue;
        }
        let (scores, c) = ranker.score(&topic.query, &items, window).map_err(|e| {
            // The rankers' numbering: 0 the query, then the documents, then the answers.
            e.naming_input(&format!("{} (ranker {name})", ranker.model_name()), |i| match i {
                0 => format!("the text of query `{}`", topic.qid),
                d if d <= docnos.len() => format!("document `{}` of query `{}`", docnos[d - 1], topic.qid),
                a => {
                    let answer = query_answers[a - 1 - docnos.len()];
                    format!(
                        "the answer of system `{}` (prompt `{}`, sample {}) to query `{}`",
                        answer.system, answer.prompt, answer.sample, topic.qid
                    )
                }
            })
        })?;
        cut += c;
        let per_doc = documents_scores.entry(topic.qid.clone()).or_default();
        for (d, s) in docnos.iter().zip(&scores) {
            per_doc.insert(d.to_string(), *s);
        }
        for (a, s) in query_answers.iter().zip(&scores[docnos.len()..]) {
            answer_scores.insert(AnswerKey::of(a), *s);
        }
    }
    if cut > 0 {
        let advice = match window {
            None => "give a window (words, stride) to score long texts by their best window".to_owned(),
            Some(w) => format!("a window of fewer words than {} keeps each window whole", w.words),
        };
        let what = if window.is_some() { "windows" } else { "documents or answers" };
        warnings.push(Warning::new(format!(
            "ranker `{name}` ({}): {cut} {what} were longer than the model's limit and lost their end; {advice}",
            ranker.kind()
        )));
    }
    Ok(RankerScores::new(name, documents_scores, answer_scores))
}
