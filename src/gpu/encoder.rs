//! The encoder's forward pass on the GPU, behind the same [`Encoder`] interface as the CPU
//! path (`model::CpuEncoder`), so evaluators and rankers never know which backend ran.
//!
//! Weights are uploaded once, when the encoder is built, and stay on the device (the
//! model's head too, for [`Readout::Logits`]). A batch shape (rows x padded length x
//! layers x readout) gets a [`Plan`] the first time it is seen: every dispatch of the pass,
//! prepared with its uniform parameters and bind group. Plans are kept (the last
//! [`KEPT_PLANS`] shapes), so the next batch of a seen shape only writes its token ids,
//! types and mask, records the same dispatches into one command encoder, submits once and
//! awaits one read-back; lengths are padded to a multiple of [`LENGTH_BUCKET`] (masked
//! padding, which changes no result) so that batches of nearby lengths share a plan. The
//! large activation buffers belong to a size class ([`Activations`]: room for a power of
//! two of tokens), shared by every plan of the class, so a new shape allocates nothing
//! unless it is larger than any before. Per layer:
//!
//! ```text
//! qkv   = x . [Wq; Wk; Wv]^T + [bq; bk; bv]     one matmul, the three projections side by side
//! ctx   = attention(qkv, mask)                  scores, padding mask, softmax, weighted sum
//! x1    = LayerNorm(ctx . Wo^T + bo + x)        residual fused into the norm
//! inner = act(x1 . Wi^T + bi)                   activation fused into the matmul
//! x     = LayerNorm(inner . Wf^T + bf + x1)
//! ```
//!
//!
//! DeBERTa-v2 runs the same layer with its relative-position terms in the attention
//! kernel (the table through each layer's query and key maps, uploaded once). ModernBERT's
//! layers are pre-norm:
//!
//! ```text
//! qkv   = LN(x) . Wqkv^T                        (the first layer without its norm)
//! qkv   = rotary(qkv)                            the queries and keys turned in place
//! ctx   = attention(qkv, mask, window)           local layers: keys within the window
//! x    += ctx . Wo^T                             the product accumulated into x
//! x    += GeGLU(LN(x) . Wi^T) . Wf^T
//! ```
//!
//! and a final norm after the last layer.
//!
//! then the readout the job asks for: the states themselves ([`Encoder::encode`]), one
//! pooled vector per row (ops::Pool), or the head's logits (two products on the first
//! tokens' rows, read in place as a strided view). Only that is copied back to the host.

use std::future::Future;

use candle_core::Tensor;

use super::context::{ChunkedTable, GpuContext, GpuTensor};
use super::ops::{
    record, record_timed, Activation, Addend, Attention, AttentionExtras, Dispatch, Mat, Ops, RelativeTables,
};
use crate::error::{Error, Result};
use crate::model::config::{Activation as ModelActivation, HeadPooling};
use crate::model::load::{Dense, Norm};
use crate::model::{Encoder, EncoderConfig, HiddenStates, LoadedModel, Readout, TokenBatch};

/// How the encoder stores the weights of its linear layers on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum WeightFormat {
    /// Exact: matches the CPU path within 1e-3 (the default).
    F32,
    /// Half the memory and bandwidth; needs `shader-f16`. Rounding the weights costs
    /// accuracy (measured in tests/integration/gpu_encoder.rs), activations stay f32.
    F16,
    /// f16 weights and f16 arithmetic: each product's inputs staged in f16 and summed in
    /// f16 over a slice of 8 or 16, with f32 accumulation across slices (kernels/matmul.wgsl);
    /// needs `shader-f16`. Looser still (measured in tests/integration/gpu_encoder.rs); unmeasured on a
    /// GPU for speed.
    F16Math,
}

impl WeightFormat {
    /// Natively, `MEDRANK_GPU_PRECISION=f16` (f16 weights) or `=f16-math` (f16 weights and
    /// arithmetic) instead of the exact default, `f32`: an A/B switch for benchmarks, like
    /// `MEDRANK_GPU_TILE`. The browser always takes f32.
    pub fn from_env() -> Result<Self> {
        #[cfg(not(target_arch = "wasm32"))]
        match std::env::var("MEDRANK_GPU_PRECISION").as_deref() {
            Err(_) | Ok("f32") => {}
            Ok("f16") => return Ok(WeightFormat::F16),
            Ok("f16-math") => return Ok(WeightFormat::F16Math),
            Ok(other) => {
                return Err(Error::invalid(format!("MEDRANK_GPU_PRECISION={other}: expected f32, f16 or f16-math")))
            }
        }
        Ok(WeightFormat::F32)
    }

    /// F16 where the adapter has `shader-f16`, F32 otherwise.
    pub fn fastest_for(ctx: &GpuContext) -> Self {
        if ctx.adapter.shader_f16 {
            WeightFormat::F16
        } else {
            WeightFormat::F32
        }
    }
}

/// A linear layer on the device: weight [out, in], bias [out].
struct GpuDense {
    weight: GpuTensor,
    bias: GpuTensor,
}

struct GpuNorm {
    gamma: GpuTensor,
    beta: GpuTensor,
}

struct GpuLayer {
    /// Query, key and value weights stacked: [3 * hidden, hidden].
    qkv: GpuDense,
    attn_out: GpuDense,
    /// After attention (post-norm) or before it (ModernBERT; none in its first layer).
    attn_norm: Option<GpuNorm>,
    ffn_in: GpuDense,
    ffn_out: GpuDense,
    ffn_norm: GpuNorm,
    /// DeBERTa-v2: the relative-position table through this layer's query and key maps.
    relative: Option<(GpuTensor, GpuTensor)>,
    /// ModernBERT: this layer's rotary tables (cos, sin; an index into the encoder's) and
    /// its window.
    rotary: Option<usize>,
    window: Option<usize>,
}

