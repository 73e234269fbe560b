//! Dropout masks from a counter-based hash: whether an element is kept depends only on
//! (seed, optimiser step, layer, site, input, element), never on how the inputs were
//! batched, sharded or padded, nor on the order the elements are visited. So the same
//! seed gives the same masks however a step is cut into micro-batches and threads, and a
//! second implementation (a GPU kernel: the hash uses 32-bit unsigned arithmetic only,
//! wrapping, as WGSL's `u32`) can draw the very same masks.
//!
//! The hash is PCG's output permutation used as a hash (`pcg_hash`, Jarzynski and Olano,
//! "Hash Functions for GPU Rendering", JCGT 9(3), 2020): a bijection of `u32`, chained
//! over the coordinates. Its one definition is `gpu::ops::dropout_hash` (re-exported here),
//! beside the constants its WGSL twin is compiled with: the GPU trainer's kernels draw these
//! very masks, given each site's [`MaskDraw`] ([`StepMasks::draw`]). An element is kept when its hash is at or above `p * 2^32`, so it
//! is dropped with probability `p` (to 2^-32), and a kept value is scaled by `1 / (1 - p)`
//! (inverted dropout, as PyTorch's `nn.Dropout`): the expected value is unchanged, and
//! evaluation applies no dropout at all.
//!
//! The sites are those of Hugging Face's BERT layers (`modeling_bert.py`): the embeddings'
//! output, the attention probabilities, the attention block's output before its residual
//! and norm, the feed-forward block's output before its residual and norm, and the
//! classifier's input.

pub use crate::gpu::ops::dropout_hash::{attention_index, hidden_index, keeps, pcg_hash, row_key};

use crate::error::Result;
use crate::gpu::ops::MaskDraw;
use crate::model::encoder::{DropoutMasks, MaskAt};
use candle_core::{Device, Tensor};
use serde::Serialize;

/// Dropout probabilities of a training run: 0 means none.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Dropout {
    /// The hidden states' (embeddings, the two blocks' outputs, the classifier's input):
    /// Hugging Face's `hidden_dropout_prob`.
    pub hidden: f64,
    /// The attention probabilities': `attention_probs_dropout_prob`.
    pub attention: f64,
}

impl Dropout {
    pub const NONE: Dropout = Dropout { hidden: 0.0, attention: 0.0 };

    /// Whether any element is ever dropped.
    pub fn is_active(self) -> bool {
        self.hidden > 0.0 || self.attention > 0.0
    }
}

/// Where in a layer a mask applies (the hash's `site` coordinate).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Site {
    Embeddings = 0,
    AttentionProbs,
    AttentionOutput,
    FeedForwardOutput,
    Classifier,
}

/// The key of one step's masks at one site of one layer (`layer`: the encoder layer's
/// index; the embeddings and the classifier use 0): the seed's two halves, then each
/// coordinate, hashed in turn.
pub fn site_key(seed: u64, step: u32, layer: u32, site: Site) -> u32 {
    let mut h = pcg_hash(seed as u32 ^ pcg_hash((seed >> 32) as u32));
    for v in [step, layer, site as u32] {
        h = pcg_hash(h ^ v);
    }
    h
}

/// Elements whose hash is below this are dropped: `p * 2^32`, rounded.
pub fn threshold(p: f64) -> u32 {
    (p.clamp(0.0, 1.0) * 4_294_967_296.0).round().min(u32::MAX as f64) as u32
}

/// The draw of the masks at `key` with probability `p`: the threshold and the kept
/// elements' multiplier `1 / (1 - p)`, in f32.
pub fn draw(key: u32, p: f64) -> MaskDraw {
    MaskDraw { key, threshold: threshold(p), scale: (1.0 / (1.0 - p)) as f32 }
}

/// The multiplier of each element of a `[rows.len(), tokens, width]` hidden-state tensor:
/// 0 where dropped, `1 / (1 - p)` where kept. `rows`: each row's input index.
pub fn hidden_mask(key: u32, rows: &[u32], tokens: usize, width: usize, p: f64) -> Vec<f32> {
    let MaskDraw { threshold: limit, scale, .. } = draw(key, p);
    let mut out = Vec::with_capacity(rows.len() * tokens * width);
    for &input in rows {
        let rk = row_key(key, input);
        for t in 0..tokens {
            out.extend((0..width).map(|f| if keeps(rk, hidden_index(t, f, width), limit) { scale } else { 0.0 }));
        }
    }
    out
}

