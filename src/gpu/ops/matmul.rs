use super::{activations_wgsl, check, check_f32, params, to_u32, Dispatch, Kernel, Source};
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
        /// Row strides of the stored x, w and y, in elements.
        ldx: u32,
        ldw: u32,
        ldy: u32,
        /// FLAG_* bits.
        flags: u32,
        /// BIAS_NONE, BIAS_ROW or BIAS_MATRIX.
        bias_mode: u32,
        _pad0: u32,
        _pad1: u32,
        _pad2: u32,
    }
}

const FLAG_TRANS_X: usize = 1;
const FLAG_TRANS_W: usize = 2;
const FLAG_ACCUMULATE: usize = 4;
const BIAS_NONE: usize = 0;
const BIAS_ROW: usize = 1;
const BIAS_MATRIX: usize = 2;

/// A matrix operand of [`MatMul::prepare_product`]: `rows x cols` values of a tensor,
/// row `i` starting at element `i * stride`, read as it is or transposed.
#[derive(Debug, Clone, Copy)]
pub struct Mat<'a> {
    tensor: &'a GpuTensor,
    rows: usize,
    cols: usize,
    stride: usize,
    transposed: bool,
}

impl<'a> Mat<'a> {
    /// A 2-D tensor as it is stored.
    pub fn of(tensor: &'a GpuTensor) -> Result<Self> {
        let (rows, cols) = tensor.dims2("matmul operand")?;
        Ok(Mat { tensor, rows, cols, stride: cols, transposed: false })
    }

    /// Rows 0, step, 2 step, .. of a 2-D tensor: `rows` of them (the first token of each
    /// sequence of a `[batch * step, hidden]` tensor).
    pub fn every_nth_row(tensor: &'a GpuTensor, step: usize, rows: usize) -> Result<Self> {
        let (total, cols) = tensor.dims2("matmul operand")?;
        check(step > 0 && (rows == 0 || (rows - 1) * step < total), "matmul", || {
            format!("{rows} rows every {step} do not fit a tensor of {total} rows")
        })?;
        Ok(Mat { tensor, rows, cols, stride: step * cols, transposed: false })
    }

    /// The same values read transposed.
    pub fn t(self) -> Self {
        Mat { transposed: !self.transposed, ..self }
    }

    /// (rows, columns) as the product reads it.
    pub fn shape(&self) -> (usize, usize) {
        if self.transposed {
            (self.cols, self.rows)
        } else {
            (self.rows, self.cols)
        }
    }
}

