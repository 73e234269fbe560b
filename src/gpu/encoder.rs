//! The encoder's forward pass on the GPU, behind the same [`Encoder`] interface as the CPU
//! path (`model::CpuEncoder`), so evaluators and rankers never know which backend ran.
//!
//! Weights are uploaded once, when the encoder is built, and stay on the device. A batch
//! shape (rows x padded length x layers) gets a [`Plan`] the first time it is seen: its
//! activation buffers and every dispatch of the pass, prepared with its uniform parameters
//! and bind group. The plan is kept, so the next batch of that shape only writes its token
//! ids, types and mask, records the same dispatches into one command encoder, submits once
//! and awaits one readback; lengths are padded to a multiple of [`LENGTH_BUCKET`] (masked
//! padding, which changes no result) so that batches of nearby lengths share a plan. Per
//! layer:
//!
//! ```text
//! qkv   = x . [Wq; Wk; Wv]^T + [bq; bk; bv]     one matmul, the three projections side by side
//! ctx   = attention(qkv, mask)                  scores, padding mask, softmax, weighted sum
//! x1    = LayerNorm(ctx . Wo^T + bo + x)        residual fused into the norm
//! inner = act(x1 . Wi^T + bi)                   activation fused into the matmul
//! x     = LayerNorm(inner . Wf^T + bf + x1)
//! ```

use std::future::Future;

use candle_core::Tensor;

use super::context::{ChunkedTable, GpuContext, GpuTensor};
use super::ops::{record, record_timed, Activation, Attention, Dispatch, Ops};
use crate::error::{Error, Result};
use crate::model::config::Activation as ModelActivation;
use crate::model::load::{Dense, Norm};
use crate::model::{Encoder, EncoderConfig, HiddenStates, LoadedModel, TokenBatch};

/// How the encoder stores the weights of its linear layers on the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum WeightFormat {
    /// Exact: matches the CPU path within 1e-3 (the default).
    F32,
    /// Half the memory and bandwidth; needs `shader-f16`. Rounding the weights costs
    /// accuracy (measured in tests/gpu_encoder.rs), activations stay f32.
    F16,
    /// f16 weights and f16 arithmetic: each product's inputs staged in f16 and summed in
    /// f16 over a slice of 8 or 16, with f32 accumulation across slices (kernels/matmul.wgsl);
    /// needs `shader-f16`. Looser still (measured in tests/gpu_encoder.rs); unmeasured on a
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
    attn_norm: GpuNorm,
    ffn_in: GpuDense,
    ffn_out: GpuDense,
    ffn_norm: GpuNorm,
}

/// The encoder body on the GPU. Build it once per model (uploads the weights) and call
/// [`Encoder::encode`] as often as needed.
pub struct GpuEncoder {
    ctx: GpuContext,
    weight_format: WeightFormat,
    ops: Ops,
    config: EncoderConfig,
    word_embeddings: ChunkedTable,
    position_embeddings: ChunkedTable,
    token_type_embeddings: Option<ChunkedTable>,
    embedding_norm: GpuNorm,
    layers: Vec<GpuLayer>,
    /// The plan of the last batch shape (taken out while a pass runs).
    plan: std::sync::Mutex<Option<Plan>>,
}

/// Sequence lengths are padded to a multiple of this on the device. Padding is masked out
/// of attention (a masked key's weight is exactly 0) and every other op works row by row,
/// so the real tokens' states are the same to the bit; the padded rows are dropped.
pub const LENGTH_BUCKET: usize = 16;

