//! Batching: inputs grouped into batches of similar length, and the plan of the batches a
//! job encodes (what progress reports and time estimates count). Below the encoders and the
//! evaluators, which both use it.

use super::config::EncoderConfig;
use serde::Serialize;

/// Indices of `lens` grouped into batches of similar length (sorted by length, stable),
/// so padding is small. Results are put back in input order by the callers.
pub fn length_batches(lens: &[usize], batch_size: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lens.len()).collect();
    order.sort_by_key(|&i| lens[i]);
    order.chunks(batch_size.max(1)).map(|c| c.to_vec()).collect()
}

/// The batches a job encodes, in the order it encodes them: what progress reports and time
/// estimates count. Built with [`length_batches`], so it is the batching the job uses.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EncodingPlan {
    pub sequences: usize,
    /// Tokens of the inputs, padding not counted.
    pub tokens: usize,
    /// (sequences, padded length) of each batch.
    pub batches: Vec<(usize, usize)>,
}

impl EncodingPlan {
    /// Appends the batches of inputs of lengths `lens`, as [`super::embed::embed_encoded`] forms them.
    pub fn add(&mut self, lens: &[usize], batch_size: usize) {
        self.sequences += lens.len();
        self.tokens += lens.iter().sum::<usize>();
        for group in length_batches(lens, batch_size) {
            let longest = group.iter().map(|&i| lens[i]).max().unwrap_or(0);
            self.batches.push((group.len(), longest));
        }
    }

    /// The arithmetic of one batch, in units proportional to its multiply-adds. Per layer and
    /// token an encoder does 4h² for the four attention projections, 2·h·I for the
    /// feed-forward pair and 2·L·h for the attention scores and their weighted sum (h hidden
    /// size, I intermediate size, L padded length): h·(4h + 2I + 2L). Dividing by the
    /// constant 2h·layers leaves rows·L·(2h + I + L). Time is close to proportional to it
    /// for a given backend, whatever the lengths, where sequence or token counts are not
    /// (batches run from shortest to longest, and attention grows with L²).
    pub fn batch_work(rows: usize, len: usize, config: &EncoderConfig) -> u64 {
        // In u64: a base-size model's batch of 1,024 x 512 passes 2^32 (usize on wasm32).
        rows as u64 * len as u64 * (2 * config.hidden_size + config.intermediate_size + len) as u64
    }

    pub fn work(&self, config: &EncoderConfig) -> u64 {
        self.batches.iter().map(|&(rows, len)| Self::batch_work(rows, len, config)).sum()
    }
}
