//! The score task's input: what a metric learned from human scores reads of one candidate
//! (`medrank train --task score` trains on it, `eval::metrics::learned` predicts with it:
//! this one function builds the pair for both).
//!
//! First segment = the candidate (the text being scored); second segment = the question,
//! then the first reference, joined by a newline (whichever of the two exists). When the
//! pair is too long for the model, the longer of the two segments loses tokens first
//! (longest first, `tokenize`), each from its end: the candidate's end, or the reference's
//! end before the question (the question opens the second segment). Every cut is counted
//! in the returned [`Encoded`] (`cut_per_part`: candidate, then question and reference).

use super::tokenize::{Encoded, Part, TextTokenizer};
use crate::data::candidates::Candidate;
use crate::error::{Error, Result};

/// The encoded (candidate | question, first reference) pair of `c`; an error names the
/// candidate's line when the tokenizer refuses it.
pub fn score_input(tokenizer: &TextTokenizer, file: &str, c: &Candidate) -> Result<Encoded> {
    let second: Vec<&str> =
        [c.question.as_deref(), c.references.first().map(String::as_str)].into_iter().flatten().collect();
    let second = second.join("\n");
    tokenizer
        .encode_parts(&[Part::cut_end(&c.candidate)], &[Part::cut_end(&second)])
        .map_err(|e| Error::input(file, c.line, "candidate", e.to_string()))
}
