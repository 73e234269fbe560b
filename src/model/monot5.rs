//! monoT5 reranking (Nogueira et al. 2020) through candle-transformers' T5: the input is
//! `Query: q Document: d Relevant:`, and the score is P("true") from a softmax over the
//! logits of the tokens "true" and "false" at the first decoder step.
//!
//! candle's T5 takes no encoder attention mask, so documents are scored one at a time
//! (no padding, exact). The query and the prompt words are never cut; a long document
//! loses its end (the count is returned), or use windows (`rankers::windows`) and take
//! the maximum, as for the other rankers. CPU only.

use super::rankers::RankerScores;
use super::tokenize::{Part, TextTokenizer};
use crate::error::{Error, Result};
use candle_core::{DType, Device, Tensor};
use candle_transformers::models::t5;

pub struct MonoT5 {
    model: t5::T5ForConditionalGeneration,
    tokenizer: TextTokenizer,
    true_id: u32,
    false_id: u32,
    decoder_start: u32,
}

impl std::fmt::Debug for MonoT5 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MonoT5(true={}, false={})", self.true_id, self.false_id)
    }
}

impl MonoT5 {
    /// From a T5 folder's `config.json`, `tokenizer.json` and `model.safetensors` bytes.
    pub fn from_bytes(config_json: &[u8], tokenizer_json: &[u8], safetensors: Vec<u8>) -> Result<MonoT5> {
        let cfg: t5::Config = serde_json::from_slice(config_json)
            .map_err(|e| Error::input("config.json", e.line(), "config", format!("not a T5 config: {e}")))?;
        let tokenizer = TextTokenizer::from_bytes("tokenizer.json", tokenizer_json, 512, cfg.pad_token_id as u32)?;
        let find = |names: &[&str]| names.iter().find_map(|n| tokenizer.token_id(n));
        let true_id = find(&["▁true", "true"])
            .ok_or_else(|| Error::in_file("tokenizer.json", "no token for `true` (is this a monoT5 tokenizer?)"))?;
        let false_id =
            find(&["▁false", "false"]).ok_or_else(|| Error::in_file("tokenizer.json", "no token for `false`"))?;
        super::load::check_weights("model.safetensors", &safetensors)?;
        let vb = candle_nn::VarBuilder::from_buffered_safetensors(safetensors, DType::F32, &Device::Cpu)
            .map_err(|e| Error::in_file("model.safetensors", format!("not readable: {e}")))?;
        let model = t5::T5ForConditionalGeneration::load(vb, &cfg)
            .map_err(|e| Error::in_file("model.safetensors", format!("does not fit the T5 config: {e}")))?;
        let decoder_start = cfg.decoder_start_token_id.unwrap_or(cfg.pad_token_id) as u32;
        Ok(MonoT5 { model, tokenizer, true_id, false_id, decoder_start })
    }

    /// P("true") for each document.
    pub fn score(&mut self, query: &str, docs: &[&str]) -> Result<RankerScores> {
        let q = format!("Query: {query}");
        let mut scores = Vec::with_capacity(docs.len());
        let mut cut_inputs = 0;
        for d in docs {
            let doc = format!("Document: {d}");
            let e =
                self.tokenizer.encode_parts(&[Part::keep(&q), Part::cut_end(&doc), Part::keep("Relevant:")], &[])?;
            cut_inputs += usize::from(e.tokens_cut() > 0);
            let ids = Tensor::new(e.ids.as_slice(), &Device::Cpu)?.unsqueeze(0)?;
            let start = Tensor::new(&[self.decoder_start], &Device::Cpu)?.unsqueeze(0)?;
            self.model.clear_kv_cache();
            let logits = self.model.forward(&ids, &start)?.squeeze(0)?;
            let l: Vec<f32> = logits.to_vec1()?;
            let (t, f) = (l[self.true_id as usize] as f64, l[self.false_id as usize] as f64);
            let m = t.max(f);
            scores.push((t - m).exp() / ((t - m).exp() + (f - m).exp()));
        }
        self.model.clear_kv_cache();
        // The rankers' numbering: 0 is the query, d + 1 the document d.
        super::finite::scores("P(true)", &scores).map_err(|e| e.reindexing(|d| d + 1))?;
        Ok(RankerScores { scores, cut_inputs })
    }
}