/// The multiplier of each attention probability of a `[rows.len(), heads, queries, keys]`
/// tensor (queries `0..queries`, keys `0..keys`).
pub fn attention_mask(
    key: u32,
    rows: &[u32],
    heads: usize,
    (queries, keys): (usize, usize),
    positions: usize,
    p: f64,
) -> Vec<f32> {
    let MaskDraw { threshold: limit, scale, .. } = draw(key, p);
    let mut out = Vec::with_capacity(rows.len() * heads * queries * keys);
    for &input in rows {
        let rk = row_key(key, input);
        for head in 0..heads {
            for i in 0..queries {
                out.extend((0..keys).map(|j| {
                    if keeps(rk, attention_index(head, i, j, positions), limit) {
                        scale
                    } else {
                        0.0
                    }
                }));
            }
        }
    }
    out
}

/// The masks of one optimiser step: what the CPU trainer's forward pass multiplies in.
#[derive(Debug, Clone, Copy)]
pub struct StepMasks {
    pub seed: u64,
    pub step: u32,
    pub dropout: Dropout,
    /// The model's position limit ([`attention_index`]).
    pub positions: usize,
}

impl StepMasks {
    /// The draw of the masks at `site` of `layer` (the embeddings and the classifier use 0),
    /// or `None` where its probability is 0: what a GPU kernel draws them with.
    pub fn draw(self, site: Site, layer: usize) -> Option<MaskDraw> {
        let p = match site {
            Site::AttentionProbs => self.dropout.attention,
            _ => self.dropout.hidden,
        };
        (p > 0.0).then(|| draw(site_key(self.seed, self.step, layer as u32, site), p))
    }

    /// The masks of a pass over the inputs `rows` (their indices in the set's flat input
    /// list, in batch order).
    pub fn over(self, rows: &[usize]) -> PassMasks {
        PassMasks { step: self, rows: rows.iter().map(|&r| r as u32).collect() }
    }
}

/// One pass's masks: a step's, over its batch's inputs.
pub struct PassMasks {
    step: StepMasks,
    rows: Vec<u32>,
}

impl PassMasks {
    /// The classifier input's multiplier `[rows, hidden]`, or `None` without hidden dropout.
    pub fn classifier(&self, hidden: usize) -> Result<Option<Tensor>> {
        self.hidden_tensor(Site::Classifier, 0, 1, hidden, &[self.rows.len(), hidden])
    }

    fn hidden_tensor(
        &self,
        site: Site,
        layer: usize,
        tokens: usize,
        width: usize,
        dims: &[usize],
    ) -> Result<Option<Tensor>> {
        let StepMasks { seed, step, dropout, .. } = self.step;
        if dropout.hidden == 0.0 {
            return Ok(None);
        }
        let key = site_key(seed, step, layer as u32, site);
        let mask = hidden_mask(key, &self.rows, tokens, width, dropout.hidden);
        Ok(Some(Tensor::from_vec(mask, dims, &Device::Cpu)?))
    }
}

