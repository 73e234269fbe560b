use super::{check, check_f32, grid, params, to_u32, Dispatch, Kernel};
use crate::error::Result;
use crate::gpu::context::{GpuContext, GpuTensor};

params! {
    struct Params {
        examples: u32,
        /// Outputs per example (the score dimensions).
        outputs: u32,
        /// Multiplies the gradient (1 / the examples of an optimiser step: their mean).
        scale: f32,
        _pad0: u32,
    }
}

/// The score task's weighted squared error per example and its gradient
/// (kernels/squared_error.wgsl): `loss[e] = sum_j w[e, j] (x[e, j] - t[e, j])^2`, the
/// weights `1 / k` over the `k` dimensions an example has and 0 where it has none (masked,
/// not a target of 0), so an example's loss is the mean squared error over its dimensions
/// (`train::scores`, the CPU engine's arithmetic).
pub struct SquaredError {
    kernel: Kernel,
}

impl SquaredError {
    /// Examples per workgroup, one a thread.
    const THREADS: usize = 64;

    pub fn new(ctx: &GpuContext) -> Self {
        let body = include_str!("../kernels/squared_error.wgsl");
        SquaredError { kernel: Kernel::with_threads(ctx, "squared_error", Params::WGSL, Self::THREADS, &[], body) }
    }

    /// `logits`, `targets`, `weights` and `dlogits` `[examples, outputs]`, `loss` `[examples]`.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        logits: &GpuTensor,
        targets: &GpuTensor,
        weights: &GpuTensor,
        scale: f32,
        loss: &GpuTensor,
        dlogits: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        let op = "squared_error";
        for (t, name) in
            [(logits, "logits"), (targets, "targets"), (weights, "weights"), (loss, "loss"), (dlogits, "dlogits")]
        {
            check_f32(t, op, name)?;
        }
        check(logits.shape.len() == 2, op, || format!("logits {:?} must be [examples, outputs]", logits.shape))?;
        for (t, name) in [(targets, "targets"), (weights, "weights"), (dlogits, "dlogits")] {
            check(t.shape == logits.shape, op, || format!("{name} {:?} != logits {:?}", t.shape, logits.shape))?;
        }
        let (examples, outputs) = (logits.shape[0], logits.shape[1]);
        check(loss.len() == examples, op, || format!("loss has {} values for {examples} examples", loss.len()))?;
        let params = Params {
            examples: to_u32(examples, op, "examples")?,
            outputs: to_u32(outputs, op, "outputs")?,
            scale,
            _pad0: 0,
        };
        let groups = grid(ctx, examples.div_ceil(Self::THREADS))?;
        Ok(vec![self.kernel.bind(
            ctx,
            &params,
            &[&logits.buffer, &targets.buffer, &weights.buffer, &loss.buffer, &dlogits.buffer],
            groups,
        )])
    }
}
