//! [`GpuTrainer`]: the top N encoder layers and the head on the GPU, or the whole encoder
//! with its embeddings, with the forward pass, the backward pass and AdamW as WGSL kernels
//! (`crate::gpu::ops::TrainOps`); the same arithmetic as the CPU engine's candle autograd
//! with `Freeze::TopLayers(n)` or `Freeze::All`.
//!
//! With top layers, the lower layers are frozen and their outputs computed once (the states
//! the frozen pass caches: real tokens only, f16), and a micro-batch uploads those states.
//! With every layer, a micro-batch uploads its token ids, and the pass starts with the
//! embedding gather and its layer norm; backward ends with the embedding tables' gradients
//! (one thread per (id, column) over the tokens that carry the id: WGSL has no float
//! atomics). Either way one submission
//! runs the top layers forward (keeping what backward needs; the last layer computes the
//! first tokens only after its attention, as the CPU engine does), the head, the loss, the
//! backward pass of the head and of every trained layer, and adds the gradients to the
//! ones already summed for the step; only the per-example losses are read back. An
//! optimiser step is one more submission: AdamW on every tensor, then the gradients are
//! cleared. No weight or activation leaves the device between layers or steps. A step's
//! dropout (`finetune`, `--dropout`) drops at the CPU engine's sites with its masks: the
//! kernels draw them from the same hash (`gpu::ops::dropout_hash`), given each input's
//! index in the training set.
//! Everything here is async and never blocks (read-backs are awaited), so it runs in the
//! browser on WebGPU as natively on Vulkan, Metal or DX12.

use half::f16;

use crate::error::{Error, Result};
use crate::gpu::context::row_chunks;
use crate::gpu::context::{GpuContext, GpuTensor};
use crate::gpu::ops::{
    record, Activation, AdamWConfig, AdamWStep, Addend, AttentionBackward, AttentionDropout, CrossEntropy, Dispatch,
    LayerNormGrads, MaskDraw, Mat, Ops, TokensById, TrainOps,
};
use crate::model::config::{Activation as ModelActivation, Arch, EncoderConfig, HeadPooling};
use crate::model::load::{Dense, HeadWeights, LoadedModel, Norm};
use crate::model::tokenize::Encoded;
use crate::model::TokenBatch;
use crate::train::dropout::{Dropout, Site, StepMasks};
use candle_core::{Device, Tensor};

/// Whether the GPU trainer's kernels run `config`'s layers: BERT, RoBERTa and DistilBERT
/// (post-norm layers, plain attention). DeBERTa-v2's relative attention and ModernBERT's
/// rotary, windowed, pre-norm layers have no backward kernels here: refused with a
/// sentence, and they train on the CPU trainer. Its last layer computes the first token
/// only (all a first-token head reads): a mean-pooled head trains on the CPU too.
pub fn supports(config: &EncoderConfig) -> Result<()> {
    match config.arch {
        Arch::DebertaV2 | Arch::ModernBert => Err(unsupported(config)),
        _ if config.head_pooling == HeadPooling::Mean => Err(Error::invalid(MEAN_POOLED_HEAD)),
        _ => Ok(()),
    }
}

/// Why a mean-pooled head does not train on the GPU.
pub const MEAN_POOLED_HEAD: &str = "the GPU trainer's last layer computes the first token only: a head on the mean \
     of the tokens (--head-pooling mean, the score task's default) trains on the CPU; --head-pooling cls trains \
     on the GPU";

