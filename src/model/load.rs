//! Weights from bytes: safetensors -> named f32 tensors in one backend-neutral layout.
//!
//! The browser has no file system, so everything here takes byte buffers; the CLI reads
//! the files and passes the bytes (see [`ModelFiles::read_dir`], native only).
//!
//! Key mapping: checkpoints name tensors with a model prefix (`bert.`, `roberta.`,
//! `distilbert.`) or bare (sentence-transformers' `BertModel`). The prefix is stripped and
//! the rest is matched against the architecture's standard names.
//!
//! Policy for tensors that do not fit (decided here, one place):
//! - a tensor the encoder or the configured head needs and that is missing: **error** naming it;
//! - a tensor of a *known* part medrank does not use (pre-training heads `cls.*`,
//!   `lm_head.*`, DistilBERT's `vocab_*`, the `position_ids` buffer, a pooler when no head
//!   uses it): **warning** naming it (the common case of loading a pre-trained checkpoint);
//! - any other tensor: **error** naming it (a wrong architecture or a mis-mapped checkpoint
//!   would otherwise run with silently missing parts).

use super::config::{Activation, Arch, EncoderConfig, HeadKind};
use super::names::{self, canonical_name, LayerNames, Qkv};
use crate::error::{Error, Result, Warning};
use candle_core::{DType, Device, Tensor};
use std::collections::{BTreeMap, HashMap};

/// A dense layer: `y = x W^T + b`, `weight` is `[out, in]` as in PyTorch. A family without
/// biases (ModernBERT) holds zeros here, which are neither trained nor written.
#[derive(Debug, Clone)]
pub struct Dense {
    pub weight: Tensor,
    pub bias: Tensor,
}

/// Layer norm parameters (`[hidden]` each); zeros for `bias` where the family has none.
#[derive(Debug, Clone)]
pub struct Norm {
    pub weight: Tensor,
    pub bias: Tensor,
}

/// One transformer layer: post-norm as in BERT, RoBERTa, DistilBERT and DeBERTa
/// (`x = LN(x + attn(x)); x = LN(x + ffn(x))`), or pre-norm as in ModernBERT
/// (`x = x + attn(LN(x)); x = x + ffn(LN(x))`, the first layer without its attention norm;
/// `ffn_in` then has twice the inner size: GeGLU's input and gate).
#[derive(Debug, Clone)]
pub struct LayerWeights {
    pub query: Dense,
    pub key: Dense,
    pub value: Dense,
    pub attn_out: Dense,
    /// `None` only for ModernBERT's first layer (an identity).
    pub attn_norm: Option<Norm>,
    pub ffn_in: Dense,
    pub ffn_out: Dense,
    pub ffn_norm: Norm,
}

/// DeBERTa-v2's relative-position table `[2 * span, hidden]` and the norm it goes through
/// before use (`norm_rel_ebd: layer_norm`).
#[derive(Debug, Clone)]
pub struct RelativeTable {
    pub table: Tensor,
    pub norm: Option<Norm>,
}

/// The encoder body in a backend-neutral layout: f32 tensors on the CPU. The GPU encoder
/// uploads these (`tensor.flatten_all()?.to_vec1::<f32>()`), the CPU encoder runs them.
#[derive(Debug, Clone)]
pub struct EncoderWeights {
    /// `[vocab, hidden]`
    pub word_embeddings: Tensor,
    /// `[max_positions, hidden]`; `None` where positions are relative (DeBERTa-v3) or
    /// rotary (ModernBERT).
    pub position_embeddings: Option<Tensor>,
    /// `[type_vocab, hidden]`; `None` for DistilBERT, DeBERTa-v3 and ModernBERT.
    pub token_type_embeddings: Option<Tensor>,
    pub embedding_norm: Norm,
    pub layers: Vec<LayerWeights>,
    /// BERT/RoBERTa pooler (`tanh(dense(h[CLS]))`), when the checkpoint has one.
    pub pooler: Option<Dense>,
    /// DeBERTa-v2's relative positions.
    pub relative: Option<RelativeTable>,
    /// ModernBERT's norm after the last layer.
    pub final_norm: Option<Norm>,
}

impl EncoderWeights {
    /// The relative-position table as the layers read it: normed when the model says so.
    pub fn relative_table(&self, eps: f64) -> Result<Option<Tensor>> {
        let Some(r) = &self.relative else { return Ok(None) };
        Ok(Some(match &r.norm {
            Some(n) => candle_nn::ops::layer_norm_slow(&r.table, &n.weight, &n.bias, eps as f32)?,
            None => r.table.clone(),
        }))
    }
}

/// Task heads with their standard tensor names (see `heads.rs` for how they run).
#[derive(Debug, Clone)]
pub enum HeadWeights {
    /// BERT: `classifier` on the pooler output (sequence classification and multiple choice).
    /// RoBERTa multiple choice: the same shape.
    PooledLinear { classifier: Dense },
    /// RoBERTa sequence classification: `classifier.dense` + tanh + `classifier.out_proj`
    /// on the first token's hidden state.
    RobertaClassifier { dense: Dense, out_proj: Dense },
    /// DistilBERT: `pre_classifier` + ReLU + `classifier` on the first token's hidden state.
    DistilClassifier { pre_classifier: Dense, classifier: Dense },
    /// DeBERTa-v2: the head's own `pooler.dense` + `pooler_hidden_act` (GELU) on the first
    /// token's hidden state, then `classifier`.
    ContextPooler { dense: Dense, activation: Activation, classifier: Dense },
    /// ModernBERT: `head.dense` + `classifier_activation` + `head.norm`, then `classifier`
    /// (on the first token's or the mean state, `classifier_pooling`, as every head:
    /// `EncoderConfig::head_pooling`).
    ModernBertHead {
        dense: Dense,
        activation: Activation,
        norm: Norm,
        /// The norm's epsilon (`norm_eps`).
        eps: f64,
        classifier: Dense,
    },
}

/// A loaded model: architecture, encoder weights, optional head, and load warnings.
#[derive(Debug, Clone)]
pub struct LoadedModel {
    pub config: EncoderConfig,
    pub weights: EncoderWeights,
    pub head: Option<HeadWeights>,
    /// Known-but-unused tensors that were skipped (see the module doc).
    pub warnings: Vec<Warning>,
    /// The arithmetic the CPU encoder runs: int8 when the file holds int8 weights
    /// (`medrank quantize`), f32 otherwise, unless the user chose (`--precision`).
    pub precision: super::precision::Precision,
}

/// Why the page refuses a model whose only tokenizer is a SentencePiece model (a Hub
/// repository's plan, `hub::plan::loadable`, and a folder picked in the page alike): its
/// worker reads `tokenizer.json` by name and converts nothing.
pub const SPM_ONLY_IN_THE_PAGE: &str =
    "a SentencePiece spm.model but no tokenizer.json, the only tokenizer the page reads (the command line converts spm.model)";

