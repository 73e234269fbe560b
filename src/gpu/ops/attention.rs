use super::dropout::{attention_wgsl, AttentionDropout};
use super::{check, check_f32, params, to_u32, Dispatch, Kernel, Source, ATTENTION_SCORES_WGSL, REDUCE_WGSL};
use crate::error::Result;
use crate::gpu::context::{DType, GpuContext, GpuTensor};

params! {
    /// The forward kernel's and both backward kernels' parameters.
    pub(super) struct Params {
        /// Padded length L of every sequence in the batch.
        seq_len: u32,
        heads: u32,
        /// D.
        head_dim: u32,
        /// heads * D.
        hidden: u32,
        /// 1 / sqrt(D) (DeBERTa's 1 / sqrt(D x (1 + c2p + p2c))).
        scale: f32,
        /// A local layer's window (keys at most this far from the query); 0: every key.
        window: u32,
        /// DeBERTa's relative positions: the longest input the index table covers.
        max_len: u32,
        /// Dropout of the probabilities (training; the kernels compiled with it): the
        /// site's key, threshold and kept scale ([`super::MaskDraw`]) and the model's
        /// position limit (attention_dropout.wgsl).
        drop_key: u32,
        drop_threshold: u32,
        drop_scale: f32,
        drop_positions: u32,
        _pad0: u32,
    }
}

/// What a family adds to plain attention ([`Attention::prepare_with`]).
#[derive(Debug, Clone, Copy)]
pub struct AttentionExtras<'a> {
    /// Multiplies every score (`None`: 1 / sqrt(D)).
    pub scale: Option<f32>,
    /// ModernBERT's local layers: keys at most this far from the query.
    pub window: Option<usize>,
    pub relative: Option<RelativeTables<'a>>,
}

impl AttentionExtras<'static> {
    /// Plain attention: nothing added.
    pub const PLAIN: Self = AttentionExtras { scale: None, window: None, relative: None };
}

/// DeBERTa-v2's relative positions for one layer (kernels/attention_relative.wgsl).
#[derive(Debug, Clone, Copy)]
pub struct RelativeTables<'a> {
    /// The table through the layer's query and key maps, `[rows, hidden]` each.
    pub pos_q: &'a GpuTensor,
    pub pos_k: &'a GpuTensor,
    /// u32, the table row of distance `i - j` at `i - j + max_len - 1` (`2 max_len - 1`).
    pub index: &'a GpuTensor,
    pub max_len: usize,
    pub c2p: bool,
    pub p2c: bool,
}

/// Multi-head self-attention with the padding mask (kernels/attention.wgsl): scores,
/// mask, softmax and the weighted sum of values fused in one pass, one thread per query,
/// keys and values staged per block of queries (flash attention's online softmax).
pub struct Attention {
    /// The forward kernel, compiled per head size (its registers hold one query and one
    /// output row) and relative terms (c2p, p2c) on first use.
    by_head_dim: std::sync::Mutex<std::collections::HashMap<ForwardKey, Kernel>>,
}

/// What a compiled forward kernel is specialised for: the head size, DeBERTa's relative
/// terms (c2p, p2c) when it has them, and whether it drops probabilities (training).
type ForwardKey = (usize, Option<(bool, bool)>, bool);