impl DropoutMasks for PassMasks {
    fn mask(&self, at: MaskAt, dims: &[usize]) -> Result<Option<Tensor>> {
        let wrong =
            || crate::error::Error::invalid(format!("dropout: a mask of {dims:?} for {} inputs", self.rows.len()));
        if dims.first() != Some(&self.rows.len()) {
            return Err(wrong());
        }
        let (site, layer) = match at {
            MaskAt::AttentionProbs(layer) => {
                let StepMasks { seed, step, dropout, positions } = self.step;
                let &[_, heads, queries, keys] = dims else { return Err(wrong()) };
                if dropout.attention == 0.0 {
                    return Ok(None);
                }
                let key = site_key(seed, step, layer as u32, Site::AttentionProbs);
                let mask = attention_mask(key, &self.rows, heads, (queries, keys), positions, dropout.attention);
                return Ok(Some(Tensor::from_vec(mask, dims, &Device::Cpu)?));
            }
            MaskAt::Embeddings => (Site::Embeddings, 0),
            MaskAt::AttentionOutput(layer) => (Site::AttentionOutput, layer),
            MaskAt::FeedForwardOutput(layer) => (Site::FeedForwardOutput, layer),
        };
        let &[_, tokens, width] = dims else { return Err(wrong()) };
        self.hidden_tensor(site, layer, tokens, width, dims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcg_hash_is_the_published_function() {
        // pcg_hash(0): state = 2891336453; state >> 28 = 10, so word = ((state >> 14) ^
        // state) * 277803737 mod 2^32, then (word >> 22) ^ word; by hand with Python's ints:
        // s = 2891336453; w = (((s >> 14) ^ s) * 277803737) % 2**32; (w >> 22) ^ w
        // == 129708002.
        assert_eq!(pcg_hash(0), 129_708_002);
        // A bijection: no two of the first 2^16 values collide.
        let mut seen: Vec<u32> = (0..1u32 << 16).map(pcg_hash).collect();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 1 << 16);
    }

    #[test]
    fn a_mask_drops_about_p_and_scales_the_kept_by_the_inverse() {
        // 64 inputs x 128 tokens x 384 features = 3,145,728 elements at p = 0.1: the
        // dropped count is Binomial(n, 0.1), standard deviation sqrt(n * 0.09) = 532; within
        // 5 of them (0.0008 of the share) unless the hash is biased.
        let rows: Vec<u32> = (0..64).collect();
        let key = site_key(42, 7, 3, Site::FeedForwardOutput);
        let m = hidden_mask(key, &rows, 128, 384, 0.1);
        let n = m.len() as f64;
        let dropped = m.iter().filter(|&&v| v == 0.0).count() as f64;
        assert!((dropped / n - 0.1).abs() < 5.0 * (0.09 / n).sqrt(), "dropped share {}", dropped / n);
        // Every kept value is exactly 1 / 0.9 (in f32), nothing else occurs.
        assert!(m.iter().all(|&v| v == 0.0 || v == (1.0 / 0.9f64) as f32));
        // The same coordinates give the same mask; another step, layer, site or seed another.
        assert_eq!(m, hidden_mask(key, &rows, 128, 384, 0.1));
        for other in [
            site_key(42, 8, 3, Site::FeedForwardOutput),
            site_key(42, 7, 2, Site::FeedForwardOutput),
            site_key(42, 7, 3, Site::AttentionOutput),
            site_key(43, 7, 3, Site::FeedForwardOutput),
        ] {
            assert_ne!(m, hidden_mask(other, &rows, 128, 384, 0.1));
        }
        // p = 0 keeps everything at scale 1.
        assert!(hidden_mask(key, &rows[..2], 4, 8, 0.0).iter().all(|&v| v == 1.0));
    }

    #[test]
    fn an_input_has_its_mask_whatever_batch_or_padding_it_is_in() {
        // Input 5's mask alone, at 10 tokens, is the first 10 tokens of its mask at 16
        // (padded) and its row in a batch with inputs 3 and 9.
        let key = site_key(1, 0, 0, Site::Embeddings);
        let alone = hidden_mask(key, &[5], 10, 32, 0.1);
        let padded = hidden_mask(key, &[5], 16, 32, 0.1);
        assert_eq!(alone, padded[..10 * 32]);
        let batch = hidden_mask(key, &[3, 5, 9], 10, 32, 0.1);
        assert_eq!(alone, batch[10 * 32..20 * 32]);
        // The attention probabilities likewise: query row 0 alone (the last layer's first
        // token) is row 0 of the full square.
        let key = site_key(1, 0, 2, Site::AttentionProbs);
        let full = attention_mask(key, &[5], 4, (10, 10), 512, 0.1);
        let first = attention_mask(key, &[5], 4, (1, 10), 512, 0.1);
        for head in 0..4 {
            assert_eq!(first[head * 10..head * 10 + 10], full[head * 100..head * 100 + 10]);
        }
    }
}
