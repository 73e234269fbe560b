//! A loaded text model (tokenizer + encoder + pooling) and sentence embeddings
//! (`medrank embed`).

use super::batching::length_batches;
use super::config::EncoderConfig;
use super::encoder::{CpuEncoder, Encoder, Readout};
use super::load::{check_config_backed, load_model, ModelFiles};
use super::pooling::Pooling;
use super::tokenize::{Encoded, TextTokenizer};
use crate::error::{Error, Result};
use std::future::Future;

/// Everything needed to turn text into vectors or head outputs on the CPU.
#[derive(Debug, Clone)]
pub struct TextModel {
    pub name: String,
    pub tokenizer: TextTokenizer,
    pub encoder: CpuEncoder,
    pub pooling: Pooling,
}

impl TextModel {
    /// Load from in-memory files (the browser's path; the CLI reads them with
    /// [`ModelFiles::read_dir`]).
    ///
    /// The checks run before anything of the config's sizes is allocated: the config's
    /// values ([`EncoderConfig::from_json`]), those sizes against the weights file's tensor
    /// shapes ([`check_config_backed`]), the tokenizer's ids against the vocabulary
    /// ([`TextTokenizer::for_model`]); then the weights as they are read (finite floats,
    /// `load::check_weights`).
    pub fn from_files(files: &ModelFiles) -> Result<TextModel> {
        let config_file = format!("{}/config.json", files.name);
        let weights_file = format!("{}/model.safetensors", files.name);
        let config_text =
            std::str::from_utf8(&files.config_json).map_err(|_| Error::in_file(&config_file, "not UTF-8 text"))?;
        let config = EncoderConfig::from_json(&config_file, config_text)?;
        check_config_backed(&config, &config_file, &weights_file, &files.weights)?;
        let tokenizer = TextTokenizer::for_model(
            &format!("{}/tokenizer.json", files.name),
            &files.tokenizer_json,
            &config,
            &config_file,
            input_limit(&files.name, config.input_limit(), files.sentence_config_json.as_deref())?,
        )?;
        let model = load_model(config, &weights_file, &files.weights)?;
        let pooling = Pooling::from_files(files.pooling_json.as_deref(), files.modules_json.as_deref())?;
        Ok(TextModel { name: files.name.clone(), tokenizer, encoder: CpuEncoder::new(model), pooling })
    }

    /// The same model run in `precision` (the CPU layers are rebuilt on first use; an int8
    /// folder's weights were widened at load, so it runs in f32 too).
    pub fn set_precision(&mut self, precision: super::Precision) {
        if self.encoder.model.precision != precision {
            // Tensors are shared, not copied, by the clone.
            let mut model = self.encoder.model.clone();
            model.precision = precision;
            self.encoder = CpuEncoder::new(model);
        }
    }

    /// Load a model folder (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_dir(dir: &std::path::Path) -> Result<TextModel> {
        TextModel::from_files(&ModelFiles::read_dir(dir)?)
    }
}

/// The longest input in tokens: the position limit, or sentence-transformers'
/// `max_seq_length` when the folder has a `sentence_bert_config.json` (all-MiniLM-L6-v2
/// says 256: its embeddings of longer texts are those of their first 256 tokens).
pub fn input_limit(model: &str, positions: usize, sentence_config: Option<&[u8]>) -> Result<usize> {
    let Some(bytes) = sentence_config else {
        return Ok(positions);
    };
    let file = format!("{model}/sentence_bert_config.json");
    let v: serde_json::Value = serde_json::from_slice(bytes)
        .map_err(|e| Error::input(&file, e.line(), "json", format!("not valid JSON: {e}")))?;
    match v.get("max_seq_length") {
        None | Some(serde_json::Value::Null) => Ok(positions),
        Some(n) => match n.as_u64() {
            Some(n) if n >= 2 => Ok((n as usize).min(positions)),
            _ => Err(Error::input(&file, 1, "max_seq_length", format!("expected a whole number >= 2, found {n}"))),
        },
    }
}

/// Default number of sequences per forward pass.
pub const DEFAULT_BATCH: usize = 16;

/// Run a future that the CPU encoder completes without waiting (it never returns
/// `Pending`). Works natively and in wasm, without an executor.
pub fn run_ready<T>(fut: impl Future<Output = Result<T>>) -> Result<T> {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match fut.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => {
            Err(Error::model("this encoder needs an async executor (use the async API for the GPU backend)"))
        }
    }
}

/// Pooled embeddings of already tokenised inputs, in input order, on any backend.
pub async fn embed_encoded<E: Encoder>(
    encoder: &E,
    tokenizer: &TextTokenizer,
    pooling: &Pooling,
    inputs: &[Encoded],
    batch_size: usize,
) -> Result<Vec<Vec<f32>>> {
    let lens: Vec<usize> = inputs.iter().map(Encoded::len).collect();
    let mut out = vec![Vec::new(); inputs.len()];
    for group in length_batches(&lens, batch_size) {
        let items: Vec<&Encoded> = group.iter().map(|&i| &inputs[i]).collect();
        let batch = tokenizer.batch(&items);
        for (vec, &i) in encoder.read_out(&batch, Readout::Pooled(*pooling)).await?.into_iter().zip(&group) {
            out[i] = vec;
        }
    }
    super::finite::vectors("embedding", &out)?;
    Ok(out)
}

