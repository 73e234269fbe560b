//! One op per kernel: each struct owns its compiled pipeline; its `prepare` checks the
//! shapes of its arguments and binds them in the order the WGSL file declares them,
//! returning [`Dispatch`]es that [`record`] puts into a command encoder. Nothing runs until
//! the caller submits the encoder, so a whole forward pass is one submission, and prepared
//! dispatches are kept and recorded again for every batch of the same shape.
//!
//! What the Rust side and a kernel must agree on has one home, the op's Rust file: its
//! parameter block (declared with [`params!`], which also writes the WGSL `struct Params`)
//! and its constants (workgroup sizes, tiles, limits), both put in front of the kernel's
//! WGSL source when it is compiled.
//!
//! Workgroup memory and size stay within what WebGPU guarantees on every adapter (16 KiB
//! of workgroup storage, 256 invocations): matmul at most 8.5 KiB / 256, attention 8.3 KiB / 64,
//! layer norm 1 KiB / 256, pool 0.5 KiB / 128, attention backward 4.3 KiB / 64. Only the grid is
//! adapter-specific (`grid`).
//!
//! Training adds [`TrainOps`]: the backward passes (the matmul's are the matmul kernel on
//! transposed and strided views, [`Mat`], plus [`ColumnSum`] for biases), the loss,
//! AdamW and dropout ([`DropoutOp`]; attention drops in its own kernels); tests/integration/
//! gpu_backward.rs checks each against candle's autograd, gpu_dropout.rs the masks against
//! the CPU trainer's, bit for bit.

mod activation;
mod adamw;
mod attention;
mod attention_backward;
mod column_sum;
mod cross_entropy;
mod dropout;
mod embedding_backward;
mod gather_add;
mod layer_norm;
mod layer_norm_backward;
mod matmul;
mod pool;
mod rotary;
mod squared_error;

pub use activation::ActivationOp;
pub use adamw::{AdamW, AdamWConfig, AdamWStep};
pub use attention::{Attention, AttentionExtras, RelativeTables};
pub use attention_backward::AttentionBackward;
pub use column_sum::ColumnSum;
pub use cross_entropy::CrossEntropy;
pub use dropout::{hash as dropout_hash, AttentionDropout, DropoutOp, MaskDraw};
pub use embedding_backward::{EmbeddingBackward, TokensById, TokensByIdOnDevice};
pub use gather_add::GatherAdd;
pub use layer_norm::LayerNorm;
pub use layer_norm_backward::{LayerNormBackward, LayerNormGrads};
pub use matmul::{Activation, Addend, Mat, MatMul, Tile};
pub use pool::Pool;
pub use rotary::Rotary;
pub use squared_error::SquaredError;

use wgpu::util::DeviceExt;

use super::context::{DType, GpuContext, GpuTensor};
use crate::error::{Error, Result};

/// Every op, compiled once per device.
pub struct Ops {
    pub gather_add: GatherAdd,
    pub matmul: MatMul,
    pub layer_norm: LayerNorm,
    pub attention: Attention,
    /// The readouts after the last layer: pooling (heads are products, `matmul`).
    pub pool: Pool,
    /// ModernBERT's rotary positions.
    pub rotary: Rotary,
    /// Activations a product cannot fuse: ModernBERT's gated feed-forward, and training's.
    pub activation: ActivationOp,
}

impl Ops {
    pub fn new(ctx: &GpuContext) -> Self {
        Self::with_f16_math(ctx, false)
    }

    /// With `f16_math`, products with f16 weights sum in f16 per slice ([`MatMul::with_f16_math`]).
    pub fn with_f16_math(ctx: &GpuContext, f16_math: bool) -> Self {
        Ops {
            gather_add: GatherAdd::new(ctx),
            matmul: MatMul::with_f16_math(ctx, f16_math),
            layer_norm: LayerNorm::new(ctx),
            attention: Attention::new(ctx),
            pool: Pool::new(ctx),
            rotary: Rotary::new(ctx),
            activation: ActivationOp::new(ctx),
        }
    }
}