fn unsupported(config: &EncoderConfig) -> Error {
    Error::invalid(format!(
        "the GPU trainer runs BERT, RoBERTa and DistilBERT layers only: a {} model trains on the CPU \
         (--backend cpu; the page trains it on the CPU as well)",
        config.arch.name()
    ))
}

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

    /// A tensor that only feeds the trained ones (embeddings under `top:N` of every
    /// layer): no gradient, moments or copy (one-value placeholders).
    fn constant(ctx: &GpuContext, name: String, data: &[f32], shape: &[usize]) -> Result<Self> {
        Ok(Param {
            value: ctx.upload_f32(&name, data, shape)?,
            grad: ctx.zeros_f32(&name, &[1])?,
            m: ctx.zeros_f32(&name, &[1])?,
            v: ctx.zeros_f32(&name, &[1])?,
            best: ctx.zeros_f32(&name, &[1])?,
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

/// An embedding table as row blocks, each small enough for one storage binding (a large
/// vocabulary's table is larger than one), each block a [`Param`] of its own.
struct Table {
    /// (first row, block)
    blocks: Vec<(usize, Param)>,
}

impl Table {
    fn new(ctx: &GpuContext, name: &str, t: &Tensor, trained: bool) -> Result<Self> {
        let (rows, cols) = t.dims2()?;
        let data = host(t)?;
        let mut blocks = Vec::new();
        for r in row_chunks(rows, cols * 4, ctx.max_binding_bytes())? {
            let block = &data[r.start * cols..r.end * cols];
            let (name, shape) = (name.to_string(), [r.len(), cols]);
            let p = if trained {
                Param::new(ctx, name, block, &shape)?
            } else {
                Param::constant(ctx, name, block, &shape)?
            };
            blocks.push((r.start, p));
        }
        Ok(Table { blocks })
    }

    fn values(&self) -> Vec<(usize, &GpuTensor)> {
        self.blocks.iter().map(|(start, p)| (*start, &p.value)).collect()
    }

    fn grads(&self) -> Vec<(usize, &GpuTensor)> {
        self.blocks.iter().map(|(start, p)| (*start, &p.grad)).collect()
    }
}

/// The embeddings, on the device when every layer is on it (the pass starts from tokens).
struct Embeddings {
    word: Table,
    position: Table,
    /// None for DistilBERT, which has no token types.
    token_type: Option<Table>,
    norm_g: Param,
    norm_b: Param,
    /// Whether they train (`Freeze::All`), or only feed the trained layers.
    trained: bool,
}

impl Embeddings {
    fn params(&self) -> impl Iterator<Item = &Param> {
        let tables = [Some(&self.word), Some(&self.position), self.token_type.as_ref()];
        tables.into_iter().flatten().flat_map(|t| t.blocks.iter().map(|(_, p)| p)).chain([&self.norm_g, &self.norm_b])
    }
}

/// What a micro-batch's loss compares the head's outputs with.
#[derive(Debug, Clone, Copy)]
pub enum Targets<'a> {
    /// Cross-entropy: each example as (inputs, gold, weight) ([`GpuTrainer::accumulate`]).
    Classes(&'a [(usize, usize, f32)]),
    /// The score task's masked squared error: each example (one input) as (weight,
    /// standardised target) per output (`train::scores::weights_and_targets`).
    Scores(&'a [(Vec<f32>, Vec<f32>)]),
}

impl<'a> Targets<'a> {
    /// Each example's number of inputs.
    fn input_counts(&self) -> Vec<usize> {
        match self {
            Targets::Classes(examples) => examples.iter().map(|e| e.0).collect(),
            Targets::Scores(examples) => vec![1; examples.len()],
        }
    }

    /// The examples `range` of these.
    fn part(&self, range: std::ops::Range<usize>) -> Targets<'a> {
        match self {
            Targets::Classes(examples) => Targets::Classes(&examples[range]),
            Targets::Scores(examples) => Targets::Scores(&examples[range]),
        }
    }
}

/// One input of a micro-batch, as the trainer starts from it.
#[derive(Debug, Clone, Copy)]
pub enum TrainInput<'a> {
    /// The frozen lower layers' states of its real tokens (`len x hidden`), for a trainer
    /// of the top layers.
    States(&'a [f16]),
    /// Its tokens, for a trainer of every layer.
    Tokens(&'a Encoded),
}

impl TrainInput<'_> {
    /// Its tokens (`hidden`: the states' width).
    fn len(&self, hidden: usize) -> usize {
        match self {
            TrainInput::States(s) => s.len() / hidden.max(1),
            TrainInput::Tokens(e) => e.len(),
        }
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

/// The gradient buffers of one layer's backward pass (`rows`: all tokens, or the last
/// layer's one per sequence), reused by every layer of that shape.
struct Scratch {
    ds2: GpuTensor,
    /// `dy * xhat` between a layer norm's backward kernels.
    norm: GpuTensor,
    dact: GpuTensor,
    dpre: GpuTensor,
    dy: GpuTensor,
    ds1: GpuTensor,
    /// Always all tokens.
    dctx: GpuTensor,
    /// With hidden dropout: a block output's gradient times its mask (`ds2`'s, then `ds1`'s).
    kept: Option<GpuTensor>,
}

impl Scratch {
    fn new(ctx: &GpuContext, rows: usize, tokens: usize, hidden: usize, inter: usize, dropout: bool) -> Result<Self> {
        Ok(Scratch {
            kept: if dropout { Some(ctx.zeros_f32("kept gradient", &[rows, hidden])?) } else { None },
            ds2: ctx.zeros_f32("ds2", &[rows, hidden])?,
            norm: ctx.zeros_f32("norm scratch", &[rows, hidden])?,
            dact: ctx.zeros_f32("dact", &[rows, inter])?,
            dpre: ctx.zeros_f32("dpre", &[rows, inter])?,
            dy: ctx.zeros_f32("dy", &[rows, hidden])?,
            ds1: ctx.zeros_f32("ds1", &[rows, hidden])?,
            dctx: ctx.zeros_f32("dctx", &[tokens, hidden])?,
        })
    }
}

/// A recorded forward pass over one micro-batch.
struct Forward {
    batch: usize,
    seq_len: usize,
    mask: GpuTensor,
    /// From tokens: the batch and the embedding sum before its layer norm.
    tokens: Option<(TokenBatch, GpuTensor)>,
    /// The first trained layer's input (after the embeddings' dropout).
    input: GpuTensor,
    saved: Vec<Saved>,
    pooled: GpuTensor,
    /// The classifier's input after its dropout (with hidden dropout).
    pooled_kept: Option<GpuTensor>,
    logits: GpuTensor,
    /// A training pass's dropout, for its backward pass.
    dropout: Option<PassDropout>,
    dispatches: Vec<Dispatch>,
}

/// Dropout in a training micro-batch: the optimiser step's masks, and each input's index
/// among the training set's inputs (the masks' input coordinate, as the CPU trainer keys
/// them), in the order of the micro-batch's inputs.
#[derive(Debug, Clone, Copy)]
pub struct Dropping<'a> {
    pub step: StepMasks,
    pub inputs: &'a [usize],
}

/// A hidden state's dropout site in a pass: the site, the encoder layer (0 for the
/// embeddings and the classifier), and the rows a sequence has in the tensor (its padded
/// tokens, or 1 where the tensor holds first tokens only).
#[derive(Debug, Clone, Copy)]
struct DropAt {
    site: Site,
    layer: usize,
    rows_per_input: usize,
}

/// A pass's dropout on the device: the step's masks and the inputs' indices (u32).
struct PassDropout {
    step: StepMasks,
    inputs: GpuTensor,
}

impl PassDropout {
    /// The masks at `site` of encoder layer `layer`, `None` where nothing drops there.
    fn draw(&self, site: Site, layer: usize) -> Option<MaskDraw> {
        self.step.draw(site, layer)
    }

    /// The attention probabilities' dropout of encoder layer `layer`.
    fn attention(&self, layer: usize) -> Option<AttentionDropout<'_>> {
        let draw = self.draw(Site::AttentionProbs, layer)?;
        Some(AttentionDropout { draw, inputs: &self.inputs, positions: self.step.positions })
    }
}

/// Where a micro-batch's pass starts: the first trained layer's input, the mask (1 per real
/// token) and the padded length, and from tokens the batch and the embedding sum.
struct Start {
    input: GpuTensor,
    mask: Vec<f32>,
    seq_len: usize,
    tokens: Option<(TokenBatch, GpuTensor)>,
}

/// What a GPU training run holds on the device, shown before it starts. WebGPU does not
/// tell how much memory an adapter has: the figure is what a user compares with their card,
/// and an adapter that cannot allocate it refuses with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct GpuMemory {
    /// Bytes of the trained tensors with their gradients, AdamW's two moments and the best
    /// epoch's copy (and of the embeddings that only feed the trained layers).
    pub parameters: u64,
    /// Bytes of the activations of the largest micro-batch, forward and backward.
    pub activations: u64,
    /// That micro-batch: its inputs, and the tokens of the longest.
    pub inputs: usize,
    pub longest: usize,
}

impl GpuMemory {
    /// The figure for `config` with a head of `n_out` outputs, layers from `first_layer`
    /// on (with the embeddings when 0, trained with `train_embeddings`), and micro-batches
    /// of at most `inputs` inputs of at most `longest` tokens, trained with `dropout`. It
    /// counts the buffers that [`GpuTrainer`] allocates, as it allocates them.
    pub fn estimate(
        config: &EncoderConfig,
        n_out: usize,
        first_layer: usize,
        train_embeddings: bool,
        inputs: usize,
        longest: usize,
        dropout: Dropout,
    ) -> Self {
        let (h, i) = (config.hidden_size as u64, config.intermediate_size as u64);
        let layers = config.num_layers.saturating_sub(first_layer) as u64;
        let n = n_out as u64;
        // Values of a layer: QKV, output, two norms, feed-forward in and out.
        let layer = 4 * h * h + 2 * h * i + 9 * h + i;
        let head = h * h + h + n * h + n;
        let types = if config.arch == Arch::DistilBert { 0 } else { config.type_vocab_size as u64 };
        let tables = (config.vocab_size as u64 + config.max_position_embeddings as u64 + types) * h + 2 * h;
        let embeddings = match (first_layer, train_embeddings) {
            (0, true) => 5 * tables,
            (0, false) => tables,
            _ => 0,
        };
        let parameters = 4 * (5 * (layers * layer + head) + embeddings);

        let (b, t) = (inputs as u64, (inputs * longest) as u64);
        let heads = config.num_heads as u64;
        // The forward pass: the input and mask, the embedding sum and the ids, each
        // layer's kept tensors (the last one's from attention on at one row a sequence),
        // the head.
        let mut values = h * t + t;
        if first_layer == 0 {
            values += h * t + 3 * t;
        }
        let kept = |rows: u64| 4 * h * t + (4 * h + 2 * i) * rows;
        values += layers.saturating_sub(1) * kept(t) + kept(b) + h * b;
        values += h * b + n * b;
        // The loss, then backward: the head's gradients, attention's statistics and dQKV,
        // the last layer's buffers and the shared ones of the others, the two input
        // gradients, the first tokens' residual, the embeddings' id lists.
        values += 4 * b + n * b + 3 * h * b;
        values += 2 * t * heads + 3 * h * t;
        let scratch = |rows: u64| (4 * h + 2 * i) * rows + h * t;
        values += scratch(b);
        if layers > 1 || first_layer == 0 {
            values += scratch(t);
        }
        values += 3 * h * t;
        if first_layer == 0 && train_embeddings {
            values += 3 * (3 * t + 1);
        }
        if dropout.is_active() {
            // The inputs' indices.
            values += b;
        }
        if dropout.hidden > 0.0 {
            // Forward: a block's output before its dropout (all tokens, first tokens), the
            // classifier's input after it, the embeddings' output after it; backward: the
            // classifier input's and the blocks' gradients times their masks.
            values += h * t + h * b + h * b;
            if first_layer == 0 {
                values += h * t;
            }
            values += h * b + h * b;
            if layers > 1 || first_layer == 0 {
                values += h * t;
            }
        }
        GpuMemory { parameters, activations: 4 * values, inputs, longest }
    }

    /// Both, in bytes.
    pub fn total(&self) -> u64 {
        self.parameters + self.activations
    }

    /// One line: `1.6 GiB on the GPU: 1.2 GiB for the trained weights ...`.
    pub fn describe(&self) -> String {
        format!(
            "{} on the GPU: {} for the trained weights, their gradients, AdamW's moments and the best epoch's copy, \
             and {} of activations for a micro-batch of {} inputs of up to {} tokens",
            bytes_text(self.total()),
            bytes_text(self.parameters),
            bytes_text(self.activations),
            self.inputs,
            self.longest
        )
    }
}

/// Bytes in MiB, or GiB from 1 GiB on.
pub fn bytes_text(bytes: u64) -> String {
    let mib = bytes as f64 / (1u64 << 20) as f64;
    if mib >= 1024.0 {
        format!("{:.1} GiB", mib / 1024.0)
    } else {
        format!("{mib:.1} MiB")
    }
}

/// The top layers and the head of a model on the GPU, with their optimisers.
pub struct GpuTrainer {
    ctx: GpuContext,
    ops: Ops,
    train: TrainOps,
    config: EncoderConfig,
    /// Index of the first trained layer (the frozen ones below it are not on the device).
    first_layer: usize,
    /// With `first_layer == 0`.
    embeddings: Option<Embeddings>,
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
    /// (which must have one), and with `first_layer == 0` the embeddings, which train with
    /// `train_embeddings` (`--freeze all`). `head_opt` and `layer_opt`: the AdamW settings
    /// of the head and of the layers and embeddings (the learning rates are set again at
    /// every step). An adapter that cannot hold the trained tensors, their gradients and
    /// their optimiser's state is refused with the memory they need.
    pub async fn new(
        ctx: GpuContext,
        model: &LoadedModel,
        first_layer: usize,
        train_embeddings: bool,
        head_opt: AdamWConfig,
        layer_opt: AdamWConfig,
    ) -> Result<Self> {
        if train_embeddings && first_layer != 0 {
            return Err(Error::invalid("gpu train: the embeddings train only with every layer"));
        }
        // Buffers the device cannot allocate become a refusal, not a panic (natively) or
        // garbage (in the browser). The scopes' pops take effect at once; their answers
        // are awaited after the uploads.
        let out_of_memory = ctx.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let made = Self::upload(ctx.clone(), model, first_layer, train_embeddings, head_opt, layer_opt);
        let memory_error = out_of_memory.pop().await;
        let trainer = made?;
        if let Some(e) = memory_error {
            let need = trainer.parameter_bytes();
            return Err(Error::model(format!(
                "gpu train: {} could not hold the trained tensors: {} for the weights, their gradients, AdamW's \
                 two moments and the best epoch's copy ({e}); train fewer layers (top:N) or on the CPU",
                ctx.adapter.name,
                bytes_text(need)
            )));
        }
        Ok(trainer)
    }

    fn upload(
        ctx: GpuContext,
        model: &LoadedModel,
        first_layer: usize,
        train_embeddings: bool,
        head_opt: AdamWConfig,
        layer_opt: AdamWConfig,
    ) -> Result<Self> {
        let config = model.config.clone();
        supports(&config)?;
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
        let embeddings = if first_layer == 0 {
            let trained = train_embeddings;
            let norm = |part: &str, t: &Tensor| {
                let name = format!("embedding_norm.{part}");
                if trained {
                    Param::from_tensor(&ctx, name, t)
                } else {
                    Param::constant(&ctx, name, &host(t)?, t.dims())
                }
            };
            Some(Embeddings {
                word: Table::new(&ctx, "word_embeddings", &w.word_embeddings, trained)?,
                position: Table::new(
                    &ctx,
                    "position_embeddings",
                    w.position_embeddings.as_ref().ok_or_else(|| Error::model("a BERT-family model has positions"))?,
                    trained,
                )?,
                token_type: match (&w.token_type_embeddings, config.arch) {
                    (Some(t), arch) if arch != Arch::DistilBert => {
                        Some(Table::new(&ctx, "token_type_embeddings", t, trained)?)
                    }
                    _ => None,
                },
                norm_g: norm("weight", &w.embedding_norm.weight)?,
                norm_b: norm("bias", &w.embedding_norm.bias)?,
                trained,
            })
        } else {
            None
        };
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
            let attn_norm = l.attn_norm.as_ref().ok_or_else(|| Error::model("a post-norm layer has its norm"))?;
            let (norm1_g, norm1_b) = norm("attn_norm", attn_norm)?;
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
            HeadWeights::ContextPooler { .. } | HeadWeights::ModernBertHead { .. } => {
                return Err(unsupported(&config));
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
        let trained_embeddings = embeddings.as_ref().filter(|e| e.trained);
        for p in layers.iter().flat_map(|l| l.params()).chain(trained_embeddings.into_iter().flat_map(|e| e.params())) {
            optimiser.extend(train.adamw.prepare(&ctx, &layer_step, &p.value, &p.grad, &p.m, &p.v)?);
        }
        Ok(GpuTrainer {
            ops: Ops::new(&ctx),
            train,
            config,
            first_layer,
            embeddings,
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

    /// The embeddings when they train (`--freeze all`).
    fn trained_embeddings(&self) -> Option<&Embeddings> {
        self.embeddings.as_ref().filter(|e| e.trained)
    }

    /// Every trained tensor: the head's, the layers', the embeddings' when they train.
    fn params(&self) -> impl Iterator<Item = &Param> {
        let embeddings = self.trained_embeddings();
        [&self.head.dense_w, &self.head.dense_b, &self.head.out_w, &self.head.out_b]
            .into_iter()
            .chain(self.layers.iter().flat_map(|l| l.params()))
            .chain(embeddings.into_iter().flat_map(|e| e.params()))
    }

    /// Bytes of the trained tensors with their gradients, moments and best copies, and of
    /// the tensors that only feed them, as allocated ([`GpuMemory::estimate`] computes it
    /// from the configuration).
    pub fn parameter_bytes(&self) -> u64 {
        let all = self.params().map(|p| 5 * p.bytes()).sum::<u64>();
        let constants = self.embeddings.as_ref().filter(|e| !e.trained).map(|e| e.params().map(|p| p.bytes()).sum());
        all + constants.unwrap_or(0)
    }

    /// Records the forward pass of the trained layers and the head over `inputs`, padded
    /// to the longest: the states after the frozen layers, or (every layer on the device)
    /// tokens through the embeddings first; with `dropout` (a training step's), its masks
    /// at every site the CPU trainer drops at (the embeddings' output when they are on the
    /// device, each layer's attention probabilities, attention output and feed-forward
    /// output before their residuals, the classifier's input).
    fn forward(&self, inputs: &[TrainInput], dropout: Option<Dropping>) -> Result<Forward> {
        let ctx = &self.ctx;
        let h = self.config.hidden_size;
        let batch = inputs.len();
        if batch == 0 {
            return Err(Error::invalid("gpu train: an empty micro-batch"));
        }
        let dropout = match dropout {
            Some(Dropping { step, inputs: indices }) if step.dropout.is_active() => {
                if indices.len() != batch {
                    return Err(Error::invalid(format!(
                        "gpu train: {} input indices for dropout, {batch} inputs",
                        indices.len()
                    )));
                }
                let indices = indices.iter().map(|&i| u32::try_from(i)).collect::<std::result::Result<Vec<_>, _>>();
                let indices = indices.map_err(|_| Error::invalid("gpu train: an input index past 2^32"))?;
                Some(PassDropout { step, inputs: ctx.upload_u32("dropout inputs", &indices, &[batch])? })
            }
            _ => None,
        };
        let eps = self.config.layer_norm_eps as f32;
        let inter = self.config.intermediate_size;
        let mut dispatches = Vec::new();
        let Start { mut input, mask, seq_len, tokens: tokens_in } = match &self.embeddings {
            None => self.start_from_states(inputs)?,
            Some(e) => self.start_from_tokens(e, inputs, &mut dispatches)?,
        };
        let tokens = batch * seq_len;
        let drops = |site: Site, layer: usize| dropout.as_ref().and_then(|p| p.draw(site, layer)).is_some();
        if self.embeddings.is_some() && drops(Site::Embeddings, 0) {
            let kept = ctx.zeros_f32("train input kept", &[tokens, h])?;
            let at = DropAt { site: Site::Embeddings, layer: 0, rows_per_input: seq_len };
            dispatches.extend(self.kept(dropout.as_ref(), &input, at, &kept)?);
            input = kept;
        }
        let mask = ctx.upload_f32("train mask", &mask, &[batch, seq_len])?;
        // A block's output before its dropout (all tokens, or the last layer's first ones),
        // shared by the layers: each is read at once by the dropout that follows it.
        let before_dropout = if dropout.as_ref().is_some_and(|p| p.step.dropout.hidden > 0.0) {
            Some((ctx.zeros_f32("before dropout", &[tokens, h])?, ctx.zeros_f32("before dropout", &[batch, h])?))
        } else {
            None
        };
        let mut saved: Vec<Saved> = Vec::new();
        for (l, layer) in self.layers.iter().enumerate() {
            let at = self.first_layer + l;
            let x_in = saved.last().map(|s| &s.out).unwrap_or(&input);
            let last = l + 1 == self.layers.len();
            let rows = if last { batch } else { tokens };
            let rows_per_input = if last { 1 } else { seq_len };
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
            // Where a block's output is written when it drops: before its dropout, which
            // writes the saved tensor (`None`: the saved tensor directly).
            let before = |site: Site| -> Option<&GpuTensor> {
                let (all, first) = before_dropout.as_ref()?;
                drops(site, at).then_some(if last { first } else { all })
            };
            let (attn_before, ffn_before) = (before(Site::AttentionOutput), before(Site::FeedForwardOutput));
            let ops = &self.ops;
            let mm = |x: &GpuTensor, w: &Param, b: &Param, y: &GpuTensor| {
                ops.matmul.prepare(ctx, x, &w.value, &b.value, Activation::None, y)
            };
            dispatches.extend(mm(x_in, &layer.qkv_w, &layer.qkv_b, &s.qkv)?);
            let heads = self.config.num_heads;
            match dropout.as_ref().and_then(|p| p.attention(at)) {
                Some(d) => dispatches.extend(ops.attention.prepare_dropping(ctx, &s.qkv, &mask, heads, &d, &s.ctx)?),
                None => dispatches.extend(ops.attention.prepare(ctx, &s.qkv, &mask, heads, &s.ctx)?),
            }
            dispatches.extend(ops.matmul.prepare_product(
                ctx,
                self.rows_of(&s.ctx, last, seq_len, batch)?,
                Mat::of(&layer.out_w.value)?,
                Addend::Row(&layer.out_b.value),
                Activation::None,
                false,
                Mat::of(attn_before.unwrap_or(&s.attn))?,
            )?);
            if let Some(x) = attn_before {
                let site = DropAt { site: Site::AttentionOutput, layer: at, rows_per_input };
                dispatches.extend(self.kept(dropout.as_ref(), x, site, &s.attn)?);
            }
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
            dispatches.extend(self.ops.activation.prepare_forward(ctx, &s.pre, Activation::Gelu, false, &s.act)?);
            dispatches.extend(mm(&s.act, &layer.ffn_w, &layer.ffn_b, ffn_before.unwrap_or(&s.ffn))?);
            if let Some(x) = ffn_before {
                let site = DropAt { site: Site::FeedForwardOutput, layer: at, rows_per_input };
                dispatches.extend(self.kept(dropout.as_ref(), x, site, &s.ffn)?);
            }
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
        let pooled_kept = if drops(Site::Classifier, 0) {
            let kept = ctx.zeros_f32("pooled kept", &[batch, h])?;
            let at = DropAt { site: Site::Classifier, layer: 0, rows_per_input: 1 };
            dispatches.extend(self.kept(dropout.as_ref(), &pooled, at, &kept)?);
            Some(kept)
        } else {
            None
        };
        dispatches.extend(self.ops.matmul.prepare(
            ctx,
            pooled_kept.as_ref().unwrap_or(&pooled),
            &head.out_w.value,
            &head.out_b.value,
            Activation::None,
            &logits,
        )?);
        Ok(Forward {
            batch,
            seq_len,
            mask,
            tokens: tokens_in,
            input,
            saved,
            pooled,
            pooled_kept,
            logits,
            dropout,
            dispatches,
        })
    }

    /// A top-layer trainer's micro-batch: the frozen layers' states, padded to the longest.
    fn start_from_states(&self, inputs: &[TrainInput]) -> Result<Start> {
        let (h, batch) = (self.config.hidden_size, inputs.len());
        let states = inputs
            .iter()
            .enumerate()
            .map(|(i, input)| match input {
                TrainInput::States(s) if !s.is_empty() && s.len() % h == 0 => Ok(*s),
                TrainInput::States(s) => Err(Error::invalid(format!(
                    "gpu train: input {i} holds {} values, not a whole number (> 0) of {h}-wide states",
                    s.len()
                ))),
                TrainInput::Tokens(_) => Err(Error::invalid(
                    "gpu train: a trainer of the top layers starts from the frozen layers' states, not tokens",
                )),
            })
            .collect::<Result<Vec<_>>>()?;
        let seq_len = states.iter().map(|s| s.len() / h).max().unwrap_or(0);
        let tokens = batch * seq_len;
        let mut x = vec![0f32; tokens * h];
        let mut mask = vec![0f32; tokens];
        for (b, states) in states.iter().enumerate() {
            for (dst, src) in x[b * seq_len * h..].iter_mut().zip(states.iter()) {
                *dst = src.to_f32();
            }
            mask[b * seq_len..b * seq_len + states.len() / h].fill(1.0);
        }
        let input = self.ctx.upload_f32("train input", &x, &[tokens, h])?;
        Ok(Start { input, mask, seq_len, tokens: None })
    }

    /// An all-layer trainer's micro-batch: tokens padded to the longest, through the
    /// embedding gather and layer norm (recorded into `dispatches`).
    fn start_from_tokens(
        &self,
        e: &Embeddings,
        inputs: &[TrainInput],
        dispatches: &mut Vec<Dispatch>,
    ) -> Result<Start> {
        let (ctx, cfg) = (&self.ctx, &self.config);
        let seqs = inputs
            .iter()
            .enumerate()
            .map(|(i, input)| match input {
                TrainInput::Tokens(t) if !t.is_empty() => Ok((t.ids.as_slice(), t.type_ids.as_slice())),
                TrainInput::Tokens(_) => Err(Error::invalid(format!("gpu train: input {i} has no token"))),
                TrainInput::States(_) => Err(Error::invalid(
                    "gpu train: a trainer of every layer starts from tokens, not a frozen pass's states",
                )),
            })
            .collect::<Result<Vec<_>>>()?;
        let tb = TokenBatch::from_sequences(&seqs, cfg.pad_token_id);
        tb.check(cfg, cfg.num_layers)?;
        let (seq_len, tokens, h) = (tb.seq_len, tb.batch * tb.seq_len, cfg.hidden_size);
        let ids = ctx.upload_u32("train ids", &tb.ids, &[tokens])?;
        let positions = ctx.upload_u32("train positions", &cfg.position_ids(tb.batch, seq_len), &[tokens])?;
        let types = ctx.upload_u32("train types", &tb.type_ids, &[tokens])?;
        let embedded = ctx.zeros_f32("embedded", &[tokens, h])?;
        let gather = &self.ops.gather_add;
        dispatches.extend(gather.prepare(ctx, &ids, &e.word.values(), &embedded)?);
        dispatches.extend(gather.prepare(ctx, &positions, &e.position.values(), &embedded)?);
        if let Some(table) = &e.token_type {
            dispatches.extend(gather.prepare(ctx, &types, &table.values(), &embedded)?);
        }
        let input = ctx.zeros_f32("train input", &[tokens, h])?;
        let (g, b, eps) = (&e.norm_g.value, &e.norm_b.value, cfg.layer_norm_eps as f32);
        dispatches.extend(self.ops.layer_norm.prepare(ctx, &embedded, None, g, b, eps, &input)?);
        let mask = tb.mask.iter().map(|&m| if m != 0 { 1.0 } else { 0.0 }).collect();
        Ok(Start { input, mask, seq_len, tokens: Some((tb, embedded)) })
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
    fn parts(&self, items: &[&[TrainInput]]) -> Vec<std::ops::Range<usize>> {
        let h = self.config.hidden_size;
        let widest = (3 * h).max(self.config.intermediate_size) as u64 * 4;
        // Attention runs one workgroup per token along one grid dimension.
        let max_tokens = self.ctx.limits.max_compute_workgroups_per_dimension as u64;
        let mut parts = Vec::new();
        let (mut start, mut inputs, mut longest) = (0, 0u64, 0u64);
        for (i, item) in items.iter().enumerate() {
            let len = item.iter().map(|s| s.len(h)).max().unwrap_or(0) as u64;
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
    pub async fn logits(&self, inputs: &[TrainInput<'_>]) -> Result<Vec<Vec<f32>>> {
        let items: Vec<&[TrainInput]> = inputs.chunks(1).collect();
        let mut out = Vec::with_capacity(inputs.len());
        for part in self.parts(&items) {
            let part = &inputs[part];
            let scope = self.ctx.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
            let f = self.forward(part, None).inspect(|f| self.submit(&f.dispatches, &[]));
            self.refuse_if_out_of_memory(scope.pop().await, part, None)?;
            let values = self.ctx.read_f32(&f?.logits).await?;
            out.extend(values.chunks(self.head.n_out).map(|r| r.to_vec()));
        }
        Ok(out)
    }

    /// An allocation the device refused while a micro-batch ran (`error`, from an
    /// out-of-memory scope) as an error naming what the micro-batch needs.
    fn refuse_if_out_of_memory(
        &self,
        error: Option<wgpu::Error>,
        inputs: &[TrainInput],
        dropout: Option<Dropping>,
    ) -> Result<()> {
        let Some(e) = error else { return Ok(()) };
        let longest = inputs.iter().map(|i| i.len(self.config.hidden_size)).max().unwrap_or(0);
        let train_embeddings = self.trained_embeddings().is_some();
        let need = GpuMemory::estimate(
            &self.config,
            self.head.n_out,
            self.first_layer,
            train_embeddings,
            inputs.len(),
            longest,
            dropout.map_or(Dropout::NONE, |d| d.step.dropout),
        );
        Err(Error::model(format!(
            "gpu train: {} ran out of memory for a micro-batch of {} inputs of up to {longest} tokens ({e}): it needs {}; \
             use a smaller batch size (--batch-size) or shorter inputs",
            self.ctx.adapter.name,
            inputs.len(),
            need.describe()
        )))
    }

    /// One micro-batch: forward, loss and backward over `inputs`, whose examples are
    /// `examples` in order, each (inputs, gold, weight): a multiple-choice example's gold is
    /// the index of the right one among its inputs, a classification example has one input
    /// and its gold is a label index; the weight multiplies its loss (its class's weight, or
    /// 1). The gradients of the mean weighted loss over `step_examples` examples (the whole
    /// optimiser step's) are added to those summed so far. Returns each example's weighted
    /// loss (not scaled). A micro-batch too large for the adapter's
    /// bindings runs in parts (the summed gradients are the same). With `dropout`, the
    /// step's masks drop as the CPU trainer's do (`dropout.inputs`: one index per input).
    pub async fn accumulate(
        &self,
        inputs: &[TrainInput<'_>],
        examples: &[(usize, usize, f32)],
        step_examples: usize,
        dropout: Option<Dropping<'_>>,
    ) -> Result<Vec<f32>> {
        self.accumulate_targets(inputs, Targets::Classes(examples), step_examples, dropout).await
    }

    /// [`GpuTrainer::accumulate`] for any loss ([`Targets`]): the score task's examples
    /// have one input each.
    pub async fn accumulate_targets(
        &self,
        inputs: &[TrainInput<'_>],
        targets: Targets<'_>,
        step_examples: usize,
        dropout: Option<Dropping<'_>>,
    ) -> Result<Vec<f32>> {
        let n_out = self.head.n_out;
        let counts = targets.input_counts();
        let total: usize = counts.iter().sum();
        if total != inputs.len() {
            return Err(Error::invalid(format!("gpu train: examples have {total} inputs, {} given", inputs.len())));
        }
        if let Some(d) = dropout.filter(|d| d.inputs.len() != inputs.len()) {
            return Err(Error::invalid(format!(
                "gpu train: {} input indices for dropout, {} inputs",
                d.inputs.len(),
                inputs.len()
            )));
        }
        if n_out > 1 && counts.iter().any(|&c| c != 1) {
            return Err(Error::invalid("gpu train: a classification example has exactly one input"));
        }
        if let Targets::Scores(scores) = targets {
            if scores.iter().any(|(w, t)| w.len() != n_out || t.len() != n_out) {
                return Err(Error::invalid(format!("gpu train: a score example has {n_out} weights and targets")));
            }
        }
        let mut items: Vec<&[TrainInput]> = Vec::with_capacity(counts.len());
        let mut at = 0;
        for &count in &counts {
            items.push(&inputs[at..at + count]);
            at += count;
        }
        let mut losses = Vec::with_capacity(counts.len());
        for part in self.parts(&items) {
            let first = items[..part.start].iter().map(|i| i.len()).sum::<usize>();
            let count = items[part.clone()].iter().map(|i| i.len()).sum::<usize>();
            let part_inputs = &inputs[first..first + count];
            let part_dropout = dropout.map(|d| Dropping { inputs: &d.inputs[first..first + count], ..d });
            losses.extend(self.accumulate_part(part_inputs, targets.part(part), step_examples, part_dropout).await?);
        }
        Ok(losses)
    }

    async fn accumulate_part(
        &self,
        inputs: &[TrainInput<'_>],
        targets: Targets<'_>,
        step_examples: usize,
        dropout: Option<Dropping<'_>>,
    ) -> Result<Vec<f32>> {
        let n_out = self.head.n_out;
        let examples = targets.input_counts().len();
        let segments = match targets {
            Targets::Classes(examples) => {
                let segments: Vec<(usize, usize, f32)> =
                    examples.iter().map(|&(count, gold, w)| (count * n_out, gold, w)).collect();
                CrossEntropy::weighted_segments(&segments)?
            }
            Targets::Scores(_) => Vec::new(),
        };
        let ctx = &self.ctx;
        // Every buffer of the pass is allocated here; one the device cannot hold is a
        // refusal with the figure, not a panic or garbage.
        let scope = ctx.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let recorded = (|| -> Result<GpuTensor> {
            let mut f = self.forward(inputs, dropout)?;
            let mut d = std::mem::take(&mut f.dispatches);
            let loss = ctx.zeros_f32("loss", &[examples])?;
            let dlogits = ctx.zeros_f32("dlogits", &[f.batch, n_out])?;
            let scale = 1.0 / step_examples.max(1) as f32;
            match targets {
                Targets::Classes(_) => {
                    let segments = ctx.upload_u32("segments", &segments, &[segments.len()])?;
                    d.extend(self.train.cross_entropy.prepare(ctx, &f.logits, &segments, scale, &loss, &dlogits)?);
                }
                Targets::Scores(scores) => {
                    let (w, t): (Vec<f32>, Vec<f32>) =
                        scores.iter().flat_map(|(w, t)| w.iter().copied().zip(t.iter().copied())).unzip();
                    let shape = [f.batch, n_out];
                    let (weights, wanted) =
                        (ctx.upload_f32("weights", &w, &shape)?, ctx.upload_f32("targets", &t, &shape)?);
                    let op = &self.train.squared_error;
                    d.extend(op.prepare(ctx, &f.logits, &wanted, &weights, scale, &loss, &dlogits)?);
                }
            }
            self.backward(&f, &dlogits, &mut d)?;
            self.submit(&d, &[]);
            Ok(loss)
        })();
        self.refuse_if_out_of_memory(scope.pop().await, inputs, dropout)?;
        ctx.read_f32(&recorded?).await
    }

    /// Records the backward pass from the logits' gradient down to the first trained layer.
    /// Where the forward pass dropped, the gradient is multiplied by the same mask (the
    /// block outputs' gradients only on the path through the block, not the residual's).
    fn backward(&self, f: &Forward, dlogits: &GpuTensor, d: &mut Vec<Dispatch>) -> Result<()> {
        let (ctx, mm, act, t) = (&self.ctx, &self.ops.matmul, &self.ops.activation, &self.train);
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

        // The head: out(dropout(act(dense(first tokens)))), on the last layer's one row per
        // sequence.
        let last = &f.saved.last().expect("a trained layer").out;
        let classifier_input = f.pooled_kept.as_ref().unwrap_or(&f.pooled);
        weight_grads(d, Mat::of(dlogits)?, Mat::of(classifier_input)?, &head.out_w, &head.out_b, dlogits)?;
        let dpooled = ctx.zeros_f32("dpooled", &[batch, h])?;
        input_grads(d, Mat::of(dlogits)?, &head.out_w, Addend::None, Mat::of(&dpooled)?)?;
        let dpooled_kept = f.pooled_kept.as_ref().map(|_| ctx.zeros_f32("dpooled kept", &[batch, h])).transpose()?;
        let classifier = DropAt { site: Site::Classifier, layer: 0, rows_per_input: 1 };
        let dpooled = self.kept_gradient(f, d, &dpooled, classifier, dpooled_kept.as_ref())?;
        let dpre = ctx.zeros_f32("dpooled pre", &[batch, h])?;
        d.extend(act.prepare(ctx, head.activation, &f.pooled, dpooled, &dpre)?);
        weight_grads(d, Mat::of(&dpre)?, Mat::of(last)?, &head.dense_w, &head.dense_b, &dpre)?;
        let dlast = ctx.zeros_f32("dout", &[batch, h])?;
        input_grads(d, Mat::of(&dpre)?, &head.dense_w, Addend::None, Mat::of(&dlast)?)?;

        // The layers, top down; the last has one row per sequence from its attention output on.
        let eps = self.config.layer_norm_eps as f32;
        let heads = self.config.num_heads;
        let stats = ctx.zeros_f32("attention stats", &[AttentionBackward::stats_len(tokens, heads)])?;
        let dqkv = ctx.zeros_f32("dqkv", &[tokens, 3 * h])?;
        // The layers' gradient buffers, shared by every layer but the last (the dispatches
        // of one submission run in order, and every one overwrites what it writes): the
        // pass's memory does not grow with the layers. The last layer's are one row per
        // sequence, its `dctx` zero at the rows it does not compute.
        let hidden_dropout = f.dropout.as_ref().is_some_and(|p| p.step.dropout.hidden > 0.0);
        let last_scratch = Scratch::new(ctx, batch, tokens, h, inter, hidden_dropout)?;
        let full_scratch = if self.layers.len() > 1 || f.tokens.is_some() {
            Some(Scratch::new(ctx, tokens, tokens, h, inter, hidden_dropout)?)
        } else {
            None
        };
        // A layer's input gradient and the one above's alternate between these two.
        let dx_pair = [ctx.zeros_f32("dx", &[tokens, h])?, ctx.zeros_f32("dx", &[tokens, h])?];
        let ds1_rows = ctx.zeros_f32("ds1 rows", &[tokens, h])?;
        let mut dout = &dlast;
        let train_embeddings = self.trained_embeddings().is_some();
        for (i, (layer, s)) in self.layers.iter().zip(&f.saved).enumerate().rev() {
            let last = i + 1 == self.layers.len();
            let (layer_at, rows_per_input) = (self.first_layer + i, if last { 1 } else { seq_len });
            let at = |site| DropAt { site, layer: layer_at, rows_per_input };
            let x_in = if i == 0 { &f.input } else { &f.saved[i - 1].out };
            let scratch = if last { &last_scratch } else { full_scratch.as_ref().expect("made with several layers") };
            let Scratch { ds2, norm: norm_scratch, dact, dpre: dpre_ffn, dy, ds1, dctx, kept: kept_scratch } = scratch;
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
                    scratch: norm_scratch,
                    dgamma: &gamma.grad,
                    dbeta: &beta.grad,
                };
                t.layer_norm.prepare(ctx, &grads)
            };
            d.extend(norm_grads(&s.ffn, &s.y, (&layer.norm2_g, &layer.norm2_b), dout, ds2)?);
            // The feed-forward block's output dropped: its gradient through the block.
            let ds2_kept = self.kept_gradient(f, d, ds2, at(Site::FeedForwardOutput), kept_scratch.as_ref())?;
            weight_grads(d, Mat::of(ds2_kept)?, Mat::of(&s.act)?, &layer.ffn_w, &layer.ffn_b, ds2_kept)?;
            input_grads(d, Mat::of(ds2_kept)?, &layer.ffn_w, Addend::None, Mat::of(dact)?)?;
            d.extend(act.prepare(ctx, Activation::Gelu, &s.pre, dact, dpre_ffn)?);
            weight_grads(d, Mat::of(dpre_ffn)?, Mat::of(&s.y)?, &layer.in_w, &layer.in_b, dpre_ffn)?;
            // y feeds the feed-forward block and its residual.
            input_grads(d, Mat::of(dpre_ffn)?, &layer.in_w, Addend::Matrix(ds2), Mat::of(dy)?)?;
            let residual = s.x_first.as_ref().unwrap_or(x_in);
            d.extend(norm_grads(&s.attn, residual, (&layer.norm1_g, &layer.norm1_b), dy, ds1)?);
            let ctx_rows = self.rows_of(&s.ctx, last, seq_len, batch)?;
            let ds1_kept = self.kept_gradient(f, d, ds1, at(Site::AttentionOutput), kept_scratch.as_ref())?;
            weight_grads(d, Mat::of(ds1_kept)?, ctx_rows, &layer.out_w, &layer.out_b, ds1_kept)?;
            let dctx_rows = self.rows_of(dctx, last, seq_len, batch)?;
            input_grads(d, Mat::of(ds1_kept)?, &layer.out_w, Addend::None, dctx_rows)?;
            match f.dropout.as_ref().and_then(|p| p.attention(layer_at)) {
                Some(drop) => {
                    d.extend(t.attention.prepare_dropping(ctx, &s.qkv, &f.mask, heads, &drop, dctx, &stats, &dqkv)?)
                }
                None => d.extend(t.attention.prepare(ctx, &s.qkv, &f.mask, heads, dctx, &stats, &dqkv)?),
            }
            weight_grads(d, Mat::of(&dqkv)?, Mat::of(x_in)?, &layer.qkv_w, &layer.qkv_b, &dqkv)?;
            if i > 0 || train_embeddings {
                // The layer's input feeds attention and the residual (at every row, or the
                // first tokens' in the last layer); it is the output of the layer below
                // (or of the embeddings), whose backward pass comes next.
                let residual = if last {
                    d.extend(self.copy_rows(Mat::of(ds1)?, Mat::every_nth_row(&ds1_rows, seq_len, batch)?)?);
                    &ds1_rows
                } else {
                    ds1
                };
                let dx = &dx_pair[i % 2];
                input_grads(d, Mat::of(&dqkv)?, &layer.qkv_w, Addend::Matrix(residual), Mat::of(dx)?)?;
                dout = dx;
            }
        }
        if let (Some(e), Some((batch_tokens, embedded))) = (self.trained_embeddings(), &f.tokens) {
            // The embeddings' layer norm, then each table's rows from the sum's gradient.
            let scratch = full_scratch.as_ref().expect("made with embeddings");
            let dsum = &scratch.ds2;
            // The embeddings' output dropped: the gradient of their norm's output.
            let embeddings = DropAt { site: Site::Embeddings, layer: 0, rows_per_input: seq_len };
            let dout = self.kept_gradient(f, d, dout, embeddings, scratch.kept.as_ref())?;
            d.extend(t.layer_norm.prepare(
                ctx,
                &LayerNormGrads {
                    x: embedded,
                    residual: None,
                    gamma: &e.norm_g.value,
                    eps,
                    dy: dout,
                    dx: dsum,
                    scratch: &scratch.norm,
                    dgamma: &e.norm_g.grad,
                    dbeta: &e.norm_b.grad,
                },
            )?);
            let tb = batch_tokens;
            let positions = self.config.position_ids(batch, seq_len);
            let mut tables = vec![(&tb.ids, &e.word, "word ids"), (&positions, &e.position, "positions")];
            if let Some(types) = &e.token_type {
                tables.push((&tb.type_ids, types, "token types"));
            }
            for (ids, table, label) in tables {
                let lists = TokensById::new(ids, &tb.mask)?.upload(ctx, label)?;
                d.extend(t.embedding.prepare(ctx, &lists, dsum, &table.grads())?);
            }
        }
        Ok(())
    }

    /// `x` times the mask at `at` of the pass's `dropout`, into `into`: a hidden state's
    /// dropout forward, or its gradient's backward.
    fn kept(
        &self,
        dropout: Option<&PassDropout>,
        x: &GpuTensor,
        at: DropAt,
        into: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        let pass = dropout.ok_or_else(|| Error::invalid("gpu train: a mask without dropout"))?;
        let draw =
            pass.draw(at.site, at.layer).ok_or_else(|| Error::invalid("gpu train: a mask where nothing drops"))?;
        self.train.dropout.prepare(&self.ctx, x, draw, &pass.inputs, at.rows_per_input, into)
    }

    /// The gradient `x` of a hidden state the forward pass `f` dropped at `at`, times the
    /// same mask into `into`; `x` itself where nothing dropped there.
    fn kept_gradient<'a>(
        &self,
        f: &Forward,
        d: &mut Vec<Dispatch>,
        x: &'a GpuTensor,
        at: DropAt,
        into: Option<&'a GpuTensor>,
    ) -> Result<&'a GpuTensor> {
        let drops = f.dropout.as_ref().is_some_and(|p| p.draw(at.site, at.layer).is_some());
        match (drops, into) {
            (false, _) => Ok(x),
            (true, Some(into)) => {
                d.extend(self.kept(f.dropout.as_ref(), x, at, into)?);
                Ok(into)
            }
            (true, None) => Err(Error::invalid(format!("gpu train: no buffer for the gradient dropped at {at:?}"))),
        }
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
    /// An embedding table's blocks come back as one tensor, `word_embeddings`, ...
    pub async fn gradients(&self) -> Result<Vec<(String, Vec<f32>)>> {
        let mut out = Vec::new();
        for p in self.params() {
            let g = self.ctx.read_f32(&p.grad).await?;
            push_joined(&mut out, split_qkv(&p.name, g, self.config.hidden_size));
        }
        Ok(out)
    }

    /// `model` with the trained tensors in place of its top layers and head (`model` is
    /// the one the trainer was built from).
    pub async fn to_model(&self, model: &LoadedModel) -> Result<LoadedModel> {
        let mut read = Vec::new();
        for p in self.params() {
            let v = self.ctx.read_f32(&p.value).await?;
            push_joined(&mut read, split_qkv(&p.name, v, self.config.hidden_size));
        }
        let mut values: std::collections::HashMap<String, Vec<f32>> = read.into_iter().collect();
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
            if let Some(attn_norm) = l.attn_norm.as_mut() {
                *attn_norm = norm(&mut take, n("attn_norm"), attn_norm)?;
            }
            l.ffn_in = dense(&mut take, n("ffn_in"), &l.ffn_in)?;
            l.ffn_out = dense(&mut take, n("ffn_out"), &l.ffn_out)?;
            l.ffn_norm = norm(&mut take, n("ffn_norm"), &l.ffn_norm)?;
        }
        if self.trained_embeddings().is_some() {
            let w = &mut m.weights;
            w.word_embeddings = take("word_embeddings".into(), &w.word_embeddings)?;
            if let Some(p) = w.position_embeddings.as_mut() {
                *p = take("position_embeddings".into(), p)?;
            }
            if self.embeddings.as_ref().is_some_and(|e| e.token_type.is_some()) {
                if let Some(t) = w.token_type_embeddings.as_mut() {
                    *t = take("token_type_embeddings".into(), t)?;
                }
            }
            w.embedding_norm = norm(&mut take, "embedding_norm".into(), &w.embedding_norm)?;
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
            HeadWeights::ContextPooler { .. } | HeadWeights::ModernBertHead { .. } => {
                return Err(unsupported(&self.config));
            }
        }
        Ok(m)
    }
}

/// Appends `parts` to `out`, a part named as the last one extending it (the row blocks of
/// an embedding table come in order, one after the other).
fn push_joined(out: &mut Vec<(String, Vec<f32>)>, parts: Vec<(String, Vec<f32>)>) {
    for (name, values) in parts {
        match out.last_mut() {
            Some((last, v)) if *last == name => v.extend(values),
            _ => out.push((name, values)),
        }
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

#[cfg(test)]
mod tests {
    use super::GpuMemory;
    use crate::model::config::{Arch, EncoderConfig, HeadKind};
    use crate::train::dropout::Dropout;

    #[test]
    fn the_memory_figure_counts_weights_gradients_moments_and_copies() {
        // Hidden 32, feed-forward 64, 3 layers, 64 words, 64 positions, 2 token types,
        // multiple choice (one output). Values by hand: a layer 3*32*32 + 96 (QKV) + 1024 +
        // 32 (output) + 64 (norm) + 2048 + 64 (in) + 2048 + 32 (out) + 64 (norm) = 8544; the
        // head 1024 + 32 (pooler) + 32 + 1 (classifier) = 1089; the embeddings (64 + 64 + 2)
        // * 32 + 64 (norm) = 4224. Five f32 copies of each trained value (value, gradient,
        // two moments, best), one of an embedding that only feeds the layers.
        let c = EncoderConfig::tiny(Arch::Bert, 3, HeadKind::MultipleChoice, &[]);
        let none = Dropout::NONE;
        let all = GpuMemory::estimate(&c, 1, 0, true, 4, 10, none);
        assert_eq!(all.parameters, (3 * 8544 + 1089 + 4224) * 5 * 4);
        assert_eq!(GpuMemory::estimate(&c, 1, 0, false, 4, 10, none).parameters, (3 * 8544 + 1089) * 5 * 4 + 4224 * 4);
        assert_eq!(GpuMemory::estimate(&c, 1, 1, false, 4, 10, none).parameters, (2 * 8544 + 1089) * 5 * 4);
        // Activations grow with the micro-batch's tokens, and the total adds both.
        let twice = GpuMemory::estimate(&c, 1, 0, true, 8, 10, none);
        assert!(twice.activations > all.activations && twice.activations <= 2 * all.activations);
        // Dropout adds, by hand for 4 inputs of 10 tokens (t = 40, b = 4, h = 32): the
        // indices (4); with hidden dropout 3 h t (before dropout, the embeddings' output,
        // the full layers' kept gradient) and 4 h b (before dropout, the classifier's input and
        // its gradient, the last layer's kept gradient), in f32 values of 4 bytes.
        let attention_only = GpuMemory::estimate(&c, 1, 0, true, 4, 10, Dropout { hidden: 0.0, attention: 0.1 });
        assert_eq!(attention_only.activations, all.activations + 4 * 4);
        let both = GpuMemory::estimate(&c, 1, 0, true, 4, 10, Dropout { hidden: 0.1, attention: 0.1 });
        assert_eq!(both.activations, all.activations + 4 * (4 + 3 * 32 * 40 + 4 * 32 * 4));
        assert_eq!(all.total(), all.parameters + all.activations);
        assert!(all.describe().starts_with(&format!("{} on the GPU", super::bytes_text(all.total()))));
        assert_eq!(super::bytes_text(3 << 19), "1.5 MiB");
        assert_eq!(super::bytes_text(5 << 29), "2.5 GiB");
    }
}