/// The error for a folder picked in the page without `tokenizer.json` (`name`: the folder),
/// the sentence above where its only tokenizer is `spm.model`.
pub fn no_tokenizer_in_the_page(name: &str, spm_only: bool) -> Error {
    match spm_only {
        true => Error::in_file(&format!("{name}/spm.model"), format!("the folder has {SPM_ONLY_IN_THE_PAGE}")),
        false => Error::invalid("the model has no tokenizer.json"),
    }
}

/// The files of a Hugging Face style model folder, as bytes.
#[derive(Debug, Clone, Default)]
pub struct ModelFiles {
    /// A short name for messages (the folder path).
    pub name: String,
    pub config_json: Vec<u8>,
    pub tokenizer_json: Vec<u8>,
    /// `model.safetensors`.
    pub weights: Vec<u8>,
    /// `1_Pooling/config.json` (sentence-transformers), if present.
    pub pooling_json: Option<Vec<u8>>,
    /// `modules.json` (sentence-transformers), if present.
    pub modules_json: Option<Vec<u8>>,
    /// `sentence_bert_config.json` (sentence-transformers), if present: its
    /// `max_seq_length` caps the input length as sentence-transformers does.
    pub sentence_config_json: Option<Vec<u8>>,
    /// When `weights` were converted from another file (`pytorch_model.bin`): that file's
    /// fingerprint, which reports give instead of the converted bytes'.
    pub weights_source: Option<crate::report::Fingerprint>,
    /// When `tokenizer_json` was converted from a SentencePiece model (`spm.model`, a
    /// DeBERTa-v3 folder without `tokenizer.json`): that file's fingerprint.
    pub tokenizer_source: Option<crate::report::Fingerprint>,
    /// `train_log.json` of a folder medrank trained (its dev figures and baselines: the
    /// measured quality every result of the model carries, `jobs::quality`), if present.
    pub train_log_json: Option<Vec<u8>>,
}

impl ModelFiles {
    /// `tokenizer.json` bytes from a SentencePiece model (`spm_name` names it in errors and
    /// reports), with the options of the folder's `tokenizer_config.json` when it has one:
    /// for a folder that has no `tokenizer.json` (`super::spm`).
    pub fn tokenizer_from_spm(
        spm_name: &str,
        spm: &[u8],
        tokenizer_config: Option<(&str, &[u8])>,
    ) -> Result<(Vec<u8>, crate::report::Fingerprint)> {
        let options = match tokenizer_config {
            Some((name, bytes)) => super::spm::SpmOptions::from_tokenizer_config(name, bytes)?,
            None => super::spm::SpmOptions::default(),
        };
        let json = super::spm::tokenizer_json(spm_name, spm, options)?;
        Ok((json, crate::report::Fingerprint::of(spm_name, spm)))
    }
}

#[cfg(test)]
impl ModelFiles {
    /// The folder of `model` (random weights, say) named `name`, with the bundled MiniLM's
    /// tokenizer (its vocabulary must be the model's 30,522): for the jobs' tests.
    pub fn for_tests(name: &str, model: &LoadedModel) -> ModelFiles {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        ModelFiles {
            name: name.into(),
            config_json: model.config.to_json().into_bytes(),
            tokenizer_json: std::fs::read(root.join("models/all-MiniLM-L6-v2/tokenizer.json")).unwrap(),
            weights: to_safetensors(model).unwrap(),
            ..Default::default()
        }
    }
}

impl ModelFiles {
    /// Read a model folder (native only; the browser passes the bytes it has).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_dir(dir: &std::path::Path) -> Result<ModelFiles> {
        // A model file that is a device or a pipe (a FIFO named config.json) would be read
        // until the memory ran out, or wait for a writer forever: refused, named, instead.
        let regular = |p: &std::path::Path| -> Result<()> {
            match std::fs::metadata(p) {
                Ok(m) if !m.is_file() => Err(Error::in_file(
                    &p.display().to_string(),
                    "not a regular file (a folder, device, pipe or socket): a model folder holds regular files",
                )),
                _ => Ok(()),
            }
        };
        let read = |name: &str| -> Result<Vec<u8>> {
            let p = dir.join(name);
            regular(&p)?;
            std::fs::read(&p).map_err(|e| Error::io(p.display().to_string(), e))
        };
        let optional = |name: &str| -> Result<Option<Vec<u8>>> {
            let p = dir.join(name);
            if !p.exists() {
                return Ok(None);
            }
            regular(&p)?;
            Ok(std::fs::read(&p).ok())
        };
        let (weights, weights_source) = if dir.join("model.safetensors").exists() {
            (read("model.safetensors")?, None)
        } else if dir.join("pytorch_model.bin").exists() {
            // PyTorch's zip pickle, read by candle's unpickler and kept as safetensors bytes
            // so everything downstream (and the browser) sees one weights format. The
            // report fingerprints the original file.
            let path = dir.join("pytorch_model.bin");
            let name = path.display().to_string();
            regular(&path)?;
            let original = std::fs::read(&path).map_err(|e| Error::io(&name, e))?;
            let tensors = candle_core::pickle::read_all(&path).map_err(|e| {
                Error::in_file(&name, format!("not a readable PyTorch checkpoint (torch.save zip format): {e}"))
            })?;
            if tensors.is_empty() {
                return Err(Error::in_file(&name, "no tensor could be read from this checkpoint"));
            }
            let fingerprint = crate::report::Fingerprint::of(&name, &original);
            (write_safetensors(&tensors)?, Some(fingerprint))
        } else {
            return Err(Error::in_file(
                &dir.display().to_string(),
                "no model.safetensors (or pytorch_model.bin) in this folder",
            ));
        };
        // The config first, as the loader reads it first (its errors come before the tokenizer's).
        let config_json = read("config.json")?;
        // A DeBERTa-v3 folder may hold only the SentencePiece model: converted here, as
        // transformers' fast tokenizer converts it.
        let (tokenizer_json, tokenizer_source) =
            if !dir.join("tokenizer.json").exists() && dir.join("spm.model").exists() {
                let spm = read("spm.model")?;
                let config = optional("tokenizer_config.json")?;
                let config_name = dir.join("tokenizer_config.json").display().to_string();
                let (json, source) = ModelFiles::tokenizer_from_spm(
                    &dir.join("spm.model").display().to_string(),
                    &spm,
                    config.as_deref().map(|b| (config_name.as_str(), b)),
                )?;
                (json, Some(source))
            } else {
                (read("tokenizer.json")?, None)
            };
        Ok(ModelFiles {
            name: dir.display().to_string(),
            config_json,
            tokenizer_json,
            tokenizer_source,
            weights,
            pooling_json: optional("1_Pooling/config.json")?,
            modules_json: optional("modules.json")?,
            sentence_config_json: optional("sentence_bert_config.json")?,
            weights_source,
            train_log_json: optional("train_log.json")?,
        })
    }
}

