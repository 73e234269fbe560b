use super::{activation_constants, check, check_f32, params, to_u32, Dispatch, Kernel, Source, ACTIVATIONS_WGSL};
use crate::error::{Error, Result};
use crate::gpu::context::{DType, GpuContext, GpuTensor};

/// What the matmul applies to `x . w^T + bias` before storing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    None = 0,
    /// Exact (erf) GELU, as BERT and RoBERTa use in their feed-forward layers.
    Gelu = 1,
    /// tanh, as in BERT's pooler and RoBERTa's classification head.
    Tanh = 2,
    /// GELU's tanh approximation (HF "gelu_new").
    GeluTanh = 3,
    Relu = 4,
}

params! {
    struct Params {
        m: u32,
        n: u32,
        k: u32,
        /// An [`Activation`] code.
        activation: u32,
    }
}

/// The declaration of the weight binding for each storage type (see kernels/matmul.wgsl).
const F32_WEIGHTS: &str = "@group(0) @binding(2) var<storage, read> w: array<f32>;
fn weight(i: u32) -> f32 { return w[i]; }";
const F16_WEIGHTS: &str = "@group(0) @binding(2) var<storage, read> w: array<f16>;
fn weight(i: u32) -> f32 { return f32(w[i]); }";

/// `y[m, n] = activation(x[m, k] . w[n, k]^T + bias[n])`, tiled through workgroup memory
/// (kernels/matmul.wgsl). `w` is in PyTorch's Linear layout (out x in), f32 or (on
/// adapters with `shader-f16`) f16.
pub struct MatMul {
    kernel: Kernel,
    /// Compiled only when the device has `shader-f16`.
    kernel_f16_weights: Option<Kernel>,
}

impl MatMul {
    /// Rows and columns of y per workgroup.
    const TILE: usize = 64;
    /// k values staged in workgroup memory at a time.
    const SLICE: usize = 16;
    /// Each thread computes a PER_THREAD x PER_THREAD block of y (the kernel's four
    /// accumulators are written for 4): 16 x 16 threads, 2 x 4 KiB of workgroup memory.
    const PER_THREAD: usize = 4;

    pub fn new(ctx: &GpuContext) -> Self {
        let activations = activation_constants();
        let kernel = |name, directives, weights| {
            let source = Source {
                directives,
                params: Params::WGSL,
                constants: &[("TILE", Self::TILE), ("SLICE", Self::SLICE), ("PER_THREAD", Self::PER_THREAD)],
                shared: &[weights, &activations, ACTIVATIONS_WGSL],
                body: include_str!("../kernels/matmul.wgsl"),
            };
            Kernel::new(ctx, name, source)
        };
        MatMul {
            kernel: kernel("matmul", "", F32_WEIGHTS),
            kernel_f16_weights: ctx
                .adapter
                .shader_f16
                .then(|| kernel("matmul_f16_weights", "enable f16;\n", F16_WEIGHTS)),
        }
    }

    pub fn prepare(
        &self,
        ctx: &GpuContext,
        x: &GpuTensor,
        w: &GpuTensor,
        bias: &GpuTensor,
        activation: Activation,
        y: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        for (t, name) in [(x, "x"), (bias, "bias"), (y, "y")] {
            check_f32(t, "matmul", name)?;
        }
        let kernel = match (w.dtype, &self.kernel_f16_weights) {
            (DType::F32, _) => &self.kernel,
            (DType::F16, Some(kernel)) => kernel,
            (DType::F16, None) => {
                return Err(Error::invalid("gpu matmul: f16 weights need an adapter with shader-f16"))
            }
            (DType::U32, _) => return Err(Error::invalid("gpu matmul: `w` must be f32 or f16")),
        };
        let (m, k) = x.dims2("matmul x")?;
        let (n, wk) = w.dims2("matmul w")?;
        check(wk == k, "matmul", || format!("x is [{m}, {k}] but w is [{n}, {wk}]"))?;
        check(bias.shape == [n], "matmul", || format!("bias {:?} != [{n}]", bias.shape))?;
        check(y.shape == [m, n], "matmul", || format!("y {:?} != [{m}, {n}]", y.shape))?;
        let params = Params {
            m: to_u32(m, "matmul", "m")?,
            n: to_u32(n, "matmul", "n")?,
            k: to_u32(k, "matmul", "k")?,
            activation: activation as u32,
        };
        let groups = (to_u32(n.div_ceil(Self::TILE), "matmul", "n")?, to_u32(m.div_ceil(Self::TILE), "matmul", "m")?);
        Ok(vec![kernel.bind(ctx, &params, &[&x.buffer, &w.buffer, &bias.buffer, &y.buffer], groups)])
    }
}
