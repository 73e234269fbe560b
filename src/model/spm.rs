//! A SentencePiece model (`spm.model`, what DeBERTa-v3 folders often hold instead of a
//! `tokenizer.json`) converted to the `tokenizers` crate's tokenizer as transformers'
//! fast-tokenizer conversion converts it (`convert_slow_tokenizer.DebertaV2Converter`):
//! the pieces and scores as a Unigram model (the unknown piece's id from the trainer
//! spec), control and user-defined pieces as added tokens, then
//!
//! - normalizer: `Lowercase` (with `do_lower_case`), `Strip`, the model's precompiled
//!   character map (SentencePiece's NFKC-based normalization), `" {2,}"` -> `" "`;
//! - pre-tokenizer: `Punctuation` (with `split_by_punct`), `Metaspace` (`▁`, prepended
//!   always);
//! - post-processor: `[CLS] A [SEP]` and `[CLS] A [SEP] B [SEP]` (types 0 and 1);
//! - decoder: `Metaspace`.
//!
//! The result is serialised as `tokenizer.json` bytes, so everything after the loader
//! (the CPU and GPU paths, the page, a trained folder's copy) reads one format.
//!
//! (transformers 5's `AutoTokenizer` for DeBERTa-v2 builds its normalizer in code instead
//! (NFC, no character map), whatever the file says, so its ids differ from SentencePiece's
//! and from this conversion on characters NFKC maps, such as ligatures and fractions: see
//! README, "Models and training".)
//!
//! The protobuf is read by a small reader of the wire format ([`read_model`]): only the
//! fields the conversion needs, every other one skipped by its wire type.

use crate::error::{Error, Result};
use tokenizers::models::unigram::Unigram;
use tokenizers::normalizers::{Lowercase, NormalizerWrapper, Precompiled, Replace, Sequence, Strip};
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::pre_tokenizers::punctuation::Punctuation;
use tokenizers::pre_tokenizers::sequence::Sequence as PreSequence;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

/// The options of a DeBERTa-v2 tokenizer (`tokenizer_config.json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpmOptions {
    pub do_lower_case: bool,
    pub split_by_punct: bool,
}

impl SpmOptions {
    /// From a folder's `tokenizer_config.json` (absent keys: false, as in DeBERTa-v3).
    pub fn from_tokenizer_config(file: &str, bytes: &[u8]) -> Result<SpmOptions> {
        let v: serde_json::Value =
            serde_json::from_slice(bytes).map_err(|e| Error::in_file(file, format!("not valid JSON: {e}")))?;
        let flag = |key: &str| -> Result<bool> {
            match v.get(key) {
                None | Some(serde_json::Value::Null) => Ok(false),
                Some(serde_json::Value::Bool(b)) => Ok(*b),
                Some(_) => Err(Error::field(file, key, "expected true or false")),
            }
        };
        Ok(SpmOptions { do_lower_case: flag("do_lower_case")?, split_by_punct: flag("split_by_punct")? })
    }
}

/// A piece's kind (SentencePiece's `ModelProto.SentencePiece.Type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PieceType {
    Normal,
    Unknown,
    Control,
    UserDefined,
    Unused,
    Byte,
}

/// What the conversion reads of a `ModelProto`.
#[derive(Debug, Clone, PartialEq)]
struct SpmModel {
    pieces: Vec<(String, f32, PieceType)>,
    /// `trainer_spec.model_type`: 1 Unigram (the default), 2 BPE, 3 word, 4 char.
    model_type: u64,
    unk_id: usize,
    byte_fallback: bool,
    precompiled_charsmap: Vec<u8>,
}

