//! Multi-head self-attention over a fused QKV buffer, one (sequence, head, block of query
//! rows) per task.
//!
//! q, k and v are strided views of the `[tokens, 3 * hidden]` output of the fused
//! projection: head `h` of q is columns `h*d .. (h+1)*d`, of k the same plus `hidden`, of
//! v plus `2 * hidden`. The scores of a block of query rows (at most `BLOCK` x keys) stay
//! in a small per-thread buffer that fits the L2 cache, and each task writes its own
//! `rows x d` block of the context, so tasks run in parallel without copies.

use super::math::softmax_row;
use super::matmul::{matmul_raw, Threads, View};
use rayon::prelude::*;

/// Query rows per task: 64 x 512 keys x 4 bytes = 128 KiB of scores.
const BLOCK: usize = 64;

#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    pub batch: usize,
    pub seq_len: usize,
    pub heads: usize,
    pub head_dim: usize,
}

/// Which keys of one sequence take part: keys after the last real token are skipped
/// (right padding costs nothing), masked keys before it get probability 0.
struct Keys {
    count: usize,
    keep: Option<Vec<bool>>,
}

fn keys_of(mask: &[u32]) -> Keys {
    match mask.iter().rposition(|&m| m != 0) {
        // No real token at all: every key, all masked -> uniform weights (what an
        // additive -1e9 mask gives).
        None => Keys { count: mask.len(), keep: Some(vec![false; mask.len()]) },
        Some(last) => {
            let count = last + 1;
            let gaps = mask[..count].iter().any(|&m| m == 0);
            Keys { count, keep: gaps.then(|| mask[..count].iter().map(|&m| m != 0).collect()) }
        }
    }
}

/// Raw pointer to the context buffer, shared by tasks that write disjoint blocks.
#[derive(Clone, Copy)]
struct SharedOut(*mut f32);
// SAFETY: tasks write disjoint (rows x head columns) blocks; see `self_attention`.
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    // A method, so closures capture the Sync wrapper, not the raw pointer field.
    fn at(&self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}

/// `ctx[t, h*d..(h+1)*d] = softmax(q_h k_h^T / sqrt d, masked) v_h` for every sequence and
/// head. `qkv` is `[batch * seq_len, 3 * hidden]`, `mask` `[batch, seq_len]` (1 = real
/// token), `ctx` `[batch * seq_len, hidden]`.
pub fn self_attention(qkv: &[f32], mask: &[u32], shape: AttentionShape, ctx: &mut [f32]) {
    let AttentionShape { batch, seq_len: s, heads, head_dim: d } = shape;
    let hidden = heads * d;
    let stride = 3 * hidden;
    assert_eq!(qkv.len(), batch * s * stride, "qkv shape");
    assert_eq!(mask.len(), batch * s, "mask shape");
    assert_eq!(ctx.len(), batch * s * hidden, "context shape");
    let keys: Vec<Keys> = mask.chunks_exact(s.max(1)).map(keys_of).collect();
    let blocks = s.div_ceil(BLOCK);
    let scale = 1.0 / (d as f32).sqrt();
    let out = SharedOut(ctx.as_mut_ptr());
    let run = |scores: &mut Vec<f32>, task: usize| {
        let (seq, rest) = (task / (heads * blocks), task % (heads * blocks));
        let (head, block) = (rest / blocks, rest % blocks);
        let first = block * BLOCK;
        let rows = BLOCK.min(s - first);
        let Keys { count: nk, keep } = &keys[seq];
        let nk = *nk;
        let base = seq * s * stride;
        let q = View { data: qkv, offset: base + first * stride + head * d, rows, cols: d, row_stride: stride, col_stride: 1 };
        // k^T: row j of k^T is column j of k, so the strides swap.
        let kt = View { data: qkv, offset: base + hidden + head * d, rows: d, cols: nk, row_stride: 1, col_stride: stride };
        let v = View { data: qkv, offset: base + 2 * hidden + head * d, rows: nk, cols: d, row_stride: stride, col_stride: 1 };
        scores.resize(rows * nk, 0.0);
        // SAFETY: `scores` is this task's own buffer of rows x nk.
        unsafe { matmul_raw(scores.as_mut_ptr(), nk, false, q, kt, scale, Threads::Single) };
        for row in scores.chunks_exact_mut(nk) {
            softmax_row(row, keep.as_deref());
        }
        let p = View::row_major(scores, rows, nk);
        let dst_offset = (seq * s + first) * hidden + head * d;
        // SAFETY: rows first..first+rows of sequence `seq`, columns of head `head`: no
        // other task has the same (seq, head, block), so the blocks are disjoint, and
        // they lie inside `ctx` (asserted shape above). `ctx` does not overlap `qkv`.
        unsafe { matmul_raw(out.at(dst_offset), hidden, false, p, v, 1.0, Threads::Single) };
    };
    let tasks = batch * heads * blocks;
    if cfg!(target_arch = "wasm32") {
        let mut scores = Vec::new();
        (0..tasks).for_each(|t| run(&mut scores, t));
    } else {
        (0..tasks).into_par_iter().for_each_init(Vec::new, run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The textbook formula in f64, one head at a time. Masked keys score -1e9 (in f32 an
    /// additive -1e9 swallows the score, so a row without real tokens is uniform).
    fn naive(qkv: &[f32], mask: &[u32], sh: AttentionShape) -> Vec<f32> {
        let AttentionShape { batch, seq_len: s, heads, head_dim: d } = sh;
        let hidden = heads * d;
        let mut ctx = vec![0.0; batch * s * hidden];
        for b in 0..batch {
            for h in 0..heads {
                for i in 0..s {
                    let at = |t: usize, part: usize, c: usize| qkv[(b * s + t) * 3 * hidden + part * hidden + h * d + c] as f64;
                    let scores: Vec<f64> = (0..s)
                        .map(|j| {
                            let dot: f64 = (0..d).map(|c| at(i, 0, c) * at(j, 1, c)).sum();
                            if mask[b * s + j] == 0 { -1e9 } else { dot / (d as f64).sqrt() }
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                    let e: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
                    let z: f64 = e.iter().sum();
                    for c in 0..d {
                        ctx[(b * s + i) * hidden + h * d + c] = ((0..s).map(|j| e[j] / z * at(j, 2, c)).sum::<f64>()) as f32;
                    }
                }
            }
        }
        ctx
    }

    #[test]
    fn matches_the_textbook_formula_with_padding_gaps_and_empty_rows() {
        // 4 sequences of 70 tokens (two query blocks), 3 heads of 5: full, right-padded,
        // a gap in the middle, and no real token at all.
        let sh = AttentionShape { batch: 4, seq_len: 70, heads: 3, head_dim: 5 };
        let n = sh.batch * sh.seq_len * 3 * sh.heads * sh.head_dim;
        let qkv: Vec<f32> = (0..n).map(|i| ((i * 7919 % 1009) as f32 / 1009.0 - 0.5) * 3.0).collect();
        let mut mask = vec![1u32; 4 * 70];
        mask[70 + 40..140].iter_mut().for_each(|m| *m = 0);
        mask[140 + 10..140 + 20].iter_mut().for_each(|m| *m = 0);
        mask[210..280].iter_mut().for_each(|m| *m = 0);
        let mut ctx = vec![0.0; 4 * 70 * 15];
        self_attention(&qkv, &mask, sh, &mut ctx);
        let want = naive(&qkv, &mask, sh);
        let worst = ctx.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
        assert!(worst < 1e-5, "max abs difference {worst}");
    }
}
