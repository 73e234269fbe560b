//! [`GpuTrainer`]: the top N encoder layers and the head on the GPU, with the forward pass,
//! the backward pass and AdamW as WGSL kernels (`crate::gpu::ops::TrainOps`); the same
//! arithmetic as the CPU engine's candle autograd with `Freeze::TopLayers(n)`.
//!
//! The lower layers are frozen and their outputs computed once (the states the frozen pass
//! caches: real tokens only, f16). A micro-batch uploads those states, and one submission
//! runs the top layers forward (keeping what backward needs; the last layer computes the
//! first tokens only after its attention, as the CPU engine does), the head, the loss, the
//! backward pass of the head and of every trained layer, and adds the gradients to the
//! ones already summed for the step; only the per-example losses are read back. An
//! optimiser step is one more submission: AdamW on every tensor, then the gradients are
//! cleared. No weight or activation leaves the device between layers or steps.
//! Everything here is async and never blocks (read-backs are awaited), so it runs in the
//! browser on WebGPU as natively on Vulkan, Metal or DX12.

use half::f16;

use crate::error::{Error, Result};
use crate::gpu::context::{GpuContext, GpuTensor};
use crate::gpu::ops::{
    record, Activation, AdamWConfig, AdamWStep, Addend, AttentionBackward, CrossEntropy, Dispatch, LayerNormGrads, Mat,
    Ops, TrainOps,
};
use crate::model::config::{Activation as ModelActivation, EncoderConfig};
use crate::model::load::{Dense, HeadWeights, LoadedModel, Norm};
use candle_core::{Device, Tensor};

/// A trained tensor on the device with its gradient (summed over a step's micro-batches)
/// and AdamW's two moments.
struct Param {
    name: String,
    value: GpuTensor,
    grad: GpuTensor,
    m: GpuTensor,
    v: GpuTensor,
    /// A copy of `value` at the best dev epoch so far.
    best: GpuTensor,
}

impl Param {
    fn new(ctx: &GpuContext, name: String, data: &[f32], shape: &[usize]) -> Result<Self> {
        Ok(Param {
            value: ctx.upload_f32(&name, data, shape)?,
            grad: ctx.zeros_f32(&name, shape)?,
            m: ctx.zeros_f32(&name, shape)?,
            v: ctx.zeros_f32(&name, shape)?,
            best: ctx.zeros_f32(&name, shape)?,
            name,
        })
    }

    fn from_tensor(ctx: &GpuContext, name: String, t: &Tensor) -> Result<Self> {
        let shape = t.dims().to_vec();
        Param::new(ctx, name, &host(t)?, &shape)
    }

    fn bytes(&self) -> u64 {
        (self.value.len().max(1) * 4) as u64
    }
}

fn host(t: &Tensor) -> Result<Vec<f32>> {
    Ok(t.flatten_all()?.to_dtype(candle_core::DType::F32)?.to_vec1::<f32>()?)
}

/// One trained layer; query, key and value stacked (one product computes all three).
struct Layer {
    qkv_w: Param,
    qkv_b: Param,
    out_w: Param,
    out_b: Param,
    norm1_g: Param,
    norm1_b: Param,
    in_w: Param,
    in_b: Param,
    ffn_w: Param,
    ffn_b: Param,
    norm2_g: Param,
    norm2_b: Param,
}

impl Layer {
    fn params(&self) -> [&Param; 12] {
        [
            &self.qkv_w,
            &self.qkv_b,
            &self.out_w,
            &self.out_b,
            &self.norm1_g,
            &self.norm1_b,
            &self.in_w,
            &self.in_b,
            &self.ffn_w,
            &self.ffn_b,
            &self.norm2_g,
            &self.norm2_b,
        ]
    }
}

/// Every head the encoders have is `out(act(dense(h_first)))` (model/heads.rs): BERT's
/// pooler + classifier and RoBERTa's classifier with tanh, DistilBERT's with ReLU.
struct Head {
    activation: Activation,
    dense_w: Param,
    dense_b: Param,
    out_w: Param,
    out_b: Param,
    n_out: usize,
}

/// What a micro-batch's forward pass keeps for its backward pass, per layer. The last
/// layer computes the first token of each sequence only after attention (all the head
/// reads; its keys and values still come from every token), as the CPU trainer does: its
/// tensors from `attn` on have one row per sequence.
struct Saved {
    qkv: GpuTensor,
    /// Every token's attention output.
    ctx: GpuTensor,
    /// The last layer's input at the first tokens (its residual), else `None`.
    x_first: Option<GpuTensor>,
    attn: GpuTensor,
    y: GpuTensor,
    pre: GpuTensor,
    act: GpuTensor,
    ffn: GpuTensor,
    /// The layer's output (the next layer's input).
    out: GpuTensor,
}