/// Parse safetensors bytes into f32 CPU tensors (f16/bf16 are widened; int8 weights with
/// their `weight_scale` beside them, as `medrank quantize` writes, become `q * scale`).
pub fn read_safetensors(file: &str, bytes: &[u8]) -> Result<HashMap<String, Tensor>> {
    if bytes.starts_with(b"PK") || bytes.starts_with(&[0x80, 0x02]) {
        return Err(Error::in_file(
            file,
            "this looks like a PyTorch pickle (pytorch_model.bin); convert it to safetensors",
        ));
    }
    check_weights(file, bytes)?;
    let unreadable = |e: &dyn std::fmt::Display| Error::in_file(file, format!("not a readable safetensors file: {e}"));
    let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| unreadable(&format!("{e:?}")))?;
    let mut out = HashMap::new();
    for (name, view) in st.tensors() {
        if name.ends_with(INT8_SCALE_SUFFIX) && st.tensor(&int8_weight_name(&name)).is_ok_and(is_int8) {
            continue; // read with its weight
        }
        let t = if is_int8(view.clone()) {
            let scale = st
                .tensor(&format!("{name}{}", &INT8_SCALE_SUFFIX[".weight".len()..]))
                .map_err(|e| unreadable(&format!("{e:?}")))?;
            let scales: Vec<f32> =
                scale.data().chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
            let q: Vec<i8> = view.data().iter().map(|&b| b as i8).collect();
            let values = super::quant::dequantize_rows(&q, &scales);
            Tensor::from_vec(values, view.shape(), &Device::Cpu)?
        } else {
            let t = <safetensors::tensor::TensorView as candle_core::safetensors::Load>::load(&view, &Device::Cpu)
                .map_err(|e| unreadable(&e))?;
            if t.dtype() == DType::F32 {
                t
            } else {
                t.to_dtype(DType::F32)?
            }
        };
        out.insert(name, t);
    }
    Ok(out)
}

/// The name of an int8 weight's scales: `X.weight` -> `X.weight_scale` (one f32 per row),
/// the convention of the compressed-tensors checkpoints.
pub const INT8_SCALE_SUFFIX: &str = ".weight_scale";

fn int8_weight_name(scale_name: &str) -> String {
    format!("{}.weight", &scale_name[..scale_name.len() - INT8_SCALE_SUFFIX.len()])
}

fn is_int8(view: safetensors::tensor::TensorView) -> bool {
    view.dtype() == safetensors::Dtype::I8
}

/// Whether safetensors bytes hold int8 weights (a folder `medrank quantize` wrote).
pub fn holds_int8(bytes: &[u8]) -> bool {
    safetensors::SafeTensors::deserialize(bytes)
        .map(|st| st.tensors().into_iter().any(|(_, v)| is_int8(v)))
        .unwrap_or(false)
}

/// Integer buffers a Hugging Face checkpoint may carry beside its weights (BERT's and
/// RoBERTa's `embeddings.position_ids`, I64 in all-MiniLM-L6-v2; `token_type_ids` in some):
/// the only tensors stored as integers that a model folder may hold. medrank skips them.
fn is_integer_buffer(name: &str) -> bool {
    name.ends_with("position_ids") || name.ends_with("token_type_ids")
}

/// Checks every tensor of safetensors bytes before they are read: its dtype is a float
/// (F32, F16, BF16, F64), or an integer for the buffers of [`is_integer_buffer`]; a float
/// tensor holds no NaN or infinity. f32 bytes labelled `I32` used to be converted to
/// floats of their integer values, and a NaN or an infinite weight to run, changing every
/// prediction without a word. The error names the tensor (and the first bad value's index).
/// One pass over the raw bytes, without copying them: on all-MiniLM-L6-v2 (22.7 M floats,
/// 91 MB) about 9 ms, where reading the tensors takes about 45 ms (measured on 2 cores of
/// the development machine). Also used for the T5 folders of monoT5, which candle reads
/// itself.
pub fn check_weights(file: &str, bytes: &[u8]) -> Result<()> {
    use safetensors::Dtype;
    let tensors = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| Error::in_file(file, format!("not a readable safetensors file: {e:?}")))?;
    for (name, view) in tensors.tensors() {
        let data = view.data();
        // (element bytes, the exponent bits that make a value NaN or infinite)
        let (size, exponent): (usize, u64) = match view.dtype() {
            Dtype::F32 => (4, 0x7f80_0000),
            Dtype::F16 => (2, 0x7c00),
            Dtype::BF16 => (2, 0x7f80),
            Dtype::F64 => (8, 0x7ff0_0000_0000_0000),
            Dtype::I64 | Dtype::I32 | Dtype::I16 | Dtype::I8 | Dtype::U64 | Dtype::U32 | Dtype::U16 | Dtype::U8
                if is_integer_buffer(&name) =>
            {
                continue
            }
            Dtype::I8 => {
                check_int8(file, &tensors, &name, &view)?;
                continue;
            }
            other => {
                return Err(Error::in_file(
                    file,
                    format!(
                        "tensor `{name}` is stored as {other:?}, but the weights of a BERT-family or T5 model are floats (F32, F16, BF16 or F64); only the position_ids and token_type_ids buffers may be integers"
                    ),
                ))
            }
        };
        if let Some(index) = first_non_finite(data, size, exponent) {
            return Err(Error::in_file(
                file,
                format!(
                    "tensor `{name}` holds a NaN or infinite value (element {index} of {}): the weights are damaged; medrank does not run a model with them",
                    data.len() / size
                ),
            ));
        }
    }
    Ok(())
}

/// An int8 tensor is a weight `X.weight` of two dimensions with `X.weight_scale` beside it:
/// F32, one positive finite scale per row.
fn check_int8(
    file: &str,
    tensors: &safetensors::SafeTensors,
    name: &str,
    view: &safetensors::tensor::TensorView,
) -> Result<()> {
    let refuse = |why: String| Err(Error::in_file(file, format!("int8 tensor `{name}`: {why}")));
    let Some(stem) = name.strip_suffix(".weight") else {
        return refuse("only weights (`….weight`) may be stored as int8".into());
    };
    if view.shape().len() != 2 {
        return refuse(format!("an int8 weight has two dimensions, this one has shape {:?}", view.shape()));
    }
    if view.shape().contains(&0) {
        return refuse(format!(
            "shape {:?} holds no weight (an int8 weight has at least one row and one column)",
            view.shape()
        ));
    }
    let scale_name = format!("{stem}{INT8_SCALE_SUFFIX}");
    let Ok(scale) = tensors.tensor(&scale_name) else {
        return refuse(format!("its scales `{scale_name}` are missing (medrank quantize writes one f32 per row)"));
    };
    if scale.dtype() != safetensors::Dtype::F32 || scale.shape() != [view.shape()[0]] {
        return refuse(format!(
            "its scales `{scale_name}` must be F32 of shape [{}], found {:?} {:?}",
            view.shape()[0],
            scale.dtype(),
            scale.shape()
        ));
    }
    let bad = scale
        .data()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .position(|v| !(v.is_finite() && v > 0.0));
    if let Some(row) = bad {
        return refuse(format!("scale of row {row} in `{scale_name}` is not a positive finite number"));
    }
    Ok(())
}

