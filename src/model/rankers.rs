//! Neural rankers for NRP (nrp-ranking-generated-answers.md): a score per document for a
//! query, higher = better, on any [`Encoder`] backend.
//!
//! - dense bi-encoder: cosine of pooled embeddings of query and document;
//! - cross-encoder: the head's logit over `query [SEP] document` (one output: the logit;
//!   two outputs: P(label 1), the "relevant" class of binary rerankers);
//! - monoT5 lives in `monot5.rs` (a T5 decoder, not an [`Encoder`]).
//!
//! Long documents: with a [`Window`], a document is split into overlapping windows of
//! words and its score is the **maximum** over windows (MaxP, Dai & Callan 2019); without
//! one, a document longer than the model's limit loses its end, and the count of cut
//! documents is returned so reports can show it.

use super::batching::length_batches;
use super::embed::embed_encoded;
use super::encoder::{Encoder, Readout};
use super::finite;
use super::heads::softmax;
use super::pooling::{cosine, Pooling};
use super::tokenize::{Encoded, Part, TextTokenizer};
use crate::error::{Error, Result};

/// Overlapping windows over a document's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub words: usize,
    pub stride: usize,
}

impl Window {
    /// A window of 1 to [`crate::bounds::MAX_WINDOW_WORDS`] words every 1 to `words` words
    /// (`--window WORDS,STRIDE`). Zero words used to mean "no window" (with a warning that
    /// asked for one), a zero stride a stride of 1, and a stride beyond the window skipped
    /// the words between windows: each is refused with the bounds instead.
    pub fn new(words: usize, stride: usize) -> std::result::Result<Window, String> {
        let max = crate::bounds::MAX_WINDOW_WORDS;
        if !(1..=max).contains(&words) {
            return Err(format!("WORDS must be from 1 to {max}"));
        }
        if !(1..=words).contains(&stride) {
            return Err(format!(
                "STRIDE must be from 1 to WORDS ({words}); a longer stride skips the words between windows"
            ));
        }
        Ok(Window { words, stride })
    }

    /// How the report's provenance states it.
    pub fn describe(self) -> String {
        format!("{} words every {} words; a text's score is its best window's (MaxP)", self.words, self.stride)
    }
}

/// Split `text` into windows of `w.words` words every `w.stride` words (the last window
/// reaches the end; a short text is one window).
pub fn windows(text: &str, w: Window) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.len() <= w.words || w.words == 0 {
        return vec![words.join(" ")];
    }
    let stride = w.stride.max(1);
    let mut out = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + w.words).min(words.len());
        out.push(words[start..end].join(" "));
        if end == words.len() {
            break;
        }
        start += stride;
    }
    out
}

/// Scores with the number of documents (or windows) that were cut to fit.
#[derive(Debug, Clone, PartialEq)]
pub struct RankerScores {
    pub scores: Vec<f64>,
    pub cut_inputs: usize,
}

fn max_per_doc(n_docs: usize, owner: &[usize], piece_scores: &[f64]) -> Vec<f64> {
    let mut out = vec![f64::NEG_INFINITY; n_docs];
    for (&d, &s) in owner.iter().zip(piece_scores) {
        out[d] = out[d].max(s);
    }
    out
}

/// What a ranker scores: one query against documents, the documents windowed or not,
/// encoded `batch_size` sequences at a time.
#[derive(Debug, Clone, Copy)]
pub struct RankQuery<'a> {
    pub query: &'a str,
    pub docs: &'a [&'a str],
    pub window: Option<Window>,
    pub batch_size: usize,
}