/// The model's head on the device (for [`Readout::Logits`]), in f32 whatever the layers'
/// format (it is small): `first` on the first token's state (or a ModernBERT head's mean
/// state) with its activation (BERT's pooler and RoBERTa's dense with tanh, DistilBERT's
/// pre-classifier with ReLU, DeBERTa's pooler and ModernBERT's dense with GELU), ModernBERT's
/// norm, then `last`, the classifier, to the logits: the layouts of `model::heads`.
struct GpuHead {
    first: GpuDense,
    activation: Activation,
    norm: Option<(GpuNorm, f32)>,
    pooling: HeadPooling,
    last: GpuDense,
    labels: usize,
}

/// The encoder body on the GPU. Build it once per model (uploads the weights) and call
/// [`Encoder::encode`] or [`Encoder::read_out`] as often as needed.
pub struct GpuEncoder {
    ctx: GpuContext,
    weight_format: WeightFormat,
    ops: Ops,
    config: EncoderConfig,
    word_embeddings: ChunkedTable,
    position_embeddings: Option<ChunkedTable>,
    token_type_embeddings: Option<ChunkedTable>,
    embedding_norm: GpuNorm,
    layers: Vec<GpuLayer>,
    /// DeBERTa-v2: the table row of every distance (u32, see `Relative::index_table`).
    relative_index: Option<GpuTensor>,
    /// ModernBERT: the rotary tables (cos, sin) of its two bases.
    rotary: Vec<(GpuTensor, GpuTensor)>,
    /// ModernBERT's norm after the last layer.
    final_norm: Option<GpuNorm>,
    /// The model's head, or why [`Readout::Logits`] cannot run (the CPU path's words).
    head: std::result::Result<GpuHead, &'static str>,
    /// The kept plans and their activation buffers (taken out while a pass runs).
    plans: std::sync::Mutex<Option<Plans>>,
    /// Bytes copied back to the host so far (what `medrank bench` reports per pass).
    bytes_read_back: std::sync::atomic::AtomicU64,
}

/// Sequence lengths are padded to a multiple of this on the device. Padding is masked out
/// of attention (a masked key's weight is exactly 0) and every other op works row by row,
/// so the real tokens' states are the same to the bit; the padded rows are dropped.
pub const LENGTH_BUCKET: usize = 16;

/// How many batch shapes keep their prepared plan (a job's length buckets, the bench's
/// grid): recording a seen shape again costs no allocation and no bind group.
pub const KEPT_PLANS: usize = 16;

/// What a plan is prepared for: its batch shape, the layer it runs to and what it reads
/// out (`None`: the hidden states).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PlanKey {
    rows: usize,
    seq_len: usize,
    output_layer: usize,
    readout: Option<Readout>,
}

/// The activation buffers of a size class: room for `tokens` tokens in `rows` rows,
/// shared by every plan whose batch fits (each binds views of its own shape over them).
struct Activations {
    tokens: usize,
    rows: usize,
    embedded: GpuTensor,
    x: GpuTensor,
    x1: GpuTensor,
    projected: GpuTensor,
    context: GpuTensor,
    qkv: GpuTensor,
    inner: GpuTensor,
    /// ModernBERT's GeGLU output `[tokens, intermediate]` (a single value otherwise).
    gated: GpuTensor,
    /// The readouts: the head's first product and the pooled vectors `[rows, hidden]`, the
    /// logits `[rows, labels]`.
    head_hidden: GpuTensor,
    pooled: GpuTensor,
    logits: GpuTensor,
    /// The host-readable buffer outputs are copied to, as large as the largest so far.
    readback: Option<wgpu::Buffer>,
}

impl Activations {
    /// A view of `shape` over the start of `buffer` (which has room for it).
    fn view(buffer: &GpuTensor, shape: &[usize]) -> GpuTensor {
        debug_assert!(shape.iter().product::<usize>() <= buffer.len());
        GpuTensor { buffer: buffer.buffer.clone(), shape: shape.to_vec(), dtype: buffer.dtype }
    }

    /// The read-back buffer, grown to at least `bytes`.
    fn readback(&mut self, ctx: &GpuContext, bytes: u64) -> wgpu::Buffer {
        match &self.readback {
            Some(b) if b.size() >= bytes => b.clone(),
            _ => {
                let b = ctx.readback_buffer(bytes.max(4));
                self.readback = Some(b.clone());
                b
            }
        }
    }
}

/// The kept plans (least recently used first) and the size class they share.
#[derive(Default)]
struct Plans {
    class: Option<Activations>,
    kept: Vec<Plan>,
}

/// A forward pass prepared for one [`PlanKey`] (see the module doc).
struct Plan {
    key: PlanKey,
    ids: GpuTensor,
    type_ids: GpuTensor,
    mask: GpuTensor,
    /// The embedding sum, built by adding tables into it: cleared before every pass.
    embedded: GpuTensor,
    /// What the host reads: the states after `output_layer` layers, the pooled vectors or
    /// the logits.
    out: GpuTensor,
    /// Where `out` is copied for the host to read (the class's).
    readback: wgpu::Buffer,
    dispatches: Vec<Dispatch>,
    /// The step of the pass each dispatch belongs to (what a profile sums by).
    steps: Vec<&'static str>,
}

/// One step of the forward pass in a [`GpuEncoder::profile`]: GPU seconds summed over its
/// dispatches (every layer's).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepTime {
    pub step: &'static str,
    pub seconds: f64,
    pub dispatches: usize,
}

/// Where one forward pass spent its time.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PassProfile {
    /// GPU time per step, in the order the pass first runs them.
    pub steps: Vec<StepTime>,
    /// Host clock: copying the output back after the GPU finished.
    pub readback_seconds: f64,
    /// Bytes copied back to the host.
    pub readback_bytes: u64,
    /// Host clock: from writing the inputs to having the output (in a timed pass, whose
    /// one-pass-per-dispatch recording costs more than an untimed pass's).
    pub wall_seconds: f64,
}