/// A recorded forward pass over one micro-batch.
struct Forward {
    batch: usize,
    seq_len: usize,
    mask: GpuTensor,
    input: GpuTensor,
    saved: Vec<Saved>,
    pooled: GpuTensor,
    logits: GpuTensor,
    dispatches: Vec<Dispatch>,
}

/// The top layers and the head of a model on the GPU, with their optimisers.
pub struct GpuTrainer {
    ctx: GpuContext,
    ops: Ops,
    train: TrainOps,
    config: EncoderConfig,
    /// Index of the first trained layer (the frozen ones below it are not on the device).
    first_layer: usize,
    layers: Vec<Layer>,
    head: Head,
    head_opt: (AdamWConfig, AdamWStep),
    layer_opt: (AdamWConfig, AdamWStep),
    /// AdamW over every trained tensor, prepared once (the step's parameters are a
    /// uniform rewritten each step).
    optimiser: Vec<Dispatch>,
    steps: u32,
    /// The `hidden x hidden` identity, to move rows between views ([`Self::copy_rows`]).
    identity: GpuTensor,
    /// The most bytes one activation tensor of a pass may take (the adapter's binding
    /// limit; smaller in tests): larger micro-batches run in parts.
    max_pass_bytes: u64,
}

impl GpuTrainer {
    /// Uploads the top `config.num_layers - first_layer` layers and the head of `model`
    /// (which must have one). `head_opt` and `layer_opt`: the AdamW settings of the head
    /// and of the layers (the learning rates are set again at every step).
    pub fn new(
        ctx: GpuContext,
        model: &LoadedModel,
        first_layer: usize,
        head_opt: AdamWConfig,
        layer_opt: AdamWConfig,
    ) -> Result<Self> {
        let config = model.config.clone();
        if config.activation != ModelActivation::Gelu {
            return Err(Error::invalid(format!(
                "the GPU trainer supports GELU (erf) layers; this model's activation is {:?}",
                config.activation
            )));
        }
        if first_layer >= config.num_layers {
            return Err(Error::invalid(format!(
                "no layer to train: the first trained layer {first_layer} of a {}-layer encoder",
                config.num_layers
            )));
        }
        let w = &model.weights;
        let mut layers = Vec::new();
        for (i, l) in w.layers.iter().enumerate().skip(first_layer) {
            let name = |part: &str| format!("layer{i}.{part}");
            let (mut qkv_w, mut qkv_b) = (Vec::new(), Vec::new());
            for d in [&l.query, &l.key, &l.value] {
                qkv_w.extend(host(&d.weight)?);
                qkv_b.extend(host(&d.bias)?);
            }
            let h = config.hidden_size;
            let dense = |part: &str, d: &Dense| -> Result<(Param, Param)> {
                Ok((
                    Param::from_tensor(&ctx, name(&format!("{part}.weight")), &d.weight)?,
                    Param::from_tensor(&ctx, name(&format!("{part}.bias")), &d.bias)?,
                ))
            };
            let norm = |part: &str, n: &Norm| -> Result<(Param, Param)> {
                Ok((
                    Param::from_tensor(&ctx, name(&format!("{part}.weight")), &n.weight)?,
                    Param::from_tensor(&ctx, name(&format!("{part}.bias")), &n.bias)?,
                ))
            };
            let (out_w, out_b) = dense("attn_out", &l.attn_out)?;
            let (norm1_g, norm1_b) = norm("attn_norm", &l.attn_norm)?;
            let (in_w, in_b) = dense("ffn_in", &l.ffn_in)?;
            let (ffn_w, ffn_b) = dense("ffn_out", &l.ffn_out)?;
            let (norm2_g, norm2_b) = norm("ffn_norm", &l.ffn_norm)?;
            layers.push(Layer {
                qkv_w: Param::new(&ctx, name("qkv.weight"), &qkv_w, &[3 * h, h])?,
                qkv_b: Param::new(&ctx, name("qkv.bias"), &qkv_b, &[3 * h])?,
                out_w,
                out_b,
                norm1_g,
                norm1_b,
                in_w,
                in_b,
                ffn_w,
                ffn_b,
                norm2_g,
                norm2_b,
            });
        }
        let head_weights =
            model.head.as_ref().ok_or_else(|| Error::invalid("the GPU trainer needs a head to train"))?;
        let (activation, dense, out, names) = match head_weights {
            HeadWeights::PooledLinear { classifier } => {
                let pooler = w.pooler.as_ref().ok_or_else(|| Error::model("this head needs the encoder's pooler"))?;
                (Activation::Tanh, pooler, classifier, ["pooler", "classifier"])
            }
            HeadWeights::RobertaClassifier { dense, out_proj } => {
                (Activation::Tanh, dense, out_proj, ["classifier.dense", "classifier.out_proj"])
            }
            HeadWeights::DistilClassifier { pre_classifier, classifier } => {
                (Activation::Relu, pre_classifier, classifier, ["pre_classifier", "classifier"])
            }
        };
        let n_out = out.weight.dims2()?.0;
        let p = |name: &str, part: &str, t: &Tensor| Param::from_tensor(&ctx, format!("{name}.{part}"), t);
        let head = Head {
            activation,
            dense_w: p(names[0], "weight", &dense.weight)?,
            dense_b: p(names[0], "bias", &dense.bias)?,
            out_w: p(names[1], "weight", &out.weight)?,
            out_b: p(names[1], "bias", &out.bias)?,
            n_out,
        };
        let config_hidden = config.hidden_size;
        let train = TrainOps::new(&ctx);
        let head_step = train.adamw.new_step(&ctx, &head_opt);
        let layer_step = train.adamw.new_step(&ctx, &layer_opt);
        let mut optimiser = Vec::new();
        for p in [&head.dense_w, &head.dense_b, &head.out_w, &head.out_b] {
            optimiser.extend(train.adamw.prepare(&ctx, &head_step, &p.value, &p.grad, &p.m, &p.v)?);
        }
        for l in &layers {
            for p in l.params() {
                optimiser.extend(train.adamw.prepare(&ctx, &layer_step, &p.value, &p.grad, &p.m, &p.v)?);
            }
        }
        Ok(GpuTrainer {
            ops: Ops::new(&ctx),
            train,
            config,
            first_layer,
            layers,
            head,
            head_opt: (head_opt, head_step),
            layer_opt: (layer_opt, layer_step),
            optimiser,
            steps: 0,
            max_pass_bytes: ctx.max_binding_bytes(),
            identity: {
                let h = config_hidden;
                let mut eye = vec![0f32; h * h];
                for i in 0..h {
                    eye[i * h + i] = 1.0;
                }
                ctx.upload_f32("identity", &eye, &[h, h])?
            },
            ctx,
        })
    }

