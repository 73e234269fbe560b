use super::{check, check_f32, grid, params, to_u32, Dispatch, Kernel};
use crate::error::Result;
use crate::gpu::context::{GpuContext, GpuTensor};

params! {
    struct Params {
        tokens: u32,
        /// Padded length of every sequence: a token's position is its row mod this.
        seq_len: u32,
        heads: u32,
        head_dim: u32,
        hidden: u32,
        _pad0: u32,
        _pad1: u32,
        _pad2: u32,
    }
}

/// ModernBERT's rotary position embeddings, in place on the query and key columns of the
/// fused projection (kernels/rotary.wgsl).
pub struct Rotary {
    kernel: Kernel,
}

impl Rotary {
    /// Rotated pairs per workgroup, one a thread.
    const THREADS: usize = 256;

    pub fn new(ctx: &GpuContext) -> Self {
        let body = include_str!("../kernels/rotary.wgsl");
        Rotary { kernel: Kernel::with_threads(ctx, "rotary", Params::WGSL, Self::THREADS, &[], body) }
    }

    /// `qkv`: `[batch * seq_len, 3 * hidden]`, changed in place; `cos`, `sin`: `[positions,
    /// head_dim / 2]` with at least `seq_len` positions.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        qkv: &GpuTensor,
        seq_len: usize,
        heads: usize,
        (cos, sin): (&GpuTensor, &GpuTensor),
    ) -> Result<Vec<Dispatch>> {
        for (t, name) in [(qkv, "qkv"), (cos, "cos"), (sin, "sin")] {
            check_f32(t, "rotary", name)?;
        }
        let (tokens, width) = qkv.dims2("rotary qkv")?;
        let hidden = width / 3;
        check(width == 3 * hidden && heads > 0 && hidden % heads == 0, "rotary", || {
            format!("qkv {:?} is not [tokens, 3 x {heads} heads]", qkv.shape)
        })?;
        let head_dim = hidden / heads;
        let (positions, half) = cos.dims2("rotary cos")?;
        check(head_dim.is_multiple_of(2) && half == head_dim / 2 && sin.shape == cos.shape, "rotary", || {
            format!("tables {:?} / {:?} for heads of {head_dim}", cos.shape, sin.shape)
        })?;
        check(seq_len > 0 && tokens % seq_len == 0 && seq_len <= positions, "rotary", || {
            format!("{tokens} tokens in sequences of {seq_len}, tables of {positions} positions")
        })?;
        let params = Params {
            tokens: to_u32(tokens, "rotary", "tokens")?,
            seq_len: to_u32(seq_len, "rotary", "seq_len")?,
            heads: to_u32(heads, "rotary", "heads")?,
            head_dim: to_u32(head_dim, "rotary", "head_dim")?,
            hidden: to_u32(hidden, "rotary", "hidden")?,
            _pad0: 0,
            _pad1: 0,
            _pad2: 0,
        };
        // One thread per rotated pair: heads x D/2 of q and as many of k, hidden in all.
        let groups = grid(ctx, (tokens * hidden).div_ceil(Self::THREADS).max(1))?;
        Ok(vec![self.kernel.bind(ctx, &params, &[&qkv.buffer, &cos.buffer, &sin.buffer], groups)])
    }
}