impl PassProfile {
    /// The GPU time of every step together.
    pub fn gpu_seconds(&self) -> f64 {
        self.steps.iter().map(|s| s.seconds).sum()
    }
}

/// The steps of a pass, as a profile names them.
pub mod step {
    pub const EMBEDDINGS: &str = "embedding gather";
    pub const LAYER_NORM: &str = "layer norm (+ residual)";
    pub const QKV: &str = "QKV product";
    pub const ATTENTION: &str = "attention";
    pub const ROTARY: &str = "rotary positions";
    pub const ATTENTION_OUT: &str = "attention output product";
    pub const FFN_IN: &str = "feed-forward in product (+ activation)";
    pub const FFN_OUT: &str = "feed-forward out product";
    pub const POOLING: &str = "pooling";
    pub const HEAD: &str = "head products";
}

fn host(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?)
}

fn table(ctx: &GpuContext, label: &str, t: &Tensor) -> Result<ChunkedTable> {
    let (rows, cols) = t.dims2()?;
    ctx.upload_table(label, &host(t)?, rows, cols)
}

fn vector(ctx: &GpuContext, label: &str, t: &Tensor) -> Result<GpuTensor> {
    let v = host(t)?;
    let n = v.len();
    ctx.upload_f32(label, &v, &[n])
}

fn weight(ctx: &GpuContext, format: WeightFormat, label: &str, w: &[f32], shape: &[usize]) -> Result<GpuTensor> {
    match format {
        WeightFormat::F32 => ctx.upload_f32(label, w, shape),
        WeightFormat::F16 | WeightFormat::F16Math => ctx.upload_f16(label, w, shape),
    }
}

fn dense(ctx: &GpuContext, format: WeightFormat, label: &str, d: &Dense) -> Result<GpuDense> {
    let (out, inp) = d.weight.dims2()?;
    Ok(GpuDense {
        weight: weight(ctx, format, label, &host(&d.weight)?, &[out, inp])?,
        bias: vector(ctx, label, &d.bias)?,
    })
}

/// Query, key and value stacked into one [3h, h] layer so one matmul computes all three.
fn stacked_qkv(ctx: &GpuContext, format: WeightFormat, label: &str, parts: [&Dense; 3]) -> Result<GpuDense> {
    let (mut weight, mut bias, mut rows, mut cols) = (Vec::new(), Vec::new(), 0, 0);
    for d in parts {
        let (r, c) = d.weight.dims2()?;
        weight.extend(host(&d.weight)?);
        bias.extend(host(&d.bias)?);
        rows += r;
        cols = c;
    }
    Ok(GpuDense {
        weight: self::weight(ctx, format, label, &weight, &[rows, cols])?,
        bias: ctx.upload_f32(label, &bias, &[rows])?,
    })
}

fn norm(ctx: &GpuContext, label: &str, n: &Norm) -> Result<GpuNorm> {
    Ok(GpuNorm { gamma: vector(ctx, label, &n.weight)?, beta: vector(ctx, label, &n.bias)? })
}

/// The model's head on the device, or why it has none (the CPU path's words).
fn head(ctx: &GpuContext, model: &LoadedModel) -> Result<std::result::Result<GpuHead, &'static str>> {
    let Some(h) = &model.head else { return Ok(Err("this model has no classification head")) };
    let parts = match h.parts(model.weights.pooler.as_ref()) {
        Ok(parts) => parts,
        Err(_) => return Ok(Err("this head needs the encoder's pooler")),
    };
    use crate::model::heads::HeadActivation;
    let activation = match parts.activation {
        HeadActivation::Tanh => Activation::Tanh,
        HeadActivation::Gelu => Activation::Gelu,
        HeadActivation::GeluTanh => Activation::GeluTanh,
        HeadActivation::Relu => Activation::Relu,
    };
    let eps = model.config.layer_norm_eps as f32;
    Ok(Ok(GpuHead {
        first: dense(ctx, WeightFormat::F32, "head.first", parts.first)?,
        activation,
        norm: parts.norm.map(|n| Ok::<_, Error>((norm(ctx, "head.norm", n)?, eps))).transpose()?,
        pooling: model.config.head_pooling,
        labels: parts.last.weight.dims2()?.0,
        last: dense(ctx, WeightFormat::F32, "head.last", parts.last)?,
    }))
}

fn activation(a: ModelActivation) -> Activation {
    match a {
        ModelActivation::Gelu => Activation::Gelu,
        ModelActivation::GeluTanh => Activation::GeluTanh,
        ModelActivation::Relu => Activation::Relu,
    }
}

impl GpuEncoder {
    /// Opens the GPU (see [`GpuContext::new`]) and uploads the model's encoder weights.
    /// Errors when there is no adapter, so the caller can fall back to the CPU encoder.
    pub async fn new(model: &LoadedModel) -> Result<Self> {
        Self::with_context(GpuContext::new().await?, model)
    }

    /// Uploads the model's encoder weights (f32; natively `MEDRANK_GPU_PRECISION` may ask
    /// for another [`WeightFormat`]) to an already opened device.
    pub fn with_context(ctx: GpuContext, model: &LoadedModel) -> Result<Self> {
        Self::with_weight_format(ctx, model, WeightFormat::from_env()?)
    }