    /// The adapter the trainer runs on.
    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    /// Outputs per input of the head (1 for multiple choice, the labels otherwise).
    pub fn outputs(&self) -> usize {
        self.head.n_out
    }

    fn params(&self) -> impl Iterator<Item = &Param> {
        [&self.head.dense_w, &self.head.dense_b, &self.head.out_w, &self.head.out_b]
            .into_iter()
            .chain(self.layers.iter().flat_map(|l| l.params()))
    }

    /// Records the forward pass of the trained layers and the head over `inputs` (each
    /// the states of one input after the frozen layers, `len x hidden`), padded to the
    /// longest.
    fn forward(&self, inputs: &[&[f16]]) -> Result<Forward> {
        let ctx = &self.ctx;
        let h = self.config.hidden_size;
        let batch = inputs.len();
        if batch == 0 {
            return Err(Error::invalid("gpu train: an empty micro-batch"));
        }
        if let Some(i) = inputs.iter().position(|s| s.is_empty() || s.len() % h != 0) {
            return Err(Error::invalid(format!(
                "gpu train: input {i} holds {} values, not a whole number (> 0) of {h}-wide states",
                inputs[i].len()
            )));
        }
        let seq_len = inputs.iter().map(|s| s.len() / h).max().unwrap_or(0);
        let tokens = batch * seq_len;
        let mut x = vec![0f32; tokens * h];
        let mut mask = vec![0f32; tokens];
        for (b, states) in inputs.iter().enumerate() {
            for (dst, src) in x[b * seq_len * h..].iter_mut().zip(states.iter()) {
                *dst = src.to_f32();
            }
            mask[b * seq_len..b * seq_len + states.len() / h].fill(1.0);
        }
        let input = ctx.upload_f32("train input", &x, &[tokens, h])?;
        let mask = ctx.upload_f32("train mask", &mask, &[batch, seq_len])?;
        let eps = self.config.layer_norm_eps as f32;
        let inter = self.config.intermediate_size;
        let mut dispatches = Vec::new();
        let mut saved: Vec<Saved> = Vec::new();
        for (l, layer) in self.layers.iter().enumerate() {
            let x_in = saved.last().map(|s| &s.out).unwrap_or(&input);
            let last = l + 1 == self.layers.len();
            let rows = if last { batch } else { tokens };
            let s = Saved {
                qkv: ctx.zeros_f32("qkv", &[tokens, 3 * h])?,
                ctx: ctx.zeros_f32("ctx", &[tokens, h])?,
                x_first: if last { Some(ctx.zeros_f32("x first", &[batch, h])?) } else { None },
                attn: ctx.zeros_f32("attn", &[rows, h])?,
                y: ctx.zeros_f32("y", &[rows, h])?,
                pre: ctx.zeros_f32("pre", &[rows, inter])?,
                act: ctx.zeros_f32("act", &[rows, inter])?,
                ffn: ctx.zeros_f32("ffn", &[rows, h])?,
                out: ctx.zeros_f32("out", &[rows, h])?,
            };
            let ops = &self.ops;
            let mm = |x: &GpuTensor, w: &Param, b: &Param, y: &GpuTensor| {
                ops.matmul.prepare(ctx, x, &w.value, &b.value, Activation::None, y)
            };
            dispatches.extend(mm(x_in, &layer.qkv_w, &layer.qkv_b, &s.qkv)?);
            dispatches.extend(ops.attention.prepare(ctx, &s.qkv, &mask, self.config.num_heads, &s.ctx)?);
            dispatches.extend(ops.matmul.prepare_product(
                ctx,
                self.rows_of(&s.ctx, last, seq_len, batch)?,
                Mat::of(&layer.out_w.value)?,
                Addend::Row(&layer.out_b.value),
                Activation::None,
                false,
                Mat::of(&s.attn)?,
            )?);
            if let Some(x_first) = &s.x_first {
                dispatches.extend(self.copy_rows(Mat::every_nth_row(x_in, seq_len, batch)?, Mat::of(x_first)?)?);
            }
            dispatches.extend(ops.layer_norm.prepare(
                ctx,
                &s.attn,
                Some(s.x_first.as_ref().unwrap_or(x_in)),
                &layer.norm1_g.value,
                &layer.norm1_b.value,
                eps,
                &s.y,
            )?);
            dispatches.extend(mm(&s.y, &layer.in_w, &layer.in_b, &s.pre)?);
            dispatches.extend(self.train.activation.prepare_forward(ctx, &s.pre, Activation::Gelu, &s.act)?);
            dispatches.extend(mm(&s.act, &layer.ffn_w, &layer.ffn_b, &s.ffn)?);
            dispatches.extend(ops.layer_norm.prepare(
                ctx,
                &s.ffn,
                Some(&s.y),
                &layer.norm2_g.value,
                &layer.norm2_b.value,
                eps,
                &s.out,
            )?);
            saved.push(s);
        }
        // The last layer's output: one row per sequence.
        let last = &saved.last().expect("at least one trained layer").out;
        let head = &self.head;
        let pooled = ctx.zeros_f32("pooled", &[batch, h])?;
        let logits = ctx.zeros_f32("logits", &[batch, head.n_out])?;
        dispatches.extend(self.ops.matmul.prepare_product(
            ctx,
            Mat::of(last)?,
            Mat::of(&head.dense_w.value)?,
            Addend::Row(&head.dense_b.value),
            head.activation,
            false,
            Mat::of(&pooled)?,
        )?);
        dispatches.extend(self.ops.matmul.prepare(
            ctx,
            &pooled,
            &head.out_w.value,
            &head.out_b.value,
            Activation::None,
            &logits,
        )?);
        Ok(Forward { batch, seq_len, mask, input, saved, pooled, logits, dispatches })
    }

