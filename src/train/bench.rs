//! Training throughput (`medrank bench --parts train`): whole-encoder fine-tuning
//! (`--freeze all`) of a model folder on synthetic multiple-choice questions of a fixed
//! shape (questions per optimiser step x options x tokens, no padding), through the same
//! [`Trainer`] `medrank train` runs, on the CPU (candle's autograd) or the GPU trainer.
//! Two epochs of two steps: the first warms up (kernels compiled, buffers allocated), the
//! second's questions/s is reported. The PyTorch peer (tests/reference/torch_train_peer.py)
//! times the same shape on CUDA.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use super::{train_with_events, Freeze, TrainExample, TrainOptions};
use crate::error::{Error, Result};
use crate::gpu::context::GpuContext;
use crate::model::config::HeadKind;
use crate::model::embed::TextModel;
use crate::model::tokenize::Encoded;

/// One measured shape on one backend.
#[derive(Debug, Clone, Serialize)]
pub struct TrainThroughput {
    /// cpu, or the GPU adapter's name.
    pub backend: String,
    pub seq_len: usize,
    pub questions_per_step: usize,
    pub options: usize,
    /// The warm epoch's questions per second (optimiser steps only, no dev pass).
    pub questions_per_s: f64,
    pub seconds_per_step: f64,
}

/// `n` questions of `options` candidates, each `len` random ids (never the pad id), the
/// right one drawn at random: the shape of a step, not a task.
pub fn synthetic_questions(base: &TextModel, n: usize, options: usize, len: usize, seed: u64) -> Vec<TrainExample> {
    let cfg = &base.encoder.model.config;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|q| TrainExample {
            id: format!("q{q}"),
            inputs: (0..options)
                .map(|_| Encoded {
                    ids: (0..len)
                        .map(|_| loop {
                            let id = rng.gen_range(0..cfg.vocab_size as u32);
                            if id != cfg.pad_token_id {
                                break id;
                            }
                        })
                        .collect(),
                    type_ids: vec![0; len],
                    cut_per_part: Vec::new(),
                })
                .collect(),
            gold: rng.gen_range(0..options),
            scores: None,
        })
        .collect()
}

/// All-layer fine-tuning of `base` with a new multiple-choice head, `questions` questions
/// of `options` x `len` tokens per step, on the GPU of `gpu` or (None) on the CPU.
pub fn train_throughput(
    base: &TextModel,
    gpu: Option<GpuContext>,
    questions: usize,
    options: usize,
    len: usize,
) -> Result<TrainThroughput> {
    if len > base.encoder.model.config.max_tokens() {
        return Err(Error::invalid(format!(
            "bench train: length {len} exceeds the model's limit of {}",
            base.encoder.model.config.max_tokens()
        )));
    }
    let backend = gpu.as_ref().map_or_else(|| "cpu".to_string(), |c| c.adapter.name.clone());
    let train_set = synthetic_questions(base, 2 * questions, options, len, 7);
    // One dev question: the dev pass is not what is measured.
    let dev_set = synthetic_questions(base, 1, options, len, 8);
    let opts = TrainOptions {
        freeze: Freeze::All,
        epochs: 2,
        patience: 2,
        batch_size: questions,
        grad_accum: 1,
        learning_rate: 1e-4,
        layer_learning_rate: 1e-5,
        ..Default::default()
    };
    let result = train_with_events(base, HeadKind::MultipleChoice, &[], &train_set, &dev_set, &opts, gpu, &mut |_| {})?;
    let warm = result.curve.last().ok_or_else(|| Error::invalid("bench train: no epoch ran"))?;
    Ok(TrainThroughput {
        backend,
        seq_len: len,
        questions_per_step: questions,
        options,
        questions_per_s: warm.examples_per_second,
        // Every step of the epoch has `questions` questions.
        seconds_per_step: questions as f64 / warm.examples_per_second.max(f64::MIN_POSITIVE),
    })
}
