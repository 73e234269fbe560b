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
            super::heads::logits(head, model.config.head_pooling, &model.weights, hidden, &batch.mask)
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

/// The embedding layer `[b, s, hidden]` (word + position + token type where the model
/// has them, normalised) of a batch that passed [`TokenBatch::check`]. Shared by both CPU
/// paths. (DeBERTa-v2 also zeroes padded rows here; padded rows are masked everywhere
/// after, so real tokens' states are the same without it.)
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
    let mut x = w.word_embeddings.embedding(&ids.flatten_all()?)?.reshape((b, s, h))?;
    if let Some(table) = &w.position_embeddings {
        // Positions count from the offset (2 for RoBERTa); right padding keeps real tokens
        // at offset..offset+len, and padded positions are masked out of attention anyway.
        let positions: Vec<u32> = (0..s as u32).map(|i| i + cfg.position_offset as u32).collect();
        let positions = Tensor::from_vec(positions, s, &Device::Cpu)?;
        x = x.broadcast_add(&table.embedding(&positions)?)?;
    }
    if let Some(tt) = &w.token_type_embeddings {
        x = (x + tt.embedding(&types.flatten_all()?)?.reshape((b, s, h))?)?;
    }
    norm(&x, &w.embedding_norm, cfg.layer_norm_eps, differentiable)
}

/// The forward pass in candle ops with autograd support: the training path, and the
/// reference the inference path ([`CpuEncoder`], same math, faster) is tested against.
/// Returns `[batch, seq_len, hidden]`.
pub fn forward(cfg: &EncoderConfig, w: &EncoderWeights, batch: &TokenBatch, output_layer: usize) -> Result<Tensor> {
    forward_dropping(cfg, w, batch, output_layer, None)
}

/// Where a training pass multiplies a dropout mask in (Hugging Face's BERT sites); the
/// layer is its index in the whole encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaskAt {
    /// The embeddings' normalised output.
    Embeddings,
    /// A layer's attention probabilities `[b, heads, queries, keys]`.
    AttentionProbs(usize),
    /// A layer's attention block output (after its output map, before residual and norm).
    AttentionOutput(usize),
    /// A layer's feed-forward output (before residual and norm).
    FeedForwardOutput(usize),
}

/// The dropout masks of one training pass: the multiplier of a tensor of `dims` at `at`
/// (0 where dropped, `1 / (1 - p)` where kept), or `None` where nothing is dropped. The
/// training layer draws them (`train::dropout`); inference passes none.
pub trait DropoutMasks: Sync {
    fn mask(&self, at: MaskAt, dims: &[usize]) -> Result<Option<Tensor>>;
}

/// `x` times the mask at `at`, when there is one.
fn dropped(x: Tensor, masks: Option<&dyn DropoutMasks>, at: MaskAt) -> Result<Tensor> {
    match masks.map(|m| m.mask(at, x.dims())).transpose()?.flatten() {
        Some(mask) => Ok((x * mask)?),
        None => Ok(x),
    }
}

/// [`forward`] with dropout masks (training): the embeddings' output and every site of
/// [`layers_forward_dropping`].
pub fn forward_dropping(
    cfg: &EncoderConfig,
    w: &EncoderWeights,
    batch: &TokenBatch,
    output_layer: usize,
    masks: Option<&dyn DropoutMasks>,
) -> Result<Tensor> {
    batch.check(cfg, output_layer)?;
    let (ids, types, _) = batch_tensors(batch);
    let x = dropped(embeddings(cfg, w, &ids, &types, true)?, masks, MaskAt::Embeddings)?;
    layers_forward_dropping(cfg, w, 0..output_layer, x, &batch.mask, false, masks)
}

/// The additive mask `[b, 1, rows, s]` of query rows `0..rows`: a large negative where the
/// key is padding or (ModernBERT's local layers) further than `window` from the query; `None`
/// when nothing is masked (adding zeros to b x heads x s x s scores is costly at 512).
fn additive_mask(mask: &[u32], b: usize, rows: usize, s: usize, window: Option<usize>) -> Result<Option<Tensor>> {
    let padded = mask.contains(&0);
    let windowed = window.is_some_and(|w| w + 1 < s);
    if !padded && !windowed {
        return Ok(None);
    }
    let mut v = Vec::with_capacity(b * rows * s);
    for seq in 0..b {
        for i in 0..rows {
            v.extend((0..s).map(|j| {
                let far = window.is_some_and(|w| i.abs_diff(j) > w);
                if mask[seq * s + j] == 0 || far {
                    -1e9f32
                } else {
                    0.0
                }
            }));
        }
    }
    Ok(Some(Tensor::from_vec(v, (b, 1, rows, s), &Device::Cpu)?))
}

