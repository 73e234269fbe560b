//! The frozen pass: what does not train is computed once per input, before the first
//! epoch, a few batches at a time (so the page's worker can report progress between them),
//! on whichever encoder runs the base model (CPU or GPU). Both engines train on its output.

use super::examples::TrainExample;
use crate::error::Result;
use crate::model::batching::length_batches;
use crate::model::config::{EncoderConfig, HeadPooling};
use crate::model::encoder::Encoder;
use crate::model::heads::head_inputs;
use crate::model::tokenize::{Encoded, TextTokenizer};
use candle_core::{Device, Tensor};
use std::collections::VecDeque;

/// What the frozen part of the encoder gives each input, computed once per set.
pub(super) enum Frozen {
    /// Head only: what the head reads of the last layer (the first token's state, or a
    /// mean-pooling head's mean state), `[n_inputs, hidden]`.
    FirstTokens(Tensor),
    /// Top N: each input's states after the frozen lower layers, real tokens only,
    /// `len x hidden` in f16.
    Lower(Vec<Vec<half::f16>>),
    /// Everything trains: nothing is frozen.
    Nothing,
}

/// A set's frozen part, indexed by its inputs in one flat list (example by example).
pub(super) struct Prepared {
    /// First input of each example in the flat list.
    starts: Vec<usize>,
    pub frozen: Frozen,
}

impl Prepared {
    /// Inputs of examples `idx` (in that order) as rows of the set's flat input list.
    pub fn rows(&self, set: &[TrainExample], idx: &[usize]) -> Vec<usize> {
        idx.iter().flat_map(|&i| self.starts[i]..self.starts[i] + set[i].inputs.len()).collect()
    }

    /// The lower layers' states of every input (`top:N`; empty otherwise).
    pub fn lower_states(&self) -> &[Vec<half::f16>] {
        match &self.frozen {
            Frozen::Lower(states) => states,
            _ => &[],
        }
    }
}

/// Inputs per batch of the frozen pass (the inference path's batching).
const CACHE_BATCH: usize = 32;

/// The frozen pass over one set while it is being computed, a few batches at a time.
struct SetCache {
    starts: Vec<usize>,
    lens: Vec<usize>,
    /// Head only: first-token rows, `n_inputs x hidden`.
    rows: Vec<f32>,
    /// Top N: each input's real-token states after the lower layers.
    states: Vec<Vec<half::f16>>,
}

impl SetCache {
    fn new(set: &[TrainExample]) -> SetCache {
        let mut starts = Vec::with_capacity(set.len());
        let mut at = 0;
        for e in set {
            starts.push(at);
            at += e.inputs.len();
        }
        let lens = set.iter().flat_map(|e| e.inputs.iter().map(Encoded::len)).collect();
        SetCache { starts, lens, rows: Vec::new(), states: Vec::new() }
    }
}

/// The frozen pass over the training and the dev set, under way or done.
pub(super) struct FrozenPass {
    /// Layers that stay frozen (0: nothing to compute).
    lower: usize,
    hidden: usize,
    num_layers: usize,
    /// How the head reads the last layer (head only).
    pooling: HeadPooling,
    /// (train, dev), and the batches still to run as (set, inputs).
    caches: [SetCache; 2],
    pending: VecDeque<(usize, Vec<usize>)>,
    inputs_done: usize,
    inputs_total: usize,
    started: Option<f64>,
    seconds: f64,
    prepared: Option<[Prepared; 2]>,
}

