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

/// The precision of the staged slices and of one slice's sums (see kernels/matmul.wgsl).
const F32_MATH: &str = "alias Scalar = f32;
alias Stage = vec4<f32>;
alias Part = mat4x4<f32>;
const F16_MATH: bool = false;";
const F16_MATH: &str = "alias Scalar = f16;
alias Stage = vec4<f16>;
alias Part = mat4x4<f16>;
const F16_MATH: bool = true;";

/// The two tile shapes of kernels/matmul.wgsl: a workgroup of 16 x 16 threads computes a
/// `size` x `size` block of y, each thread `per_thread` x `per_thread` of it, staging `slice`
/// values of k at a time (2 x slice x (size + 4) x 4 bytes of workgroup memory: at most 8.5 KiB for
/// either, within WebGPU's guaranteed 16 KiB).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tile {
    /// 64 x 64, 4 x 4 a thread: four times as many workgroups as `Large` for a small product.
    Small,
    /// 128 x 128, 8 x 8 a thread: every staged value is used twice as often.
    Large,
}

impl Tile {
    /// A product takes large tiles when it has at least this many of them: enough
    /// workgroups to keep every core of a large GPU busy (an H100 has 132 multiprocessors,
    /// each holding several workgroups), where the higher reuse pays; fewer, and the small
    /// tiles' four times as many workgroups fill the GPU better.
    pub const LARGE_MIN_WORKGROUPS: usize = 256;

    /// The tile an `m` x `n` product is computed with. Natively, `MEDRANK_GPU_TILE=small`
    /// or `=large` forces one for every product (an A/B switch for benchmarks, like
    /// `MEDRANK_CPU_KERNEL`).
    pub fn for_product(m: usize, n: usize) -> Tile {
        #[cfg(not(target_arch = "wasm32"))]
        match std::env::var("MEDRANK_GPU_TILE").as_deref() {
            Ok("small") => return Tile::Small,
            Ok("large") => return Tile::Large,
            _ => {}
        }
        if m.div_ceil(128) * n.div_ceil(128) >= Self::LARGE_MIN_WORKGROUPS {
            Tile::Large
        } else {
            Tile::Small
        }
    }

    fn size(self) -> usize {
        match self {
            Tile::Small => 64,
            Tile::Large => 128,
        }
    }

    fn per_thread(self) -> usize {
        match self {
            Tile::Small => 4,
            Tile::Large => 8,
        }
    }

    fn slice(self) -> usize {
        match self {
            Tile::Small => 16,
            Tile::Large => 8,
        }
    }
}

/// `y[m, n] = activation(x[m, k] . w[n, k]^T + bias[n])`, tiled through workgroup memory
/// (kernels/matmul.wgsl). `w` is in PyTorch's Linear layout (out x in), f32 or (on
/// adapters with `shader-f16`) f16.
pub struct MatMul {
    /// Indexed by [`Tile`]: small, large.
    kernels: [Kernel; 2],
    /// Compiled only when the device has `shader-f16`: f32 arithmetic, or (made with
    /// [`MatMul::with_f16_math`]) f16 products summed per slice.
    kernels_f16_weights: Option<[Kernel; 2]>,
}

impl MatMul {
    /// Every product in f32 arithmetic, whatever the weights' storage.
    pub fn new(ctx: &GpuContext) -> Self {
        Self::with_f16_math(ctx, false)
    }

    /// With `f16_math`, products with f16 weights stage x in f16 and sum each slice's
    /// products in f16 before the f32 accumulation (kernels/matmul.wgsl); f32 weights
    /// keep f32 arithmetic.
    pub fn with_f16_math(ctx: &GpuContext, f16_math: bool) -> Self {
        let activations = activations_wgsl();
        let kernel = |name, tile: Tile, directives, weights, math| {
            let source = Source {
                directives,
                params: Params::WGSL,
                constants: &[
                    ("TILE", tile.size()),
                    ("SLICE", tile.slice()),
                    ("PER_THREAD", tile.per_thread()),
                    ("FLAG_TRANS_X", FLAG_TRANS_X),
                    ("FLAG_TRANS_W", FLAG_TRANS_W),
                    ("FLAG_ACCUMULATE", FLAG_ACCUMULATE),
                    ("BIAS_NONE", BIAS_NONE),
                    ("BIAS_ROW", BIAS_ROW),
                    ("BIAS_MATRIX", BIAS_MATRIX),
                ],
                shared: &[weights, math, &activations],
                body: include_str!("../kernels/matmul.wgsl"),
            };
            Kernel::new(ctx, name, source)
        };
        MatMul {
            kernels: [
                kernel("matmul_64", Tile::Small, "", F32_WEIGHTS, F32_MATH),
                kernel("matmul_128", Tile::Large, "", F32_WEIGHTS, F32_MATH),
            ],
            kernels_f16_weights: ctx.adapter.shader_f16.then(|| {
                let math = if f16_math { F16_MATH } else { F32_MATH };
                [
                    kernel("matmul_64_f16_weights", Tile::Small, "enable f16;\n", F16_WEIGHTS, math),
                    kernel("matmul_128_f16_weights", Tile::Large, "enable f16;\n", F16_WEIGHTS, math),
                ]
            }),
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
        let kernels = match (w.tensor.dtype, &self.kernels_f16_weights) {
            (DType::F32, _) => &self.kernels,
            (DType::F16, Some(kernels)) => kernels,
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
        let tile = Tile::for_product(m, n);
        let kernel = &kernels[tile as usize];
        let groups = (to_u32(n.div_ceil(tile.size()), "matmul", "n")?, to_u32(m.div_ceil(tile.size()), "matmul", "m")?);
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

#[cfg(test)]
mod tests {
    use super::Tile;

    /// kernels/matmul.wgsl stages exactly four values of each operand per thread (of 256)
    /// and slice, whichever the tile.
    #[test]
    fn every_tile_stages_four_values_per_thread() {
        for tile in [Tile::Small, Tile::Large] {
            assert_eq!(tile.size() * tile.slice(), 4 * 256, "{tile:?}");
            assert_eq!(tile.size(), 16 * tile.per_thread(), "{tile:?}");
        }
    }
}