/// DeBERTa's relative-position scores of query rows `0..rows` over `s` keys, `[b, heads,
/// rows, s]`, already divided by the attention's scale (`scale` multiplies): content to
/// position `q_i . pos_k[r(i, j)]` and position to content `k_j . pos_q[r(i, j)]`, each
/// gathered from the products with the whole table.
fn relative_scores(
    rel: &super::config::Relative,
    table: &Tensor,
    layer: &LayerWeights,
    (q, k): (&Tensor, &Tensor),
    heads: usize,
    scale: f64,
) -> Result<Option<Tensor>> {
    let (b, _, rows, d) = q.dims4()?;
    let s = k.dims4()?.2;
    let span2 = 2 * rel.span();
    // [1, heads, 2 span, d]: the table through the layer's own query and key maps.
    let project = |dense: &Dense| -> Result<Tensor> {
        Ok(linear(table, dense)?.reshape((1, span2, heads, d))?.transpose(1, 2)?.contiguous()?)
    };
    // Gathers [b, heads, n, 2 span] at flat positions `at(i, j)` into [b, heads, rows, s].
    let gather = |all: Tensor, n: usize, at: &dyn Fn(usize, usize) -> usize| -> Result<Tensor> {
        let idx: Vec<u32> = (0..rows).flat_map(|i| (0..s).map(move |j| (i, j))).map(|(i, j)| at(i, j) as u32).collect();
        let idx = Tensor::from_vec(idx, rows * s, &Device::Cpu)?;
        Ok(all.reshape((b * heads, n * span2))?.index_select(&idx, 1)?.reshape((b, heads, rows, s))?)
    };
    let index = |i: usize, j: usize| rel.index(i as i64 - j as i64);
    let mut score: Option<Tensor> = None;
    if rel.c2p {
        let pos_k = project(&layer.key)?;
        let all = q.broadcast_matmul(&pos_k.t()?)?;
        let c2p = gather(all, rows, &|i, j| i * span2 + index(i, j))?;
        score = Some(c2p);
    }
    if rel.p2c {
        let pos_q = project(&layer.query)?;
        let all = k.broadcast_matmul(&pos_q.t()?)?;
        let p2c = (gather(all, s, &|i, j| j * span2 + index(i, j))? * scale)?;
        score = Some(match score {
            Some(c2p) => (c2p + p2c)?,
            None => p2c,
        });
    }
    Ok(score)
}

/// Turns heads `[b, heads, n, d]` by the rotary angles of positions `0..n` (`cos`, `sin`:
/// `[max positions, d / 2]`), as HF's `apply_rotary_pos_emb` with `rotate_half`.
fn rotate(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    let (_, _, n, d) = x.dims4()?;
    let half = d / 2;
    let cos = cos.narrow(0, 0, n)?;
    let sin = sin.narrow(0, 0, n)?;
    let cos = Tensor::cat(&[&cos, &cos], 1)?.reshape((1, 1, n, d))?;
    let sin = Tensor::cat(&[&sin, &sin], 1)?.reshape((1, 1, n, d))?;
    let x1 = x.narrow(3, 0, half)?;
    let x2 = x.narrow(3, half, half)?;
    let rotated = Tensor::cat(&[&x2.neg()?, &x1], 3)?;
    Ok((x.broadcast_mul(&cos)? + rotated.broadcast_mul(&sin)?)?)
}

/// Layers `range` of the model (candle ops, differentiable) over hidden states `x`
/// `[batch, seq_len, hidden]` with `mask` `[batch * seq_len]` (1 = real token); a range
/// that ends at the last layer ends with ModernBERT's final norm. Training starts here from
/// states that the frozen lower layers produced once. With `first_token_only` the last
/// layer computes the output of position 0 alone (its keys and values still come from
/// every token), all a first-token head reads: `[batch, 1, hidden]`, the same numbers as
/// the full layer's first row.
pub fn layers_forward(
    cfg: &EncoderConfig,
    w: &EncoderWeights,
    range: std::ops::Range<usize>,
    x: Tensor,
    mask: &[u32],
    first_token_only: bool,
) -> Result<Tensor> {
    layers_forward_dropping(cfg, w, range, x, mask, first_token_only, None)
}

