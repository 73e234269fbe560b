use wgpu::util::DeviceExt;

use super::{check, check_f32, grid, params, Dispatch, Kernel};
use crate::error::Result;
use crate::gpu::context::{GpuContext, GpuTensor};

params! {
    struct Params {
        lr: f32,
        beta1: f32,
        one_minus_beta1: f32,
        beta2: f32,
        one_minus_beta2: f32,
        eps: f32,
        /// 1 - lr * weight_decay.
        decay: f32,
        /// 1 / (1 - beta1^t).
        scale_m: f32,
        /// 1 / (1 - beta2^t).
        scale_v: f32,
        _pad0: u32,
        _pad1: u32,
        _pad2: u32,
    }
}

/// The hyper-parameters of an AdamW optimiser, as candle-nn's `ParamsAdamW`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWConfig {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    /// candle-nn's defaults.
    fn default() -> Self {
        AdamWConfig { lr: 0.001, beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.01 }
    }
}

/// One optimiser's step parameters on the device: shared by the dispatches of all its
/// tensors, rewritten before each step ([`AdamW::set_step`]).
pub struct AdamWStep {
    uniform: wgpu::Buffer,
}

/// AdamW on the GPU (kernels/adamw.wgsl): one dispatch per parameter tensor updates the
/// tensor and its two moments in place from its gradient.
pub struct AdamW {
    kernel: Kernel,
}

impl AdamW {
    /// Elements per workgroup, one a thread.
    const THREADS: usize = 256;

    pub fn new(ctx: &GpuContext) -> Self {
        let body = include_str!("../kernels/adamw.wgsl");
        AdamW { kernel: Kernel::with_threads(ctx, "adamw", Params::WGSL, Self::THREADS, &[], body) }
    }

    fn params(config: &AdamWConfig, step: u32) -> Params {
        let t = step.max(1) as i32;
        Params {
            lr: config.lr as f32,
            beta1: config.beta1 as f32,
            one_minus_beta1: (1.0 - config.beta1) as f32,
            beta2: config.beta2 as f32,
            one_minus_beta2: (1.0 - config.beta2) as f32,
            eps: config.eps as f32,
            decay: (1.0 - config.lr * config.weight_decay) as f32,
            scale_m: (1.0 / (1.0 - config.beta1.powi(t))) as f32,
            scale_v: (1.0 / (1.0 - config.beta2.powi(t))) as f32,
            _pad0: 0,
            _pad1: 0,
            _pad2: 0,
        }
    }

    /// A parameter block for step 1 of `config`.
    pub fn new_step(&self, ctx: &GpuContext, config: &AdamWConfig) -> AdamWStep {
        let uniform = ctx.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("adamw"),
            contents: bytemuck::bytes_of(&Self::params(config, 1)),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        });
        AdamWStep { uniform }
    }

    /// Sets the parameters of step `step` (1-based, as candle counts) with `config`'s
    /// learning rate (a schedule changes it every step); takes effect at the next submit.
    pub fn set_step(&self, ctx: &GpuContext, state: &AdamWStep, config: &AdamWConfig, step: u32) {
        ctx.queue.write_buffer(&state.uniform, 0, bytemuck::bytes_of(&Self::params(config, step)));
    }

    /// One update of `theta` (and its moments `m`, `v`, zero at first) from `grad`.
    pub fn prepare(
        &self,
        ctx: &GpuContext,
        state: &AdamWStep,
        theta: &GpuTensor,
        grad: &GpuTensor,
        m: &GpuTensor,
        v: &GpuTensor,
    ) -> Result<Vec<Dispatch>> {
        for (t, name) in [(theta, "theta"), (grad, "grad"), (m, "m"), (v, "v")] {
            check_f32(t, "adamw", name)?;
            check(t.shape == theta.shape, "adamw", || format!("{name} {:?} != theta {:?}", t.shape, theta.shape))?;
        }
        let groups = grid(ctx, theta.len().div_ceil(Self::THREADS))?;
        let buffers = [&theta.buffer, &grad.buffer, &m.buffer, &v.buffer];
        Ok(vec![self.kernel.bind_uniform(ctx, &state.uniform, &buffers, groups)])
    }
}