/// The ops training adds (backward passes, loss, optimiser), compiled once per device
/// only when something trains.
pub struct TrainOps {
    pub column_sum: ColumnSum,
    pub layer_norm: LayerNormBackward,
    pub attention: AttentionBackward,
    pub cross_entropy: CrossEntropy,
    /// The score task's loss.
    pub squared_error: SquaredError,
    pub embedding: EmbeddingBackward,
    pub adamw: AdamW,
    /// Dropout of hidden states, forward and backward (attention's is in its kernels).
    pub dropout: DropoutOp,
}

impl TrainOps {
    pub fn new(ctx: &GpuContext) -> Self {
        TrainOps {
            column_sum: ColumnSum::new(ctx),
            layer_norm: LayerNormBackward::new(ctx),
            attention: AttentionBackward::new(ctx),
            cross_entropy: CrossEntropy::new(ctx),
            squared_error: SquaredError::new(ctx),
            embedding: EmbeddingBackward::new(ctx),
            adamw: AdamW::new(ctx),
            dropout: DropoutOp::new(ctx),
        }
    }
}

/// Declares a kernel's uniform parameter block once for both sides: the Rust struct that
/// is uploaded (`bytemuck`) and its WGSL declaration `Params::WGSL` (`struct Params` and
/// its binding, `p` at binding 0), which [`Kernel::new`] puts in front of the kernel's
/// source, so the two layouts cannot drift and no kernel declares binding 0 itself.
/// Fields are `u32` or `f32` (4 bytes each: the C and the WGSL uniform layouts agree).
macro_rules! params {
    ($(#[$meta:meta])* $vis:vis struct $name:ident { $($(#[$field_meta:meta])* $field:ident: $ty:ident),* $(,)? }) => {
        $(#[$meta])*
        #[repr(C)]
        #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
        $vis struct $name { $($(#[$field_meta])* $field: $ty),* }
        impl $name {
            const WGSL: &'static str = concat!(
                "struct Params {\n",
                $("    ", stringify!($field), ": ", stringify!($ty), ",\n",)*
                "}\n",
                "@group(0) @binding(0) var<uniform> p: Params;\n"
            );
        }
        impl $crate::gpu::ops::KernelParams for $name {}
    };
}
pub(crate) use params;

/// A uniform parameter block declared with [`params!`]: only those can be dispatched.
trait KernelParams: bytemuck::Pod {}

/// WGSL files prepended to the kernels that use them.
const ACTIVATIONS_WGSL: &str = include_str!("../kernels/activations.wgsl");
const REDUCE_WGSL: &str = include_str!("../kernels/reduce.wgsl");
/// A row's mean and 1/sqrt(var + eps), for the LayerNorm kernels (needs `REDUCE_WGSL`).
const LAYER_NORM_STATS_WGSL: &str = include_str!("../kernels/layer_norm_stats.wgsl");
/// The attention kernels' shared scores and softmax (needs `REDUCE_WGSL`).
const ATTENTION_SCORES_WGSL: &str = include_str!("../kernels/attention_scores.wgsl");

/// activations.wgsl with the activation codes in front of it as WGSL constants, taken from
/// the Rust enum, for the kernels that apply an activation.
fn activations_wgsl() -> String {
    let codes: String = [
        ("ACT_NONE", Activation::None),
        ("ACT_GELU", Activation::Gelu),
        ("ACT_TANH", Activation::Tanh),
        ("ACT_GELU_TANH", Activation::GeluTanh),
        ("ACT_RELU", Activation::Relu),
    ]
    .iter()
    .map(|(name, a)| format!("const {name}: u32 = {}u;\n", *a as u32))
    .collect();
    codes + ACTIVATIONS_WGSL
}

/// The pieces of a kernel's source, assembled in this order: directives (`enable f16;`,
/// which WGSL wants first), the parameter block, the constants the Rust side also uses
/// (workgroup sizes, tile sizes, limits: one home each, in the op's Rust file), shared WGSL
/// files, then the kernel's own file.
struct Source<'a> {
    directives: &'a str,
    params: &'static str,
    constants: &'a [(&'static str, usize)],
    shared: &'a [&'a str],
    body: &'a str,
}