/// A forward pass prepared for one batch shape (see the module doc).
struct Plan {
    rows: usize,
    seq_len: usize,
    output_layer: usize,
    ids: GpuTensor,
    type_ids: GpuTensor,
    mask: GpuTensor,
    /// The embedding sum, built by adding tables into it: cleared before every pass.
    embedded: GpuTensor,
    /// The hidden states after `output_layer` layers.
    x: GpuTensor,
    /// Where the states are copied for the host to read, kept with the plan.
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
    /// Host clock: copying the states back after the GPU finished.
    pub readback_seconds: f64,
    /// Host clock: from writing the inputs to having the states (in a timed pass, whose
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
    pub const ATTENTION_OUT: &str = "attention output product";
    pub const FFN_IN: &str = "feed-forward in product (+ activation)";
    pub const FFN_OUT: &str = "feed-forward out product";
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
        let mut layers = Vec::with_capacity(w.layers.len());
        for (i, l) in w.layers.iter().enumerate() {
            let name = |part: &str| format!("layer{i}.{part}");
            layers.push(GpuLayer {
                qkv: stacked_qkv(&ctx, format, &name("qkv"), [&l.query, &l.key, &l.value])?,
                attn_out: dense(&ctx, format, &name("attn_out"), &l.attn_out)?,
                attn_norm: norm(&ctx, &name("attn_norm"), &l.attn_norm)?,
                ffn_in: dense(&ctx, format, &name("ffn_in"), &l.ffn_in)?,
                ffn_out: dense(&ctx, format, &name("ffn_out"), &l.ffn_out)?,
                ffn_norm: norm(&ctx, &name("ffn_norm"), &l.ffn_norm)?,
            });
        }
        Ok(GpuEncoder {
            word_embeddings: table(&ctx, "word_embeddings", &w.word_embeddings)?,
            position_embeddings: table(&ctx, "position_embeddings", &w.position_embeddings)?,
            token_type_embeddings: match &w.token_type_embeddings {
                Some(t) => Some(table(&ctx, "token_type_embeddings", t)?),
                None => None,
            },
            embedding_norm: norm(&ctx, "embedding_norm", &w.embedding_norm)?,
            layers,
            plan: std::sync::Mutex::new(None),
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

    /// How many rows of `seq_len` tokens one pass may hold (larger batches run in several
    /// passes): every activation buffer must fit one storage binding, and attention
    /// launches one workgroup per token along one grid dimension.
    pub fn rows_per_pass(&self, seq_len: usize) -> Result<usize> {
        let c = &self.config;
        let widest = (3 * c.hidden_size).max(c.intermediate_size).max(c.hidden_size);
        let by_memory = (self.ctx.max_binding_bytes() / (widest as u64 * 4)) as usize;
        let by_grid = self.ctx.limits.max_compute_workgroups_per_dimension as usize;
        let rows = by_memory.min(by_grid) / seq_len.max(1);
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
        let limit = Attention::MAX_SEQ_LEN.min(self.config.max_tokens());
        seq_len.next_multiple_of(LENGTH_BUCKET).min(limit).max(seq_len)
    }

    /// Whether `batch` sequences of `seq_len` tokens run as one pass (what a profile times).
    pub fn fits_one_pass(&self, seq_len: usize, batch: usize) -> Result<bool> {
        Ok(batch <= self.rows_per_pass(self.padded_len(seq_len))?)
    }

    fn check_batch(&self, batch: &TokenBatch, output_layer: usize) -> Result<()> {
        batch.check(&self.config, output_layer)?;
        if batch.seq_len > Attention::MAX_SEQ_LEN {
            return Err(Error::invalid(format!(
                "the GPU encoder handles at most {} tokens a sequence, got {}",
                Attention::MAX_SEQ_LEN,
                batch.seq_len
            )));
        }
        Ok(())
    }

    /// Hidden states after layer `output_layer`, `[batch, seq_len, hidden]`.
    pub async fn forward(&self, batch: &TokenBatch, output_layer: usize) -> Result<HiddenStates> {
        self.check_batch(batch, output_layer)?;
        let (s, h) = (batch.seq_len, self.config.hidden_size);
        let padded = self.padded_len(s);
        if batch.batch == 0 || s == 0 {
            return Ok(HiddenStates { batch: batch.batch, seq_len: s, hidden: h, data: Vec::new() });
        }
        let rows = self.rows_per_pass(padded)?;
        if padded == s && batch.batch <= rows {
            // One pass with nothing to trim: its states are the result as they are (no
            // second copy of a buffer that can be tens of MB).
            let data = self.forward_pass(batch, output_layer).await?;
            return Ok(HiddenStates { batch: batch.batch, seq_len: s, hidden: h, data });
        }
        // Every pass gets the same number of rows (the last filled up with padding rows), so
        // all of them reuse one plan instead of preparing a new one for the remainder.
        let passes = batch.batch.div_ceil(rows);
        let per_pass = batch.batch.div_ceil(passes);
        let mut data = Vec::with_capacity(batch.batch * s * h);
        for first in (0..batch.batch).step_by(per_pass) {
            let last = (first + per_pass).min(batch.batch);
            let part = padded_rows(batch, first..last, padded, per_pass);
            let states = self.forward_pass(&part, output_layer).await?;
            // Keep the first `s` positions of every real row.
            for row in states.chunks(padded * h).take(last - first) {
                data.extend_from_slice(&row[..s * h]);
            }
        }
        Ok(HiddenStates { batch: batch.batch, seq_len: s, hidden: h, data })
    }

    /// One submission for a batch that fits the adapter's limits.
    async fn forward_pass(&self, batch: &TokenBatch, output_layer: usize) -> Result<Vec<f32>> {
        let (plan, _) = self.submit(batch, output_layer, false).await?;
        let states = self.ctx.map_values(&plan.readback, plan.x.len()).await;
        self.keep(plan);
        states
    }

    /// Puts the pass's plan back for the next batch of its shape.
    fn keep(&self, plan: Plan) {
        if let Ok(mut slot) = self.plan.lock() {
            *slot = Some(plan);
        }
    }

    /// Writes the batch's ids, types and mask into its plan and submits every dispatch of
    /// the pass; with `timed`, each dispatch in a timed pass of its own, the timestamps
    /// resolved into the returned buffer (two u64 ticks per dispatch).
    async fn submit(
        &self,
        batch: &TokenBatch,
        output_layer: usize,
        timed: bool,
    ) -> Result<(Plan, Option<wgpu::Buffer>)> {
        let ctx = &self.ctx;
        // Validation and memory errors (an adapter that rejects a kernel, a buffer it cannot
        // allocate) become an `Err` the caller can fall back on, not a panic or garbage.
        let validation = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let out_of_memory = ctx.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let kept = self.plan.lock().ok().and_then(|mut slot| slot.take());
        let prepared = match kept {
            Some(p) if (p.rows, p.seq_len, p.output_layer) == (batch.batch, batch.seq_len, output_layer) => Ok(p),
            _ => self.plan(batch.batch, batch.seq_len, output_layer),
        };
        let mut timestamps = None;
        if let Ok(plan) = &prepared {
            let mask: Vec<f32> = batch.mask.iter().map(|&m| if m != 0 { 1.0 } else { 0.0 }).collect();
            ctx.queue.write_buffer(&plan.ids.buffer, 0, bytemuck::cast_slice(&batch.ids));
            ctx.queue.write_buffer(&plan.type_ids.buffer, 0, bytemuck::cast_slice(&batch.type_ids));
            ctx.queue.write_buffer(&plan.mask.buffer, 0, bytemuck::cast_slice(&mask));
            let mut enc = ctx.device.create_command_encoder(&Default::default());
            enc.clear_buffer(&plan.embedded.buffer, 0, None);
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
            // The states' copy to the host-readable buffer goes in the same submission.
            enc.copy_buffer_to_buffer(&plan.x.buffer, 0, &plan.readback, 0, plan.x.len() as u64 * 4);
            ctx.queue.submit([enc.finish()]);
        }
        // Pop both scopes whatever happened, so they stay balanced.
        let memory_error = out_of_memory.pop().await;
        let validation_error = validation.pop().await;
        let plan = prepared?;
        if let Some(e) = memory_error.or(validation_error) {
            return Err(Error::model(format!("gpu: the forward pass failed on {}: {e}", ctx.adapter)));
        }
        Ok((plan, timestamps))
    }

    /// Where one forward pass of `batch` spends its time on the GPU: every dispatch timed
    /// by the GPU itself (timestamp queries), summed per step of the pass, and the
    /// read-back of the states (mapping and copying them once the GPU is done) timed by the
    /// host clock `now` (seconds from any origin).
    /// Errors on an adapter without `timestamp-query`: GPU time is never estimated.
    pub async fn profile(&self, batch: &TokenBatch, output_layer: usize, now: &dyn Fn() -> f64) -> Result<PassProfile> {
        let ctx = &self.ctx;
        if !ctx.adapter.timestamps {
            return Err(Error::model(format!(
                "gpu: {} cannot time dispatches (no timestamp-query feature); no GPU profile",
                ctx.adapter
            )));
        }
        self.check_batch(batch, output_layer)?;
        let padded = self.padded_len(batch.seq_len);
        if batch.batch == 0 || batch.batch > self.rows_per_pass(padded)? {
            return Err(Error::invalid("gpu profile: the batch must be non-empty and fit one pass"));
        }
        let part = padded_rows(batch, 0..batch.batch, padded, batch.batch);
        let start = now();
        let (plan, resolved) = self.submit(&part, output_layer, true).await?;
        let resolved = resolved.ok_or_else(|| Error::model("gpu profile: no timestamps were recorded"))?;
        let ticks = ctx.read_values::<u64>(&resolved, 2 * plan.dispatches.len()).await;
        let read_start = now();
        let states = ctx.map_values::<f32>(&plan.readback, plan.x.len()).await;
        let end = now();
        let steps = plan.steps.clone();
        self.keep(plan);
        let (ticks, _) = (ticks?, states?);
        let tick_seconds = ctx.queue.get_timestamp_period() as f64 * 1e-9;
        let mut profile =
            PassProfile { steps: Vec::new(), readback_seconds: end - read_start, wall_seconds: end - start };
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

    /// Allocates the buffers of a `rows` x `seq_len` pass and prepares its dispatches.
    fn plan(&self, rows: usize, seq_len: usize, output_layer: usize) -> Result<Plan> {
        let (ctx, ops, c) = (&self.ctx, &self.ops, &self.config);
        let (s, h) = (seq_len, c.hidden_size);
        let tokens = rows * s;
        let positions = c.position_ids(rows, s);
        let ids = ctx.upload_u32("ids", &vec![0; tokens], &[tokens])?;
        let position_ids = ctx.upload_u32("position_ids", &positions, &[tokens])?;
        let type_ids = ctx.upload_u32("type_ids", &vec![0; tokens], &[tokens])?;
        let mask = ctx.zeros_f32("mask", &[rows, s])?;

        let embedded = ctx.zeros_f32("embedded", &[tokens, h])?;
        let x = ctx.zeros_f32("x", &[tokens, h])?;
        let x1 = ctx.zeros_f32("x1", &[tokens, h])?;
        let projected = ctx.zeros_f32("projected", &[tokens, h])?;
        let context = ctx.zeros_f32("context", &[tokens, h])?;
        let qkv = ctx.zeros_f32("qkv", &[tokens, 3 * h])?;
        let inner = ctx.zeros_f32("inner", &[tokens, c.intermediate_size])?;

        let mut d = Vec::new();
        let mut steps = Vec::new();
        let mut add = |step: &'static str, dispatches: Vec<Dispatch>| {
            steps.extend(std::iter::repeat_n(step, dispatches.len()));
            d.extend(dispatches);
        };
        let eps = c.layer_norm_eps as f32;
        add(step::EMBEDDINGS, ops.gather_add.prepare(ctx, &ids, &self.word_embeddings.blocks(), &embedded)?);
        add(
            step::EMBEDDINGS,
            ops.gather_add.prepare(ctx, &position_ids, &self.position_embeddings.blocks(), &embedded)?,
        );
        if let Some(types) = &self.token_type_embeddings {
            add(step::EMBEDDINGS, ops.gather_add.prepare(ctx, &type_ids, &types.blocks(), &embedded)?);
        }
        let n = &self.embedding_norm;
        add(step::LAYER_NORM, ops.layer_norm.prepare(ctx, &embedded, None, &n.gamma, &n.beta, eps, &x)?);
        let (act, none) = (activation(c.activation), Activation::None);
        for l in self.layers.iter().take(output_layer) {
            add(step::QKV, ops.matmul.prepare(ctx, &x, &l.qkv.weight, &l.qkv.bias, none, &qkv)?);
            add(step::ATTENTION, ops.attention.prepare(ctx, &qkv, &mask, c.num_heads, &context)?);
            let out = ops.matmul.prepare(ctx, &context, &l.attn_out.weight, &l.attn_out.bias, none, &projected)?;
            add(step::ATTENTION_OUT, out);
            let n = &l.attn_norm;
            add(step::LAYER_NORM, ops.layer_norm.prepare(ctx, &projected, Some(&x), &n.gamma, &n.beta, eps, &x1)?);
            add(step::FFN_IN, ops.matmul.prepare(ctx, &x1, &l.ffn_in.weight, &l.ffn_in.bias, act, &inner)?);
            add(step::FFN_OUT, ops.matmul.prepare(ctx, &inner, &l.ffn_out.weight, &l.ffn_out.bias, none, &projected)?);
            let n = &l.ffn_norm;
            add(step::LAYER_NORM, ops.layer_norm.prepare(ctx, &projected, Some(&x1), &n.gamma, &n.beta, eps, &x)?);
        }
        let readback = ctx.readback_buffer(x.len() as u64 * 4);
        Ok(Plan { rows, seq_len, output_layer, ids, type_ids, mask, embedded, x, readback, dispatches: d, steps })
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
}
