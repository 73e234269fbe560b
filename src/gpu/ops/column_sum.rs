use super::{check, check_f32, grid, params, to_u32, Dispatch, Kernel};
use crate::error::Result;
use crate::gpu::context::{GpuContext, GpuTensor};

params! {
    struct Params {
        rows: u32,
        cols: u32,
        /// 1: add to `out` (gradients summed over micro-batches).
        accumulate: u32,
        _pad0: u32,
    }
}

/// `out[c] (+)= sum_r x[r, c]` (kernels/column_sum.wgsl): the gradient of a bias from the
/// gradient of the output it was added to.
pub struct ColumnSum {
    kernel: Kernel,
}

impl ColumnSum {
    /// Columns per workgroup, one a thread.
    const THREADS: usize = 64;

    pub fn new(ctx: &GpuContext) -> Self {
        let body = include_str!("../kernels/column_sum.wgsl");
        ColumnSum { kernel: Kernel::with_threads(ctx, "column_sum", Params::WGSL, Self::THREADS, &[], body) }
    }

    /// `x`: `[rows, cols]`; `out`: `[cols]`.
    pub fn prepare(&self, ctx: &GpuContext, x: &GpuTensor, accumulate: bool, out: &GpuTensor) -> Result<Vec<Dispatch>> {
        check_f32(x, "column_sum", "x")?;
        check_f32(out, "column_sum", "out")?;
        let (rows, cols) = x.dims2("column_sum x")?;
        check(out.shape == [cols], "column_sum", || format!("out {:?} != [{cols}]", out.shape))?;
        let params = Params {
            rows: to_u32(rows, "column_sum", "rows")?,
            cols: to_u32(cols, "column_sum", "cols")?,
            accumulate: accumulate as u32,
            _pad0: 0,
        };
        Ok(vec![self.kernel.bind(ctx, &params, &[&x.buffer, &out.buffer], grid(ctx, cols.div_ceil(Self::THREADS))?)])
    }
}