/// The index of the first element of `data` (little-endian, `size` bytes each) whose
/// exponent bits are all set (NaN or infinity). A branch-free pass first (it vectorises);
/// the index is looked for only when there is one.
fn first_non_finite(data: &[u8], size: usize, exponent: u64) -> Option<usize> {
    let bits = |c: &[u8]| -> u64 {
        match size {
            2 => u16::from_le_bytes([c[0], c[1]]) as u64,
            4 => u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u64,
            _ => u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]),
        }
    };
    let any = match size {
        2 => data
            .chunks_exact(2)
            .fold(false, |bad, c| bad | (u16::from_le_bytes([c[0], c[1]]) as u64 & exponent == exponent)),
        4 => data
            .chunks_exact(4)
            .fold(false, |bad, c| bad | (u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as u64 & exponent == exponent)),
        _ => data.chunks_exact(size).fold(false, |bad, c| bad | (bits(c) & exponent == exponent)),
    };
    if !any {
        return None;
    }
    data.chunks_exact(size).position(|c| bits(c) & exponent == exponent)
}

/// Build a [`LoadedModel`] from a parsed config and safetensors bytes.
pub fn load_model(config: EncoderConfig, file: &str, safetensors: &[u8]) -> Result<LoadedModel> {
    let tensors = read_safetensors(file, safetensors)?;
    let mut model = from_tensors(config, file, tensors)?;
    if holds_int8(safetensors) {
        model.precision = super::precision::Precision::Int8;
    }
    Ok(model)
}

/// Each size `config.json` states against the shapes of the weights file's tensors, read
/// from the safetensors header before any tensor is (so before anything of the config's
/// size is allocated): the vocabulary and hidden size against the word embeddings, the
/// positions and token types against theirs, the layers against the layers the file
/// holds, the feed-forward size against the first layer's, DeBERTa's relative span against
/// its table. A disagreement names the config's field and what the file holds; a tensor
/// that is missing or of another shape than the rest implies is named by [`from_tensors`].
pub fn check_config_backed(config: &EncoderConfig, config_file: &str, weights_file: &str, bytes: &[u8]) -> Result<()> {
    let st = safetensors::SafeTensors::deserialize(bytes)
        .map_err(|e| Error::in_file(weights_file, format!("not a readable safetensors file: {e:?}")))?;
    let shapes: HashMap<String, Vec<usize>> = st
        .tensors()
        .into_iter()
        .map(|(name, view)| (canonical_name(config.arch, &name), view.shape().to_vec()))
        .collect();
    let distil = config.arch == Arch::DistilBert;
    let key = |bert: &'static str, distilbert: &'static str| if distil { distilbert } else { bert };
    let disagree = |field: &str, says: usize, holds: String| {
        Error::field(config_file, field, format!("says {says}, but {weights_file} {holds}"))
    };
    // (tensor, dimension, the config's value, its field)
    let first = names::layer(config.arch, 0);
    let ffn_in = format!("{}.weight", first.ffn_in);
    let word = names::word_embeddings(config.arch);
    let mut checks = vec![
        (word, 0, config.vocab_size, "vocab_size"),
        (word, 1, config.hidden_size, key("hidden_size", "dim")),
        (ffn_in.as_str(), 0, config.ffn_in_size(), key("intermediate_size", "hidden_dim")),
    ];
    if config.absolute_positions() {
        checks.push((names::POSITION_EMBEDDINGS, 0, config.max_position_embeddings, "max_position_embeddings"));
    }
    if config.type_vocab_size > 0 {
        checks.push((names::TOKEN_TYPE_EMBEDDINGS, 0, config.type_vocab_size, "type_vocab_size"));
    }
    let span_field = match config.relative() {
        Some(r) if r.buckets > 0 => "position_buckets",
        _ => "max_relative_positions",
    };
    if let Some(r) = config.relative() {
        checks.push((names::RELATIVE_EMBEDDINGS, 0, 2 * r.span(), span_field));
    }
    for (tensor, dim, says, field) in checks {
        if let Some(&holds) = shapes.get(tensor).and_then(|shape| shape.get(dim)) {
            if holds != says {
                let says = if tensor == names::RELATIVE_EMBEDDINGS { says / 2 } else { says };
                let holds = if tensor == names::RELATIVE_EMBEDDINGS {
                    format!("has `{tensor}` of {holds} rows (2 x the span)")
                } else {
                    format!("has `{tensor}` of {holds} along dimension {dim}")
                };
                return Err(disagree(field, says, holds));
            }
        }
    }
    let prefix = names::layer_prefix(config.arch);
    let layer = |i: usize| format!("{}.weight", names::layer(config.arch, i).query());
    let held = (0..=shapes.len()).find(|&i| !shapes.contains_key(&layer(i))).unwrap_or(0);
    if held != config.num_layers {
        let which = if held == 0 { String::new() } else { format!(" (`{prefix}.0` to `{prefix}.{}`)", held - 1) };
        return Err(disagree(
            key("num_hidden_layers", "n_layers"),
            config.num_layers,
            format!("holds {held} layers{which}"),
        ));
    }
    Ok(())
}

