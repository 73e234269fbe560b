use super::{check, check_f32, grid, params, to_u32, Dispatch, Kernel, Source, REDUCE_WGSL};
use crate::error::Result;
use crate::gpu::context::{GpuContext, GpuTensor};
use crate::model::{Pooling, PoolingMode};

params! {
    struct Params {
        rows: u32,
        seq_len: u32,
        hidden: u32,
        /// A [`PoolingMode`] as its MODE_* code.
        mode: u32,
        /// 1: scale each vector to unit length.
        normalize: u32,
        _pad0: u32,
        _pad1: u32,
        _pad2: u32,
    }
}

/// One vector per sequence from its tokens' states (kernels/pool.wgsl): the mean or the
/// maximum over the real tokens, or the first token's state, optionally normalised; what
/// [`Pooling::pool`] computes on the host.
pub struct Pool {
    kernel: Kernel,
}

impl Pool {
    /// Threads per row (one workgroup a row; the columns are split over them).
    const THREADS: usize = 128;

    pub fn new(ctx: &GpuContext) -> Self {
        // The kernel's MODE_* codes are the host enum's own discriminants.
        let constants = [
            ("THREADS", Self::THREADS),
            ("MODE_MEAN", PoolingMode::Mean as usize),
            ("MODE_CLS", PoolingMode::Cls as usize),
            ("MODE_MAX", PoolingMode::Max as usize),
        ];
        let source = Source {
            directives: "",
            params: Params::WGSL,
            constants: &constants,
            shared: &[REDUCE_WGSL],
            body: include_str!("../kernels/pool.wgsl"),
        };
        Pool { kernel: Kernel::new(ctx, "pool", source) }
    }

    /// `x`: `[rows * seq_len, hidden]` token states; `mask`: `[rows, seq_len]` (1 for real
    /// tokens); `out`: `[rows, hidden]`.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        x: &GpuTensor,
        mask: &GpuTensor,
        pooling: Pooling,
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        for (t, name) in [(x, "x"), (mask, "mask"), (out, "out")] {
            check_f32(t, "pool", name)?;
        }
        let (rows, seq_len) = mask.dims2("pool mask")?;
        let (tokens, hidden) = x.dims2("pool x")?;
        check(tokens == rows * seq_len, "pool", || format!("x has {tokens} token rows, the mask {rows} x {seq_len}"))?;
        check(out.shape == [rows, hidden], "pool", || format!("out {:?} != [{rows}, {hidden}]", out.shape))?;
        let params = Params {
            rows: to_u32(rows, "pool", "rows")?,
            seq_len: to_u32(seq_len, "pool", "seq_len")?,
            hidden: to_u32(hidden, "pool", "hidden")?,
            mode: pooling.mode as u32,
            normalize: pooling.normalize as u32,
            _pad0: 0,
            _pad1: 0,
            _pad2: 0,
        };
        if rows == 0 {
            return Ok(Vec::new());
        }
        Ok(vec![self.kernel.bind(ctx, &params, &[&x.buffer, &mask.buffer, &out.buffer], grid(ctx, rows)?)])
    }
}