/// What [`MatMul::prepare_product`] adds before the activation.
#[derive(Debug, Clone, Copy)]
pub enum Addend<'a> {
    None,
    /// A bias `[n]` added to every row.
    Row(&'a GpuTensor),
    /// A whole `[m, n]` matrix (e.g. the gradient a residual connection carries).
    Matrix(&'a GpuTensor),
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
        let activations = activations_wgsl();
        let kernel = |name, directives, weights| {
            let source = Source {
                directives,
                params: Params::WGSL,
                constants: &[
                    ("TILE", Self::TILE),
                    ("SLICE", Self::SLICE),
                    ("PER_THREAD", Self::PER_THREAD),
                    ("FLAG_TRANS_X", FLAG_TRANS_X),
                    ("FLAG_TRANS_W", FLAG_TRANS_W),
                    ("FLAG_ACCUMULATE", FLAG_ACCUMULATE),
                    ("BIAS_NONE", BIAS_NONE),
                    ("BIAS_ROW", BIAS_ROW),
                    ("BIAS_MATRIX", BIAS_MATRIX),
                ],
                shared: &[weights, &activations],
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
        let (x, w) = (Mat::of(x)?, Mat::of(w)?);
        let (m, k) = x.shape();
        let (n, wk) = w.shape();
        check(wk == k, "matmul", || format!("x is [{m}, {k}] but w is [{n}, {wk}]"))?;
        self.prepare_product(ctx, x, w, Addend::Row(bias), activation, false, Mat::of(y)?)
    }

    /// The general product `y[m, n] (+)= activation(X[m, k] . W[n, k]^T + addend)` on
    /// views of the operands (transposed, strided): the backward passes' products, e.g.
    /// `dX = dY . W` is `prepare_product(dY, W.t(), ..)` and `dW += dY^T . X` is
    /// `prepare_product(dY.t(), X.t(), .., accumulate)`. `y` may be a strided view too
    /// (the first-token rows of a `[batch * seq_len, hidden]` gradient), never transposed.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare_product(
        &self,
        ctx: &GpuContext,
        x: Mat,
        w: Mat,
        addend: Addend,
        activation: Activation,
        accumulate: bool,
        y: Mat,
    ) -> Result<Vec<Dispatch>> {
        check_f32(x.tensor, "matmul", "x")?;
        check_f32(y.tensor, "matmul", "y")?;
        let kernel = match (w.tensor.dtype, &self.kernel_f16_weights) {
            (DType::F32, _) => &self.kernel,
            (DType::F16, Some(kernel)) => kernel,
            (DType::F16, None) => {
                return Err(Error::invalid("gpu matmul: f16 weights need an adapter with shader-f16"))
            }
            (DType::U32, _) => return Err(Error::invalid("gpu matmul: `w` must be f32 or f16")),
        };
        let (m, k) = x.shape();
        let (n, wk) = w.shape();
        check(wk == k, "matmul", || format!("x is [{m}, {k}] but w is [{n}, {wk}]"))?;
        check(y.shape() == (m, n) && !y.transposed, "matmul", || {
            format!("y is {:?} (transposed: {}) but the product is [{m}, {n}]", y.shape(), y.transposed)
        })?;
        let (bias, bias_mode) = match addend {
            Addend::None => (x.tensor, BIAS_NONE),
            Addend::Row(b) => {
                check_f32(b, "matmul", "bias")?;
                check(b.shape == [n], "matmul", || format!("bias {:?} != [{n}]", b.shape))?;
                (b, BIAS_ROW)
            }
            Addend::Matrix(a) => {
                check_f32(a, "matmul", "addend")?;
                check(a.shape == [m, n], "matmul", || format!("addend {:?} != [{m}, {n}]", a.shape))?;
                (a, BIAS_MATRIX)
            }
        };
        // The views must lie inside their tensors (a kernel would read out of bounds).
        for (v, what) in [(&x, "x"), (&w, "w"), (&y, "y")] {
            let end = if v.rows == 0 { 0 } else { (v.rows - 1) * v.stride + v.cols };
            check(end <= v.tensor.len(), "matmul", || format!("the view of `{what}` exceeds its tensor"))?;
        }
        let flags = if x.transposed { FLAG_TRANS_X } else { 0 }
            | if w.transposed { FLAG_TRANS_W } else { 0 }
            | if accumulate { FLAG_ACCUMULATE } else { 0 };
        let params = Params {
            m: to_u32(m, "matmul", "m")?,
            n: to_u32(n, "matmul", "n")?,
            k: to_u32(k, "matmul", "k")?,
            activation: activation as u32,
            ldx: to_u32(x.stride, "matmul", "x stride")?,
            ldw: to_u32(w.stride, "matmul", "w stride")?,
            ldy: to_u32(y.stride, "matmul", "y stride")?,
            flags: flags as u32,
            bias_mode: bias_mode as u32,
            _pad0: 0,
            _pad1: 0,
            _pad2: 0,
        };
        let groups = (to_u32(n.div_ceil(Self::TILE), "matmul", "n")?, to_u32(m.div_ceil(Self::TILE), "matmul", "m")?);
        // A binding may not be both read and written in one dispatch.
        check([x.tensor, w.tensor, bias].iter().all(|t| t.buffer != y.tensor.buffer), "matmul", || {
            "y may not also be an input".to_string()
        })?;
        Ok(vec![kernel.bind(
            ctx,
            &params,
            &[&x.tensor.buffer, &w.tensor.buffer, &bias.buffer, &y.tensor.buffer],
            groups,
        )])
    }
}