/// Build a [`LoadedModel`] from named tensors (checkpoint names, prefixed or bare).
pub fn from_tensors(config: EncoderConfig, file: &str, tensors: HashMap<String, Tensor>) -> Result<LoadedModel> {
    // Canonical name -> tensor.
    let named: BTreeMap<String, Tensor> =
        tensors.into_iter().map(|(k, t)| (canonical_name(config.arch, &k), t)).collect();
    let mut take = Taker { file, named, cfg: &config };
    let h = config.hidden_size;
    let word_embeddings = take.tensor(names::word_embeddings(config.arch), &[config.vocab_size, h])?;
    let position_embeddings = if config.absolute_positions() {
        Some(take.tensor(names::POSITION_EMBEDDINGS, &[config.max_position_embeddings, h])?)
    } else {
        None
    };
    let token_type_embeddings = if config.type_vocab_size > 0 {
        Some(take.tensor(names::TOKEN_TYPE_EMBEDDINGS, &[config.type_vocab_size, h])?)
    } else {
        None
    };
    let norm_bias = config.norm_bias();
    let embedding_norm = take.norm(names::embedding_norm(config.arch), norm_bias)?;
    let mut layers = Vec::with_capacity(config.num_layers);
    let (bias, mlp_bias, inner) = (config.linear_bias(), config.mlp_bias(), config.intermediate_size);
    for i in 0..config.num_layers {
        let n: LayerNames = names::layer(config.arch, i);
        let [query, key, value] = match &n.qkv {
            Qkv::Separate([q, k, v]) => {
                [take.dense(q, h, h, bias)?, take.dense(k, h, h, bias)?, take.dense(v, h, h, bias)?]
            }
            Qkv::Fused(qkv) => split_qkv(&take.dense(qkv, 3 * h, h, bias)?, h)?,
        };
        layers.push(LayerWeights {
            query,
            key,
            value,
            attn_out: take.dense(&n.attn_out, h, h, bias)?,
            attn_norm: n.attn_norm.as_deref().map(|name| take.norm(name, norm_bias)).transpose()?,
            ffn_in: take.dense(&n.ffn_in, config.ffn_in_size(), h, mlp_bias)?,
            ffn_out: take.dense(&n.ffn_out, h, inner, mlp_bias)?,
            ffn_norm: take.norm(&n.ffn_norm, norm_bias)?,
        });
    }
    let pooler = if matches!(config.arch, Arch::Bert | Arch::Roberta) && take.has("pooler.dense.weight") {
        Some(take.dense("pooler.dense", h, h, true)?)
    } else {
        None
    };
    let relative = match config.relative() {
        Some(r) => Some(RelativeTable {
            table: take.tensor(names::RELATIVE_EMBEDDINGS, &[2 * r.span(), h])?,
            norm: if r.norm { Some(take.norm(names::RELATIVE_NORM, true)?) } else { None },
        }),
        None => None,
    };
    let final_norm =
        if config.arch == Arch::ModernBert { Some(take.norm(names::FINAL_NORM, norm_bias)?) } else { None };
    let weights = EncoderWeights {
        word_embeddings,
        position_embeddings,
        token_type_embeddings,
        embedding_norm,
        layers,
        pooler,
        relative,
        final_norm,
    };
    let n_out = head_outputs(&config);
    let head = match (config.head, config.arch) {
        (HeadKind::None, _) => None,
        (_, Arch::DistilBert) => Some(HeadWeights::DistilClassifier {
            pre_classifier: take.dense("pre_classifier", h, h, true)?,
            classifier: take.dense("classifier", n_out, h, true)?,
        }),
        (HeadKind::SequenceClassification, Arch::Roberta) => Some(HeadWeights::RobertaClassifier {
            dense: take.dense("classifier.dense", h, h, true)?,
            out_proj: take.dense("classifier.out_proj", n_out, h, true)?,
        }),
        (_, Arch::DebertaV2) => Some(HeadWeights::ContextPooler {
            dense: take.dense("pooler.dense", h, h, true)?,
            activation: config.deberta().map_or(Activation::Gelu, |d| d.pooler_activation),
            classifier: take.dense("classifier", n_out, h, true)?,
        }),
        (_, Arch::ModernBert) => {
            let m = config.modernbert().expect("a ModernBERT config has its options");
            Some(HeadWeights::ModernBertHead {
                dense: take.dense("head.dense", h, h, m.classifier_bias)?,
                activation: m.classifier_activation,
                norm: take.norm("head.norm", norm_bias)?,
                eps: config.layer_norm_eps,
                classifier: take.dense("classifier", n_out, h, true)?,
            })
        }
        _ => {
            if weights.pooler.is_none() {
                return Err(Error::in_file(
                    file,
                    "missing tensor `pooler.dense.weight` (the classifier head runs on the pooler)",
                ));
            }
            Some(HeadWeights::PooledLinear { classifier: take.dense("classifier", n_out, h, true)? })
        }
    };
    let mut warnings = Vec::new();
    for name in take.named.keys() {
        if !names::known_unused(&config, name) {
            return Err(Error::in_file(
                file,
                format!("unexpected tensor `{name}` for a {} encoder with head {:?}", config.arch.name(), config.head),
            ));
        }
        warnings.push(Warning::at(
            crate::error::Location::file(file),
            format!("tensor `{name}` belongs to a part medrank does not use; skipped"),
        ));
    }
    Ok(LoadedModel { config, weights, head, warnings, precision: Default::default() })
}

/// ModernBERT's fused `Wqkv` (`[3 h, h]`: the query's rows, then the key's, then the
/// value's) as three maps.
fn split_qkv(fused: &Dense, h: usize) -> Result<[Dense; 3]> {
    let part = |k: usize| -> Result<Dense> {
        Ok(Dense { weight: fused.weight.narrow(0, k * h, h)?.contiguous()?, bias: fused.bias.narrow(0, k * h, h)? })
    };
    Ok([part(0)?, part(1)?, part(2)?])
}

/// Takes tensors out of the name map, checking names and shapes.
struct Taker<'a> {
    file: &'a str,
    named: BTreeMap<String, Tensor>,
    cfg: &'a EncoderConfig,
}

impl Taker<'_> {
    fn has(&self, name: &str) -> bool {
        self.named.contains_key(name)
    }
    fn tensor(&mut self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let t = self.named.remove(name).ok_or_else(|| Error::in_file(self.file, format!("missing tensor `{name}`")))?;
        if t.dims() != shape {
            return Err(Error::in_file(
                self.file,
                format!("tensor `{name}` has shape {:?}, the config implies {shape:?}", t.dims()),
            ));
        }
        Ok(t)
    }
    /// `name.weight` and, where the family has biases, `name.bias` (zeros otherwise; a bias
    /// the config says the model lacks is left in the map, so it is refused as unexpected).
    fn dense(&mut self, name: &str, out: usize, inp: usize, bias: bool) -> Result<Dense> {
        Ok(Dense {
            weight: self.tensor(&format!("{name}.weight"), &[out, inp])?,
            bias: if bias {
                self.tensor(&format!("{name}.bias"), &[out])?
            } else {
                Tensor::zeros(out, DType::F32, &Device::Cpu)?
            },
        })
    }
    fn norm(&mut self, name: &str, bias: bool) -> Result<Norm> {
        let h = self.cfg.hidden_size;
        Ok(Norm {
            weight: self.tensor(&format!("{name}.weight"), &[h])?,
            bias: if bias {
                self.tensor(&format!("{name}.bias"), &[h])?
            } else {
                Tensor::zeros(h, DType::F32, &Device::Cpu)?
            },
        })
    }
}

