//! Training on a GPU through wgpu (WebGPU in the page, Vulkan / Metal / DX12 natively): the
//! top N layers and the head, whose lower layers come from the trainer's frozen pass, or
//! the whole encoder with its embeddings.
//!
//! - `trainer`: [`GpuTrainer`], the trained tensors on the device with their optimisers
//!   (micro-batches, steps, logits, gradients, the trained model), built on the kernels of
//!   `crate::gpu::ops`;
//! - `engine`: [`GpuEngine`], the [`super::engine::Engine`] the training loop drives;
//! - `gradient_check`: the trainer's gradients against candle's autograd on the adapter at
//!   hand (the native tests on lavapipe, the bench page on the browser's WebGPU).

mod engine;
pub mod gradient_check;
mod trainer;

pub(super) use engine::GpuEngine;
pub use trainer::{bytes_text, supports, Dropping, GpuMemory, GpuTrainer, Targets, TrainInput, MEAN_POOLED_HEAD};