impl Source<'_> {
    fn assemble(&self) -> String {
        let mut text = format!("{}{}", self.directives, self.params);
        for (name, value) in self.constants {
            text.push_str(&format!("const {name}: u32 = {value}u;\n"));
        }
        for shared in self.shared {
            text.push_str(shared);
            text.push('\n');
        }
        text.push_str(self.body);
        text
    }
}

/// Whether wgpu wraps the kernels' loops in iteration counters and their integer
/// divisions in zero checks (its protection against untrusted shaders). Natively they are
/// left out: the kernels are this crate's own (see the SAFETY note in [`Kernel::new`]), and
/// on an H200 (Vulkan) the encoder ran 14-42 % faster without them (BENCHMARKS.md,
/// 2026-11-26). `MEDRANK_GPU_SHADER_GUARDS=on` puts them back (an A/B switch). In the
/// browser wgpu hands the WGSL to the browser's own compiler: they stay as asked.
fn loop_and_division_guards() -> bool {
    cfg!(target_arch = "wasm32") || std::env::var("MEDRANK_GPU_SHADER_GUARDS").as_deref() == Ok("on")
}

/// A compiled compute pipeline whose binding 0 is a uniform parameter block and whose
/// bindings 1.. are storage buffers, in declaration order.
#[derive(Clone)]
struct Kernel {
    name: &'static str,
    pipeline: wgpu::ComputePipeline,
}

impl Kernel {
    /// The common kernel: its parameter block, a workgroup size `THREADS`, shared WGSL
    /// pieces and its body, without directives or other constants.
    fn with_threads(
        ctx: &GpuContext,
        name: &'static str,
        params: &'static str,
        threads: usize,
        shared: &[&str],
        body: &str,
    ) -> Self {
        let constants = [("THREADS", threads)];
        Kernel::new(ctx, name, Source { directives: "", params, constants: &constants, shared, body })
    }

    /// Compiles the kernel, or takes the pipeline this device already compiled from the
    /// same source (a kernel's name and source determine its pipeline).
    fn new(ctx: &GpuContext, name: &'static str, source: Source) -> Self {
        let text = source.assemble();
        let mut compiled = ctx.pipelines.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let pipeline = compiled.entry(format!("{name}\n{text}")).or_insert_with(|| Self::compile(ctx, name, text));
        Kernel { name, pipeline: pipeline.clone() }
    }

    fn compile(ctx: &GpuContext, name: &'static str, text: String) -> wgpu::ComputePipeline {
        let desc = wgpu::ShaderModuleDescriptor { label: Some(name), source: wgpu::ShaderSource::Wgsl(text.into()) };
        let module = match loop_and_division_guards() {
            true => ctx.device.create_shader_module(desc),
            // SAFETY: the kernels are this crate's own: every loop counts up to a bound
            // below 2^31 (no infinite loop), and every divisor is a nonzero constant or a
            // count the op checked to be nonzero. Buffer bounds checks stay on.
            false => unsafe {
                ctx.device.create_shader_module_trusted(
                    desc,
                    wgpu::ShaderRuntimeChecks {
                        force_loop_bounding: false,
                        int_div_checks: false,
                        ..wgpu::ShaderRuntimeChecks::checked()
                    },
                )
            },
        };
        ctx.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(name),
            layout: None,
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        })
    }

    /// Binds `params` (in a uniform buffer of its own) and `buffers` for one dispatch of
    /// `groups` workgroups (x, y). The result can be recorded any number of times: the
    /// encoder keeps it for every batch of the same shape.
    fn bind<P: KernelParams>(
        &self,
        ctx: &GpuContext,
        params: &P,
        buffers: &[&wgpu::Buffer],
        groups: (u32, u32),
    ) -> Dispatch {
        let uniform = ctx.device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(self.name),
            contents: bytemuck::bytes_of(params),
            usage: wgpu::BufferUsages::UNIFORM,
        });
        self.bind_uniform(ctx, &uniform, buffers, groups)
    }

    /// [`Self::bind`] with a parameter block the caller keeps and rewrites between
    /// submissions (the optimiser's step and learning rate).
    fn bind_uniform(
        &self,
        ctx: &GpuContext,
        uniform: &wgpu::Buffer,
        buffers: &[&wgpu::Buffer],
        groups: (u32, u32),
    ) -> Dispatch {
        let mut entries = vec![wgpu::BindGroupEntry { binding: 0, resource: uniform.as_entire_binding() }];
        for (i, buffer) in buffers.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: buffer.as_entire_binding() });
        }
        // The bind group holds the uniform buffer (and every bound buffer) alive.
        let bind_group = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(self.name),
            layout: &self.pipeline.get_bind_group_layout(0),
            entries: &entries,
        });
        Dispatch { kernel: self.name, pipeline: self.pipeline.clone(), bind_group, groups }
    }
}

