//! Tokenisation with truncation that respects what matters.
//!
//! An input is one or two *segments* (`[CLS] first [SEP] second [SEP]` for BERT), each made
//! of *parts* (case, argument, option, ...). Every part says whether it may be cut and from
//! which end. When the input is longer than the model allows, tokens are removed one at a
//! time from the currently longest cuttable part ("longest first", as HF's truncation
//! strategy of that name), so the option or label text is never cut and the case and the
//! argument share the loss. What was cut is returned so reports can count it.
//!
//! The tokenizer's own padding and truncation settings (the packaged MiniLM pads to 128)
//! are switched off: padding is done per batch with an attention mask.

use super::encoder::TokenBatch;
use crate::error::{Error, Result};
use tokenizers::{Encoding, PostProcessor, TruncationDirection};

/// Which end of a part may lose tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// Never cut (MCQA option, label text). An input whose uncuttable parts alone are too
    /// long is an error.
    Never,
    /// Drop tokens from the end (arguments: the start carries the reasoning's claim).
    End,
    /// Drop tokens from the start (clinical case + question: the question is at the end).
    Start,
}

/// A piece of text and its cut policy.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    pub text: &'a str,
    pub cut: Cut,
}

impl<'a> Part<'a> {
    pub fn keep(text: &'a str) -> Self {
        Part { text, cut: Cut::Never }
    }
    pub fn cut_end(text: &'a str) -> Self {
        Part { text, cut: Cut::End }
    }
    pub fn cut_start(text: &'a str) -> Self {
        Part { text, cut: Cut::Start }
    }
}

/// One tokenised input, special tokens included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    /// Tokens removed from each part, in the order the parts were given (first segment's
    /// parts, then the second's). All zero when nothing was cut.
    pub cut_per_part: Vec<usize>,
}

impl Encoded {
    pub fn tokens_cut(&self) -> usize {
        self.cut_per_part.iter().sum()
    }
    pub fn len(&self) -> usize {
        self.ids.len()
    }
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// A Hugging Face tokenizer (from `tokenizer.json` bytes) with a token limit.
#[derive(Clone)]
pub struct TextTokenizer {
    inner: tokenizers::Tokenizer,
    /// Longest input in tokens, special tokens included.
    pub max_tokens: usize,
    pub pad_id: u32,
}

impl std::fmt::Debug for TextTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TextTokenizer(max_tokens={}, pad_id={})", self.max_tokens, self.pad_id)
    }
}

impl TextTokenizer {
    /// `file` names the tokenizer in errors; `max_tokens` usually comes from
    /// `EncoderConfig::max_tokens` (512 for BERT-family models).
    pub fn from_bytes(file: &str, bytes: &[u8], max_tokens: usize, pad_id: u32) -> Result<Self> {
        let mut inner = tokenizers::Tokenizer::from_bytes(bytes)
            .map_err(|e| Error::in_file(file, format!("not a readable tokenizer.json: {e}")))?;
        inner.with_padding(None);
        inner.with_truncation(None).map_err(|e| Error::in_file(file, format!("cannot switch truncation off: {e}")))?;
        Ok(TextTokenizer { inner, max_tokens, pad_id })
    }

    /// Number of special tokens the post-processor adds (`[CLS]`, `[SEP]`, ...).
    pub fn special_tokens(&self, pair: bool) -> usize {
        self.inner.get_post_processor().map(|p| p.added_tokens(pair)).unwrap_or(0)
    }

    /// The token id of a vocabulary entry (e.g. "[SEP]").
    pub fn token_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// Tokenise a single text, cutting its end if it is too long.
    pub fn encode(&self, text: &str) -> Result<Encoded> {
        self.encode_parts(&[Part::cut_end(text)], &[])
    }

    /// Tokens of a text without special tokens and without any limit (for windows).
    pub fn raw_ids(&self, text: &str) -> Result<Vec<u32>> {
        Ok(self.raw(text)?.get_ids().to_vec())
    }

    fn raw(&self, text: &str) -> Result<Encoding> {
        self.inner.encode(text, false).map_err(|e| Error::model(format!("tokenizer: {e}")))
    }