/// Embeddings of texts with their truncation counts (tokens cut per text; texts longer
/// than the model's limit lose their end).
pub async fn embed_texts<E: Encoder>(
    encoder: &E,
    tokenizer: &TextTokenizer,
    pooling: &Pooling,
    texts: &[&str],
    batch_size: usize,
) -> Result<(Vec<Vec<f32>>, Vec<usize>)> {
    let encoded: Vec<Encoded> = texts.iter().map(|t| tokenizer.encode(t)).collect::<Result<_>>()?;
    let cut = encoded.iter().map(Encoded::tokens_cut).collect();
    Ok((embed_encoded(encoder, tokenizer, pooling, &encoded, batch_size).await?, cut))
}

/// One embedding per line (the core of `medrank embed`), CPU. Lines longer than the model's
/// limit are cut at the end; use [`embed_texts`] to learn how many tokens were cut.
pub fn embed_lines(model: &TextModel, lines: &[&str]) -> Result<Vec<Vec<f32>>> {
    run_ready(embed_texts(&model.encoder, &model.tokenizer, &model.pooling, lines, DEFAULT_BATCH)).map(|(v, _)| v)
}

/// The encoder's outputs for one input of [`encoder_outputs`]: its token ids and types,
/// the states of its real tokens after the last layer and after layer `layer` (row after
/// row of `hidden` values), and the head's logits (empty without a head).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EncoderOutputs {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
    pub hidden: Vec<f32>,
    pub layer: Vec<f32>,
    pub logits: Vec<f32>,
}

/// Texts and pairs of texts (the model's pair template, each part cut at its end where the
/// pair is too long) run through `encoder` in batches of 16 of similar length, as the
/// evaluators batch them ([`super::batching::length_batches`]), returned in input order:
/// what the parity tests compare with Hugging Face transformers on every path (natively,
/// and in the page through `page::encoder_outputs`). In input order, a batch that mixed the
/// parity checks' long texts with short ones padded every short one to the longest.
pub async fn encoder_outputs<E: Encoder>(
    model: &TextModel,
    encoder: &E,
    inputs: &[(String, Option<String>)],
    layer: usize,
) -> Result<Vec<EncoderOutputs>> {
    use super::tokenize::Part;
    let tokenizer = &model.tokenizer;
    let encoded: Vec<Encoded> = inputs
        .iter()
        .map(|(a, b)| match b {
            None => tokenizer.encode(a),
            Some(b) => tokenizer.encode_parts(&[Part::cut_end(a)], &[Part::cut_end(b)]),
        })
        .collect::<Result<_>>()?;
    let last = encoder.config().num_layers;
    let has_head = model.encoder.model.head.is_some();
    let lens: Vec<usize> = encoded.iter().map(Encoded::len).collect();
    let mut out: Vec<Option<EncoderOutputs>> = vec![None; encoded.len()];
    for group in super::batching::length_batches(&lens, 16) {
        let batch = tokenizer.batch(&group.iter().map(|&i| &encoded[i]).collect::<Vec<_>>());
        let states = encoder.encode(&batch, last).await?;
        let at_layer = encoder.encode(&batch, layer).await?;
        let mut logits = if has_head { encoder.read_out(&batch, Readout::Logits).await? } else { vec![] };
        logits.resize(group.len(), vec![]);
        for ((row, &i), logits) in group.iter().enumerate().zip(logits) {
            let e = &encoded[i];
            let span = row * states.seq_len * states.hidden..(row * states.seq_len + e.len()) * states.hidden;
            out[i] = Some(EncoderOutputs {
                ids: e.ids.clone(),
                type_ids: e.type_ids.clone(),
                hidden: states.data[span.clone()].to_vec(),
                layer: at_layer.data[span].to_vec(),
                logits,
            });
        }
    }
    Ok(out.into_iter().map(|o| o.expect("every input is in one batch")).collect())
}

#[cfg(test)]
mod input_limit_tests {
    use super::input_limit;

    #[test]
    fn sentence_transformers_max_seq_length_caps_the_position_limit() {
        assert_eq!(input_limit("m", 512, None).unwrap(), 512);
        assert_eq!(input_limit("m", 512, Some(br#"{"max_seq_length": 256, "do_lower_case": false}"#)).unwrap(), 256);
        // Never above what the position embeddings allow.
        assert_eq!(input_limit("m", 128, Some(br#"{"max_seq_length": 256}"#)).unwrap(), 128);
        assert_eq!(input_limit("m", 512, Some(br#"{"do_lower_case": false}"#)).unwrap(), 512);
        let err = input_limit("m", 512, Some(br#"{"max_seq_length": "long"}"#)).unwrap_err().to_string();
        assert!(err.contains("m/sentence_bert_config.json:1: field `max_seq_length`"), "{err}");
    }
}