/// A cursor over protobuf wire-format bytes.
struct Wire<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Wire<'a> {
    fn varint(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.bytes.get(self.at)?;
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.at.checked_add(n)?;
        let out = self.bytes.get(self.at..end)?;
        self.at = end;
        Some(out)
    }

    /// The next field: its number and its value (varint, fixed or length-delimited bytes).
    fn field(&mut self) -> Option<(u64, Value<'a>)> {
        let key = self.varint()?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => Value::Fixed(u64::from_le_bytes(self.take(8)?.try_into().ok()?)),
            2 => {
                let n = usize::try_from(self.varint()?).ok()?;
                Value::Bytes(self.take(n)?)
            }
            5 => Value::Fixed(u64::from(u32::from_le_bytes(self.take(4)?.try_into().ok()?))),
            _ => return None, // groups (3, 4) are not used by SentencePiece
        };
        Some((key >> 3, value))
    }

    /// Every field of a message, or `None` where the bytes break off or are not protobuf.
    fn fields(bytes: &'a [u8]) -> Option<Vec<(u64, Value<'a>)>> {
        let mut wire = Wire { bytes, at: 0 };
        let mut out = Vec::new();
        while wire.at < bytes.len() {
            out.push(wire.field()?);
        }
        Some(out)
    }
}

#[derive(Debug, Clone, Copy)]
enum Value<'a> {
    Varint(u64),
    Fixed(u64),
    Bytes(&'a [u8]),
}

/// Reads the fields of `spm.model` the conversion needs; `None` where the bytes are not a
/// SentencePiece model.
fn read_model(bytes: &[u8]) -> Option<SpmModel> {
    let mut model = SpmModel {
        pieces: Vec::new(),
        model_type: 1,
        unk_id: 0,
        byte_fallback: false,
        precompiled_charsmap: Vec::new(),
    };
    for (number, value) in Wire::fields(bytes)? {
        match (number, value) {
            (1, Value::Bytes(piece)) => {
                let (mut text, mut score, mut kind) = (String::new(), 0f32, PieceType::Normal);
                for (n, v) in Wire::fields(piece)? {
                    match (n, v) {
                        (1, Value::Bytes(s)) => text = String::from_utf8(s.to_vec()).ok()?,
                        (2, Value::Fixed(bits)) => score = f32::from_bits(bits as u32),
                        (3, Value::Varint(t)) => {
                            kind = match t {
                                1 => PieceType::Normal,
                                2 => PieceType::Unknown,
                                3 => PieceType::Control,
                                4 => PieceType::UserDefined,
                                5 => PieceType::Unused,
                                6 => PieceType::Byte,
                                _ => return None,
                            }
                        }
                        _ => {}
                    }
                }
                model.pieces.push((text, score, kind));
            }
            (2, Value::Bytes(trainer)) => {
                for (n, v) in Wire::fields(trainer)? {
                    match (n, v) {
                        (3, Value::Varint(t)) => model.model_type = t,
                        (35, Value::Varint(b)) => model.byte_fallback = b != 0,
                        // int32: a negative id is sign-extended to ten bytes.
                        (40, Value::Varint(id)) => model.unk_id = usize::try_from(id as i64).ok()?,
                        _ => {}
                    }
                }
            }
            (3, Value::Bytes(normalizer)) => {
                for (n, v) in Wire::fields(normalizer)? {
                    if let (2, Value::Bytes(map)) = (n, v) {
                        model.precompiled_charsmap = map.to_vec();
                    }
                }
            }
            _ => {}
        }
    }
    Some(model)
}