/// The checkpoint names (bare, HF style) of every tensor of a model: used to save trained
/// models and random test models so that [`from_tensors`] reads them back. A family's
/// absent biases (the zeros [`Dense`] holds for them) are not written.
pub fn to_named_tensors(model: &LoadedModel) -> Vec<(String, Tensor)> {
    let cfg = &model.config;
    let w = &model.weights;
    let mut out: Vec<(String, Tensor)> = Vec::new();
    let dense = |out: &mut Vec<(String, Tensor)>, name: &str, d: &Dense, bias: bool| {
        out.push((format!("{name}.weight"), d.weight.clone()));
        if bias {
            out.push((format!("{name}.bias"), d.bias.clone()));
        }
    };
    let norm = |out: &mut Vec<(String, Tensor)>, name: &str, n: &Norm, bias: bool| {
        out.push((format!("{name}.weight"), n.weight.clone()));
        if bias {
            out.push((format!("{name}.bias"), n.bias.clone()));
        }
    };
    let (bias, mlp_bias, norm_bias) = (cfg.linear_bias(), cfg.mlp_bias(), cfg.norm_bias());
    out.push((names::word_embeddings(cfg.arch).into(), w.word_embeddings.clone()));
    if let Some(p) = &w.position_embeddings {
        out.push((names::POSITION_EMBEDDINGS.into(), p.clone()));
    }
    if let Some(tt) = &w.token_type_embeddings {
        out.push((names::TOKEN_TYPE_EMBEDDINGS.into(), tt.clone()));
    }
    norm(&mut out, names::embedding_norm(cfg.arch), &w.embedding_norm, norm_bias);
    for (i, l) in w.layers.iter().enumerate() {
        let n = names::layer(cfg.arch, i);
        match &n.qkv {
            Qkv::Separate([q, k, v]) => {
                dense(&mut out, q, &l.query, bias);
                dense(&mut out, k, &l.key, bias);
                dense(&mut out, v, &l.value, bias);
            }
            Qkv::Fused(qkv) => {
                let cat = |f: fn(&Dense) -> &Tensor| {
                    Tensor::cat(&[f(&l.query), f(&l.key), f(&l.value)], 0).expect("three maps of one width")
                };
                let fused = Dense { weight: cat(|d| &d.weight), bias: cat(|d| &d.bias) };
                dense(&mut out, qkv, &fused, bias);
            }
        }
        dense(&mut out, &n.attn_out, &l.attn_out, bias);
        if let (Some(name), Some(nw)) = (&n.attn_norm, &l.attn_norm) {
            norm(&mut out, name, nw, norm_bias);
        }
        dense(&mut out, &n.ffn_in, &l.ffn_in, mlp_bias);
        dense(&mut out, &n.ffn_out, &l.ffn_out, mlp_bias);
        norm(&mut out, &n.ffn_norm, &l.ffn_norm, norm_bias);
    }
    if let Some(r) = &w.relative {
        out.push((names::RELATIVE_EMBEDDINGS.into(), r.table.clone()));
        if let Some(n) = &r.norm {
            norm(&mut out, names::RELATIVE_NORM, n, true);
        }
    }
    if let Some(n) = &w.final_norm {
        norm(&mut out, names::FINAL_NORM, n, norm_bias);
    }
    if let Some(p) = &w.pooler {
        dense(&mut out, "pooler.dense", p, true);
    }
    match &model.head {
        None => {}
        Some(HeadWeights::PooledLinear { classifier }) => dense(&mut out, "classifier", classifier, true),
        Some(HeadWeights::RobertaClassifier { dense: d, out_proj }) => {
            dense(&mut out, "classifier.dense", d, true);
            dense(&mut out, "classifier.out_proj", out_proj, true);
        }
        Some(HeadWeights::DistilClassifier { pre_classifier, classifier }) => {
            dense(&mut out, "pre_classifier", pre_classifier, true);
            dense(&mut out, "classifier", classifier, true);
        }
        Some(HeadWeights::ContextPooler { dense: d, classifier, .. }) => {
            dense(&mut out, "pooler.dense", d, true);
            dense(&mut out, "classifier", classifier, true);
        }
        Some(HeadWeights::ModernBertHead { dense: d, norm: n, classifier, .. }) => {
            let classifier_bias = cfg.modernbert().is_some_and(|m| m.classifier_bias);
            dense(&mut out, "head.dense", d, classifier_bias);
            norm(&mut out, "head.norm", n, norm_bias);
            dense(&mut out, "classifier", classifier, true);
        }
    }
    for (name, _) in &mut out {
        *name = names::written(cfg.arch, name);
    }
    out
}

/// Serialise a model's tensors to safetensors bytes (HF names, bare prefix).
pub fn to_safetensors(model: &LoadedModel) -> Result<Vec<u8>> {
    write_safetensors(&to_named_tensors(model))
}

/// The safetensors format written directly (8-byte little-endian header length, a JSON
/// header of dtype/shape/offsets, then raw little-endian f32 data): the `safetensors`
/// crate version in Cargo.toml differs from candle's, so its `View` impls do not meet.
pub fn write_safetensors(tensors: &[(String, Tensor)]) -> Result<Vec<u8>> {
    let raw = tensors
        .iter()
        .map(|(name, t)| {
            let values: Vec<f32> = t.to_dtype(DType::F32)?.flatten_all()?.to_vec1()?;
            Ok(RawTensor::f32(name.clone(), t.dims().to_vec(), &values))
        })
        .collect::<Result<Vec<_>>>()?;
    write_raw_safetensors(raw)
}

/// One tensor to write: its name, safetensors dtype, shape and little-endian bytes.
pub struct RawTensor {
    pub name: String,
    pub dtype: &'static str,
    pub shape: Vec<usize>,
    pub bytes: Vec<u8>,
}

impl RawTensor {
    pub fn f32(name: String, shape: Vec<usize>, values: &[f32]) -> RawTensor {
        RawTensor { name, dtype: "F32", shape, bytes: values.iter().flat_map(|v| v.to_le_bytes()).collect() }
    }
    pub fn i8(name: String, shape: Vec<usize>, values: &[i8]) -> RawTensor {
        RawTensor { name, dtype: "I8", shape, bytes: values.iter().map(|&v| v as u8).collect() }
    }
}

/// [`write_safetensors`] for tensors of any dtype, sorted by name.
pub fn write_raw_safetensors(mut tensors: Vec<RawTensor>) -> Result<Vec<u8>> {
    tensors.sort_by(|a, b| a.name.cmp(&b.name));
    let mut header = serde_json::Map::new();
    let mut data: Vec<u8> = Vec::new();
    for t in tensors {
        let start = data.len();
        data.extend_from_slice(&t.bytes);
        header.insert(
            t.name,
            serde_json::json!({"dtype": t.dtype, "shape": t.shape, "data_offsets": [start, data.len()]}),
        );
    }
    let mut head = serde_json::to_vec(&serde_json::Value::Object(header))
        .map_err(|e| Error::model(format!("writing safetensors header: {e}")))?;
    while head.len() % 8 != 0 {
        head.push(b' '); // the format pads the header with spaces to 8-byte alignment
    }
    let mut out = (head.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&head);
    out.extend_from_slice(&data);
    Ok(out)
}

/// The names of the tensors `medrank quantize` stores as int8: every linear weight of the
/// encoder layers (the products the int8 path runs) and the word embeddings (row by row:
/// the largest tensor of a small encoder, widened to f32 at load; the embeddings are
/// computed in f32).
pub fn int8_tensor_names(cfg: &EncoderConfig) -> Vec<String> {
    let mut out = vec![names::word_embeddings(cfg.arch).to_string()];
    for i in 0..cfg.num_layers {
        out.extend(names::layer(cfg.arch, i).linear().iter().map(|name| format!("{name}.weight")));
    }
    out.iter().map(|name| names::written(cfg.arch, name)).collect()
}

