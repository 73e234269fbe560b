//! The encoder's forward pass on the GPU through wgpu: WebGPU in the browser, Vulkan /
//! Metal / DX12 natively.
//!
//! - `context`: the adapter (name, backend, software or not), its real limits, buffers,
//!   tables split over the storage-binding limit, and a readback that is awaited (never
//!   blocks in the browser).
//! - `ops`: one Rust struct per WGSL kernel in `kernels/` (one op per file); each checks
//!   shapes, binds buffers and records its dispatch.
//! - `encoder`: [`GpuEncoder`], the same [`crate::model::Encoder`] interface as the CPU
//!   path, so pooling, heads, evaluators and rankers run unchanged on top of it.
//! - `select`: the GPU when an adapter exists, else the CPU, or the backend the user forces.
//! - `bench`: sequences/s and tokens/s for any encoder (GPU or CPU).
//! - `ops` also holds the backward passes, the loss and AdamW (`TrainOps`) that the GPU
//!   trainer (`crate::train::gpu`) runs; their gradients match candle's autograd
//!   (tests/integration/gpu_backward.rs).
//!
//! Results match the CPU path within 1e-3 (tests/integration/gpu_encoder.rs, run natively on lavapipe).
//! Weights are f32 by default; [`WeightFormat::F16`] stores the linear layers' weights as f16
//! on adapters with `shader-f16` (an opt-in: it trades accuracy for memory and bandwidth).

pub mod bench;
pub mod context;
pub mod encoder;
pub mod ops;
pub mod select;

pub use context::{AdapterSummary, ChunkedTable, DType, GpuContext, GpuTensor};
pub use encoder::{GpuEncoder, PassProfile, StepTime, WeightFormat};
pub use ops::{Activation, Ops};
pub use select::{open_encoder, select_encoder, AnyEncoder, BackendChoice, BackendReport, GpuNotUsed, GpuUnavailable};
