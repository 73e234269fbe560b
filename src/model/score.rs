//! The score task's input: what a metric learned from human scores reads of one candidate
//! (`medrank train --task score` trains on it, `eval::metrics::learned` predicts with it:
//! this one function builds the pair for both).
//!
//! First segment = the candidate (the text being scored); second segment, as the model's
//! [`ScoreInput`] says (`--score-input`, kept in its config.json): nothing, the question,
//! or the question then the first reference, joined by a newline (whichever exists). When
//! the pair is too long for the model, the longer of the two segments loses tokens first
//! (longest first, `tokenize`), each from its end: the candidate's end, or the reference's
//! end before the question (the question opens the second segment). Every cut is counted
//! in the returned [`Encoded`] (`cut_per_part`: candidate, then question and reference).

use super::tokenize::{Encoded, Part, TextTokenizer};
use crate::data::candidates::Candidate;
use crate::error::{Error, Result};

/// What a score model reads beside the candidate. On SQuALITY's human scores (the vendored
/// `data/squality-scores`, 150 answers), the candidate alone trains a metric well above
/// ROUGE while the reference beside it halves the candidate's share of the tokens and
/// slows learning (README, "Metrics learned from experts' scores").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum ScoreInput {
    /// The candidate alone.
    #[serde(rename = "candidate")]
    Candidate,
    /// The candidate, then the question.
    #[default]
    #[serde(rename = "candidate+question")]
    WithQuestion,
    /// The candidate, then the question and the first reference (what score models read
    /// before the choice existed: a config.json without the key reads so).
    #[serde(rename = "candidate+question+reference")]
    WithReference,
}

impl ScoreInput {
    pub const NAMES: [&'static str; 3] = ["candidate", "candidate+question", "candidate+question+reference"];

    pub fn name(self) -> &'static str {
        match self {
            ScoreInput::Candidate => Self::NAMES[0],
            ScoreInput::WithQuestion => Self::NAMES[1],
            ScoreInput::WithReference => Self::NAMES[2],
        }
    }

    /// `--score-input`'s value, or None.
    pub fn parse(s: &str) -> Option<ScoreInput> {
        [ScoreInput::Candidate, ScoreInput::WithQuestion, ScoreInput::WithReference]
            .into_iter()
            .find(|i| i.name() == s.trim())
    }
}

/// The encoded (candidate | what `input` adds) pair of `c`; an error names the candidate's
/// line when the tokenizer refuses it.
pub fn score_input(tokenizer: &TextTokenizer, file: &str, c: &Candidate, input: ScoreInput) -> Result<Encoded> {
    let reference = (input == ScoreInput::WithReference).then(|| c.references.first().map(String::as_str)).flatten();
    let question = (input != ScoreInput::Candidate).then_some(c.question.as_deref()).flatten();
    let second: Vec<&str> = [question, reference].into_iter().flatten().collect();
    let candidate = [Part::cut_end(&c.candidate)];
    let encoded = if second.is_empty() {
        tokenizer.encode_parts(&candidate, &[])
    } else {
        tokenizer.encode_parts(&candidate, &[Part::cut_end(&second.join("\n"))])
    };
    encoded.map_err(|e| Error::input(file, c.line, "candidate", e.to_string()))
}
