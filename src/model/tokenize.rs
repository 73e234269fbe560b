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

use super::states::TokenBatch;
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
    /// The file's name, for errors.
    file: String,
    /// Every token id must be below this (the model's vocabulary), every token type id
    /// below `type_limit` (its token types): the embedding tables have no other rows.
    id_limit: usize,
    type_limit: usize,
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
        Ok(TextTokenizer {
            inner,
            max_tokens,
            pad_id,
            file: file.to_string(),
            id_limit: usize::MAX,
            type_limit: usize::MAX,
        })
    }

    /// The tokenizer of a model of `config` (`config_file` names its config in errors):
    /// every id its vocabulary and added tokens name is checked against the model's
    /// vocabulary before the tokenizer is built ([`check_token_ids`]), and every input it
    /// encodes against the vocabulary and the token types (the post-processor's special
    /// tokens included), so no id reaches an embedding table without a row for it.
    pub fn for_model(
        file: &str,
        bytes: &[u8],
        config: &super::config::EncoderConfig,
        config_file: &str,
        max_tokens: usize,
    ) -> Result<Self> {
        check_token_ids(file, bytes, config.vocab_size, config_file)?;
        let mut tokenizer = TextTokenizer::from_bytes(file, bytes, max_tokens, config.pad_token_id)?;
        tokenizer.id_limit = config.vocab_size;
        // DistilBERT has no token-type table: its type ids are not read.
        tokenizer.type_limit = if config.type_vocab_size == 0 { usize::MAX } else { config.type_vocab_size };
        Ok(tokenizer)
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
        // Of a long part only the tokens at the end it keeps are held (`part_tokens`).
        let encode_segment = |parts: &[Part]| -> Result<Vec<PartTokens>> {
            parts
                .iter()
                .enumerate()
                .map(|(i, p)| match i {
                    0 => self.part_tokens(p.text, p.cut, budget + 1),
                    _ => self.part_tokens(&format!(" {}", p.text), p.cut, budget + 1),
                })
                .collect()
        };
        let mut parts = encode_segment(first)?;
        let n_first = parts.len();
        parts.extend(encode_segment(second)?);
        let cuts: Vec<Cut> = first.iter().chain(second).map(|p| p.cut).collect();
        let lens: Vec<usize> = parts.iter().map(|p| p.total).collect();
        let fixed: usize = lens.iter().zip(&cuts).filter(|(_, c)| **c == Cut::Never).map(|(l, _)| l).sum();
        if fixed > budget {
            return Err(Error::invalid(format!(
                "the parts that must not be cut (e.g. the option) take {fixed} tokens; the model \
                 allows {budget} besides special tokens"
            )));
        }
        let keep = longest_first(&lens, &cuts, budget);
        let mut cut_per_part = Vec::with_capacity(parts.len());
        let mut encs = Vec::with_capacity(parts.len());
        for ((part, cut), &k) in parts.into_iter().zip(&cuts).zip(&keep) {
            cut_per_part.push(part.total - k);
            let mut enc = part.kept;
            if k < enc.len() {
                let dir = if *cut == Cut::Start { TruncationDirection::Left } else { TruncationDirection::Right };
                enc.truncate(k, 0, dir);
                enc.get_overflowing_mut().clear();
            }
            encs.push(enc);
        }
        let second_encs = encs.split_off(n_first);
        let first_enc = Encoding::merge(encs, false);
        let second_enc = if pair { Some(Encoding::merge(second_encs, false)) } else { None };
        let full = self
            .inner
            .post_process(first_enc, second_enc, true)
            .map_err(|e| Error::model(format!("tokenizer post-processing: {e}")))?;
        let encoded = Encoded { ids: full.get_ids().to_vec(), type_ids: full.get_type_ids().to_vec(), cut_per_part };
        self.check_ids(&encoded)?;
        Ok(encoded)
    }

    /// The ids of an encoded input against the model's tables (see [`TextTokenizer::for_model`]).
    fn check_ids(&self, encoded: &Encoded) -> Result<()> {
        if let Some(id) = encoded.ids.iter().find(|&&id| id as usize >= self.id_limit) {
            return Err(Error::in_file(
                &self.file,
                format!(
                    "it gives the token id {id}, but the model's vocabulary has {} rows (config.json vocab_size): \
                     every id the tokenizer emits must have a row in the embedding table",
                    self.id_limit
                ),
            ));
        }
        if let Some(t) = encoded.type_ids.iter().find(|&&t| t as usize >= self.type_limit) {
            return Err(Error::in_file(
                &self.file,
                format!(
                    "it gives the token type id {t}, but the model has {} token types (config.json type_vocab_size)",
                    self.type_limit
                ),
            ));
        }
        Ok(())
    }

    /// The tokens of one part: how many it has in all, and an encoding that holds at least
    /// `keep` of them (or all) from the end a cut keeps (the start, or the end for
    /// [`Cut::Start`]). A text of more than [`PIECE_BYTES`] bytes is tokenised piece by
    /// piece ([`whitespace_pieces`]) and only the pieces at the kept end are held: the
    /// memory of tokenising (about 150 bytes per input byte in the tokenizers crate: 775 MB
    /// for a 5 MB response) stays that of one piece and the kept tokens whatever the text's
    /// length, while the count of tokens cut stays exact.
    fn part_tokens(&self, text: &str, cut: Cut, keep: usize) -> Result<PartTokens> {
        if text.len() <= PIECE_BYTES {
            let kept = self.raw(text)?;
            return Ok(PartTokens { total: kept.len(), kept });
        }
        let mut pieces = whitespace_pieces(text, PIECE_BYTES);
        if cut == Cut::Start {
            pieces.reverse();
        }
        let (mut total, mut held, mut kept) = (0, 0, Vec::new());
        for piece in pieces {
            let enc = self.raw(piece)?;
            total += enc.len();
            if held < keep {
                held += enc.len();
                kept.push(enc);
            }
        }
        if cut == Cut::Start {
            kept.reverse();
        }
        Ok(PartTokens { total, kept: Encoding::merge(kept, false) })
    }

    /// Pad encoded inputs into one batch (attention mask marks real tokens).
    pub fn batch(&self, items: &[&Encoded]) -> TokenBatch {
        let seqs: Vec<(&[u32], &[u32])> = items.iter().map(|e| (e.ids.as_slice(), e.type_ids.as_slice())).collect();
        TokenBatch::from_sequences(&seqs, self.pad_id)
    }
}