    /// Uploads the model's encoder weights, the linear layers' in `format`.
    pub fn with_weight_format(ctx: GpuContext, model: &LoadedModel, format: WeightFormat) -> Result<Self> {
        if format != WeightFormat::F32 && !ctx.adapter.shader_f16 {
            return Err(Error::model(format!("gpu: f16 weights need shader-f16, which {} lacks", ctx.adapter.name)));
        }
        let config = model.config.clone();
        let head_dim = config.hidden_size / config.num_heads.max(1);
        if head_dim > Attention::MAX_HEAD_DIM {
            return Err(Error::model(format!(
                "gpu: attention heads of {head_dim} values exceed the GPU kernel's {} (the CPU path runs this model)",
                Attention::MAX_HEAD_DIM
            )));
        }
        let w = &model.weights;
        let ops = Ops::with_f16_math(&ctx, format == WeightFormat::F16Math);
        let max_len = config.max_tokens();
        // DeBERTa's table through each layer's query and key maps: the CPU path's, in f32.
        let positions =
            crate::model::cpu::relative_position_tables(&config, w, crate::model::Precision::F32)?.unwrap_or_default();
        let rotary: Vec<(GpuTensor, GpuTensor)> = match config.modernbert() {
            Some(m) => [m.global_theta, m.local_theta]
                .iter()
                .map(|&theta| {
                    let (cos, sin) = crate::model::config::family::rotary_tables(theta, head_dim, max_len);
                    Ok((
                        ctx.upload_f32("rotary.cos", &cos, &[max_len, head_dim / 2])?,
                        ctx.upload_f32("rotary.sin", &sin, &[max_len, head_dim / 2])?,
                    ))
                })
                .collect::<Result<_>>()?,
            None => Vec::new(),
        };
        let mut layers = Vec::with_capacity(w.layers.len());
        for (i, l) in w.layers.iter().enumerate() {
            let name = |part: &str| format!("layer{i}.{part}");
            let h = config.hidden_size;
            let relative = match positions.get(i) {
                Some((pos_q, pos_k)) => Some((
                    ctx.upload_f32(&name("pos_q"), pos_q, &[pos_q.len() / h, h])?,
                    ctx.upload_f32(&name("pos_k"), pos_k, &[pos_k.len() / h, h])?,
                )),
                None => None,
            };
            let window = config.modernbert().and_then(|m| m.window(i));
            layers.push(GpuLayer {
                qkv: stacked_qkv(&ctx, format, &name("qkv"), [&l.query, &l.key, &l.value])?,
                attn_out: dense(&ctx, format, &name("attn_out"), &l.attn_out)?,
                attn_norm: l.attn_norm.as_ref().map(|n| norm(&ctx, &name("attn_norm"), n)).transpose()?,
                ffn_in: dense(&ctx, format, &name("ffn_in"), &l.ffn_in)?,
                ffn_out: dense(&ctx, format, &name("ffn_out"), &l.ffn_out)?,
                ffn_norm: norm(&ctx, &name("ffn_norm"), &l.ffn_norm)?,
                relative,
                rotary: config.modernbert().map(|_| usize::from(window.is_some())),
                window,
            });
        }
        let relative_index = match config.relative() {
            Some(r) => {
                let index = r.index_table(max_len);
                let n = index.len();
                Some(ctx.upload_u32("relative_index", &index, &[n])?)
            }
            None => None,
        };
        Ok(GpuEncoder {
            word_embeddings: table(&ctx, "word_embeddings", &w.word_embeddings)?,
            position_embeddings: match &w.position_embeddings {
                Some(t) => Some(table(&ctx, "position_embeddings", t)?),
                None => None,
            },
            token_type_embeddings: match &w.token_type_embeddings {
                Some(t) => Some(table(&ctx, "token_type_embeddings", t)?),
                None => None,
            },
            embedding_norm: norm(&ctx, "embedding_norm", &w.embedding_norm)?,
            layers,
            relative_index,
            rotary,
            final_norm: w.final_norm.as_ref().map(|n| norm(&ctx, "final_norm", n)).transpose()?,
            head: head(&ctx, model)?,
            plans: std::sync::Mutex::new(None),
            bytes_read_back: Default::default(),
            ops,
            config,
            weight_format: format,
            ctx,
        })
    }

    /// The device this encoder runs on (adapter name, backend, limits).
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    pub fn weight_format(&self) -> WeightFormat {
        self.weight_format
    }

    /// How many bindings the word-embedding table is split over (1 unless the vocabulary
    /// is larger than the adapter's `max_storage_buffer_binding_size`).
    pub fn word_embedding_bindings(&self) -> usize {
        self.word_embeddings.chunks.len()
    }

    /// The widest activation of a token, in values (what the binding limit divides).
    fn widest(&self) -> usize {
        let c = &self.config;
        (3 * c.hidden_size).max(c.ffn_in_size()).max(c.hidden_size)
    }

    /// How many rows of `seq_len` tokens one pass may hold (larger batches run in several
    /// passes): every activation buffer must fit one storage binding, and the attention
    /// kernel's blocks of queries one grid dimension. Only the device's own limits split a
    /// batch (the adapter's limits are requested in full: a discrete GPU binds gigabytes).
    pub fn rows_per_pass(&self, seq_len: usize) -> Result<usize> {
        let by_memory = (self.ctx.max_binding_bytes() / (self.widest() as u64 * 4)) as usize / seq_len.max(1);
        let rows = by_memory.min(Attention::max_rows(&self.ctx, seq_len));
        if rows == 0 {
            return Err(Error::model(format!(
                "gpu: one sequence of {seq_len} tokens does not fit the adapter's limits"
            )));
        }
        Ok(rows)
    }

    /// The length sequences of `seq_len` tokens run at on the device: the next multiple of
    /// [`LENGTH_BUCKET`] within the model's and the kernels' limit.
    fn padded_len(&self, seq_len: usize) -> usize {
        let limit = Attention::MAX_FORWARD_SEQ_LEN.min(self.config.max_tokens());
        seq_len.next_multiple_of(LENGTH_BUCKET).min(limit).max(seq_len)
    }

    /// Whether `batch` sequences of `seq_len` tokens run as one pass (what a profile times).
    pub fn fits_one_pass(&self, seq_len: usize, batch: usize) -> Result<bool> {
        Ok(batch <= self.rows_per_pass(self.padded_len(seq_len))?)
    }

