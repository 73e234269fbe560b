use super::{check, check_f32, grid, params, to_u32, Dispatch, Kernel, LAYER_NORM_STATS_WGSL, REDUCE_WGSL};
use crate::error::Result;
use crate::gpu::context::{GpuContext, GpuTensor};

params! {
    struct Params {
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
        let body = include_str!("../kernels/layer_norm.wgsl");
        LayerNorm {
            kernel: Kernel::with_threads(
                ctx,
                "layer_norm",
                Params::WGSL,
                Self::THREADS,
                &[REDUCE_WGSL, LAYER_NORM_STATS_WGSL],
                body,
            ),
        }
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
        for (t, name) in [(x, "x"), (gamma, "gamma"), (beta, "beta"), (out, "out")] {
            check_f32(t, "layer_norm", name)?;
        }
        let (rows, cols) = x.dims2("layer_norm x")?;
        if let Some(r) = residual {
            check_f32(r, "layer_norm", "residual")?;
            check(r.shape == x.shape, "layer_norm", || format!("residual {:?} != x {:?}", r.shape, x.shape))?;
        }
        check(gamma.shape == [cols] && beta.shape == [cols], "layer_norm", || {
            format!("gamma {:?} / beta {:?} != [{cols}]", gamma.shape, beta.shape)
        })?;
        check(out.shape == x.shape, "layer_norm", || format!("out {:?} != x {:?}", out.shape, x.shape))?;
        let params = Params {
            rows: to_u32(rows, "layer_norm", "rows")?,
            cols: to_u32(cols, "layer_norm", "cols")?,
            eps,
            has_residual: residual.is_some() as u32,
        };
        // Without a residual the binding still needs a buffer; `x` is never read through it.
        let residual = residual.unwrap_or(x);
        let buffers = [&x.buffer, &residual.buffer, &gamma.buffer, &beta.buffer, &out.buffer];
        Ok(vec![self.kernel.bind(ctx, &params, &buffers, grid(ctx, rows)?)])
    }
}
