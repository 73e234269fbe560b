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

pub use super::config::ScoreInput;

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
