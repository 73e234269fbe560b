use super::{check, check_f32, grid, ColumnSum, Dispatch, Kernel, LayerNorm};
use crate::error::Result;
use crate::gpu::context::{GpuContext, GpuTensor};

/// The gradients of [`super::LayerNorm`] (kernels/layer_norm_backward.wgsl, then two
/// column sums): `dx` (the gradient of `x` and of the residual alike), and gamma's and
/// beta's, added to `dgamma` and `dbeta` (gradients summed over micro-batches: clear them
/// first). `scratch` (`[rows, cols]`) holds `dy * xhat` between the two kernels.
pub struct LayerNormBackward {
    kernel: Kernel,
    column_sum: ColumnSum,
}

/// The tensors of one [`LayerNormBackward::prepare`]: the forward's inputs, the output's
/// gradient, and where the gradients go.
pub struct LayerNormGrads<'a> {
    pub x: &'a GpuTensor,
    pub residual: Option<&'a GpuTensor>,
    pub gamma: &'a GpuTensor,
    pub eps: f32,
    pub dy: &'a GpuTensor,
    pub dx: &'a GpuTensor,
    pub scratch: &'a GpuTensor,
    pub dgamma: &'a GpuTensor,
    pub dbeta: &'a GpuTensor,
}

impl LayerNormBackward {
    pub fn new(ctx: &GpuContext) -> Self {
        let body = include_str!("../kernels/layer_norm_backward.wgsl");
        LayerNormBackward {
            kernel: LayerNorm::kernel(ctx, "layer_norm_backward", body),
            column_sum: ColumnSum::new(ctx),
        }
    }

    pub fn prepare(&self, ctx: &GpuContext, t: &LayerNormGrads) -> Result<Vec<Dispatch>> {
        let op = "layer_norm_backward";
        let (params, (rows, cols), residual) = LayerNorm::params(op, t.x, t.residual, t.eps)?;
        for (x, name) in [
            (t.gamma, "gamma"),
            (t.dy, "dy"),
            (t.dx, "dx"),
            (t.scratch, "scratch"),
            (t.dgamma, "dgamma"),
            (t.dbeta, "dbeta"),
        ] {
            check_f32(x, op, name)?;
        }
        for (y, name) in [(t.dy, "dy"), (t.dx, "dx"), (t.scratch, "scratch")] {
            check(y.shape == t.x.shape, op, || format!("{name} {:?} != x {:?}", y.shape, t.x.shape))?;
        }
        for (v, name) in [(t.gamma, "gamma"), (t.dgamma, "dgamma"), (t.dbeta, "dbeta")] {
            check(v.shape == [cols], op, || format!("{name} {:?} != [{cols}]", v.shape))?;
        }
        let buffers = [&t.x.buffer, residual, &t.gamma.buffer, &t.dy.buffer, &t.dx.buffer, &t.scratch.buffer];
        let mut out = vec![self.kernel.bind(ctx, &params, &buffers, grid(ctx, rows)?)];
        out.extend(self.column_sum.prepare(ctx, t.scratch, true, t.dgamma)?);
        out.extend(self.column_sum.prepare(ctx, t.dy, true, t.dbeta)?);
        Ok(out)
    }
}
