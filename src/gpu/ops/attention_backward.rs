use super::{check, check_f32, Attention, AttentionDropout, Dispatch, Kernel};
use crate::error::Result;
use crate::gpu::context::{GpuContext, GpuTensor};

/// The gradient of [`Attention`] with respect to its `qkv` input
/// (kernels/attention_backward.wgsl: softmax backward and dq per query;
/// kernels/attention_backward_kv.wgsl: dk and dv per key), with the forward op's
/// parameters and shared scores. The softmax is recomputed from `qkv` and the mask in both;
/// two numbers per (token, head) pass from the first kernel to the second through `stats`
/// (`[tokens * heads * 2]`), so no `seq_len x seq_len` matrix is stored. Workgroup memory:
/// 4.3 KiB (first), 4 KiB (second). Each is compiled twice: as is, and dropping the
/// probabilities as [`Attention::prepare_dropping`] did (training with dropout).
pub struct AttentionBackward {
    queries: Kernel,
    keys: Kernel,
    queries_dropping: Kernel,
    keys_dropping: Kernel,
}

impl AttentionBackward {
    pub fn new(ctx: &GpuContext) -> Self {
        let queries = |dropout| {
            Attention::kernel(ctx, "attention_backward", include_str!("../kernels/attention_backward.wgsl"), dropout)
        };
        let keys = |dropout| {
            Attention::kernel(
                ctx,
                "attention_backward_kv",
                include_str!("../kernels/attention_backward_kv.wgsl"),
                dropout,
            )
        };
        AttentionBackward {
            queries: queries(false),
            keys: keys(false),
            queries_dropping: queries(true),
            keys_dropping: keys(true),
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
        self.prepare_full(ctx, qkv, mask, heads, None, dout, stats, dqkv)
    }

    /// [`Self::prepare`] for [`Attention::prepare_dropping`]'s output, with its `dropout`.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare_dropping(
        &self,
        ctx: &GpuContext,
        qkv: &GpuTensor,
        mask: &GpuTensor,
        heads: usize,
        dropout: &AttentionDropout,
        dout: &GpuTensor,
        stats: &GpuTensor,
        dqkv: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        self.prepare_full(ctx, qkv, mask, heads, Some(dropout), dout, stats, dqkv)
    }

    #[allow(clippy::too_many_arguments)]
    fn prepare_full(
        &self,
        ctx: &GpuContext,
        qkv: &GpuTensor,
        mask: &GpuTensor,
        heads: usize,
        dropout: Option<&AttentionDropout>,
        dout: &GpuTensor,
        stats: &GpuTensor,
        dqkv: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        let op = "attention_backward";
        for (t, name) in [(qkv, "qkv"), (mask, "mask"), (dout, "dout"), (stats, "stats"), (dqkv, "dqkv")] {
            check_f32(t, op, name)?;
        }
        let (tokens, hidden) = dout.dims2("attention_backward dout")?;
        for (t, name) in [(qkv, "qkv"), (dqkv, "dqkv")] {
            check(t.shape == [tokens, 3 * hidden], op, || {
                format!("{name} {:?} != [{tokens}, {}]", t.shape, 3 * hidden)
            })?;
        }
        let want = Self::stats_len(tokens, heads);
        check(stats.len() == want, op, || format!("stats holds {} values, needs {want}", stats.len()))?;
        let mut params = Attention::params(ctx, op, mask, (tokens, hidden), heads)?;
        // One workgroup per (token, head): tokens along one grid dimension.
        let max_groups = ctx.limits.max_compute_workgroups_per_dimension as usize;
        check(tokens <= max_groups, op, || {
            format!("{tokens} tokens exceed {max_groups} workgroups a dimension; use smaller batches")
        })?;
        if tokens == 0 {
            return Ok(Vec::new());
        }
        let groups = (tokens as u32, heads as u32);
        let mut buffers = vec![&qkv.buffer, &mask.buffer, &dout.buffer, &stats.buffer, &dqkv.buffer];
        let (queries, keys) = match dropout {
            Some(d) => {
                Attention::drop_params(op, &mut params, d, mask.dims2("attention_backward mask")?.0)?;
                buffers.push(&d.inputs.buffer);
                (&self.queries_dropping, &self.keys_dropping)
            }
            None => (&self.queries, &self.keys),
        };
        Ok(vec![queries.bind(ctx, &params, &buffers, groups), keys.bind(ctx, &params, &buffers, groups)])
    }
}