impl FrozenPass {
    /// The pass of the `lower` frozen layers of a `config` encoder over both sets; nothing
    /// is computed yet.
    pub fn new(train_set: &[TrainExample], dev_set: &[TrainExample], lower: usize, config: &EncoderConfig) -> Self {
        let caches = [SetCache::new(train_set), SetCache::new(dev_set)];
        // The frozen pass in the order the one-call trainer ran it: the train set's length
        // batches, then the dev set's.
        let mut pending = VecDeque::new();
        if lower > 0 {
            for (s, c) in caches.iter().enumerate() {
                pending.extend(length_batches(&c.lens, CACHE_BATCH).into_iter().map(|b| (s, b)));
            }
        }
        let inputs_total = caches.iter().map(|c| c.lens.len()).sum();
        FrozenPass {
            lower,
            hidden: config.hidden_size,
            num_layers: config.num_layers,
            pooling: config.head_pooling,
            caches,
            pending,
            inputs_done: 0,
            inputs_total,
            started: None,
            seconds: 0.0,
            prepared: None,
        }
    }

    /// Inputs whose frozen part is computed, of all (train and dev).
    pub fn inputs(&self) -> (usize, usize) {
        if self.lower == 0 {
            (self.inputs_total, self.inputs_total)
        } else {
            (self.inputs_done, self.inputs_total)
        }
    }

    /// Seconds the pass took (once it is complete).
    pub fn seconds(&self) -> f64 {
        self.seconds
    }

    /// Both sets' frozen part (train, dev), once the pass is complete.
    pub fn prepared(&self) -> Option<&[Prepared; 2]> {
        self.prepared.as_ref()
    }

    /// Runs up to `max_batches` batches on `encoder` over `sets` (train, dev: those given
    /// to [`FrozenPass::new`]); true once every input is done. `clock` times the pass.
    pub async fn run<E: Encoder>(
        &mut self,
        encoder: &E,
        tokenizer: &TextTokenizer,
        sets: [&[TrainExample]; 2],
        clock: fn() -> f64,
        max_batches: usize,
    ) -> Result<bool> {
        if self.prepared.is_some() {
            return Ok(true);
        }
        let started = *self.started.get_or_insert_with(clock);
        let (h, num_layers) = (self.hidden, self.num_layers);
        for _ in 0..max_batches {
            let Some((s, group)) = self.pending.pop_front() else { break };
            let set = sets[s];
            let cache = &mut self.caches[s];
            let inputs: Vec<&Encoded> = set.iter().flat_map(|e| e.inputs.iter()).collect();
            let items: Vec<&Encoded> = group.iter().map(|&i| inputs[i]).collect();
            let batch = tokenizer.batch(&items);
            if self.lower >= num_layers {
                let states = encoder.encode(&batch, num_layers).await?;
                let inputs: Vec<f32> = head_inputs(self.pooling, &states, &batch.mask)?.flatten_all()?.to_vec1()?;
                cache.rows.resize(cache.lens.len() * h, 0.0);
                for (k, &i) in group.iter().enumerate() {
                    cache.rows[i * h..(i + 1) * h].copy_from_slice(&inputs[k * h..(k + 1) * h]);
                }
            } else {
                let hidden = encoder.encode(&batch, self.lower).await?;
                cache.states.resize(cache.lens.len(), Vec::new());
                for (k, &i) in group.iter().enumerate() {
                    let row = &hidden.data[k * hidden.seq_len * h..(k * hidden.seq_len + cache.lens[i]) * h];
                    cache.states[i] = row.iter().map(|&x| half::f16::from_f32(x)).collect();
                }
            }
            self.inputs_done += group.len();
        }
        if !self.pending.is_empty() {
            return Ok(false);
        }
        let lower = self.lower;
        let prepared = |c: &mut SetCache| -> Result<Prepared> {
            let frozen = if lower == 0 {
                Frozen::Nothing
            } else if lower >= num_layers {
                let n = c.lens.len();
                Frozen::FirstTokens(Tensor::from_vec(std::mem::take(&mut c.rows), (n, h), &Device::Cpu)?)
            } else {
                Frozen::Lower(std::mem::take(&mut c.states))
            };
            Ok(Prepared { starts: std::mem::take(&mut c.starts), frozen })
        };
        let [t, d] = &mut self.caches;
        self.prepared = Some([prepared(t)?, prepared(d)?]);
        self.seconds = clock() - started;
        Ok(true)
    }
}
