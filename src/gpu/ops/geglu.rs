use super::{activations_wgsl, check, check_f32, grid, params, to_u32, Activation, Dispatch, Kernel};
use crate::error::Result;
use crate::gpu::context::{GpuContext, GpuTensor};

params! {
    struct Params {
        rows: u32,
        /// I: the output's width, half the input's.
        inner: u32,
        activation: u32,
        _pad0: u32,
    }
}

/// ModernBERT's GeGLU (kernels/geglu.wgsl): `[rows, 2 I]` (input | gate) to `[rows, I]`.
pub struct GeGlu {
    kernel: Kernel,
}

impl GeGlu {
    /// Output values per workgroup, one a thread.
    const THREADS: usize = 256;

    pub fn new(ctx: &GpuContext) -> Self {
        let body = include_str!("../kernels/geglu.wgsl");
        let shared = activations_wgsl();
        GeGlu { kernel: Kernel::with_threads(ctx, "geglu", Params::WGSL, Self::THREADS, &[&shared], body) }
    }

    pub fn prepare(
        &self,
        ctx: &GpuContext,
        x: &GpuTensor,
        activation: Activation,
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        check_f32(x, "geglu", "x")?;
        check_f32(out, "geglu", "out")?;
        let (rows, inner) = out.dims2("geglu out")?;
        check(x.shape == [rows, 2 * inner], "geglu", || format!("x {:?} != [{rows}, {}]", x.shape, 2 * inner))?;
        let params = Params {
            rows: to_u32(rows, "geglu", "rows")?,
            inner: to_u32(inner, "geglu", "inner")?,
            activation: activation as u32,
            _pad0: 0,
        };
        let groups = grid(ctx, (rows * inner).div_ceil(Self::THREADS).max(1))?;
        Ok(vec![self.kernel.bind(ctx, &params, &[&x.buffer, &out.buffer], groups)])
    }
}
