use super::{activations_wgsl, check, check_f32, grid, params, to_u32, Activation, Dispatch, Kernel, Source};
use crate::error::{Error, Result};
use crate::gpu::context::{GpuContext, GpuTensor};

params! {
    struct Params {
        /// Output elements.
        len: u32,
        /// MODE_* code.
        mode: u32,
        /// The [`Activation`] code applied in MODE_FORWARD and MODE_GATED.
        activation: u32,
        /// MODE_GATED: the output's width I (the input's is 2 I); unused otherwise.
        inner: u32,
    }
}

/// What the kernel computes: its MODE_* codes.
#[derive(Clone, Copy)]
enum Mode {
    Forward = 0,
    Gelu,
    Tanh,
    Relu,
    Gated,
}

/// The activations elementwise where a product cannot fuse them (kernels/activation.wgsl):
/// ModernBERT's gated feed-forward (GeGLU) in inference, and for training an activation
/// applied forward to a saved pre-activation and the activations' gradients. GELU's
/// gradient is taken from its input, tanh's and ReLU's from their output (what the
/// training pass keeps).
pub struct ActivationOp {
    kernel: Kernel,
}

impl ActivationOp {
    /// Output elements per workgroup, one a thread.
    const THREADS: usize = 256;

    pub fn new(ctx: &GpuContext) -> Self {
        let activations = activations_wgsl();
        let source = Source {
            directives: "",
            params: Params::WGSL,
            constants: &[
                ("THREADS", Self::THREADS),
                ("MODE_FORWARD", Mode::Forward as usize),
                ("MODE_GELU", Mode::Gelu as usize),
                ("MODE_TANH", Mode::Tanh as usize),
                ("MODE_RELU", Mode::Relu as usize),
                ("MODE_GATED", Mode::Gated as usize),
            ],
            shared: &[&activations],
            body: include_str!("../kernels/activation.wgsl"),
        };
        ActivationOp { kernel: Kernel::new(ctx, "activation", source) }
    }

    /// `out = activation(x)` elementwise; or, `gated`, the gated feed-forward (GeGLU):
    /// `x = [input | gate]` (`[rows, 2 I]`) to `out[r, c] = activation(input[r, c]) * gate[r, c]`
    /// (`[rows, I]`).
    pub fn prepare_forward(
        &self,
        ctx: &GpuContext,
        x: &GpuTensor,
        activation: Activation,
        gated: bool,
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        if !gated {
            check(out.shape == x.shape, "activation", || format!("out {:?} != x {:?}", out.shape, x.shape))?;
            return self.bind(ctx, x, x, Mode::Forward, activation, 0, out);
        }
        let (rows, inner) = out.dims2("gated activation out")?;
        check(x.shape == [rows, 2 * inner], "activation", || format!("x {:?} != [{rows}, {}]", x.shape, 2 * inner))?;
        self.bind(ctx, x, x, Mode::Gated, activation, to_u32(inner, "activation", "inner")?, out)
    }

    /// `dx = grad * activation'`: `saved` is the input of GELU, the output of tanh and ReLU.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        activation: Activation,
        saved: &GpuTensor,
        grad: &GpuTensor,
        dx: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        let mode = match activation {
            Activation::Gelu => Mode::Gelu,
            Activation::Tanh => Mode::Tanh,
            Activation::Relu => Mode::Relu,
            other => return Err(Error::invalid(format!("gpu activation: no gradient for {other:?}"))),
        };
        check_f32(grad, "activation", "grad")?;
        check(grad.shape == saved.shape, "activation", || format!("grad {:?} != saved {:?}", grad.shape, saved.shape))?;
        check(dx.shape == saved.shape, "activation", || format!("dx {:?} != saved {:?}", dx.shape, saved.shape))?;
        self.bind(ctx, saved, grad, mode, Activation::None, 0, dx)
    }

    #[allow(clippy::too_many_arguments)]
    fn bind(
        &self,
        ctx: &GpuContext,
        x: &GpuTensor,
        grad: &GpuTensor,
        mode: Mode,
        activation: Activation,
        inner: u32,
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        check_f32(x, "activation", "x")?;
        check_f32(out, "activation", "out")?;
        let params = Params {
            len: to_u32(out.len(), "activation", "len")?,
            mode: mode as u32,
            activation: activation as u32,
            inner,
        };
        let groups = grid(ctx, out.len().div_ceil(Self::THREADS).max(1))?;
        Ok(vec![self.kernel.bind(ctx, &params, &[&x.buffer, &grad.buffer, &out.buffer], groups)])
    }
}