impl RankQuery<'_> {
    /// The pieces of each document (windows, or the whole text) and which document each
    /// belongs to.
    fn pieces(&self) -> (Vec<String>, Vec<usize>) {
        let mut texts = Vec::new();
        let mut owner = Vec::new();
        for (d, doc) in self.docs.iter().enumerate() {
            let parts = match self.window {
                Some(w) => windows(doc, w),
                None => vec![doc.to_string()],
            };
            for p in parts {
                texts.push(p);
                owner.push(d);
            }
        }
        (texts, owner)
    }

    /// A document's score is the best of its pieces' scores.
    fn scores(&self, owner: &[usize], piece_scores: &[f64], cut_inputs: usize) -> RankerScores {
        RankerScores { scores: max_per_doc(self.docs.len(), owner, piece_scores), cut_inputs }
    }
}

/// Dense bi-encoder: cosine(embed(query), embed(document)). A ranker's output that is not
/// a number is an [`Error::NonFinite`](crate::Error::NonFinite) whose index is 0 for the
/// query and `d + 1` for `q.docs[d]`.
pub async fn dense_scores<E: Encoder>(
    encoder: &E,
    tokenizer: &TextTokenizer,
    pooling: &Pooling,
    q: &RankQuery<'_>,
) -> Result<RankerScores> {
    let (texts, owner) = q.pieces();
    let mut encoded: Vec<Encoded> = vec![tokenizer.encode(q.query)?];
    for t in &texts {
        encoded.push(tokenizer.encode(t)?);
    }
    let cut_inputs = encoded[1..].iter().filter(|e| e.tokens_cut() > 0).count();
    let vecs = embed_encoded(encoder, tokenizer, pooling, &encoded, q.batch_size)
        .await
        .map_err(|e| e.reindexing(|i| if i == 0 { 0 } else { owner[i - 1] + 1 }))?;
    let piece_scores: Vec<f64> = vecs[1..].iter().map(|v| cosine(&vecs[0], v) as f64).collect();
    finite::scores("similarity", &piece_scores).map_err(|e| e.reindexing(|p| owner[p] + 1))?;
    Ok(q.scores(&owner, &piece_scores, cut_inputs))
}

/// Cross-encoder over `query [SEP] document` (the query is never cut).
pub async fn cross_encoder_scores<E: Encoder>(
    encoder: &E,
    tokenizer: &TextTokenizer,
    q: &RankQuery<'_>,
) -> Result<RankerScores> {
    let (texts, owner) = q.pieces();
    let encoded: Vec<Encoded> = texts
        .iter()
        .map(|t| tokenizer.encode_parts(&[Part::keep(q.query)], &[Part::cut_end(t)]))
        .collect::<Result<_>>()?;
    let cut_inputs = encoded.iter().filter(|e| e.tokens_cut() > 0).count();
    let lens: Vec<usize> = encoded.iter().map(Encoded::len).collect();
    let mut piece_scores = vec![0f64; encoded.len()];
    for group in length_batches(&lens, q.batch_size) {
        let items: Vec<&Encoded> = group.iter().map(|&i| &encoded[i]).collect();
        let batch = tokenizer.batch(&items);
        for (l, &i) in encoder.read_out(&batch, Readout::Logits).await?.into_iter().zip(&group) {
            piece_scores[i] = match l.len() {
                1 => l[0] as f64,
                2 => softmax(&l, 1.0)[1],
                n => {
                    return Err(Error::invalid(format!(
                        "a cross-encoder has one output (or two: not relevant / relevant); this head has {n}"
                    )))
                }
            };
        }
    }
    finite::scores("relevance score", &piece_scores).map_err(|e| e.reindexing(|p| owner[p] + 1))?;
    Ok(q.scores(&owner, &piece_scores, cut_inputs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cover_the_text_with_overlap() {
        let text = "a b c d e f g";
        let w = windows(text, Window { words: 3, stride: 2 });
        assert_eq!(w, vec!["a b c", "c d e", "e f g"]);
        let w = windows(text, Window { words: 4, stride: 4 });
        assert_eq!(w, vec!["a b c d", "e f g"]);
        assert_eq!(windows("short text", Window { words: 5, stride: 2 }), vec!["short text"]);
        assert_eq!(max_per_doc(2, &[0, 0, 1], &[0.1, 0.7, 0.3]), vec![0.7, 0.3]);
    }
}