/// `spm.model` bytes (`file` names it in errors) as the `tokenizer.json` bytes of the
/// tokenizer transformers' conversion makes of it (see the module doc).
pub fn tokenizer_json(file: &str, bytes: &[u8], options: SpmOptions) -> Result<Vec<u8>> {
    let refuse = |why: String| Error::in_file(file, why);
    let model = read_model(bytes).ok_or_else(|| refuse("not a readable SentencePiece model (spm.model)".into()))?;
    if model.model_type != 1 {
        return Err(refuse(format!(
            "a SentencePiece model of type {} (1 is Unigram): DeBERTa-v2/v3's tokenizer is a Unigram model",
            model.model_type
        )));
    }
    if model.pieces.is_empty() || model.unk_id >= model.pieces.len() {
        return Err(refuse(format!(
            "{} pieces and the unknown piece at id {}: no usable vocabulary",
            model.pieces.len(),
            model.unk_id
        )));
    }
    if model.byte_fallback {
        // transformers converts it without byte fallback too (with a warning): unknown
        // characters become the unknown piece where SentencePiece would emit bytes.
        return Err(refuse(
            "a SentencePiece model with byte fallback: transformers' conversion drops it and its ids differ from \
             SentencePiece's; DeBERTa-v3's model has none"
                .into(),
        ));
    }
    let vocab: Vec<(String, f64)> = model.pieces.iter().map(|(p, s, _)| (p.clone(), *s as f64)).collect();
    let unigram =
        Unigram::from(vocab, Some(model.unk_id), false).map_err(|e| refuse(format!("its vocabulary: {e}")))?;
    let mut tokenizer = Tokenizer::new(unigram);
    // Control pieces ([PAD], [CLS], [SEP]) are special, user-defined ones are not; both are
    // matched whole, before normalization.
    let added: Vec<AddedToken> = model
        .pieces
        .iter()
        .filter(|(_, _, kind)| matches!(kind, PieceType::Control | PieceType::UserDefined))
        .map(|(piece, _, kind)| AddedToken::from(piece.clone(), *kind == PieceType::Control).normalized(false))
        .collect();
    tokenizer.add_tokens(&added);
    let mut normalizers: Vec<NormalizerWrapper> = Vec::new();
    if options.do_lower_case {
        normalizers.push(Lowercase.into());
    }
    normalizers.push(Strip::new(true, true).into());
    if !model.precompiled_charsmap.is_empty() {
        let map = Precompiled::from(&model.precompiled_charsmap)
            .map_err(|e| refuse(format!("its precompiled character map: {e}")))?;
        normalizers.push(map.into());
    }
    let spaces = Replace::new(tokenizers::normalizers::replace::ReplacePattern::Regex(" {2,}".into()), " ")
        .map_err(|e| refuse(format!("a normalizer: {e}")))?;
    normalizers.push(spaces.into());
    tokenizer.with_normalizer(Some(Sequence::new(normalizers)));
    let mut pre: Vec<PreTokenizerWrapper> = Vec::new();
    if options.split_by_punct {
        pre.push(Punctuation::new(SplitDelimiterBehavior::Isolated).into());
    }
    pre.push(Metaspace::new('▁', PrependScheme::Always, true).into());
    tokenizer.with_pre_tokenizer(Some(PreSequence::new(pre)));
    tokenizer.with_decoder(Some(Metaspace::new('▁', PrependScheme::Always, true)));
    let id =
        |piece: &str| -> Result<u32> {
            model.pieces.iter().position(|(p, _, _)| p == piece).map(|i| i as u32).ok_or_else(|| {
                refuse(format!("no `{piece}` piece: DeBERTa's inputs start with [CLS] and end with [SEP]"))
            })
        };
    let template = TemplateProcessing::builder()
        .try_single("[CLS]:0 $A:0 [SEP]:0")
        .and_then(|t| t.try_pair("[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1"))
        .map_err(|e| refuse(format!("a template: {e}")))?
        .special_tokens(vec![("[CLS]", id("[CLS]")?), ("[SEP]", id("[SEP]")?)])
        .build()
        .map_err(|e| refuse(format!("a template: {e}")))?;
    tokenizer.with_post_processor(Some(template));
    Ok(tokenizer.to_string(false).map_err(|e| refuse(format!("serialising the tokenizer: {e}")))?.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_reader_takes_fields_and_refuses_broken_bytes() {
        // A piece "▁a" with score -1.5 and type CONTROL (3), then trainer_spec.unk_id = 2.
        let piece = [&[0x0a, 4][..], "▁a".as_bytes(), &[0x15], &(-1.5f32).to_le_bytes(), &[0x18, 3]].concat();
        let trainer = [0xc0, 0x02, 2]; // field 40 (40 << 3 = 320: varint 0xc0 0x02), value 2
        let bytes = [&[0x0a, piece.len() as u8][..], &piece, &[0x12, trainer.len() as u8], &trainer].concat();
        let m = read_model(&bytes).unwrap();
        assert_eq!(m.pieces, vec![("▁a".to_string(), -1.5, PieceType::Control)]);
        assert_eq!((m.unk_id, m.model_type), (2, 1));
        // Cut short, or a text that is no protobuf at all.
        assert_eq!(read_model(&bytes[..bytes.len() - 1]), None);
        assert!(tokenizer_json("m/spm.model", b"{\"not\": \"protobuf\"}", SpmOptions::default())
            .unwrap_err()
            .to_string()
            .starts_with("m/spm.model: "));
    }
}
