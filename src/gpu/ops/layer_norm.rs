use super::{check, check_f32, grid, params, to_u32, Dispatch, Kernel, LAYER_NORM_STATS_WGSL, REDUCE_WGSL};
use crate::error::Result;
use crate::gpu::context::{GpuContext, GpuTensor};

params! {
    /// The forward and the backward kernel's parameters.
    pub(super) struct Params {
        rows: u32,
        cols: u32,
        eps: f32,
        /// 0: the `residual` binding is a placeholder and is not read.
        has_residual: u32,
    }
}

/// `out = LayerNorm(x + residual) * gamma + beta` per row (kernels/layer_norm.wgsl),
/// with the residual add fused; `residual = None` normalises `x` alone.
pub struct LayerNorm {
    kernel: Kernel,
}

impl LayerNorm {
    /// Threads per row (one workgroup a row).
    const THREADS: usize = 256;

    pub fn new(ctx: &GpuContext) -> Self {
        LayerNorm { kernel: Self::kernel(ctx, "layer_norm", include_str!("../kernels/layer_norm.wgsl")) }
    }

    /// A LayerNorm kernel (this op's or its gradient's): one workgroup a row, the shared
    /// inputs and statistics of layer_norm_stats.wgsl.
    pub(super) fn kernel(ctx: &GpuContext, name: &'static str, body: &str) -> Kernel {
        Kernel::with_threads(ctx, name, Params::WGSL, Self::THREADS, &[REDUCE_WGSL, LAYER_NORM_STATS_WGSL], body)
    }

    /// Checks `x` (`[rows, cols]`) and the optional `residual` (the same shape) and
    /// returns the kernels' parameters, `(rows, cols)` and the buffer bound as the
    /// residual (without one, `x`'s: the binding needs a buffer; the kernel does not read it).
    pub(super) fn params<'a>(
        op: &str,
        x: &'a GpuTensor,
        residual: Option<&'a GpuTensor>,
        eps: f32,
    ) -> Result<(Params, (usize, usize), &'a wgpu::Buffer)> {
        check_f32(x, op, "x")?;
        let (rows, cols) = x.dims2(&format!("{op} x"))?;
        if let Some(r) = residual {
            check_f32(r, op, "residual")?;
            check(r.shape == x.shape, op, || format!("residual {:?} != x {:?}", r.shape, x.shape))?;
        }
        let params = Params {
            rows: to_u32(rows, op, "rows")?,
            cols: to_u32(cols, op, "cols")?,
            eps,
            has_residual: residual.is_some() as u32,
        };
        Ok((params, (rows, cols), &residual.unwrap_or(x).buffer))
    }

    #[allow(clippy::too_many_arguments)]
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        x: &GpuTensor,
        residual: Option<&GpuTensor>,
        gamma: &GpuTensor,
        beta: &GpuTensor,
        eps: f32,
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        let (params, (rows, cols), residual) = Self::params("layer_norm", x, residual, eps)?;
        for (t, name) in [(gamma, "gamma"), (beta, "beta"), (out, "out")] {
            check_f32(t, "layer_norm", name)?;
        }
        check(gamma.shape == [cols] && beta.shape == [cols], "layer_norm", || {
            format!("gamma {:?} / beta {:?} != [{cols}]", gamma.shape, beta.shape)
        })?;
        check(out.shape == x.shape, "layer_norm", || format!("out {:?} != x {:?}", out.shape, x.shape))?;
        let buffers = [&x.buffer, residual, &gamma.buffer, &beta.buffer, &out.buffer];
        Ok(vec![self.kernel.bind(ctx, &params, &buffers, grid(ctx, rows)?)])
    }
}