/// Texts longer than this (bytes) are tokenised in pieces of at most this size
/// ([`whitespace_pieces`]).
pub const PIECE_BYTES: usize = 32 * 1024;

/// A part's tokens: how many it has, and those at the end a cut keeps.
struct PartTokens {
    total: usize,
    kept: Encoding,
}

/// `text` in consecutive pieces of at most `size` bytes whose tokens are the text's: each
/// cut falls just before a space between two words (so the pre-tokenizers of WordPiece,
/// byte-level BPE and SentencePiece's Metaspace, which split at whitespace, see the same
/// words: the next piece starts with the space, as " word" does in the whole text), in the
/// second half of the piece; failing that before any whitespace; failing that (a run of
/// `size / 2` bytes without whitespace, e.g. Chinese) at a character boundary, where a
/// token may be split in two.
pub fn whitespace_pieces(text: &str, size: usize) -> Vec<&str> {
    let size = size.max(64);
    let mut pieces = Vec::with_capacity(text.len() / size + 1);
    let mut rest = text;
    while rest.len() > size {
        // A UTF-8 character has at most 4 bytes: both ends move by at most 3.
        let (mut from, mut end) = (size / 2, size);
        while !rest.is_char_boundary(from) {
            from += 1;
        }
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let bytes = rest.as_bytes();
        let between_words = |at: usize| {
            !bytes[at - 1].is_ascii_whitespace() && bytes.get(at + 1).is_some_and(|b| !b.is_ascii_whitespace())
        };
        let window = || rest[from..end].char_indices().map(|(i, c)| (from + i, c));
        let cut = window()
            .filter(|&(at, c)| c == ' ' && between_words(at))
            .map(|(at, _)| at)
            .next_back()
            .or_else(|| window().filter(|(_, c)| c.is_whitespace()).map(|(at, _)| at).next_back())
            .unwrap_or(end);
        pieces.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    pieces.push(rest);
    pieces
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

/// Checks the ids a `tokenizer.json` names (the vocabulary of its model, its added tokens)
/// against the model's vocabulary of `vocab_size` rows, reading the file as a stream
/// without building the tokenizer: a `tokenizer.json` of 10 million entries whose ids lie
/// beyond the vocabulary took 44 s and 2.95 GB to build, only to fail at the first long
/// input. Refused, naming the entry: an id at or beyond `vocab_size`, and a vocabulary of
/// more entries than `vocab_size` (ids would repeat). The first such entry stops the
/// reading. Memory: the file's bytes, one entry at a time.
pub fn check_token_ids(file: &str, bytes: &[u8], vocab_size: usize, config_file: &str) -> Result<()> {
    use std::cell::RefCell;
    let found: RefCell<Option<(String, String)>> = RefCell::new(None);
    let scan = scan::TokenizerScan { limit: vocab_size as u64, found: &found };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let read = serde::de::DeserializeSeed::deserialize(scan, &mut de);
    if let Some((field, why)) = found.into_inner() {
        return Err(Error::field(
            file,
            &field,
            format!(
                "{why}, but the model's vocabulary has {vocab_size} rows ({config_file}: vocab_size): every id \
                 the tokenizer emits must have a row in the embedding table"
            ),
        ));
    }
    read.map_err(|e| Error::in_file(file, format!("not a readable tokenizer.json: {e}")))
}

/// The streaming reader of [`check_token_ids`]: serde seeds that visit `model.vocab` (an
/// object of token -> id for WordPiece, BPE and WordLevel; a list of [token, score] for
/// Unigram, whose ids are the positions) and `added_tokens` (objects with an `id`), and
/// skip everything else unread.
mod scan {
    use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use std::cell::RefCell;
    use std::fmt;

    /// (field, what is wrong) of the first entry beyond the vocabulary.
    type Found<'a> = &'a RefCell<Option<(String, String)>>;

    fn stop<E: de::Error>(found: Found<'_>, field: &str, why: String) -> E {
        *found.borrow_mut() = Some((field.to_string(), why));
        E::custom("an id beyond the vocabulary")
    }

    #[derive(Clone, Copy)]
    pub(super) struct TokenizerScan<'a> {
        pub limit: u64,
        pub found: Found<'a>,
    }

    impl<'de> DeserializeSeed<'de> for TokenizerScan<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for TokenizerScan<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a tokenizer.json object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    "model" => map.next_value_seed(Model(self))?,
                    "added_tokens" => map.next_value_seed(Added(self))?,
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            Ok(())
        }
    }

    struct Model<'a>(TokenizerScan<'a>);

    impl<'de> DeserializeSeed<'de> for Model<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_map(self)
        }
    }

    impl<'de> Visitor<'de> for Model<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("the tokenizer's model")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<String>()? {
                if key == "vocab" {
                    map.next_value_seed(Vocab(self.0))?;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            Ok(())
        }
    }

    struct Vocab<'a>(TokenizerScan<'a>);

    impl<'de> DeserializeSeed<'de> for Vocab<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Vocab<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a vocabulary (an object of ids by token, or a list of [token, score])")
        }
        /// WordPiece, BPE, WordLevel: `{"token": id, ...}`.
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let TokenizerScan { limit, found } = self.0;
            let mut entries = 0u64;
            while let Some((token, id)) = map.next_entry::<String, u64>()? {
                entries += 1;
                if id >= limit {
                    return Err(stop(found, &format!("model.vocab.{token}"), format!("token `{token}` has id {id}")));
                }
                if entries > limit {
                    return Err(stop(found, "model.vocab", format!("the vocabulary has more than {limit} entries")));
                }
            }
            Ok(())
        }
        /// Unigram: `[["token", score], ...]`, the id is the position.
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let TokenizerScan { limit, found } = self.0;
            let mut id = 0u64;
            while let Some((token, _score)) = seq.next_element::<(String, f64)>()? {
                if id >= limit {
                    return Err(stop(found, &format!("model.vocab[{id}]"), format!("token `{token}` has id {id}")));
                }
                id += 1;
            }
            Ok(())
        }
    }

    struct Added<'a>(TokenizerScan<'a>);

    #[derive(serde::Deserialize)]
    struct AddedToken {
        id: u64,
        content: String,
    }

    impl<'de> DeserializeSeed<'de> for Added<'_> {
        type Value = ();
        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_seq(self)
        }
    }

    impl<'de> Visitor<'de> for Added<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of added tokens")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let TokenizerScan { limit, found } = self.0;
            let mut i = 0;
            while let Some(token) = seq.next_element::<AddedToken>()? {
                if token.id >= limit {
                    let why = format!("added token `{}` has id {}", token.content, token.id);
                    return Err(stop(found, &format!("added_tokens[{i}].id"), why));
                }
                i += 1;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minilm_tokenizer_json() -> Vec<u8> {
        std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2/tokenizer.json"))
            .expect("run scripts/setup.sh model")
    }

    #[test]
    fn pieces_cut_before_a_space_between_words_and_rejoin_to_the_text() {
        let text = "alpha beta  gamma delta epsilon ".repeat(40);
        let pieces = whitespace_pieces(&text, 64);
        assert_eq!(pieces.concat(), text);
        assert!(pieces.iter().all(|p| p.len() <= 64));
        for p in &pieces[1..] {
            // Each piece after the first starts with the one space before a word.
            assert!(p.starts_with(' ') && !p[1..].starts_with(' '), "{p:?}");
        }
        // No whitespace at all (or multi-byte characters only): cut at a character boundary.
        let cjk = "医".repeat(100);
        let pieces = whitespace_pieces(&cjk, 64);
        assert_eq!(pieces.concat(), cjk);
        assert!(pieces.iter().all(|p| p.len() <= 64 && !p.is_empty()));
    }

    #[test]
    fn a_long_text_is_cut_to_the_same_tokens_while_only_its_kept_end_is_held() {
        // A text over PIECE_BYTES (tokenised in pieces) gives the ids and the count of tokens
        // cut that tokenising it whole gives (the whole text's tokens, by the tokenizer
        // itself, are the reference), from either end.
        let tok = TextTokenizer::from_bytes("t.json", &minilm_tokenizer_json(), 64, 0).unwrap();
        let sentence = "The patient, aged 67, reports chest pain radiating to the left arm (since 2 h). ";
        let long = sentence.repeat(PIECE_BYTES / sentence.len() * 3 + 7);
        assert!(long.len() > 3 * PIECE_BYTES);
        let whole = tok.raw_ids(&long).unwrap();
        let budget = 64 - tok.special_tokens(false);
        let end = tok.encode(&long).unwrap();
        assert_eq!(end.ids[1..end.ids.len() - 1], whole[..budget]);
        assert_eq!(end.cut_per_part, [whole.len() - budget]);
        let start = tok.encode_parts(&[Part::cut_start(&long)], &[]).unwrap();
        assert_eq!(start.ids[1..start.ids.len() - 1], whole[whole.len() - budget..]);
        assert_eq!(start.cut_per_part, [whole.len() - budget]);
        // A part that is never cut is counted whole: refused with its exact length.
        let err = tok.encode_parts(&[Part::keep(&long)], &[]).unwrap_err().to_string();
        assert!(err.contains(&format!("take {} tokens", whole.len())), "{err}");
    }

    #[test]
    fn ids_beyond_the_vocabulary_are_refused_before_the_tokenizer_is_built() {
        let json = minilm_tokenizer_json();
        check_token_ids("t.json", &json, 30522, "c.json").unwrap();
        // The MiniLM vocabulary's largest id is 30521: a model of 30000 words lacks rows.
        let e = check_token_ids("m/tokenizer.json", &json, 30000, "m/config.json").unwrap_err().to_string();
        assert!(e.starts_with("m/tokenizer.json: field `model.vocab."), "{e}");
        assert!(
            e.contains("has id 30000, but the model's vocabulary has 30000 rows (m/config.json: vocab_size)"),
            "{e}"
        );
        // An added token, and a Unigram vocabulary (a list: the id is the position).
        let added = br#"{"added_tokens": [{"id": 3, "content": "<s>"}, {"id": 70000, "content": "[X]"}], "model": {"vocab": {"a": 0}}}"#;
        let e = check_token_ids("t.json", added, 100, "c.json").unwrap_err().to_string();
        assert!(e.starts_with("t.json: field `added_tokens[1].id`: added token `[X]` has id 70000"), "{e}");
        let unigram = br#"{"model": {"type": "Unigram", "vocab": [["<unk>", 0.0], ["a", -1.5], ["b", -2.0]]}}"#;
        assert!(check_token_ids("t.json", unigram, 3, "c.json").is_ok());
        let e = check_token_ids("t.json", unigram, 2, "c.json").unwrap_err().to_string();
        assert!(e.starts_with("t.json: field `model.vocab[2]`: token `b` has id 2"), "{e}");
        // More entries than rows, whatever their ids say.
        let repeated = br#"{"model": {"vocab": {"a": 0, "b": 1, "c": 0}}}"#;
        let e = check_token_ids("t.json", repeated, 2, "c.json").unwrap_err().to_string();
        assert!(e.contains("the vocabulary has more than 2 entries"), "{e}");
        assert!(check_token_ids("t.json", b"[1, 2]", 2, "c.json").unwrap_err().to_string().contains("not a readable"));
    }

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