    /// All rows of `t`, or (the last layer) the first token's of each sequence.
    fn rows_of<'a>(&self, t: &'a GpuTensor, first_only: bool, seq_len: usize, batch: usize) -> Result<Mat<'a>> {
        if first_only {
            Mat::every_nth_row(t, seq_len, batch)
        } else {
            Mat::of(t)
        }
    }

    /// `y = x` for views of the same shape (`hidden` columns), a product with the identity:
    /// exact, since every other term is a zero.
    fn copy_rows(&self, x: Mat, y: Mat) -> Result<Vec<Dispatch>> {
        let identity = Mat::of(&self.identity)?;
        self.ops.matmul.prepare_product(&self.ctx, x, identity, Addend::None, Activation::None, false, y)
    }

    /// Passes larger than the adapter allows run in parts of at most `bytes` per activation
    /// tensor (tests use a small value to exercise the split).
    pub fn set_max_pass_bytes(&mut self, bytes: u64) {
        self.max_pass_bytes = bytes.min(self.ctx.max_binding_bytes());
    }

    /// Consecutive parts of `items` (each item: its inputs' states) such that one part's
    /// widest activation tensor (`inputs x longest x max(3 hidden, intermediate)`) fits
    /// `max_pass_bytes` and its tokens the grid: item ranges. An item too large alone is a
    /// part of its own (its upload then says what does not fit).
    fn parts(&self, items: &[&[&[f16]]]) -> Vec<std::ops::Range<usize>> {
        let h = self.config.hidden_size;
        let widest = (3 * h).max(self.config.intermediate_size) as u64 * 4;
        // Attention runs one workgroup per token along one grid dimension.
        let max_tokens = self.ctx.limits.max_compute_workgroups_per_dimension as u64;
        let mut parts = Vec::new();
        let (mut start, mut inputs, mut longest) = (0, 0u64, 0u64);
        for (i, item) in items.iter().enumerate() {
            let len = item.iter().map(|s| s.len() / h).max().unwrap_or(0) as u64;
            let (n, l) = (inputs + item.len() as u64, longest.max(len));
            if i > start && (n * l * widest > self.max_pass_bytes || n * l > max_tokens) {
                parts.push(start..i);
                (start, inputs, longest) = (i, item.len() as u64, len);
            } else {
                (inputs, longest) = (n, l);
            }
        }
        if start < items.len() {
            parts.push(start..items.len());
        }
        parts
    }

    /// The head's outputs for `inputs` (no gradient): `[inputs][outputs]`.
    pub async fn logits(&self, inputs: &[&[f16]]) -> Result<Vec<Vec<f32>>> {
        let items: Vec<&[&[f16]]> = inputs.chunks(1).collect();
        let mut out = Vec::with_capacity(inputs.len());
        for part in self.parts(&items) {
            let f = self.forward(&inputs[part])?;
            self.submit(&f.dispatches, &[]);
            let values = self.ctx.read_f32(&f.logits).await?;
            out.extend(values.chunks(self.head.n_out).map(|r| r.to_vec()));
        }
        Ok(out)
    }

    /// One micro-batch: forward, loss and backward over `inputs`, whose examples are
    /// `examples` in order, each (inputs, gold, weight): a multiple-choice example's gold is
    /// the index of the right one among its inputs, a classification example has one input
    /// and its gold is a label index; the weight multiplies its loss (its class's weight, or
    /// 1). The gradients of the mean weighted loss over `step_examples` examples (the whole
    /// optimiser step's) are added to those summed so far. Returns each example's weighted
    /// loss (not scaled). A micro-batch too large for the adapter's
    /// bindings runs in parts (the summed gradients are the same).
    pub async fn accumulate(
        &self,
        inputs: &[&[f16]],
        examples: &[(usize, usize, f32)],
        step_examples: usize,
    ) -> Result<Vec<f32>> {
        let n_out = self.head.n_out;
        let total: usize = examples.iter().map(|e| e.0).sum();
        if total != inputs.len() {
            return Err(Error::invalid(format!("gpu train: examples have {total} inputs, {} given", inputs.len())));
        }
        if n_out > 1 && examples.iter().any(|e| e.0 != 1) {
            return Err(Error::invalid("gpu train: a classification example has exactly one input"));
        }
        let mut items: Vec<&[&[f16]]> = Vec::with_capacity(examples.len());
        let mut at = 0;
        for &(count, _, _) in examples {
            items.push(&inputs[at..at + count]);
            at += count;
        }
        let mut losses = Vec::with_capacity(examples.len());
        for part in self.parts(&items) {
            let first = items[..part.start].iter().map(|i| i.len()).sum::<usize>();
            let count = items[part.clone()].iter().map(|i| i.len()).sum::<usize>();
            let part_inputs = &inputs[first..first + count];
            losses.extend(self.accumulate_part(part_inputs, &examples[part], step_examples).await?);
        }
        Ok(losses)
    }

    async fn accumulate_part(
        &self,
        inputs: &[&[f16]],
        examples: &[(usize, usize, f32)],
        step_examples: usize,
    ) -> Result<Vec<f32>> {
        let n_out = self.head.n_out;
        let segments: Vec<(usize, usize, f32)> =
            examples.iter().map(|&(count, gold, w)| (count * n_out, gold, w)).collect();
        let segments = CrossEntropy::weighted_segments(&segments)?;
        let mut f = self.forward(inputs)?;
        let ctx = &self.ctx;
        let mut d = std::mem::take(&mut f.dispatches);
        let loss = ctx.zeros_f32("loss", &[examples.len()])?;
        let dlogits = ctx.zeros_f32("dlogits", &[f.batch, n_out])?;
        let segments = ctx.upload_u32("segments", &segments, &[segments.len()])?;
        let scale = 1.0 / step_examples.max(1) as f32;
        d.extend(self.train.cross_entropy.prepare(ctx, &f.logits, &segments, scale, &loss, &dlogits)?);
        self.backward(&f, &dlogits, &mut d)?;
        self.submit(&d, &[]);
        ctx.read_f32(&loss).await
    }

    /// Records the backward pass from the logits' gradient down to the first trained layer.
    fn backward(&self, f: &Forward, dlogits: &GpuTensor, d: &mut Vec<Dispatch>) -> Result<()> {
        let (ctx, mm, t) = (&self.ctx, &self.ops.matmul, &self.train);
        let h = self.config.hidden_size;
        let inter = self.config.intermediate_size;
        let (batch, seq_len) = (f.batch, f.seq_len);
        let tokens = batch * seq_len;
        let head = &self.head;
        // dW += dY^T . X and db += column sums of dY.
        let weight_grads =
            |d: &mut Vec<Dispatch>, dy: Mat, x: Mat, w: &Param, b: &Param, dy_t: &GpuTensor| -> Result<()> {
                d.extend(mm.prepare_product(
                    ctx,
                    dy.t(),
                    x.t(),
                    Addend::None,
                    Activation::None,
                    true,
                    Mat::of(&w.grad)?,
                )?);
                d.extend(t.column_sum.prepare(ctx, dy_t, true, &b.grad)?);
                Ok(())
            };

        // dx = dy · Wᵀ (+ a residual's gradient): the gradient that flows to a linear layer's input.
        let input_grads = |d: &mut Vec<Dispatch>, dy: Mat, w: &Param, residual: Addend, dx: Mat| -> Result<()> {
            d.extend(mm.prepare_product(ctx, dy, Mat::of(&w.value)?.t(), residual, Activation::None, false, dx)?);
            Ok(())
        };

        // The head: out(act(dense(first tokens))), on the last layer's one row per sequence.
        let last = &f.saved.last().expect("a trained layer").out;
        weight_grads(d, Mat::of(dlogits)?, Mat::of(&f.pooled)?, &head.out_w, &head.out_b, dlogits)?;
        let dpooled = ctx.zeros_f32("dpooled", &[batch, h])?;
        input_grads(d, Mat::of(dlogits)?, &head.out_w, Addend::None, Mat::of(&dpooled)?)?;
        let dpre = ctx.zeros_f32("dpooled pre", &[batch, h])?;
        d.extend(t.activation.prepare(ctx, head.activation, &f.pooled, &dpooled, &dpre)?);
        weight_grads(d, Mat::of(&dpre)?, Mat::of(last)?, &head.dense_w, &head.dense_b, &dpre)?;
        let dlast = ctx.zeros_f32("dout", &[batch, h])?;
        input_grads(d, Mat::of(&dpre)?, &head.dense_w, Addend::None, Mat::of(&dlast)?)?;

        // The layers, top down; the last has one row per sequence from its attention output on.
        let eps = self.config.layer_norm_eps as f32;
        let heads = self.config.num_heads;
        let stats = ctx.zeros_f32("attention stats", &[AttentionBackward::stats_len(tokens, heads)])?;
        let dqkv = ctx.zeros_f32("dqkv", &[tokens, 3 * h])?;
        let mut dout = dlast;
        for (i, (layer, s)) in self.layers.iter().zip(&f.saved).enumerate().rev() {
            let last = i + 1 == self.layers.len();
            let rows = if last { batch } else { tokens };
            let x_in = if i == 0 { &f.input } else { &f.saved[i - 1].out };
            let ds2 = ctx.zeros_f32("ds2", &[rows, h])?;
            let scratch = ctx.zeros_f32("norm scratch", &[rows, h])?;
            let dact = ctx.zeros_f32("dact", &[rows, inter])?;
            let dpre_ffn = ctx.zeros_f32("dpre", &[rows, inter])?;
            let dy = ctx.zeros_f32("dy", &[rows, h])?;
            let ds1 = ctx.zeros_f32("ds1", &[rows, h])?;
            // Zero at the rows the last layer does not compute.
            let dctx = ctx.zeros_f32("dctx", &[tokens, h])?;
            // The gradients of a post-norm `LayerNorm(x + residual)` with its (gamma, beta).
            let norm_grads = |x: &GpuTensor,
                              residual: &GpuTensor,
                              (gamma, beta): (&Param, &Param),
                              dy: &GpuTensor,
                              dx: &GpuTensor| {
                let grads = LayerNormGrads {
                    x,
                    residual: Some(residual),
                    gamma: &gamma.value,
                    eps,
                    dy,
                    dx,
                    scratch: &scratch,
                    dgamma: &gamma.grad,
                    dbeta: &beta.grad,
                };
                t.layer_norm.prepare(ctx, &grads)
            };
            d.extend(norm_grads(&s.ffn, &s.y, (&layer.norm2_g, &layer.norm2_b), &dout, &ds2)?);
            weight_grads(d, Mat::of(&ds2)?, Mat::of(&s.act)?, &layer.ffn_w, &layer.ffn_b, &ds2)?;
            input_grads(d, Mat::of(&ds2)?, &layer.ffn_w, Addend::None, Mat::of(&dact)?)?;
            d.extend(t.activation.prepare(ctx, Activation::Gelu, &s.pre, &dact, &dpre_ffn)?);
            weight_grads(d, Mat::of(&dpre_ffn)?, Mat::of(&s.y)?, &layer.in_w, &layer.in_b, &dpre_ffn)?;
            // y feeds the feed-forward block and its residual.
            input_grads(d, Mat::of(&dpre_ffn)?, &layer.in_w, Addend::Matrix(&ds2), Mat::of(&dy)?)?;
            let residual = s.x_first.as_ref().unwrap_or(x_in);
            d.extend(norm_grads(&s.attn, residual, (&layer.norm1_g, &layer.norm1_b), &dy, &ds1)?);
            let ctx_rows = self.rows_of(&s.ctx, last, seq_len, batch)?;
            weight_grads(d, Mat::of(&ds1)?, ctx_rows, &layer.out_w, &layer.out_b, &ds1)?;
            input_grads(d, Mat::of(&ds1)?, &layer.out_w, Addend::None, self.rows_of(&dctx, last, seq_len, batch)?)?;
            d.extend(t.attention.prepare(ctx, &s.qkv, &f.mask, heads, &dctx, &stats, &dqkv)?);
            weight_grads(d, Mat::of(&dqkv)?, Mat::of(x_in)?, &layer.qkv_w, &layer.qkv_b, &dqkv)?;
            if i > 0 {
                // The layer's input feeds attention and the residual (at every row, or the
                // first tokens' in the last layer); it is the output of the layer below,
                // whose backward pass comes next.
                let residual = if last {
                    let full = ctx.zeros_f32("ds1 rows", &[tokens, h])?;
                    d.extend(self.copy_rows(Mat::of(&ds1)?, Mat::every_nth_row(&full, seq_len, batch)?)?);
                    full
                } else {
                    ds1
                };
                let dx = ctx.zeros_f32("dx", &[tokens, h])?;
                input_grads(d, Mat::of(&dqkv)?, &layer.qkv_w, Addend::Matrix(&residual), Mat::of(&dx)?)?;
                dout = dx;
            }
        }
        Ok(())
    }

    /// One AdamW step over every trained tensor with the summed gradients, at these
    /// learning rates; then the gradients are cleared for the next step.
    pub fn step(&mut self, head_lr: f64, layer_lr: f64) {
        self.steps += 1;
        let adamw = &self.train.adamw;
        adamw.set_step(&self.ctx, &self.head_opt.1, &AdamWConfig { lr: head_lr, ..self.head_opt.0 }, self.steps);
        adamw.set_step(&self.ctx, &self.layer_opt.1, &AdamWConfig { lr: layer_lr, ..self.layer_opt.0 }, self.steps);
        let grads: Vec<&wgpu::Buffer> = self.params().map(|p| &p.grad.buffer).collect();
        self.submit(&self.optimiser, &grads);
    }

    /// Records `dispatches` into one command encoder, clears `clear` after them, submits.
    fn submit(&self, dispatches: &[Dispatch], clear: &[&wgpu::Buffer]) {
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        record(&mut encoder, dispatches);
        for b in clear {
            encoder.clear_buffer(b, 0, None);
        }
        self.ctx.queue.submit([encoder.finish()]);
    }

    /// Keeps a copy of every trained tensor on the device (the best epoch's weights).
    pub fn keep_best(&self) {
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        for p in self.params() {
            encoder.copy_buffer_to_buffer(&p.value.buffer, 0, &p.best.buffer, 0, p.bytes());
        }
        self.ctx.queue.submit([encoder.finish()]);
    }

    /// Back to the weights [`Self::keep_best`] kept last.
    pub fn restore_best(&self) {
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        for p in self.params() {
            encoder.copy_buffer_to_buffer(&p.best.buffer, 0, &p.value.buffer, 0, p.bytes());
        }
        self.ctx.queue.submit([encoder.finish()]);
    }

    /// The summed gradients, by the checkpoint-style names of `model.weights` (query, key
    /// and value apart): `layer{i}.query.weight`, ..., `pooler.weight`, `classifier.bias`.
    pub async fn gradients(&self) -> Result<Vec<(String, Vec<f32>)>> {
        let mut out = Vec::new();
        for p in self.params() {
            let g = self.ctx.read_f32(&p.grad).await?;
            out.extend(split_qkv(&p.name, g, self.config.hidden_size));
        }
        Ok(out)
    }

    /// `model` with the trained tensors in place of its top layers and head (`model` is
    /// the one the trainer was built from).
    pub async fn to_model(&self, model: &LoadedModel) -> Result<LoadedModel> {
        let mut values = std::collections::HashMap::new();
        for p in self.params() {
            let v = self.ctx.read_f32(&p.value).await?;
            for (name, v) in split_qkv(&p.name, v, self.config.hidden_size) {
                values.insert(name, v);
            }
        }
        let mut take = |name: String, like: &Tensor| -> Result<Tensor> {
            let v = values.remove(&name).ok_or_else(|| Error::model(format!("gpu train: no tensor {name}")))?;
            Ok(Tensor::from_vec(v, like.dims(), &Device::Cpu)?)
        };
        let mut m = model.clone();
        let dense =
            |take: &mut dyn FnMut(String, &Tensor) -> Result<Tensor>, name: String, d: &Dense| -> Result<Dense> {
                Ok(Dense {
                    weight: take(format!("{name}.weight"), &d.weight)?,
                    bias: take(format!("{name}.bias"), &d.bias)?,
                })
            };
        let norm = |take: &mut dyn FnMut(String, &Tensor) -> Result<Tensor>, name: String, n: &Norm| -> Result<Norm> {
            Ok(Norm {
                weight: take(format!("{name}.weight"), &n.weight)?,
                bias: take(format!("{name}.bias"), &n.bias)?,
            })
        };
        for (i, l) in m.weights.layers.iter_mut().enumerate().skip(self.first_layer) {
            let n = |part: &str| format!("layer{i}.{part}");
            l.query = dense(&mut take, n("query"), &l.query)?;
            l.key = dense(&mut take, n("key"), &l.key)?;
            l.value = dense(&mut take, n("value"), &l.value)?;
            l.attn_out = dense(&mut take, n("attn_out"), &l.attn_out)?;
            l.attn_norm = norm(&mut take, n("attn_norm"), &l.attn_norm)?;
            l.ffn_in = dense(&mut take, n("ffn_in"), &l.ffn_in)?;
            l.ffn_out = dense(&mut take, n("ffn_out"), &l.ffn_out)?;
            l.ffn_norm = norm(&mut take, n("ffn_norm"), &l.ffn_norm)?;
        }
        match m.head.as_mut().ok_or_else(|| Error::invalid("no head"))? {
            HeadWeights::PooledLinear { classifier } => {
                let pooler = m.weights.pooler.as_mut().ok_or_else(|| Error::model("no pooler"))?;
                *pooler = dense(&mut take, "pooler".into(), pooler)?;
                *classifier = dense(&mut take, "classifier".into(), classifier)?;
            }
            HeadWeights::RobertaClassifier { dense: d, out_proj } => {
                *d = dense(&mut take, "classifier.dense".into(), d)?;
                *out_proj = dense(&mut take, "classifier.out_proj".into(), out_proj)?;
            }
            HeadWeights::DistilClassifier { pre_classifier, classifier } => {
                *pre_classifier = dense(&mut take, "pre_classifier".into(), pre_classifier)?;
                *classifier = dense(&mut take, "classifier".into(), classifier)?;
            }
        }
        Ok(m)
    }
}

/// A stacked `layer{i}.qkv.*` tensor as its query, key and value parts; others as they are.
fn split_qkv(name: &str, values: Vec<f32>, hidden: usize) -> Vec<(String, Vec<f32>)> {
    match name.strip_suffix(".qkv.weight").or_else(|| name.strip_suffix(".qkv.bias")) {
        Some(layer) => {
            let part = if name.ends_with("weight") { "weight" } else { "bias" };
            let third = values.len() / 3;
            debug_assert_eq!(third % hidden, 0);
            ["query", "key", "value"]
                .iter()
                .zip(values.chunks(third))
                .map(|(which, v)| (format!("{layer}.{which}.{part}"), v.to_vec()))
                .collect()
        }
        None => vec![(name.to_string(), values)],
    }
}