    fn check_batch(&self, batch: &TokenBatch, output_layer: usize) -> Result<()> {
        batch.check(&self.config, output_layer)?;
        if batch.seq_len > Attention::MAX_FORWARD_SEQ_LEN {
            return Err(Error::invalid(format!(
                "the GPU encoder handles at most {} tokens a sequence, got {}",
                Attention::MAX_FORWARD_SEQ_LEN,
                batch.seq_len
            )));
        }
        Ok(())
    }

    fn gpu_head(&self) -> Result<&GpuHead> {
        self.head.as_ref().map_err(|why| Error::model(*why))
    }

    /// Hidden states after layer `output_layer`, `[batch, seq_len, hidden]`.
    pub async fn forward(&self, batch: &TokenBatch, output_layer: usize) -> Result<HiddenStates> {
        self.check_batch(batch, output_layer)?;
        let (s, h) = (batch.seq_len, self.config.hidden_size);
        if batch.batch == 0 || s == 0 {
            return Ok(HiddenStates { batch: batch.batch, seq_len: s, hidden: h, data: Vec::new() });
        }
        let data = self.run(batch, output_layer, None).await?;
        Ok(HiddenStates { batch: batch.batch, seq_len: s, hidden: h, data })
    }

    /// [`Encoder::read_out`]: the pooled vectors or logits of the last layer, computed on
    /// the device; only they are read back.
    pub async fn readout(&self, batch: &TokenBatch, readout: Readout) -> Result<Vec<Vec<f32>>> {
        let layers = self.config.num_layers;
        self.check_batch(batch, layers)?;
        let width = match readout {
            Readout::Pooled(_) => self.config.hidden_size,
            Readout::Logits => self.gpu_head()?.labels,
        };
        if batch.batch == 0 {
            return Ok(Vec::new());
        }
        if batch.seq_len == 0 {
            return Err(Error::invalid("a batch of empty sequences has no token to read out"));
        }
        let flat = self.run(batch, layers, Some(readout)).await?;
        Ok(flat.chunks(width.max(1)).map(<[f32]>::to_vec).collect())
    }

    /// The output of `batch` (states, pooled vectors or logits, row after row), in as many
    /// passes as the adapter's limits need. Rows are padded to [`Self::padded_len`]; the
    /// padding is trimmed off states, and rows of padding alone are dropped.
    async fn run(&self, batch: &TokenBatch, output_layer: usize, readout: Option<Readout>) -> Result<Vec<f32>> {
        let (s, h) = (batch.seq_len, self.config.hidden_size);
        let padded = self.padded_len(s);
        let rows = self.rows_per_pass(padded)?;
        if padded == s && batch.batch <= rows {
            // One pass with nothing to trim: its output is the result as it is (no second
            // copy of a buffer that can be tens of MB).
            return self.pass(batch, output_layer, readout).await;
        }
        // Every pass gets the same number of rows (the last filled up with padding rows), so
        // all of them reuse one plan instead of preparing a new one for the remainder.
        let passes = batch.batch.div_ceil(rows);
        let per_pass = batch.batch.div_ceil(passes);
        let mut data = Vec::new();
        for first in (0..batch.batch).step_by(per_pass) {
            let last = (first + per_pass).min(batch.batch);
            let part = padded_rows(batch, first..last, padded, per_pass);
            let out = self.pass(&part, output_layer, readout).await?;
            let row_width = out.len() / part.batch;
            for row in out.chunks(row_width).take(last - first) {
                // States keep the first `s` positions of every real row.
                data.extend_from_slice(if readout.is_none() { &row[..s * h] } else { row });
            }
        }
        Ok(data)
    }

    /// One submission for a batch that fits the adapter's limits.
    async fn pass(&self, batch: &TokenBatch, output_layer: usize, readout: Option<Readout>) -> Result<Vec<f32>> {
        let (mut plans, plan, _) = self.submit(batch, output_layer, readout, false).await?;
        let out = self.ctx.map_values(&plan.readback, plan.out.len()).await;
        self.bytes_read_back.fetch_add(plan.out.len() as u64 * 4, std::sync::atomic::Ordering::Relaxed);
        self.keep(&mut plans, plan);
        out
    }

    /// Puts the pass's plan back among the kept ones, and the plans back for the next pass.
    fn keep(&self, plans: &mut Option<Plans>, plan: Plan) {
        if let Some(mut kept) = plans.take() {
            kept.kept.push(plan);
            if kept.kept.len() > KEPT_PLANS {
                kept.kept.remove(0);
            }
            if let Ok(mut slot) = self.plans.lock() {
                *slot = Some(kept);
            }
        }
    }

    /// The plan of `key` from `plans` (prepared now if it is new), with the activation
    /// buffers of a size class that holds it (a larger class replaces a smaller one, and
    /// the plans bound to the old buffers go with it).
    fn plan_for(&self, plans: &mut Plans, key: PlanKey) -> Result<Plan> {
        if let Some(i) = plans.kept.iter().position(|p| p.key == key) {
            return Ok(plans.kept.remove(i));
        }
        let tokens = key.rows * key.seq_len;
        let fits = plans.class.as_ref().is_some_and(|c| c.tokens >= tokens && c.rows >= key.rows);
        if !fits {
            let (old_tokens, old_rows) = plans.class.as_ref().map_or((0, 0), |c| (c.tokens, c.rows));
            // Room for a power of two of tokens (within one binding): a job's growing
            // lengths allocate a few times, not once per length.
            let most = (self.ctx.max_binding_bytes() / (self.widest() as u64 * 4)) as usize;
            let class_tokens = tokens.next_power_of_two().min(most).max(tokens).max(old_tokens);
            let class_rows = key.rows.next_power_of_two().min(class_tokens).max(key.rows).max(old_rows);
            plans.kept.clear();
            plans.class = None; // freed before the larger class is allocated
            plans.class = Some(self.activations(class_tokens, class_rows)?);
        }
        let class = plans.class.as_mut().expect("allocated above");
        self.plan(class, key)
    }

