//! The GPU engine: the training loop's steps, dev pass and best weights on a
//! [`GpuTrainer`], fed with the frozen pass's f16 states of the lower layers (`top:N`) or
//! with the examples' tokens (every layer).

use super::trainer::{Dropping, GpuTrainer, Targets, TrainInput};
use crate::error::{Error, Result};
use crate::gpu::context::GpuContext;
use crate::gpu::ops::AdamWConfig;
use crate::model::load::LoadedModel;
use crate::train::engine::{Batches, Engine, Pending};
use crate::train::examples::TrainExample;
use crate::train::options::{Freeze, TrainOptions};
use crate::train::scores::weights_and_targets;
use half::f16;

/// The trained part on a GPU.
pub(in crate::train) enum GpuEngine {
    /// Asked for; the trainer is made at the first epoch (the frozen pass comes first, and
    /// may run on the same GPU).
    Ready(Box<GpuContext>),
    Training(Box<GpuTrainer>),
}

impl GpuEngine {
    fn trainer(&mut self) -> Result<&mut GpuTrainer> {
        match self {
            GpuEngine::Training(t) => Ok(t),
            GpuEngine::Ready(_) => Err(Error::invalid("the GPU trainer starts with the first epoch")),
        }
    }
}

impl Engine for GpuEngine {
    fn start<'a>(&'a mut self, model: &'a LoadedModel, lower: usize, opts: &'a TrainOptions) -> Pending<'a, ()> {
        Box::pin(async move {
            if let GpuEngine::Ready(ctx) = self {
                let adamw = |lr: f64| AdamWConfig { lr, weight_decay: opts.weight_decay, ..Default::default() };
                // A context's handles are reference counted: the clone is the same device.
                let trainer = GpuTrainer::new(
                    (**ctx).clone(),
                    model,
                    lower,
                    opts.freeze == Freeze::All,
                    adamw(opts.learning_rate),
                    adamw(opts.layer_learning_rate),
                )
                .await?;
                *self = GpuEngine::Training(Box::new(trainer));
            }
            Ok(())
        })
    }

    fn step<'a>(&'a mut self, train: Batches<'a>, chunk: &'a [usize], lr: f64, layer_lr: f64) -> Pending<'a, f64> {
        Box::pin(async move {
            let gpu = self.trainer()?;
            let cached = Cached::new(train.set, train.prepared.lower_states(), train.lower)?;
            let mut sum = 0.0;
            for micro in chunk.chunks(train.batch_size) {
                let inputs = cached.inputs(micro);
                // The step's dropout masks, keyed by each input's place in the set as the CPU
                // engine keys them.
                let rows = cached.rows(micro);
                let dropout = train.dropout.map(|step| Dropping { step, inputs: &rows });
                let losses = match train.score_scale {
                    Some(scale) => {
                        let scores = micro
                            .iter()
                            .map(|&i| weights_and_targets(&train.set[i], scale))
                            .collect::<Result<Vec<_>>>()?;
                        gpu.accumulate_targets(&inputs, Targets::Scores(&scores), chunk.len(), dropout).await?
                    }
                    None => {
                        let examples: Vec<(usize, usize, f32)> = micro
                            .iter()
                            .map(|&i| {
                                let e = &train.set[i];
                                let weight = train.class_weights.get(e.gold).copied().unwrap_or(1.0) as f32;
                                (e.inputs.len(), e.gold, weight)
                            })
                            .collect();
                        gpu.accumulate(&inputs, &examples, chunk.len(), dropout).await?
                    }
                };
                sum += losses.iter().map(|&l| l as f64).sum::<f64>();
            }
            gpu.step(lr, layer_lr);
            Ok(sum)
        })
    }

    fn dev<'a>(&'a self, dev: Batches<'a>) -> Pending<'a, (Vec<usize>, f64)> {
        Box::pin(async move {
            let GpuEngine::Training(gpu) = self else {
                return Err(Error::invalid("the GPU trainer starts with the first epoch"));
            };
            let cached = Cached::new(dev.set, dev.prepared.lower_states(), dev.lower)?;
            dev_outcome(gpu, &cached, dev.batch_size, dev.multiple_choice, dev.class_weights).await
        })
    }

    fn dev_outputs<'a>(&'a self, dev: Batches<'a>) -> Pending<'a, Vec<Vec<f32>>> {
        Box::pin(async move {
            let GpuEngine::Training(gpu) = self else {
                return Err(Error::invalid("the GPU trainer starts with the first epoch"));
            };
            let cached = Cached::new(dev.set, dev.prepared.lower_states(), dev.lower)?;
            let idx: Vec<usize> = (0..dev.set.len()).collect();
            let mut outputs = Vec::with_capacity(idx.len());
            for part in idx.chunks(dev.batch_size.max(1)) {
                outputs.extend(gpu.logits(&cached.inputs(part)).await?);
            }
            Ok(outputs)
        })
    }

    fn keep_best(&mut self) -> Result<()> {
        self.trainer()?.keep_best();
        Ok(())
    }

    fn best_model<'a>(&'a mut self, model: &'a LoadedModel) -> Pending<'a, LoadedModel> {
        Box::pin(async move {
            let gpu = self.trainer()?;
            gpu.restore_best();
            gpu.to_model(model).await
        })
    }

    fn threads(&self) -> usize {
        0
    }
}

