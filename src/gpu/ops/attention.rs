use super::{check, check_f32, params, to_u32, Dispatch, Kernel, Source, ATTENTION_SCORES_WGSL, REDUCE_WGSL};
use crate::error::Result;
use crate::gpu::context::{GpuContext, GpuTensor};

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
        /// 1 / sqrt(D).
        scale: f32,
        _pad0: u32,
        _pad1: u32,
        _pad2: u32,
    }
}

/// Multi-head self-attention with the padding mask (kernels/attention.wgsl): scores,
/// mask, softmax and the weighted sum of values fused in one pass, one thread per query,
/// keys and values staged per block of queries (flash attention's online softmax).
pub struct Attention {
    /// The forward kernel, compiled per head size (its registers hold one query and one
    /// output row) on first use.
    by_head_dim: std::sync::Mutex<std::collections::HashMap<usize, Kernel>>,
}

impl Attention {
    /// The backward kernels keep one row of scores in workgroup memory (2 KiB).
    pub const MAX_SEQ_LEN: usize = 512;
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

    /// The forward kernel for heads of `head_dim` values (at most [`Self::MAX_HEAD_DIM`]).
    fn forward_kernel(&self, ctx: &GpuContext, head_dim: usize) -> Kernel {
        let mut kernels = self.by_head_dim.lock().unwrap_or_else(|e| e.into_inner());
        kernels
            .entry(head_dim)
            .or_insert_with(|| {
                let mats = head_dim.div_ceil(16).max(1);
                // Keys staged per block: 4 KiB of keys and 4 KiB of values (64 keys of a
                // head of up to 16 values, 16 of 64), a multiple of the 4 taken at a time.
                let key_block = (64 / mats) / 4 * 4;
                let constants = [("QUERIES", Self::QUERIES), ("KEY_BLOCK", key_block), ("HEAD_MATS", mats)];
                let source = Source {
                    directives: "",
                    params: Params::WGSL,
                    constants: &constants,
                    shared: &[],
                    body: include_str!("../kernels/attention.wgsl"),
                };
                Kernel::new(ctx, "attention", source)
            })
            .clone()
    }

    /// A backward attention kernel: one workgroup per (token, head), the shared scores
    /// and softmax of attention_scores.wgsl.
    pub(super) fn kernel(ctx: &GpuContext, name: &'static str, body: &str) -> Kernel {
        let source = Source {
            directives: "",
            params: Params::WGSL,
            constants: &Self::CONSTANTS,
            shared: &[REDUCE_WGSL, ATTENTION_SCORES_WGSL],
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
        let (batch, seq_len) = mask.dims2(&format!("{op} mask"))?;
        check(tokens == batch * seq_len, op, || format!("{tokens} token rows, but the mask says {batch} x {seq_len}"))?;
        check(heads > 0 && hidden % heads == 0, op, || format!("hidden {hidden} is not a multiple of {heads} heads"))?;
        check(seq_len <= Self::MAX_SEQ_LEN, op, || {
            format!("sequences of {seq_len} tokens exceed the kernel's {}", Self::MAX_SEQ_LEN)
        })?;
        let max_groups = ctx.limits.max_compute_workgroups_per_dimension as usize;
        check(heads <= max_groups, op, || format!("{heads} heads exceed {max_groups} workgroups a dimension"))?;
        let head_dim = hidden / heads;
        Ok(Params {
            seq_len: to_u32(seq_len, op, "seq_len")?,
            heads: to_u32(heads, op, "heads")?,
            head_dim: to_u32(head_dim, op, "head_dim")?,
            hidden: to_u32(hidden, op, "hidden")?,
            scale: 1.0 / (head_dim as f32).sqrt(),
            _pad0: 0,
            _pad1: 0,
            _pad2: 0,
        })
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
        for (t, name) in [(qkv, "qkv"), (mask, "mask"), (out, "out")] {
            check_f32(t, "attention", name)?;
        }
        let (tokens, hidden) = out.dims2("attention out")?;
        check(qkv.shape == [tokens, 3 * hidden], "attention", || {
            format!("qkv {:?} != [{tokens}, {}]", qkv.shape, 3 * hidden)
        })?;
        let params = Self::params(ctx, "attention", mask, (tokens, hidden), heads)?;
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
        let kernel = self.forward_kernel(ctx, head_dim);
        Ok(vec![kernel.bind(ctx, &params, &[&qkv.buffer, &mask.buffer, &out.buffer], groups)])
    }
}
