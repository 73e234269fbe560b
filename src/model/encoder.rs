//! The encoder interface shared by the CPU and GPU (wgpu) backends, the CPU encoder
//! (embeddings here, layers in `super::cpu`), and the candle forward pass for training.
//!
//! Interface contract (kept stable for the GPU backend, `crate::gpu`):
//! - input: a [`TokenBatch`] — right-padded token ids, token-type ids and an attention mask,
//!   all row-major `[batch, seq_len]` `u32`;
//! - output: [`HiddenStates`] — `[batch, seq_len, hidden]` f32, row-major, the output of
//!   layer `output_layer` (1..=num_layers; 0 = the embedding layer's output). Rows at
//!   padded positions hold whatever the math gives; callers must use the mask.
//! - `encode` is async so the browser's GPU path can await buffer read-back; the CPU
//!   implementation finishes before returning (native callers use `pollster::block_on`).
//!
//! The forward pass is written out (not candle-transformers' BertModel) because the
//! evaluators need the attention mask, intermediate layers (BERTScore), and three
//! architectures with one code path; training needs it differentiable.

use super::config::{Activation, EncoderConfig};
use super::cpu::CpuLayers;
use super::load::{Dense, EncoderWeights, LayerWeights, LoadedModel, Norm};
use super::pooling::Pooling;
use super::states::{HiddenStates, TokenBatch};
use crate::error::{Error, Result};
use candle_core::{DType, Device, Module, Tensor, D};
use std::future::Future;

/// What a job reads from the last layer, when it needs less than the hidden states: the
/// encoder computes it where the states are (the GPU keeps them on the device) and hands
/// back one short vector per row instead of `seq_len x hidden` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readout {
    /// One sentence vector per row, pooled (and normalised) as the model's pooling says.
    Pooled(Pooling),
    /// The logits of the model's own head per row (its classification or multiple-choice
    /// head, on the first token; see `heads`). An error for a model without a head.
    Logits,
}

/// A backend that turns token batches into hidden states. Evaluators and rankers are
/// generic over it, so they never know whether the CPU or the GPU runs the model.
pub trait Encoder {
    /// The architecture (hidden size, layers, position limit, pad id).
    fn config(&self) -> &EncoderConfig;
    /// Hidden states after layer `output_layer` (`config().num_layers` for the last layer).
    fn encode(&self, batch: &TokenBatch, output_layer: usize) -> impl Future<Output = Result<HiddenStates>>;
    /// What `readout` asks of the last layer, one vector per row of the batch (pooled
    /// vectors or logits): what evaluators, graders and rankers consume. The same numbers
    /// as pooling or the head applied to [`Self::encode`]'s states; the GPU computes them
    /// on the device and reads back only these.
    fn read_out(&self, batch: &TokenBatch, readout: Readout) -> impl Future<Output = Result<Vec<Vec<f32>>>>;
    /// Bytes copied from a device to the host so far (benchmarks report them per pass);
    /// `None` for encoders that compute in host memory.
    fn bytes_read_back(&self) -> Option<u64> {
        None
    }
    /// Told once by an evaluator, before its first `encode`, every batch it will encode: a
    /// progress wrapper sizes its total from it. Encoders that run the model ignore it.
    fn plan(&self, _plan: &super::batching::EncodingPlan) {}
}

/// What a report's provenance says of the arithmetic: the precision and, for int8, the
/// scheme and this machine's kernel.
pub fn describe_precision(precision: super::Precision) -> String {
    match precision {
        super::Precision::F32 => "f32".into(),
        super::Precision::Int8 => format!(
            "int8 (weights per output channel, activations 7-bit per token, i32 sums; {} kernel)",
            super::cpu::int8::Int8Kernel::this_machine().name()
        ),
    }
}

/// The CPU encoder: candle for the embeddings, [`super::cpu::CpuLayers`] for the layers.
/// Also the reference the GPU encoder is tested against.
#[derive(Debug, Clone)]
pub struct CpuEncoder {
    /// The model; replace the whole encoder, not this field, to change weights (the
    /// layers' CPU copy is made from it on first use).
    pub model: LoadedModel,
    layers: std::sync::OnceLock<std::sync::Arc<CpuLayers>>,
    /// For int8: the weights with the word embeddings rounded through int8 row by row, as
    /// `medrank quantize` stores them, so that an f32 folder run in int8 computes what its
    /// int8 folder computes.
    int8_weights: std::sync::OnceLock<EncoderWeights>,
}

impl CpuEncoder {
    pub fn new(model: LoadedModel) -> Self {
        CpuEncoder { model, layers: std::sync::OnceLock::new(), int8_weights: std::sync::OnceLock::new() }
    }

    fn layers(&self) -> Result<&CpuLayers> {
        if self.layers.get().is_none() {
            let built = CpuLayers::new(&self.model.config, &self.model.weights, self.model.precision)?;
            // Another thread may have won the race; both built the same thing.
            let _ = self.layers.set(std::sync::Arc::new(built));
        }
        Ok(self.layers.get().expect("set above"))
    }