/// [`layers_forward`] with dropout masks (training): each layer's attention probabilities,
/// attention output and feed-forward output ([`MaskAt`]).
pub fn layers_forward_dropping(
    cfg: &EncoderConfig,
    w: &EncoderWeights,
    range: std::ops::Range<usize>,
    mut x: Tensor,
    mask: &[u32],
    first_token_only: bool,
    masks: Option<&dyn DropoutMasks>,
) -> Result<Tensor> {
    let (b, s, h) = x.dims3()?;
    if mask.len() != b * s {
        return Err(Error::invalid(format!("mask of {} values for {b}x{s} hidden states", mask.len())));
    }
    let heads = cfg.num_heads;
    let d = cfg.head_dim();
    let relative = match (cfg.relative(), w.relative_table(cfg.layer_norm_eps)?) {
        (Some(r), Some(table)) => Some((r, table)),
        _ => None,
    };
    let factor = cfg.relative().map_or(1, |r| r.scale_factor());
    let scale = 1.0 / ((d * factor) as f64).sqrt();
    let last = range.end;
    for l in range {
        let layer = &w.layers[l];
        let rows = if first_token_only && l + 1 == last { 1 } else { s };
        let window = cfg.modernbert().and_then(|m| m.window(l));
        let neg = additive_mask(mask, b, rows, s, window)?;
        let split =
            |t: Tensor, n: usize| -> Result<Tensor> { Ok(t.reshape((b, n, heads, d))?.transpose(1, 2)?.contiguous()?) };
        let xq = if rows == s { x.clone() } else { x.narrow(1, 0, rows)? };
        // ModernBERT normalises before attention (its first layer not at all); the others after.
        let (attn_in, attn_in_q) = match (cfg.pre_norm(), &layer.attn_norm) {
            (true, Some(n)) => {
                let normed = norm(&x, n, cfg.layer_norm_eps, true)?;
                let q_rows = if rows == s { normed.clone() } else { normed.narrow(1, 0, rows)? };
                (normed, q_rows)
            }
            _ => (x.clone(), xq.clone()),
        };
        let mut q = split(linear(&attn_in_q, &layer.query)?, rows)?;
        let mut k = split(linear(&attn_in, &layer.key)?, s)?;
        let v = split(linear(&attn_in, &layer.value)?, s)?;
        if let Some(m) = cfg.modernbert() {
            let (cos, sin) = super::config::family::rotary_tables(m.theta(l), d, s);
            let cos = Tensor::from_vec(cos, (s, d / 2), &Device::Cpu)?;
            let sin = Tensor::from_vec(sin, (s, d / 2), &Device::Cpu)?;
            q = rotate(&q, &cos, &sin)?;
            k = rotate(&k, &cos, &sin)?;
        }
        // Scaling q (s x d) is cheaper than scaling the scores (s x s).
        let q = (q * scale)?;
        let mut scores = q.matmul(&k.t()?)?;
        if let Some((rel, table)) = &relative {
            if let Some(extra) = relative_scores(rel, table, layer, (&q, &k), heads, scale)? {
                scores = (scores + extra)?;
            }
        }
        let scores = match &neg {
            Some(neg) => scores.broadcast_add(neg)?,
            None => scores,
        };
        let probs = dropped(candle_nn::ops::softmax(&scores, D::Minus1)?, masks, MaskAt::AttentionProbs(l))?;
        let ctx = probs.matmul(&v)?.transpose(1, 2)?.reshape((b, rows, h))?;
        let attn = dropped(linear(&ctx, &layer.attn_out)?, masks, MaskAt::AttentionOutput(l))?;
        if cfg.pre_norm() {
            let y = (attn + &xq)?;
            let inner = linear(&norm(&y, &layer.ffn_norm, cfg.layer_norm_eps, true)?, &layer.ffn_in)?;
            let half = cfg.intermediate_size;
            let gated = (activate(cfg.activation, &inner.narrow(2, 0, half)?)? * inner.narrow(2, half, half)?)?;
            x = (dropped(linear(&gated, &layer.ffn_out)?, masks, MaskAt::FeedForwardOutput(l))? + y)?;
        } else {
            let norm_after =
                layer.attn_norm.as_ref().ok_or_else(|| Error::model("a post-norm layer lacks its norm"))?;
            let y = norm(&(attn + &xq)?, norm_after, cfg.layer_norm_eps, true)?;
            let inner = activate(cfg.activation, &linear(&y, &layer.ffn_in)?)?;
            let out = dropped(linear(&inner, &layer.ffn_out)?, masks, MaskAt::FeedForwardOutput(l))?;
            x = norm(&(out + &y)?, &layer.ffn_norm, cfg.layer_norm_eps, true)?;
        }
    }
    if last == cfg.num_layers {
        if let Some(n) = &w.final_norm {
            x = norm(&x, n, cfg.layer_norm_eps, true)?;
        }
    }
    debug_assert_eq!(x.dtype(), DType::F32);
    Ok(x)
}

fn activate(activation: Activation, x: &Tensor) -> Result<Tensor> {
    Ok(match activation {
        Activation::Gelu => x.gelu_erf()?,
        Activation::GeluTanh => x.gelu()?,
        Activation::Relu => x.relu()?,
    })
}