/// A model with seeded random weights (normal, std 0.02 like HF's init; norms at 1/0):
/// the tiny configs of the fast unit tests, and the starting point of a new head.
pub fn random_model(config: EncoderConfig, seed: u64) -> Result<LoadedModel> {
    use rand::SeedableRng;
    use rand_distr_free::normal;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let h = config.hidden_size;
    let mut rand_t = |shape: &[usize]| -> Result<Tensor> {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|_| 0.02 * normal(&mut rng)).collect();
        Ok(Tensor::from_vec(v, shape, &Device::Cpu)?)
    };
    // A family's absent biases are zeros and draw nothing.
    let dense = |r: &mut dyn FnMut(&[usize]) -> Result<Tensor>, out: usize, inp: usize, bias: bool| -> Result<Dense> {
        let weight = r(&[out, inp])?;
        let bias = if bias { r(&[out])? } else { Tensor::zeros(out, DType::F32, &Device::Cpu)? };
        Ok(Dense { weight, bias })
    };
    let norm = || -> Result<Norm> {
        Ok(Norm {
            weight: Tensor::ones(h, DType::F32, &Device::Cpu)?,
            bias: Tensor::zeros(h, DType::F32, &Device::Cpu)?,
        })
    };
    let (bias, mlp_bias) = (config.linear_bias(), config.mlp_bias());
    let word_embeddings = rand_t(&[config.vocab_size, h])?;
    let position_embeddings =
        if config.absolute_positions() { Some(rand_t(&[config.max_position_embeddings, h])?) } else { None };
    let token_type_embeddings =
        if config.type_vocab_size > 0 { Some(rand_t(&[config.type_vocab_size, h])?) } else { None };
    let mut layers = Vec::new();
    for i in 0..config.num_layers {
        layers.push(LayerWeights {
            query: dense(&mut rand_t, h, h, bias)?,
            key: dense(&mut rand_t, h, h, bias)?,
            value: dense(&mut rand_t, h, h, bias)?,
            attn_out: dense(&mut rand_t, h, h, bias)?,
            attn_norm: if config.pre_norm() && i == 0 { None } else { Some(norm()?) },
            ffn_in: dense(&mut rand_t, config.ffn_in_size(), h, mlp_bias)?,
            ffn_out: dense(&mut rand_t, h, config.intermediate_size, mlp_bias)?,
            ffn_norm: norm()?,
        });
    }
    let pooler =
        if matches!(config.arch, Arch::Bert | Arch::Roberta) { Some(dense(&mut rand_t, h, h, true)?) } else { None };
    let n_out = head_outputs(&config);
    let head = match (config.head, config.arch) {
        (HeadKind::None, _) => None,
        (_, Arch::DistilBert) => Some(HeadWeights::DistilClassifier {
            pre_classifier: dense(&mut rand_t, h, h, true)?,
            classifier: dense(&mut rand_t, n_out, h, true)?,
        }),
        (HeadKind::SequenceClassification, Arch::Roberta) => Some(HeadWeights::RobertaClassifier {
            dense: dense(&mut rand_t, h, h, true)?,
            out_proj: dense(&mut rand_t, n_out, h, true)?,
        }),
        (_, Arch::DebertaV2) => Some(HeadWeights::ContextPooler {
            dense: dense(&mut rand_t, h, h, true)?,
            activation: config.deberta().map_or(Activation::Gelu, |d| d.pooler_activation),
            classifier: dense(&mut rand_t, n_out, h, true)?,
        }),
        (_, Arch::ModernBert) => {
            let m = config.modernbert().expect("a ModernBERT config has its options");
            Some(HeadWeights::ModernBertHead {
                dense: dense(&mut rand_t, h, h, m.classifier_bias)?,
                activation: m.classifier_activation,
                norm: norm()?,
                eps: config.layer_norm_eps,
                classifier: dense(&mut rand_t, n_out, h, true)?,
            })
        }
        _ => Some(HeadWeights::PooledLinear { classifier: dense(&mut rand_t, n_out, h, true)? }),
    };
    let relative = match config.relative() {
        Some(r) => Some(RelativeTable { table: rand_t(&[2 * r.span(), h])?, norm: r.norm.then(norm).transpose()? }),
        None => None,
    };
    let final_norm = if config.arch == Arch::ModernBert { Some(norm()?) } else { None };
    let weights = EncoderWeights {
        word_embeddings,
        position_embeddings,
        token_type_embeddings,
        embedding_norm: norm()?,
        layers,
        pooler,
        relative,
        final_norm,
    };
    Ok(LoadedModel { config, weights, head, warnings: Vec::new(), precision: Default::default() })
}

/// A standard normal draw (Box-Muller) from a seeded generator: value-stable across
/// platforms, unlike candle's own random init.
mod rand_distr_free {
    use rand::Rng;
    pub fn normal(rng: &mut impl Rng) -> f32 {
        let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
        let u2: f64 = rng.gen();
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
    }
}

