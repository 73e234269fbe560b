use super::{check, check_f32, grid, params, to_u32, Dispatch, Kernel};
use crate::error::Result;
use crate::gpu::context::{DType, GpuContext, GpuTensor};

params! {
    struct Params {
        examples: u32,
        /// Multiplies the gradient (1 / the examples of an optimiser step: their mean).
        scale: f32,
        _pad0: u32,
        _pad1: u32,
    }
}

/// Per-example cross-entropy over segments of the logits, and its gradient
/// (kernels/cross_entropy.wgsl), each example's term times its weight. `segments` holds
/// (start, count, gold, weight) per example, as [`CrossEntropy::weighted_segments`] builds them.
pub struct CrossEntropy {
    kernel: Kernel,
}

impl CrossEntropy {
    /// Examples per workgroup, one a thread.
    const THREADS: usize = 64;

    pub fn new(ctx: &GpuContext) -> Self {
        let body = include_str!("../kernels/cross_entropy.wgsl");
        CrossEntropy { kernel: Kernel::with_threads(ctx, "cross_entropy", Params::WGSL, Self::THREADS, &[], body) }
    }

    /// The (start, count, gold, weight) of examples laid out one after the other, each
    /// given as (count, gold), in the flat logits, every weight 1. Errors on a gold index
    /// outside its segment.
    pub fn segments(examples: &[(usize, usize)]) -> Result<Vec<u32>> {
        let weighted: Vec<(usize, usize, f32)> = examples.iter().map(|&(c, g)| (c, g, 1.0)).collect();
        Self::weighted_segments(&weighted)
    }

    /// [`Self::segments`] with a weight per example (count, gold, weight): its loss and
    /// gradient are multiplied by it (class-weighted training). The weight travels as its
    /// f32 bits.
    pub fn weighted_segments(examples: &[(usize, usize, f32)]) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(examples.len() * 4);
        let mut start = 0;
        for (e, &(count, gold, weight)) in examples.iter().enumerate() {
            check(gold < count, "cross_entropy", || {
                format!("example {e}: gold {gold} is not among its {count} scores")
            })?;
            check(weight.is_finite(), "cross_entropy", || format!("example {e}: weight {weight}"))?;
            out.extend([to_u32(start, "cross_entropy", "start")?, count as u32, gold as u32, weight.to_bits()]);
            start += count;
        }
        Ok(out)
    }

    /// `logits` and `dlogits` of the same shape (any), `segments` `[examples * 4]` u32
    /// covering the logits exactly, `loss` `[examples]`.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        logits: &GpuTensor,
        segments: &GpuTensor,
        scale: f32,
        loss: &GpuTensor,
        dlogits: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        let op = "cross_entropy";
        for (t, name) in [(logits, "logits"), (loss, "loss"), (dlogits, "dlogits")] {
            check_f32(t, op, name)?;
        }
        check(segments.dtype == DType::U32, op, || "`segments` must be u32".into())?;
        check(dlogits.shape == logits.shape, op, || {
            format!("dlogits {:?} != logits {:?}", dlogits.shape, logits.shape)
        })?;
        let examples = loss.len();
        check(segments.len() == 4 * examples, op, || {
            format!("{} segment values for {examples} examples (4 each)", segments.len())
        })?;
        let params = Params { examples: to_u32(examples, op, "examples")?, scale, _pad0: 0, _pad1: 0 };
        let groups = grid(ctx, examples.div_ceil(Self::THREADS))?;
        Ok(vec![self.kernel.bind(
            ctx,
            &params,
            &[&logits.buffer, &segments.buffer, &loss.buffer, &dlogits.buffer],
            groups,
        )])
    }
}