/// One prepared dispatch: a kernel's pipeline, its bind group (parameters and buffers) and
/// its grid. Ops return these from `prepare`, after checking shapes; [`record`] puts them
/// in a command encoder.
#[derive(Debug)]
pub struct Dispatch {
    /// The kernel's name (what a profile reports where the caller names no step).
    pub kernel: &'static str,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    groups: (u32, u32),
}

/// Records `dispatches` in order into one compute pass (wgpu orders each dispatch's reads
/// after the previous ones' writes).
pub fn record(encoder: &mut wgpu::CommandEncoder, dispatches: &[Dispatch]) {
    let mut pass =
        encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("medrank"), timestamp_writes: None });
    for d in dispatches {
        pass.set_pipeline(&d.pipeline);
        pass.set_bind_group(0, &d.bind_group, &[]);
        pass.dispatch_workgroups(d.groups.0, d.groups.1, 1);
    }
}

/// [`record`] with every dispatch in a compute pass of its own whose start and end write
/// timestamps `2 i` and `2 i + 1` of `queries` (WebGPU times passes, not dispatches, and
/// passes are what both wgpu natively and the browser can time). Needs `timestamp-query`
/// and a query set of at least `2 * dispatches.len()` timestamps.
pub fn record_timed(encoder: &mut wgpu::CommandEncoder, dispatches: &[Dispatch], queries: &wgpu::QuerySet) {
    for (i, d) in dispatches.iter().enumerate() {
        let at = 2 * i as u32;
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(d.kernel),
            timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                query_set: queries,
                beginning_of_pass_write_index: Some(at),
                end_of_pass_write_index: Some(at + 1),
            }),
        });
        pass.set_pipeline(&d.pipeline);
        pass.set_bind_group(0, &d.bind_group, &[]);
        pass.dispatch_workgroups(d.groups.0, d.groups.1, 1);
    }
}

/// Lays `groups` workgroups out on a 2-D grid: one dimension may hold at most
/// `max_compute_workgroups_per_dimension` (65535 on most adapters). Kernels linearise
/// `wid.y * num_workgroups.x + wid.x` and ignore the overshoot.
fn grid(ctx: &GpuContext, groups: usize) -> Result<(u32, u32)> {
    let max = ctx.limits.max_compute_workgroups_per_dimension as usize;
    let x = groups.clamp(1, max);
    let y = groups.div_ceil(x).max(1);
    if y > max {
        return Err(Error::model(format!("gpu: {groups} workgroups exceed the adapter's grid")));
    }
    Ok((x as u32, y as u32))
}

fn check(ok: bool, op: &str, message: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(format!("gpu {op}: {}", message())))
    }
}

fn check_f32(t: &GpuTensor, op: &str, what: &str) -> Result<()> {
    check(t.dtype == DType::F32, op, || format!("`{what}` must be f32"))
}

fn to_u32(n: usize, op: &str, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::invalid(format!("gpu {op}: `{what}` = {n} is too large")))
}