impl Attention {
    /// The backward kernels keep one row of scores in workgroup memory (2 KiB).
    pub const MAX_SEQ_LEN: usize = 512;
    /// The forward kernel walks the keys in blocks and holds no row of scores: sequences up
    /// to ModernBERT's 8,192 tokens.
    pub const MAX_FORWARD_SEQ_LEN: usize = 8192;
    /// Threads of the backward kernels per (query, head): the usual head size, so the
    /// weighted sum of the values keeps every thread busy.
    const THREADS: usize = 64;
    const CONSTANTS: [(&'static str, usize); 2] = [("THREADS", Self::THREADS), ("MAX_KEYS", Self::MAX_SEQ_LEN)];
    /// Queries (threads) per workgroup of the forward kernel.
    const QUERIES: usize = 64;
    /// The forward kernel holds a head in at most four 4 x 4 matrices.
    pub const MAX_HEAD_DIM: usize = 64;

    pub fn new(_ctx: &GpuContext) -> Self {
        Attention { by_head_dim: Default::default() }
    }

    /// How many rows of `seq_len` tokens one forward dispatch can take: its blocks of
    /// [`Self::QUERIES`] queries lie along one grid dimension.
    pub fn max_rows(ctx: &GpuContext, seq_len: usize) -> usize {
        ctx.limits.max_compute_workgroups_per_dimension as usize / seq_len.div_ceil(Self::QUERIES).max(1)
    }

    /// The forward kernel for heads of `head_dim` values (at most [`Self::MAX_HEAD_DIM`]),
    /// with DeBERTa's relative terms (c2p, p2c) or without, dropping probabilities
    /// (`dropout`, training) or not.
    fn forward_kernel(
        &self,
        ctx: &GpuContext,
        head_dim: usize,
        relative: Option<(bool, bool)>,
        dropout: bool,
    ) -> Kernel {
        let mut kernels = self.by_head_dim.lock().unwrap_or_else(|e| e.into_inner());
        kernels
            .entry((head_dim, relative, dropout))
            .or_insert_with(|| {
                let mats = head_dim.div_ceil(16).max(1);
                // Keys staged per block: 4 KiB of keys and 4 KiB of values (64 keys of a
                // head of up to 16 values, 16 of 64), a multiple of the 4 taken at a time.
                let key_block = (64 / mats) / 4 * 4;
                let (c2p, p2c) = relative.unwrap_or((false, false));
                let constants = [
                    ("QUERIES", Self::QUERIES),
                    ("KEY_BLOCK", key_block),
                    ("HEAD_MATS", mats),
                    ("C2P", usize::from(c2p)),
                    ("P2C", usize::from(p2c)),
                ];
                let terms = match relative {
                    Some(_) => include_str!("../kernels/attention_relative.wgsl"),
                    None => include_str!("../kernels/attention_plain.wgsl"),
                };
                // The input indices follow qkv, mask, out and the relative tables.
                let binding = 4 + if relative.is_some() { 3 } else { 0 };
                let drop = attention_wgsl(dropout.then_some(binding));
                let source = Source {
                    directives: "",
                    params: Params::WGSL,
                    constants: &constants,
                    shared: &[terms, &drop],
                    body: include_str!("../kernels/attention.wgsl"),
                };
                Kernel::new(ctx, "attention", source)
            })
            .clone()
    }

    /// A backward attention kernel: one workgroup per (token, head), the shared scores
    /// and softmax of attention_scores.wgsl; with `dropout`, dropping probabilities as the
    /// forward kernel did (the input indices at binding 6, after its five buffers).
    pub(super) fn kernel(ctx: &GpuContext, name: &'static str, body: &str, dropout: bool) -> Kernel {
        let drop = attention_wgsl(dropout.then_some(6));
        let source = Source {
            directives: "",
            params: Params::WGSL,
            constants: &Self::CONSTANTS,
            shared: &[REDUCE_WGSL, ATTENTION_SCORES_WGSL, &drop],
            body,
        };
        Kernel::new(ctx, name, source)
    }

    /// Checks the padding mask (`[batch, seq_len]`) against `tokens` x `hidden`
    /// activations split in `heads` heads, and returns the kernels' parameters.
    pub(super) fn params(
        ctx: &GpuContext,
        op: &str,
        mask: &GpuTensor,
        (tokens, hidden): (usize, usize),
        heads: usize,
    ) -> Result<Params> {
        Self::params_up_to(ctx, op, mask, (tokens, hidden), heads, Self::MAX_SEQ_LEN)
    }

    /// [`Self::params`] for sequences of at most `limit` tokens.
    fn params_up_to(
        ctx: &GpuContext,
        op: &str,
        mask: &GpuTensor,
        (tokens, hidden): (usize, usize),
        heads: usize,
        limit: usize,
    ) -> Result<Params> {
        let (batch, seq_len) = mask.dims2(&format!("{op} mask"))?;
        check(tokens == batch * seq_len, op, || format!("{tokens} token rows, but the mask says {batch} x {seq_len}"))?;
        check(heads > 0 && hidden % heads == 0, op, || format!("hidden {hidden} is not a multiple of {heads} heads"))?;
        check(seq_len <= limit, op, || format!("sequences of {seq_len} tokens exceed the kernel's {limit}"))?;
        let max_groups = ctx.limits.max_compute_workgroups_per_dimension as usize;
        check(heads <= max_groups, op, || format!("{heads} heads exceed {max_groups} workgroups a dimension"))?;
        let head_dim = hidden / heads;
        Ok(Params {
            seq_len: to_u32(seq_len, op, "seq_len")?,
            heads: to_u32(heads, op, "heads")?,
            head_dim: to_u32(head_dim, op, "head_dim")?,
            hidden: to_u32(hidden, op, "hidden")?,
            scale: 1.0 / (head_dim as f32).sqrt(),
            window: 0,
            max_len: 0,
            drop_key: 0,
            drop_threshold: 0,
            drop_scale: 1.0,
            drop_positions: 0,
            _pad0: 0,
        })
    }

    /// Sets `params` to drop with `dropout` after checking it against the batch.
    pub(super) fn drop_params(op: &str, params: &mut Params, dropout: &AttentionDropout, batch: usize) -> Result<()> {
        dropout.check(op, batch, params.seq_len as usize)?;
        params.drop_key = dropout.draw.key;
        params.drop_threshold = dropout.draw.threshold;
        params.drop_scale = dropout.draw.scale;
        params.drop_positions = to_u32(dropout.positions, op, "positions")?;
        Ok(())
    }

    /// `qkv`: [batch * seq_len, 3 * hidden] (q | k | v per token); `mask`: [batch, seq_len]
    /// with 1 for real tokens, 0 for padding; `out`: [batch * seq_len, hidden].
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        qkv: &GpuTensor,
        mask: &GpuTensor,
        heads: usize,
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        self.prepare_with(ctx, qkv, mask, heads, AttentionExtras::PLAIN, out)
    }

    /// [`Self::prepare`] with what a family adds (a window, relative positions, a scale).
    pub fn prepare_with(
        &self,
        ctx: &GpuContext,
        qkv: &GpuTensor,
        mask: &GpuTensor,
        heads: usize,
        extras: AttentionExtras,
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        self.prepare_full(ctx, qkv, mask, heads, extras, None, out)
    }

    /// [`Self::prepare`] in training with dropout: each probability times its mask's
    /// multiplier (0, or `1 / (1 - p)` where kept) before the weighted sum of the values;
    /// the softmax's sum is over the probabilities before dropout, as
    /// `dropout(softmax(scores)) . v`.
    pub fn prepare_dropping(
        &self,
        ctx: &GpuContext,
        qkv: &GpuTensor,
        mask: &GpuTensor,
        heads: usize,
        dropout: &AttentionDropout,
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        self.prepare_full(ctx, qkv, mask, heads, AttentionExtras::PLAIN, Some(dropout), out)
    }

    #[allow(clippy::too_many_arguments)]
    fn prepare_full(
        &self,
        ctx: &GpuContext,
        qkv: &GpuTensor,
        mask: &GpuTensor,
        heads: usize,
        extras: AttentionExtras,
        dropout: Option<&AttentionDropout>,
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        for (t, name) in [(qkv, "qkv"), (mask, "mask"), (out, "out")] {
            check_f32(t, "attention", name)?;
        }
        let (tokens, hidden) = out.dims2("attention out")?;
        check(qkv.shape == [tokens, 3 * hidden], "attention", || {
            format!("qkv {:?} != [{tokens}, {}]", qkv.shape, 3 * hidden)
        })?;
        let limit = Self::MAX_FORWARD_SEQ_LEN;
        let mut params = Self::params_up_to(ctx, "attention", mask, (tokens, hidden), heads, limit)?;
        if let Some(scale) = extras.scale {
            params.scale = scale;
        }
        params.window = to_u32(extras.window.unwrap_or(0), "attention", "window")?;
        let mut buffers = vec![&qkv.buffer, &mask.buffer, &out.buffer];
        if let Some(r) = &extras.relative {
            let seq_len = params.seq_len as usize;
            check(
                r.max_len >= seq_len && r.index.len() == 2 * r.max_len - 1 && r.index.dtype == DType::U32,
                "attention",
                || {
                    format!(
                        "a relative index of {} for {} positions and sequences of {seq_len}",
                        r.index.len(),
                        r.max_len
                    )
                },
            )?;
            check(r.pos_q.shape == r.pos_k.shape && r.pos_q.dims2("pos_q")?.1 == hidden, "attention", || {
                format!("relative tables {:?} / {:?} for hidden {hidden}", r.pos_q.shape, r.pos_k.shape)
            })?;
            params.max_len = to_u32(r.max_len, "attention", "max_len")?;
            buffers.extend([&r.pos_q.buffer, &r.pos_k.buffer, &r.index.buffer]);
        }
        if let Some(d) = dropout {
            Self::drop_params("attention", &mut params, d, mask.dims2("attention mask")?.0)?;
            buffers.push(&d.inputs.buffer);
        }
        if tokens == 0 {
            return Ok(Vec::new());
        }
        let (batch, seq_len) = mask.dims2("attention mask")?;
        let blocks = batch * seq_len.div_ceil(Self::QUERIES);
        let max_groups = ctx.limits.max_compute_workgroups_per_dimension as usize;
        check(blocks <= max_groups, "attention", || {
            format!("{blocks} blocks of {} queries exceed {max_groups} workgroups a dimension", Self::QUERIES)
        })?;
        let groups = (to_u32(blocks, "attention", "query blocks")?, to_u32(heads, "attention", "heads")?);
        let head_dim = hidden / heads;
        check(head_dim <= Self::MAX_HEAD_DIM, "attention", || {
            format!("heads of {head_dim} values exceed the kernel's {}", Self::MAX_HEAD_DIM)
        })?;
        let kernel = self.forward_kernel(ctx, head_dim, extras.relative.map(|r| (r.c2p, r.p2c)), dropout.is_some());
        Ok(vec![kernel.bind(ctx, &params, &buffers, groups)])
    }
}
