//! What the training loop asks of whatever computes the steps: candle's autograd on the
//! CPU ([`super::cpu::CpuEngine`]) or the WGSL kernels on a GPU
//! ([`super::gpu::GpuEngine`]). The loop (shuffle, schedule, dev figures, best epoch,
//! early stopping) is the same for both, so they give the same curve.
//!
//! Calls return boxed futures: the GPU engine awaits read-backs (in the browser it must
//! never block), the CPU engine's are ready at once; boxing keeps the trait usable as
//! `dyn Engine`, so the trainer can switch to the GPU after it is made.

use super::examples::TrainExample;
use super::frozen::Prepared;
use super::options::TrainOptions;
use crate::error::Result;
use crate::model::config::ScoreScale;
use crate::model::load::LoadedModel;
use crate::model::tokenize::TextTokenizer;
use std::future::Future;
use std::pin::Pin;

/// An engine's answer, to be awaited.
pub(super) type Pending<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + 'a>>;

/// One set as an engine reads it, lent by the trainer for one call.
#[derive(Clone, Copy)]
pub(super) struct Batches<'a> {
    /// The trainer's model (its trained tensors are candle variables).
    pub model: &'a LoadedModel,
    pub tokenizer: &'a TextTokenizer,
    pub set: &'a [TrainExample],
    /// The set's frozen part.
    pub prepared: &'a Prepared,
    /// Layers that stay frozen.
    pub lower: usize,
    pub multiple_choice: bool,
    /// One loss weight per label (empty: every example weighs 1).
    pub class_weights: &'a [f64],
    /// The score task's standardisation: the head is a regression head trained with the
    /// masked mean squared error (`super::scores`); `None` for the other tasks.
    pub score_scale: Option<&'a ScoreScale>,
    /// Examples per micro-batch.
    pub batch_size: usize,
    /// The optimiser step's dropout masks (training with dropout; `None` for dev passes,
    /// which never drop anything).
    pub dropout: Option<super::dropout::StepMasks>,
}

/// The steps of training on one kind of hardware.
pub(super) trait Engine {
    /// Before every epoch; only the first does anything (the optimisers, or the GPU
    /// trainer with `model`'s weights uploaded: the frozen pass comes first).
    fn start<'a>(&'a mut self, model: &'a LoadedModel, lower: usize, opts: &'a TrainOptions) -> Pending<'a, ()>;

    /// One optimiser step over the training examples `chunk` (micro-batches of
    /// `train.batch_size`, gradients summed, scaled so the step's gradient is the mean over
    /// `chunk`), the head at `lr` and the layers at `layer_lr`. Returns the summed loss.
    fn step<'a>(&'a mut self, train: Batches<'a>, chunk: &'a [usize], lr: f64, layer_lr: f64) -> Pending<'a, f64>;

    /// Each dev example's predicted index with the current weights (no gradients kept) and
    /// the summed (weighted) dev loss.
    fn dev<'a>(&'a self, dev: Batches<'a>) -> Pending<'a, (Vec<usize>, f64)>;

    /// Each dev example's head outputs with the current weights (one row per example: the
    /// score task's standardised predictions), no gradients kept.
    fn dev_outputs<'a>(&'a self, dev: Batches<'a>) -> Pending<'a, Vec<Vec<f32>>>;

    /// Keeps the current weights as the best epoch's.
    fn keep_best(&mut self) -> Result<()>;

    /// The weights [`Engine::keep_best`] kept last, as a plain model (no variables) built
    /// on `model`, the trainer's.
    fn best_model<'a>(&'a mut self, model: &'a LoadedModel) -> Pending<'a, LoadedModel>;

    /// Threads the steps ran on (0 on a GPU).
    fn threads(&self) -> usize;
}