/// Examples by index with what the trainer starts from: their inputs' cached states
/// (`top:N`), or their tokens (every layer: no frozen pass).
struct Cached<'a> {
    set: &'a [TrainExample],
    states: &'a [Vec<f16>],
    /// First input of each example in `states`.
    starts: Vec<usize>,
}

impl<'a> Cached<'a> {
    fn new(set: &'a [TrainExample], states: &'a [Vec<f16>], lower: usize) -> Result<Self> {
        let mut starts = Vec::with_capacity(set.len());
        let mut at = 0;
        for e in set {
            starts.push(at);
            at += e.inputs.len();
        }
        let expected = if lower == 0 { 0 } else { at };
        if expected != states.len() {
            return Err(Error::invalid(format!("{expected} cached states expected, {} given", states.len())));
        }
        Ok(Cached { set, states, starts })
    }

    /// The index of each input of examples `idx` in the set's flat list of inputs.
    fn rows(&self, idx: &[usize]) -> Vec<usize> {
        idx.iter().flat_map(|&i| self.starts[i]..self.starts[i] + self.set[i].inputs.len()).collect()
    }

    fn inputs(&self, idx: &[usize]) -> Vec<TrainInput<'a>> {
        let set = self.set;
        if self.states.is_empty() {
            return idx.iter().flat_map(|&i| set[i].inputs.iter().map(TrainInput::Tokens)).collect();
        }
        idx.iter()
            .flat_map(|&i| self.states[self.starts[i]..self.starts[i] + set[i].inputs.len()].iter())
            .map(|s| TrainInput::States(s.as_slice()))
            .collect()
    }
}

/// Each dev example's predicted index (the first of equal scores) and the summed loss,
/// each example's cross-entropy times its gold class's weight in `weights` (empty: 1), with
/// the trainer's current weights. The loss is computed here from the read-back logits, in
/// f64, as the CPU path computes it.
async fn dev_outcome(
    trainer: &GpuTrainer,
    dev: &Cached<'_>,
    batch_size: usize,
    multiple_choice: bool,
    weights: &[f64],
) -> Result<(Vec<usize>, f64)> {
    let idx: Vec<usize> = (0..dev.set.len()).collect();
    let (mut predicted, mut loss) = (Vec::with_capacity(idx.len()), 0.0);
    for part in idx.chunks(batch_size.max(1)) {
        let logits = trainer.logits(&dev.inputs(part)).await?;
        let mut row = 0;
        for &i in part {
            let ex = &dev.set[i];
            let v: Vec<f32> = if multiple_choice {
                let n = ex.inputs.len();
                row += n;
                logits[row - n..row].iter().map(|r| r[0]).collect()
            } else {
                row += 1;
                logits[row - 1].clone()
            };
            let max = v.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x as f64));
            let log_total = v.iter().map(|&x| (x as f64 - max).exp()).sum::<f64>().ln() + max;
            loss += weights.get(ex.gold).copied().unwrap_or(1.0) * (log_total - v[ex.gold] as f64);
            predicted.push(v.iter().enumerate().fold(0, |b, (i, x)| if *x > v[b] { i } else { b }));
        }
    }
    Ok((predicted, loss))
}