    /// The weights the embedding layer reads in this precision.
    fn embedding_weights(&self) -> Result<&EncoderWeights> {
        if self.model.precision == super::Precision::F32 {
            return Ok(&self.model.weights);
        }
        if self.int8_weights.get().is_none() {
            let table = &self.model.weights.word_embeddings;
            let (rows, cols) = table.dims2()?;
            let (q, scales) = super::quant::quantize_weight_rows(&table.flatten_all()?.to_vec1()?, cols);
            let rounded = Tensor::from_vec(super::quant::dequantize_rows(&q, &scales), (rows, cols), &Device::Cpu)?;
            let _ = self.int8_weights.set(EncoderWeights { word_embeddings: rounded, ..self.model.weights.clone() });
        }
        Ok(self.int8_weights.get().expect("set above"))
    }

    /// Synchronous form of [`Encoder::encode`].
    pub fn hidden_states(&self, batch: &TokenBatch, output_layer: usize) -> Result<HiddenStates> {
        let cfg = &self.model.config;
        batch.check(cfg, output_layer)?;
        let (ids, types, _) = batch_tensors(batch);
        let mut data: Vec<f32> = super::cpu::profile::time(super::cpu::profile::Step::Embeddings, || {
            Ok::<_, crate::error::Error>(
                embeddings(cfg, self.embedding_weights()?, &ids, &types, false)?.flatten_all()?.to_vec1()?,
            )
        })?;
        self.layers()?.run(&mut data, batch.batch, batch.seq_len, &batch.mask, output_layer);
        Ok(HiddenStates { batch: batch.batch, seq_len: batch.seq_len, hidden: cfg.hidden_size, data })
    }
}

impl Encoder for CpuEncoder {
    fn config(&self) -> &EncoderConfig {
        &self.model.config
    }
    #[allow(clippy::manual_async_fn)]
    fn encode(&self, batch: &TokenBatch, output_layer: usize) -> impl Future<Output = Result<HiddenStates>> {
        std::future::ready(self.hidden_states(batch, output_layer))
    }
    #[allow(clippy::manual_async_fn)]
    fn read_out(&self, batch: &TokenBatch, readout: Readout) -> impl Future<Output = Result<Vec<Vec<f32>>>> {
        std::future::ready(
            self.hidden_states(batch, self.model.config.num_layers)
                .and_then(|hidden| read_out_on_host(&self.model, &hidden, batch, readout)),
        )
    }
}

/// [`Encoder::read_out`] from hidden states on the host: the CPU path's, and the reference
/// the GPU's readout kernels are tested against.
pub fn read_out_on_host(
    model: &LoadedModel,
    hidden: &HiddenStates,
    batch: &TokenBatch,
    readout: Readout,
) -> Result<Vec<Vec<f32>>> {
    match readout {
        Readout::Pooled(pooling) => Ok(pooling.pool(hidden, batch)),
        Readout::Logits => {
            let head = model.head.as_ref().ok_or_else(|| Error::model("this model has no classification head"))?;
            super::heads::logits(head, &model.weights, hidden)
        }
    }
}

/// The batch as candle tensors: ids `[b, s]` u32, type ids `[b, s]` u32, mask `[b, s]` f32.
/// The batch must have passed [`TokenBatch::check`].
fn batch_tensors(batch: &TokenBatch) -> (Tensor, Tensor, Tensor) {
    let shape = (batch.batch, batch.seq_len);
    let tensor = |v: Vec<u32>| Tensor::from_vec(v, shape, &Device::Cpu).expect("shape checked");
    let mask: Vec<f32> = batch.mask.iter().map(|&m| if m != 0 { 1.0 } else { 0.0 }).collect();
    let mask = Tensor::from_vec(mask, shape, &Device::Cpu).expect("shape checked");
    (tensor(batch.ids.clone()), tensor(batch.type_ids.clone()), mask)
}

fn linear(x: &Tensor, d: &Dense) -> Result<Tensor> {
    Ok(candle_nn::Linear::new(d.weight.clone(), Some(d.bias.clone())).forward(x)?)
}

fn norm(x: &Tensor, n: &Norm, eps: f64, differentiable: bool) -> Result<Tensor> {
    Ok(if differentiable {
        candle_nn::ops::layer_norm_slow(x, &n.weight, &n.bias, eps as f32)?
    } else {
        candle_nn::ops::layer_norm(&x.contiguous()?, &n.weight, &n.bias, eps as f32)?
    })
}