/// The outputs of a model's head: one score per option (multiple choice), one per label
/// (classification), none without a head.
fn head_outputs(config: &EncoderConfig) -> usize {
    match config.head {
        HeadKind::None => 0,
        HeadKind::MultipleChoice => 1,
        HeadKind::SequenceClassification => config.labels.len().max(1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Safetensors bytes written by hand: (name, dtype, shape, little-endian data).
    fn safetensors(tensors: &[(&str, &str, &[usize], Vec<u8>)]) -> Vec<u8> {
        let mut header = serde_json::Map::new();
        let mut data = Vec::new();
        for (name, dtype, shape, bytes) in tensors {
            let start = data.len();
            data.extend_from_slice(bytes);
            header.insert(
                name.to_string(),
                serde_json::json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}),
            );
        }
        let head = serde_json::to_vec(&serde_json::Value::Object(header)).unwrap();
        let mut out = (head.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(&head);
        out.extend_from_slice(&data);
        out
    }

    fn f32s(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    const QUERY: &str = "encoder.layer.0.attention.self.query.weight";

    #[test]
    fn weights_are_finite_floats_and_only_id_buffers_are_integers() {
        let error = |bytes: &[u8]| read_safetensors("m.safetensors", bytes).unwrap_err().to_string();
        // Finite floats of every width and an I64 position_ids (as all-MiniLM-L6-v2 has) load.
        let ids: Vec<u8> = (0i64..4).flat_map(|i| i.to_le_bytes()).collect();
        let fine = safetensors(&[
            (QUERY, "F32", &[2, 2], f32s(&[0.5, -1.0, 3e38, -0.0])),
            ("a.f16", "F16", &[2], vec![0x00, 0x3c, 0xff, 0x7b]), // 1.0 and 65504, the largest f16
            ("a.bf16", "BF16", &[1], vec![0x80, 0x3f]),           // 1.0
            ("embeddings.position_ids", "I64", &[1, 4], ids.clone()),
        ]);
        let tensors = read_safetensors("m.safetensors", &fine).unwrap();
        assert_eq!(tensors[QUERY].flatten_all().unwrap().to_vec1::<f32>().unwrap(), [0.5, -1.0, 3e38, -0.0]);
        assert_eq!(tensors["a.f16"].to_vec1::<f32>().unwrap(), [1.0, 65504.0]);

        // A NaN, or an infinity, in a weight: refused, naming the tensor and the element.
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let bytes = safetensors(&[(QUERY, "F32", &[2, 2], f32s(&[0.5, -1.0, bad, 1.0]))]);
            assert_eq!(
                error(&bytes),
                format!("m.safetensors: tensor `{QUERY}` holds a NaN or infinite value (element 2 of 4): the weights are damaged; medrank does not run a model with them")
            );
        }
        // The same in half precision: f16 infinity 0x7c00, bf16 NaN 0x7fc0.
        let f16_inf = safetensors(&[("a.f16", "F16", &[2], vec![0x00, 0x3c, 0x00, 0x7c])]);
        assert!(error(&f16_inf).contains("tensor `a.f16` holds a NaN or infinite value (element 1 of 2)"));
        let bf16_nan = safetensors(&[("a.bf16", "BF16", &[1], vec![0xc0, 0x7f])]);
        assert!(error(&bf16_nan).contains("tensor `a.bf16` holds a NaN or infinite value (element 0 of 1)"));

        // f32 bytes labelled I32 were read as the integers 1056964608, ... and run.
        let relabelled = safetensors(&[(QUERY, "I32", &[2, 2], f32s(&[0.5, -1.0, 2.0, 1.0]))]);
        assert_eq!(
            error(&relabelled),
            format!("m.safetensors: tensor `{QUERY}` is stored as I32, but the weights of a BERT-family or T5 model are floats (F32, F16, BF16 or F64); only the position_ids and token_type_ids buffers may be integers")
        );
        // Integer buffers may be any integer width; a boolean weight is no float either.
        let ids32: Vec<u8> = (0i32..4).flat_map(|i| i.to_le_bytes()).collect();
        assert!(read_safetensors("m", &safetensors(&[("bert.embeddings.position_ids", "I32", &[4], ids32)])).is_ok());
        let boolean = safetensors(&[("pooler.dense.bias", "BOOL", &[2], vec![1, 0])]);
        assert!(error(&boolean).contains("tensor `pooler.dense.bias` is stored as BOOL"));
    }

    #[test]
    fn int8_tensors_without_rows_or_columns_are_refused_not_a_panic() {
        // Zero rows or zero columns, even in a tensor the model does not use, panicked in
        // quant.rs ("scales per row", "chunk size must be non-zero").
        for shape in [[0usize, 4], [3, 0]] {
            let bytes = safetensors(&[
                ("cls.x.weight", "I8", &shape, Vec::new()),
                ("cls.x.weight_scale", "F32", &[shape[0]], f32s(&vec![1.0; shape[0]])),
            ]);
            let e = read_safetensors("m.safetensors", &bytes).unwrap_err().to_string();
            assert_eq!(
                e,
                format!("m.safetensors: int8 tensor `cls.x.weight`: shape {shape:?} holds no weight (an int8 weight has at least one row and one column)")
            );
        }
    }

    /// A tiny BERT's tensors (`config`'s shapes) with `extra` added, as safetensors bytes.
    fn tiny_bytes(config: &EncoderConfig, extra: Vec<RawTensor>) -> Vec<u8> {
        let model = random_model(config.clone(), 1).unwrap();
        let mut raw: Vec<RawTensor> = to_named_tensors(&model)
            .into_iter()
            .map(|(n, t)| RawTensor::f32(n, t.dims().to_vec(), &t.flatten_all().unwrap().to_vec1().unwrap()))
            .collect();
        raw.extend(extra);
        write_raw_safetensors(raw).unwrap()
    }

    #[test]
    fn an_integer_token_type_ids_buffer_loads_as_the_readme_says() {
        // The README allows it beside position_ids; the loader called it unexpected.
        let config = EncoderConfig::tiny(Arch::Bert, 1, HeadKind::None, &[]);
        let ids: Vec<u8> = (0i64..64).flat_map(|_| 0i64.to_le_bytes()).collect();
        let buffer =
            RawTensor { name: "embeddings.token_type_ids".into(), dtype: "I64", shape: vec![1, 64], bytes: ids };
        let model = load_model(config.clone(), "m.safetensors", &tiny_bytes(&config, vec![buffer])).unwrap();
        assert!(model.warnings[0]
            .to_string()
            .contains("tensor `embeddings.token_type_ids` belongs to a part medrank does not use"));
    }

    #[test]
    fn config_sizes_must_be_backed_by_the_tensors_before_they_are_read() {
        let config = EncoderConfig::tiny(Arch::Bert, 2, HeadKind::None, &[]);
        let bytes = tiny_bytes(&config, Vec::new());
        check_config_backed(&config, "m/config.json", "m/model.safetensors", &bytes).unwrap();
        let check = |c: EncoderConfig| {
            check_config_backed(&c, "m/config.json", "m/model.safetensors", &bytes).unwrap_err().to_string()
        };
        assert_eq!(
            check(EncoderConfig { num_layers: 200, ..config.clone() }),
            "m/config.json: field `num_hidden_layers`: says 200, but m/model.safetensors holds 2 layers (`encoder.layer.0` to `encoder.layer.1`)"
        );
        assert_eq!(
            check(EncoderConfig { vocab_size: 1_000_000, ..config.clone() }),
            "m/config.json: field `vocab_size`: says 1000000, but m/model.safetensors has `embeddings.word_embeddings.weight` of 64 along dimension 0"
        );
        assert!(check(EncoderConfig { intermediate_size: 65_536, ..config.clone() })
            .starts_with("m/config.json: field `intermediate_size`"));
        assert!(check(EncoderConfig { max_position_embeddings: 512, ..config.clone() })
            .starts_with("m/config.json: field `max_position_embeddings`"));
        assert!(check(EncoderConfig { type_vocab_size: 3, ..config.clone() })
            .starts_with("m/config.json: field `type_vocab_size`"));
        assert!(check(EncoderConfig { hidden_size: 64, num_heads: 4, ..config })
            .starts_with("m/config.json: field `hidden_size`"));
    }

    #[test]
    fn the_finite_check_finds_the_first_bad_element_at_any_position() {
        // Branch-free pass and position agree for a bad value at each of the first 9
        // positions, and find none in finite data (largest, smallest, subnormal, zeroes).
        for at in 0..9 {
            let mut values = vec![1.0f32; 9];
            values[at] = f32::NAN;
            assert_eq!(first_non_finite(&f32s(&values), 4, 0x7f80_0000), Some(at));
        }
        let finite = f32s(&[f32::MAX, f32::MIN, f32::MIN_POSITIVE / 2.0, 0.0, -0.0]);
        assert_eq!(first_non_finite(&finite, 4, 0x7f80_0000), None);
        let f64s: Vec<u8> = [1.0f64, f64::INFINITY].iter().flat_map(|v| v.to_le_bytes()).collect();
        assert_eq!(first_non_finite(&f64s, 8, 0x7ff0_0000_0000_0000), Some(1));
    }
}
