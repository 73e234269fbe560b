//! A metric learned from experts' scores (`medrank train --task score`): the trained
//! model's predictions of every human score dimension for each candidate, which the metrics
//! job sets beside ROUGE and BERTScore in the agreement table.
//!
//! The model reads each candidate as it was trained on it (`model::score::score_input`,
//! the one builder of the pair: the candidate, then the question and the first reference)
//! and its outputs are read back on the human scale with the standardisation its
//! `config.json` keeps (`model::config::ScoreScale`). Why a regression head rather than an
//! ordinal one, and what the training reports, is in `train::scores`.

use crate::data::candidates::Candidate;
use crate::error::{Error, Result};
use crate::model::embed::DEFAULT_BATCH;
use crate::model::grade::head_logits;
use crate::model::score::score_input;
use crate::model::{Encoder, TextModel};
use serde::Serialize;

/// A learned metric's predictions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LearnedScores {
    /// The human score dimensions the model predicts (its labels), in its output order.
    pub dimensions: Vec<String>,
    /// One row per candidate (in the order given), one predicted score per dimension, on
    /// the human scores' scale.
    pub scores: Vec<Vec<f64>>,
    /// The candidates (indices into those given) whose input was cut to the model's token
    /// limit: their scores are of what the model read.
    pub truncated: Vec<usize>,
}

/// The name [`score_input`] gives the candidates in its errors (they carry their line,
/// not their file's name).
const CANDIDATES: &str = "candidates";

/// Each candidate's predicted human scores with `model`, a score model trained by
/// `medrank train --task score` (or any regression model whose `id2label` names its
/// outputs); a model of another kind is refused. `encoder` runs `model`'s weights: its own
/// CPU encoder (the CLI), the GPU's, or the page's kept model with progress and cancel.
pub async fn predict_scores<E: Encoder>(
    encoder: &E,
    model: &TextModel,
    candidates: &[Candidate],
) -> Result<LearnedScores> {
    let config = &model.encoder.model.config;
    let Some(scale) = config.score_scale.as_ref() else {
        return Err(Error::invalid(format!(
            "{} is not a score model (its config.json has no problem_type \"regression\"): a learned metric is \
             trained with `medrank train --task score` on human scores",
            model.name
        )));
    };
    let inputs = candidates
        .iter()
        .map(|c| score_input(&model.tokenizer, CANDIDATES, c, config.score_input))
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<_> = inputs.iter().collect();
    let outputs = head_logits(encoder, &model.tokenizer, &refs, DEFAULT_BATCH).await?;
    let scores =
        outputs.iter().map(|o| o.iter().enumerate().map(|(j, &v)| scale.score(j, v as f64)).collect()).collect();
    let truncated = inputs.iter().enumerate().filter(|(_, e)| e.tokens_cut() > 0).map(|(i, _)| i).collect();
    Ok(LearnedScores { dimensions: config.labels.clone(), scores, truncated })
}