    /// The activation buffers of a size class.
    fn activations(&self, tokens: usize, rows: usize) -> Result<Activations> {
        let (ctx, c) = (&self.ctx, &self.config);
        let h = c.hidden_size;
        let labels = self.head.as_ref().map_or(1, |head| head.labels);
        Ok(Activations {
            tokens,
            rows,
            embedded: ctx.zeros_f32("embedded", &[tokens, h])?,
            x: ctx.zeros_f32("x", &[tokens, h])?,
            x1: ctx.zeros_f32("x1", &[tokens, h])?,
            projected: ctx.zeros_f32("projected", &[tokens, h])?,
            context: ctx.zeros_f32("context", &[tokens, h])?,
            qkv: ctx.zeros_f32("qkv", &[tokens, 3 * h])?,
            inner: ctx.zeros_f32("inner", &[tokens, c.ffn_in_size()])?,
            gated: ctx.zeros_f32("gated", &[if c.pre_norm() { tokens * c.intermediate_size } else { 1 }])?,
            head_hidden: ctx.zeros_f32("head_hidden", &[rows, h])?,
            pooled: ctx.zeros_f32("pooled", &[rows, h])?,
            logits: ctx.zeros_f32("logits", &[rows, labels])?,
            readback: None,
        })
    }

    /// Writes the batch's ids, types and mask into its plan and submits every dispatch of
    /// the pass and the copy of its output; with `timed`, each dispatch in a timed pass of
    /// its own, the timestamps resolved into the returned buffer (two u64 ticks per
    /// dispatch). Returns the plans taken out for the pass (to put back with
    /// [`Self::keep`]) and the pass's plan.
    async fn submit(
        &self,
        batch: &TokenBatch,
        output_layer: usize,
        readout: Option<Readout>,
        timed: bool,
    ) -> Result<(Option<Plans>, Plan, Option<wgpu::Buffer>)> {
        let ctx = &self.ctx;
        // Validation and memory errors (an adapter that rejects a kernel, a buffer it cannot
        // allocate) become an `Err` the caller can fall back on, not a panic or garbage.
        let validation = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let out_of_memory = ctx.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        // The plans are taken out for the pass (their buffers are the pass's); a pass that
        // finds them taken (another in flight) works with a class of its own.
        let mut plans = Some(self.plans.lock().ok().and_then(|mut slot| slot.take()).unwrap_or_default());
        let key = PlanKey { rows: batch.batch, seq_len: batch.seq_len, output_layer, readout };
        let prepared = self.plan_for(plans.as_mut().expect("taken above"), key);
        let mut timestamps = None;
        if let Ok(plan) = &prepared {
            let mask: Vec<f32> = batch.mask.iter().map(|&m| if m != 0 { 1.0 } else { 0.0 }).collect();
            ctx.queue.write_buffer(&plan.ids.buffer, 0, bytemuck::cast_slice(&batch.ids));
            ctx.queue.write_buffer(&plan.type_ids.buffer, 0, bytemuck::cast_slice(&batch.type_ids));
            ctx.queue.write_buffer(&plan.mask.buffer, 0, bytemuck::cast_slice(&mask));
            let mut enc = ctx.device.create_command_encoder(&Default::default());
            enc.clear_buffer(&plan.embedded.buffer, 0, Some(plan.embedded.len() as u64 * 4));
            if timed {
                let count = 2 * plan.dispatches.len() as u32;
                let queries = ctx.device.create_query_set(&wgpu::QuerySetDescriptor {
                    label: Some("profile"),
                    ty: wgpu::QueryType::Timestamp,
                    count,
                });
                let resolved = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some("profile"),
                    size: count as u64 * 8,
                    usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                });
                record_timed(&mut enc, &plan.dispatches, &queries);
                enc.resolve_query_set(&queries, 0..count, &resolved, 0);
                timestamps = Some(resolved);
            } else {
                record(&mut enc, &plan.dispatches);
            }
            // The output's copy to the host-readable buffer goes in the same submission.
            enc.copy_buffer_to_buffer(&plan.out.buffer, 0, &plan.readback, 0, plan.out.len() as u64 * 4);
            ctx.queue.submit([enc.finish()]);
        }
        // Pop both scopes whatever happened, so they stay balanced.
        let memory_error = out_of_memory.pop().await;
        let validation_error = validation.pop().await;
        let plan = prepared?;
        if let Some(e) = memory_error.or(validation_error) {
            return Err(Error::model(format!("gpu: the forward pass failed on {}: {e}", ctx.adapter)));
        }
        Ok((plans, plan, timestamps))
    }

    /// Where one forward pass of `batch` spends its time on the GPU: every dispatch timed
    /// by the GPU itself (timestamp queries), summed per step of the pass, and the
    /// read-back of the output (mapping and copying it once the GPU is done) timed by the
    /// host clock `now` (seconds from any origin). `readout` as in [`Encoder::read_out`]
    /// (`None`: the states of `output_layer`).
    /// Errors on an adapter without `timestamp-query`: GPU time is never estimated.
    pub async fn profile(
        &self,
        batch: &TokenBatch,
        output_layer: usize,
        readout: Option<Readout>,
        now: &dyn Fn() -> f64,
    ) -> Result<PassProfile> {
        let ctx = &self.ctx;
        if !ctx.adapter.timestamps {
            return Err(Error::model(format!(
                "gpu: {} cannot time dispatches (no timestamp-query feature); no GPU profile",
                ctx.adapter
            )));
        }
        self.check_batch(batch, output_layer)?;
        if readout == Some(Readout::Logits) {
            self.gpu_head()?;
        }
        let padded = self.padded_len(batch.seq_len);
        if batch.batch == 0 || batch.batch > self.rows_per_pass(padded)? {
            return Err(Error::invalid("gpu profile: the batch must be non-empty and fit one pass"));
        }
        let part = padded_rows(batch, 0..batch.batch, padded, batch.batch);
        let start = now();
        let (mut plans, plan, resolved) = self.submit(&part, output_layer, readout, true).await?;
        let resolved = resolved.ok_or_else(|| Error::model("gpu profile: no timestamps were recorded"))?;
        let ticks = ctx.read_values::<u64>(&resolved, 2 * plan.dispatches.len()).await;
        let read_start = now();
        let out = ctx.map_values::<f32>(&plan.readback, plan.out.len()).await;
        let end = now();
        let steps = plan.steps.clone();
        let readback_bytes = plan.out.len() as u64 * 4;
        self.keep(&mut plans, plan);
        let (ticks, _) = (ticks?, out?);
        let tick_seconds = ctx.queue.get_timestamp_period() as f64 * 1e-9;
        let mut profile = PassProfile {
            steps: Vec::new(),
            readback_seconds: end - read_start,
            readback_bytes,
            wall_seconds: end - start,
        };
        for (step, pair) in steps.iter().zip(ticks.chunks(2)) {
            let seconds = pair[1].saturating_sub(pair[0]) as f64 * tick_seconds;
            match profile.steps.iter_mut().find(|s| s.step == *step) {
                Some(s) => {
                    s.seconds += seconds;
                    s.dispatches += 1;
                }
                None => profile.steps.push(StepTime { step, seconds, dispatches: 1 }),
            }
        }
        Ok(profile)
    }

    /// Prepares the dispatches of `key`'s pass over views of `class`'s buffers.
    fn plan(&self, class: &mut Activations, key: PlanKey) -> Result<Plan> {
        let (ctx, ops, c) = (&self.ctx, &self.ops, &self.config);
        let PlanKey { rows, seq_len: s, output_layer, readout } = key;
        let h = c.hidden_size;
        let tokens = rows * s;
        let positions = c.position_ids(rows, s);
        let ids = ctx.upload_u32("ids", &vec![0; tokens], &[tokens])?;
        let position_ids = ctx.upload_u32("position_ids", &positions, &[tokens])?;
        let type_ids = ctx.upload_u32("type_ids", &vec![0; tokens], &[tokens])?;
        let mask = ctx.zeros_f32("mask", &[rows, s])?;

        let view = |t: &GpuTensor, cols: usize| Activations::view(t, &[tokens, cols]);
        let embedded = view(&class.embedded, h);
        let (x, x1, projected, context) =
            (view(&class.x, h), view(&class.x1, h), view(&class.projected, h), view(&class.context, h));
        let (qkv, inner) = (view(&class.qkv, 3 * h), view(&class.inner, c.ffn_in_size()));

        let mut d = Vec::new();
        let mut steps = Vec::new();
        let mut add = |step: &'static str, dispatches: Vec<Dispatch>| {
            steps.extend(std::iter::repeat_n(step, dispatches.len()));
            d.extend(dispatches);
        };
        let eps = c.layer_norm_eps as f32;
        add(step::EMBEDDINGS, ops.gather_add.prepare(ctx, &ids, &self.word_embeddings.blocks(), &embedded)?);
        if let Some(positions) = &self.position_embeddings {
            add(step::EMBEDDINGS, ops.gather_add.prepare(ctx, &position_ids, &positions.blocks(), &embedded)?);
        }
        if let Some(types) = &self.token_type_embeddings {
            add(step::EMBEDDINGS, ops.gather_add.prepare(ctx, &type_ids, &types.blocks(), &embedded)?);
        }
        let n = &self.embedding_norm;
        add(step::LAYER_NORM, ops.layer_norm.prepare(ctx, &embedded, None, &n.gamma, &n.beta, eps, &x)?);
        let (act, none) = (activation(c.activation), Activation::None);
        let factor = c.relative().map_or(1, |r| r.scale_factor());
        let scale = 1.0 / ((c.head_dim() * factor) as f32).sqrt();
        for l in self.layers.iter().take(output_layer) {
            let relative = match (&l.relative, &self.relative_index, c.relative()) {
                (Some((pos_q, pos_k)), Some(index), Some(r)) => {
                    Some(RelativeTables { pos_q, pos_k, index, max_len: c.max_tokens(), c2p: r.c2p, p2c: r.p2c })
                }
                _ => None,
            };
            let extras = AttentionExtras { scale: Some(scale), window: l.window, relative };
            if c.pre_norm() {
                // ModernBERT: x += attn(LN(x)); x += GeGLU(LN(x)) products, into x itself.
                let normed = &x1;
                let input = match &l.attn_norm {
                    Some(n) => {
                        add(step::LAYER_NORM, ops.layer_norm.prepare(ctx, &x, None, &n.gamma, &n.beta, eps, normed)?);
                        normed
                    }
                    None => &x,
                };
                add(step::QKV, ops.matmul.prepare(ctx, input, &l.qkv.weight, &l.qkv.bias, none, &qkv)?);
                if let Some((cos, sin)) = l.rotary.and_then(|t| self.rotary.get(t)) {
                    add(step::ROTARY, ops.rotary.prepare(ctx, &qkv, s, c.num_heads, (cos, sin))?);
                }
                add(step::ATTENTION, ops.attention.prepare_with(ctx, &qkv, &mask, c.num_heads, extras, &context)?);
                let residual = |src: &GpuTensor, d: &GpuDense| -> Result<Vec<Dispatch>> {
                    let product = (Mat::of(src)?, Mat::of(&d.weight)?, Addend::Row(&d.bias));
                    ops.matmul.prepare_product(ctx, product.0, product.1, product.2, none, true, Mat::of(&x)?)
                };
                add(step::ATTENTION_OUT, residual(&context, &l.attn_out)?);
                let n = &l.ffn_norm;
                add(step::LAYER_NORM, ops.layer_norm.prepare(ctx, &x, None, &n.gamma, &n.beta, eps, normed)?);
                add(step::FFN_IN, ops.matmul.prepare(ctx, normed, &l.ffn_in.weight, &l.ffn_in.bias, none, &inner)?);
                let gated = Activations::view(&class.gated, &[tokens, c.intermediate_size]);
                add(step::FFN_IN, ops.activation.prepare_forward(ctx, &inner, act, true, &gated)?);
                add(step::FFN_OUT, residual(&gated, &l.ffn_out)?);
            } else {
                add(step::QKV, ops.matmul.prepare(ctx, &x, &l.qkv.weight, &l.qkv.bias, none, &qkv)?);
                add(step::ATTENTION, ops.attention.prepare_with(ctx, &qkv, &mask, c.num_heads, extras, &context)?);
                let out = ops.matmul.prepare(ctx, &context, &l.attn_out.weight, &l.attn_out.bias, none, &projected)?;
                add(step::ATTENTION_OUT, out);
                let n = l.attn_norm.as_ref().ok_or_else(|| Error::model("a post-norm layer has its norm"))?;
                add(step::LAYER_NORM, ops.layer_norm.prepare(ctx, &projected, Some(&x), &n.gamma, &n.beta, eps, &x1)?);
                add(step::FFN_IN, ops.matmul.prepare(ctx, &x1, &l.ffn_in.weight, &l.ffn_in.bias, act, &inner)?);
                add(
                    step::FFN_OUT,
                    ops.matmul.prepare(ctx, &inner, &l.ffn_out.weight, &l.ffn_out.bias, none, &projected)?,
                );
                let n = &l.ffn_norm;
                add(step::LAYER_NORM, ops.layer_norm.prepare(ctx, &projected, Some(&x1), &n.gamma, &n.beta, eps, &x)?);
            }
        }
        // ModernBERT's final norm, when the pass runs every layer.
        let x = match (&self.final_norm, output_layer == c.num_layers) {
            (Some(n), true) => {
                add(step::LAYER_NORM, ops.layer_norm.prepare(ctx, &x, None, &n.gamma, &n.beta, eps, &x1)?);
                x1
            }
            _ => x,
        };
        let out = match readout {
            None => x,
            Some(Readout::Pooled(pooling)) => {
                let pooled = Activations::view(&class.pooled, &[rows, h]);
                add(step::POOLING, ops.pool.prepare(ctx, &x, &mask, pooling, &pooled)?);
                pooled
            }
            Some(Readout::Logits) => {
                // The head reads the first token of every row in place (a strided view), or
                // a mean-pooling head the pooled rows.
                let head = self.gpu_head()?;
                let hidden = Activations::view(&class.head_hidden, &[rows, h]);
                let logits = Activations::view(&class.logits, &[rows, head.labels]);
                let pooled = Activations::view(&class.pooled, &[rows, h]);
                let first = match head.pooling {
                    HeadPooling::Cls => Mat::every_nth_row(&x, s, rows)?,
                    HeadPooling::Mean => {
                        let mean = crate::model::Pooling { mode: crate::model::PoolingMode::Mean, normalize: false };
                        add(step::POOLING, ops.pool.prepare(ctx, &x, &mask, mean, &pooled)?);
                        Mat::of(&pooled)?
                    }
                };
                let w = Mat::of(&head.first.weight)?;
                let bias = Addend::Row(&head.first.bias);
                add(
                    step::HEAD,
                    ops.matmul.prepare_product(ctx, first, w, bias, head.activation, false, Mat::of(&hidden)?)?,
                );
                let last_input = match &head.norm {
                    Some((n, eps)) => {
                        add(step::HEAD, ops.layer_norm.prepare(ctx, &hidden, None, &n.gamma, &n.beta, *eps, &pooled)?);
                        &pooled
                    }
                    None => &hidden,
                };
                add(
                    step::HEAD,
                    ops.matmul.prepare(ctx, last_input, &head.last.weight, &head.last.bias, none, &logits)?,
                );
                logits
            }
        };
        let readback = class.readback(ctx, out.len() as u64 * 4);
        Ok(Plan { key, ids, type_ids, mask, embedded, out, readback, dispatches: d, steps })
    }
}