    /// Tokenise `first` (and `second`, if not empty, as the pair segment), truncating
    /// cuttable parts longest-first to fit `max_tokens`.
    pub fn encode_parts(&self, first: &[Part], second: &[Part]) -> Result<Encoded> {
        let pair = !second.is_empty();
        let budget = self.max_tokens.saturating_sub(self.special_tokens(pair));
        // Parts after the first in a segment get a leading space, so that byte-level BPE
        // (RoBERTa) sees a word boundary as it would in the joined text; WordPiece ignores it.
        let encode_segment = |parts: &[Part]| -> Result<Vec<Encoding>> {
            parts
                .iter()
                .enumerate()
                .map(|(i, p)| if i == 0 { self.raw(p.text) } else { self.raw(&format!(" {}", p.text)) })
                .collect()
        };
        let mut encs = encode_segment(first)?;
        let n_first = encs.len();
        encs.extend(encode_segment(second)?);
        let cuts: Vec<Cut> = first.iter().chain(second).map(|p| p.cut).collect();
        let lens: Vec<usize> = encs.iter().map(Encoding::len).collect();
        let fixed: usize = lens.iter().zip(&cuts).filter(|(_, c)| **c == Cut::Never).map(|(l, _)| l).sum();
        if fixed > budget {
            return Err(Error::invalid(format!(
                "the parts that must not be cut (e.g. the option) take {fixed} tokens; the model \
                 allows {budget} besides special tokens"
            )));
        }
        let keep = longest_first(&lens, &cuts, budget);
        let mut cut_per_part = Vec::with_capacity(encs.len());
        for ((enc, cut), k) in encs.iter_mut().zip(&cuts).zip(&keep) {
            cut_per_part.push(enc.len() - k);
            if *k < enc.len() {
                let dir = if *cut == Cut::Start { TruncationDirection::Left } else { TruncationDirection::Right };
                enc.truncate(*k, 0, dir);
                enc.get_overflowing_mut().clear();
            }
        }
        let second_encs = encs.split_off(n_first);
        let first_enc = Encoding::merge(encs, false);
        let second_enc = if pair { Some(Encoding::merge(second_encs, false)) } else { None };
        let full = self
            .inner
            .post_process(first_enc, second_enc, true)
            .map_err(|e| Error::model(format!("tokenizer post-processing: {e}")))?;
        Ok(Encoded { ids: full.get_ids().to_vec(), type_ids: full.get_type_ids().to_vec(), cut_per_part })
    }

    /// Pad encoded inputs into one batch (attention mask marks real tokens).
    pub fn batch(&self, items: &[&Encoded]) -> TokenBatch {
        let seqs: Vec<(&[u32], &[u32])> = items.iter().map(|e| (e.ids.as_slice(), e.type_ids.as_slice())).collect();
        TokenBatch::from_sequences(&seqs, self.pad_id)
    }
}

/// How many tokens each part keeps when tokens are removed one at a time from the longest
/// cuttable part until the total fits `budget` (ties: the earliest part loses first).
pub fn longest_first(lens: &[usize], cuts: &[Cut], budget: usize) -> Vec<usize> {
    let mut keep = lens.to_vec();
    let mut total: usize = keep.iter().sum();
    while total > budget {
        let victim = keep
            .iter()
            .enumerate()
            .filter(|(i, &k)| cuts[*i] != Cut::Never && k > 0)
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(&a.0)))
            .map(|(i, _)| i);
        match victim {
            Some(i) => {
                // Remove in bulk down to the next-longest length (same result, fewer steps).
                let next = keep
                    .iter()
                    .enumerate()
                    .filter(|(j, &k)| *j != i && cuts[*j] != Cut::Never && k < keep[i])
                    .map(|(_, &k)| k)
                    .max()
                    .unwrap_or(0);
                let equal_longer =
                    keep.iter().enumerate().any(|(j, &k)| j != i && cuts[j] != Cut::Never && k == keep[i]);
                let step = if equal_longer { 1 } else { (keep[i] - next).clamp(1, total - budget) };
                keep[i] -= step;
                total -= step;
            }
            None => break, // only uncuttable parts left; the caller checked they fit
        }
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_first_cuts_the_longest_and_never_the_kept() {
        use Cut::*;
        // case 300, argument 250, option 20, budget 509 (512 - 3 specials): 61 tokens go.
        // Longest first: case 300 -> 250 (50 cut), then both alternate: 11 more, case first.
        let keep = longest_first(&[300, 250, 20], &[Start, End, Never], 509);
        assert_eq!(keep, vec![244, 245, 20]);
        assert_eq!(keep.iter().sum::<usize>(), 509);
        // Fits already: unchanged.
        assert_eq!(longest_first(&[10, 5], &[End, Never], 100), vec![10, 5]);
        // Only the cuttable part shrinks, even below the kept one.
        assert_eq!(longest_first(&[10, 50], &[End, Never], 55), vec![5, 50]);
    }
}
