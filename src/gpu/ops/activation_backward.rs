use super::{activations_wgsl, check, check_f32, grid, params, to_u32, Activation, Dispatch, Kernel, Source};
use crate::error::{Error, Result};
use crate::gpu::context::{GpuContext, GpuTensor};

params! {
    struct Params {
        len: u32,
        /// MODE_* code.
        mode: u32,
        /// The [`Activation`] code applied in MODE_FORWARD.
        activation: u32,
        _pad0: u32,
    }
}

const MODE_FORWARD: usize = 0;
const MODE_GELU: usize = 1;
const MODE_TANH: usize = 2;
const MODE_RELU: usize = 3;

/// The activations elementwise for training (kernels/activation_backward.wgsl): applied
/// forward to a saved pre-activation, and their gradients. GELU's gradient is taken from
/// its input, tanh's and ReLU's from their output (what the training pass keeps).
pub struct ActivationBackward {
    kernel: Kernel,
}

impl ActivationBackward {
    /// Elements per workgroup, one a thread.
    const THREADS: usize = 256;

    pub fn new(ctx: &GpuContext) -> Self {
        let activations = activations_wgsl();
        let source = Source {
            directives: "",
            params: Params::WGSL,
            constants: &[
                ("THREADS", Self::THREADS),
                ("MODE_FORWARD", MODE_FORWARD),
                ("MODE_GELU", MODE_GELU),
                ("MODE_TANH", MODE_TANH),
                ("MODE_RELU", MODE_RELU),
            ],
            shared: &[&activations],
            body: include_str!("../kernels/activation_backward.wgsl"),
        };
        ActivationBackward { kernel: Kernel::new(ctx, "activation_backward", source) }
    }

    /// `out = activation(x)` elementwise.
    pub fn prepare_forward(
        &self,
        ctx: &GpuContext,
        x: &GpuTensor,
        activation: Activation,
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        self.bind(ctx, x, x, MODE_FORWARD, activation, out)
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
            Activation::Gelu => MODE_GELU,
            Activation::Tanh => MODE_TANH,
            Activation::Relu => MODE_RELU,
            other => return Err(Error::invalid(format!("gpu activation_backward: no gradient for {other:?}"))),
        };
        check_f32(grad, "activation_backward", "grad")?;
        check(grad.shape == saved.shape, "activation_backward", || {
            format!("grad {:?} != saved {:?}", grad.shape, saved.shape)
        })?;
        self.bind(ctx, saved, grad, mode, Activation::None, dx)
    }

    fn bind(
        &self,
        ctx: &GpuContext,
        x: &GpuTensor,
        grad: &GpuTensor,
        mode: usize,
        activation: Activation,
        out: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        check_f32(x, "activation_backward", "x")?;
        check_f32(out, "activation_backward", "out")?;
        check(out.shape == x.shape, "activation_backward", || format!("out {:?} != x {:?}", out.shape, x.shape))?;
        let params = Params {
            len: to_u32(x.len(), "activation_backward", "len")?,
            mode: mode as u32,
            activation: activation as u32,
            _pad0: 0,
        };
        let groups = grid(ctx, x.len().div_ceil(Self::THREADS))?;
        Ok(vec![self.kernel.bind(ctx, &params, &[&x.buffer, &grad.buffer, &out.buffer], groups)])
    }
}
