use super::{check, check_f32, params, to_u32, Attention, Dispatch, Kernel, Source, REDUCE_WGSL};
use crate::error::Result;
use crate::gpu::context::{GpuContext, GpuTensor};

params! {
    struct Params {
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

/// The gradient of [`Attention`] with respect to its `qkv` input
/// (kernels/attention_backward.wgsl: softmax backward and dq per query;
/// kernels/attention_backward_kv.wgsl: dk and dv per key). The softmax is recomputed from
/// `qkv` and the mask in both; two numbers per (token, head) pass from the first kernel to
/// the second through `stats` (`[tokens * heads * 2]`), so no `seq_len x seq_len` matrix
/// is stored. Workgroup memory: 4.3 KiB (first), 4 KiB (second).
pub struct AttentionBackward {
    queries: Kernel,
    keys: Kernel,
}

impl AttentionBackward {
    /// Threads per (token, head), as in the forward kernel.
    const THREADS: usize = 64;

    pub fn new(ctx: &GpuContext) -> Self {
        let kernel = |name, body| {
            let source = Source {
                directives: "",
                params: Params::WGSL,
                constants: &[("THREADS", Self::THREADS), ("MAX_KEYS", Attention::MAX_SEQ_LEN)],
                shared: &[REDUCE_WGSL],
                body,
            };
            Kernel::new(ctx, name, source)
        };
        AttentionBackward {
            queries: kernel("attention_backward", include_str!("../kernels/attention_backward.wgsl")),
            keys: kernel("attention_backward_kv", include_str!("../kernels/attention_backward_kv.wgsl")),
        }
    }

    /// The values `stats` holds for a batch of `tokens` tokens.
    pub fn stats_len(tokens: usize, heads: usize) -> usize {
        tokens * heads * 2
    }

    /// `qkv`, `mask` and `heads` as given to the forward op; `dout`: `[tokens, hidden]`,
    /// the gradient of its output; `dqkv`: `[tokens, 3 * hidden]`, written in full.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        qkv: &GpuTensor,
        mask: &GpuTensor,
        heads: usize,
        dout: &GpuTensor,
        stats: &GpuTensor,
        dqkv: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        let op = "attention_backward";
        for (t, name) in [(qkv, "qkv"), (mask, "mask"), (dout, "dout"), (stats, "stats"), (dqkv, "dqkv")] {
            check_f32(t, op, name)?;
        }
        let (batch, seq_len) = mask.dims2("attention_backward mask")?;
        let (tokens, hidden) = dout.dims2("attention_backward dout")?;
        check(tokens == batch * seq_len, op, || format!("dout has {tokens} rows, mask says {batch} x {seq_len}"))?;
        for (t, name) in [(qkv, "qkv"), (dqkv, "dqkv")] {
            check(t.shape == [tokens, 3 * hidden], op, || {
                format!("{name} {:?} != [{tokens}, {}]", t.shape, 3 * hidden)
            })?;
        }
        check(heads > 0 && hidden % heads == 0, op, || format!("hidden {hidden} is not a multiple of {heads} heads"))?;
        check(seq_len <= Attention::MAX_SEQ_LEN, op, || {
            format!("sequences of {seq_len} tokens exceed the kernel's {}", Attention::MAX_SEQ_LEN)
        })?;
        let want = Self::stats_len(tokens, heads);
        check(stats.len() == want, op, || format!("stats holds {} values, needs {want}", stats.len()))?;
        let max_groups = ctx.limits.max_compute_workgroups_per_dimension as usize;
        check(tokens <= max_groups && heads <= max_groups, op, || {
            format!("{tokens} tokens exceed {max_groups} workgroups a dimension; use smaller batches")
        })?;
        let head_dim = hidden / heads;
        let params = Params {
            seq_len: to_u32(seq_len, op, "seq_len")?,
            heads: to_u32(heads, op, "heads")?,
            head_dim: to_u32(head_dim, op, "head_dim")?,
            hidden: to_u32(hidden, op, "hidden")?,
            scale: 1.0 / (head_dim as f32).sqrt(),
            _pad0: 0,
            _pad1: 0,
            _pad2: 0,
        };
        if tokens == 0 {
            return Ok(Vec::new());
        }
        let groups = (tokens as u32, heads as u32);
        let buffers = [&qkv.buffer, &mask.buffer, &dout.buffer, &stats.buffer, &dqkv.buffer];
        Ok(vec![self.queries.bind(ctx, &params, &buffers, groups), self.keys.bind(ctx, &params, &buffers, groups)])
    }
}
