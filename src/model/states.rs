//! What the encoder interface passes: right-padded token ids in ([`TokenBatch`]) and hidden
//! states out ([`HiddenStates`]). A module of their own so that what reads states (pooling,
//! heads) and what makes batches (the tokenizer) need not import the encoders.

use super::config::EncoderConfig;
use crate::error::{Error, Result};

/// Right-padded token ids of a batch of sequences, row-major `[batch, seq_len]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TokenBatch {
    pub batch: usize,
    pub seq_len: usize,
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    /// 1 for real tokens, 0 for padding.
    pub mask: Vec<u32>,
}

impl TokenBatch {
    /// Pad sequences of (ids, type_ids) to the longest one with `pad_id`.
    pub fn from_sequences(seqs: &[(&[u32], &[u32])], pad_id: u32) -> TokenBatch {
        let seq_len = seqs.iter().map(|(ids, _)| ids.len()).max().unwrap_or(0);
        let mut b = TokenBatch { batch: seqs.len(), seq_len, ..Default::default() };
        for (ids, types) in seqs {
            let pad = seq_len - ids.len();
            b.ids.extend_from_slice(ids);
            b.ids.extend(std::iter::repeat_n(pad_id, pad));
            b.type_ids.extend_from_slice(types);
            b.type_ids.extend(std::iter::repeat_n(0, pad));
            b.mask.extend(std::iter::repeat_n(1, ids.len()));
            b.mask.extend(std::iter::repeat_n(0, pad));
        }
        b
    }
    /// Real (unpadded) length of row `i`.
    pub fn len_of(&self, i: usize) -> usize {
        self.mask[i * self.seq_len..(i + 1) * self.seq_len].iter().filter(|&&m| m != 0).count()
    }
    /// Number of real tokens in the batch.
    pub fn real_tokens(&self) -> usize {
        self.mask.iter().filter(|&&m| m != 0).count()
    }

    /// Ids, type ids and mask each hold `batch x seq_len` values.
    fn check_shape(&self) -> Result<()> {
        let n = self.batch * self.seq_len;
        if self.ids.len() != n || self.type_ids.len() != n || self.mask.len() != n {
            return Err(Error::invalid(format!(
                "token batch {}x{} has {} ids, {} type ids, {} mask values",
                self.batch,
                self.seq_len,
                self.ids.len(),
                self.type_ids.len(),
                self.mask.len()
            )));
        }
        Ok(())
    }

    /// What every encoder (CPU, GPU, training) checks before it runs: the shape, the layer
    /// asked for, the length, and ids and token types against the model's tables (an
    /// out-of-range id would otherwise fail deep inside a gather, or silently on a GPU).
    pub fn check(&self, cfg: &EncoderConfig, output_layer: usize) -> Result<()> {
        self.check_shape()?;
        if output_layer > cfg.num_layers {
            return Err(Error::invalid(format!(
                "layer {output_layer} requested from a {}-layer encoder",
                cfg.num_layers
            )));
        }
        if self.seq_len > cfg.max_tokens() {
            return Err(Error::invalid(format!(
                "sequence of {} tokens exceeds the model's limit of {}",
                self.seq_len,
                cfg.max_tokens()
            )));
        }
        if let Some(&id) = self.ids.iter().find(|&&id| id as usize >= cfg.vocab_size) {
            return Err(Error::invalid(format!(
                "token id {id} is outside the vocabulary of {} (tokenizer and model do not match)",
                cfg.vocab_size
            )));
        }
        // DistilBERT, DeBERTa-v3 and ModernBERT have no token-type table and ignore the type ids.
        if cfg.type_vocab_size > 0 {
            if let Some(&t) = self.type_ids.iter().find(|&&t| t as usize >= cfg.type_vocab_size) {
                return Err(Error::invalid(format!(
                    "token type {t} given to a model with {} token types (RoBERTa-style models \
                     take type 0 only: use their own tokenizer)",
                    cfg.type_vocab_size
                )));
            }
        }
        Ok(())
    }
}

/// Hidden states `[batch, seq_len, hidden]`, row-major f32.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HiddenStates {
    pub batch: usize,
    pub seq_len: usize,
    pub hidden: usize,
    pub data: Vec<f32>,
}

impl HiddenStates {
    /// The hidden vector of token `t` in row `b`.
    pub fn token(&self, b: usize, t: usize) -> &[f32] {
        let start = (b * self.seq_len + t) * self.hidden;
        &self.data[start..start + self.hidden]
    }
}