/// The embedding layer `[b, s, hidden]` (word + position + token type, normalised) of a
/// batch that passed [`TokenBatch::check`]. Shared by both CPU paths.
fn embeddings(
    cfg: &EncoderConfig,
    w: &EncoderWeights,
    ids: &Tensor,
    types: &Tensor,
    differentiable: bool,
) -> Result<Tensor> {
    let (b, s) = ids.dims2()?;
    if b * s == 0 {
        return Ok(Tensor::zeros((b, s, cfg.hidden_size), DType::F32, &Device::Cpu)?);
    }
    let h = cfg.hidden_size;
    // Positions count from the offset (2 for RoBERTa); right padding keeps real tokens at
    // offset..offset+len, and padded positions are masked out of attention anyway.
    let positions: Vec<u32> = (0..s as u32).map(|i| i + cfg.position_offset as u32).collect();
    let positions = Tensor::from_vec(positions, s, &Device::Cpu)?;
    let mut x = w.word_embeddings.embedding(&ids.flatten_all()?)?.reshape((b, s, h))?;
    let pos = w.position_embeddings.embedding(&positions)?;
    x = x.broadcast_add(&pos)?;
    if let Some(tt) = &w.token_type_embeddings {
        x = (x + tt.embedding(&types.flatten_all()?)?.reshape((b, s, h))?)?;
    }
    norm(&x, &w.embedding_norm, cfg.layer_norm_eps, differentiable)
}

/// The forward pass in candle ops with autograd support: the training path, and the
/// reference the inference path ([`CpuEncoder`], same math, faster) is tested against.
/// Returns `[batch, seq_len, hidden]`.
pub fn forward(cfg: &EncoderConfig, w: &EncoderWeights, batch: &TokenBatch, output_layer: usize) -> Result<Tensor> {
    batch.check(cfg, output_layer)?;
    let (ids, types, _) = batch_tensors(batch);
    let x = embeddings(cfg, w, &ids, &types, true)?;
    layers_forward(cfg, &w.layers[..output_layer], x, &batch.mask, false)
}

/// `layers` (candle ops, differentiable) over hidden states `x` `[batch, seq_len, hidden]`
/// with `mask` `[batch * seq_len]` (1 = real token). Training starts here from states that
/// the frozen lower layers produced once. With `first_token_only` the last layer computes
/// the output of position 0 alone (its keys and values still come from every token), all
/// a head reads: `[batch, 1, hidden]`, the same numbers as the full layer's first row.
pub fn layers_forward(
    cfg: &EncoderConfig,
    layers: &[LayerWeights],
    mut x: Tensor,
    mask: &[u32],
    first_token_only: bool,
) -> Result<Tensor> {
    let (b, s, h) = x.dims3()?;
    if mask.len() != b * s {
        return Err(Error::invalid(format!("mask of {} values for {b}x{s} hidden states", mask.len())));
    }
    // Additive mask [b, 1, 1, s]: 0 for real tokens, a large negative for padding. A batch
    // without padding skips it (adding zeros to b x heads x s x s scores is costly at 512).
    let neg = if mask.contains(&0) {
        let v: Vec<f32> = mask.iter().map(|&m| if m != 0 { 0.0 } else { -1e9 }).collect();
        Some(Tensor::from_vec(v, (b, 1, 1, s), &Device::Cpu)?)
    } else {
        None
    };
    let heads = cfg.num_heads;
    let d = cfg.head_dim();
    let scale = 1.0 / (d as f64).sqrt();
    for (l, layer) in layers.iter().enumerate() {
        let rows = if first_token_only && l + 1 == layers.len() { 1 } else { s };
        let split =
            |t: Tensor, n: usize| -> Result<Tensor> { Ok(t.reshape((b, n, heads, d))?.transpose(1, 2)?.contiguous()?) };
        let xq = if rows == s { x.clone() } else { x.narrow(1, 0, rows)? };
        // Scaling q (s x d) is cheaper than scaling the scores (s x s).
        let q = (split(linear(&xq, &layer.query)?, rows)? * scale)?;
        let k = split(linear(&x, &layer.key)?, s)?;
        let v = split(linear(&x, &layer.value)?, s)?;
        let scores = q.matmul(&k.t()?)?;
        let scores = match &neg {
            Some(neg) => scores.broadcast_add(neg)?,
            None => scores,
        };
        let probs = candle_nn::ops::softmax(&scores, D::Minus1)?;
        let ctx = probs.matmul(&v)?.transpose(1, 2)?.reshape((b, rows, h))?;
        let attn = linear(&ctx, &layer.attn_out)?;
        let y = norm(&(attn + &xq)?, &layer.attn_norm, cfg.layer_norm_eps, true)?;
        let inner = linear(&y, &layer.ffn_in)?;
        let inner = match cfg.activation {
            Activation::Gelu => inner.gelu_erf()?,
            Activation::GeluTanh => inner.gelu()?,
            Activation::Relu => inner.relu()?,
        };
        let out = linear(&inner, &layer.ffn_out)?;
        x = norm(&(out + &y)?, &layer.ffn_norm, cfg.layer_norm_eps, true)?;
    }
    debug_assert_eq!(x.dtype(), DType::F32);
    Ok(x)
}