/// Rows `range` of `batch`, each padded with masked tokens to `len` positions, then rows of
/// padding alone up to `rows` rows.
fn padded_rows(batch: &TokenBatch, range: std::ops::Range<usize>, len: usize, rows: usize) -> TokenBatch {
    let s = batch.seq_len;
    let mut part = TokenBatch {
        batch: rows.max(range.len()),
        seq_len: len,
        ids: Vec::with_capacity(rows * len),
        type_ids: Vec::with_capacity(rows * len),
        mask: Vec::with_capacity(rows * len),
    };
    for r in range {
        let row = r * s..(r + 1) * s;
        part.ids.extend_from_slice(&batch.ids[row.clone()]);
        part.type_ids.extend_from_slice(&batch.type_ids[row.clone()]);
        part.mask.extend_from_slice(&batch.mask[row]);
        part.ids.resize(part.ids.len() + len - s, 0);
        part.type_ids.resize(part.type_ids.len() + len - s, 0);
        part.mask.resize(part.mask.len() + len - s, 0);
    }
    let total = part.batch * len;
    part.ids.resize(total, 0);
    part.type_ids.resize(total, 0);
    part.mask.resize(total, 0);
    part
}

impl Encoder for GpuEncoder {
    fn config(&self) -> &EncoderConfig {
        &self.config
    }

    fn encode(&self, batch: &TokenBatch, output_layer: usize) -> impl Future<Output = Result<HiddenStates>> {
        self.forward(batch, output_layer)
    }

    fn read_out(&self, batch: &TokenBatch, readout: Readout) -> impl Future<Output = Result<Vec<Vec<f32>>>> {
        self.readout(batch, readout)
    }

    fn bytes_read_back(&self) -> Option<u64> {
        Some(self.bytes_read_back.load(std::sync::atomic::Ordering::Relaxed))
    }
}
