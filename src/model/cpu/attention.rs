//! Multi-head self-attention over a fused QKV buffer, for a range of query rows (the
//! caller splits the rows over threads).
//!
//! q, k and v are strided views of the `[tokens, 3 * hidden]` output of the fused
//! projection: head `h` of q is columns `h*d .. (h+1)*d`, of k the same plus `hidden`, of
//! v plus `2 * hidden`. Per sequence and head, k^T and v are packed once ([`PackedRhs`])
//! for all of the task's query rows of that sequence; the scores of a block of query rows
//! (at most `BLOCK` x keys) stay in a small buffer that fits the L1/L2 cache.
//!
//! Two families add to the scores ([`Extras`]): DeBERTa-v2's relative positions (content
//! to position, `q_i . pos_k[r]`, and position to content, `k_j . pos_q[r]`, with `r` the
//! table row of the distance `i - j`: the products with the whole table, then a gather),
//! and ModernBERT's local layers, whose queries see only the keys within a window (a block
//! of queries packs only the keys some of its rows can see).

use super::math::{softmax_unnormalised, Arithmetic};
use super::matmul::{matmul_packed, Kernel, PackedRhs};
use super::view::{View, ViewMut};

/// Query rows per block of scores: 32 x 512 keys x 4 bytes = 64 KiB. With `gemm`, 32 rows
/// is also where it reads a packed operand in place (see `matmul::ROW_CHUNK`).
const BLOCK: usize = 32;

#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    pub batch: usize,
    pub seq_len: usize,
    pub heads: usize,
    pub head_dim: usize,
}

/// DeBERTa-v2's relative positions for one layer: the table through the layer's query and
/// key maps (`[2 span, hidden]` each), and the table row of every distance.
#[derive(Debug, Clone, Copy)]
pub struct RelativeScores<'a> {
    pub pos_q: &'a [f32],
    pub pos_k: &'a [f32],
    /// `2 span`: the table's rows.
    pub rows: usize,
    /// The row of distance `i - j` at `i - j + max_len - 1` (see `Relative::index_table`).
    pub index: &'a [u32],
    pub max_len: usize,
    pub c2p: bool,
    pub p2c: bool,
}

/// What a family adds to plain attention, and the scale of its scores.
#[derive(Debug, Clone, Copy)]
pub struct Extras<'a> {
    /// Multiplies every score: `1 / sqrt(head_dim)`, DeBERTa's `1 / sqrt(head_dim x (1 +
    /// c2p + p2c))`.
    pub scale: f32,
    pub relative: Option<RelativeScores<'a>>,
    /// A local layer's window: keys at most this far from the query.
    pub window: Option<usize>,
}

impl Extras<'_> {
    /// Plain scaled dot-product attention over heads of `head_dim` values.
    #[cfg(test)]
    pub fn plain(head_dim: usize) -> Extras<'static> {
        Extras { scale: 1.0 / (head_dim as f32).sqrt(), relative: None, window: None }
    }
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
            let gaps = mask[..count].contains(&0);
            Keys { count, keep: gaps.then(|| mask[..count].iter().map(|&m| m != 0).collect()) }
        }
    }
}

/// `ctx[t, h*d..(h+1)*d] = softmax(q_h k_h^T * scale + extras, masked) v_h` for the query
/// tokens `first_token ..` (counted over the whole batch) that fill `ctx` (`[rows, hidden]`).
/// `qkv` is `[batch * seq_len, 3 * hidden]` and `mask` `[batch, seq_len]` (1 = real token).
/// Callers run disjoint row ranges in parallel; rows may span several sequences. Products,
/// softmax and scaling round as `arithmetic` says.
pub fn self_attention(
    arithmetic: Arithmetic,
    qkv: &[f32],
    mask: &[u32],
    shape: AttentionShape,
    extras: Extras,
    first_token: usize,
    ctx: &mut [f32],
) {
    let AttentionShape { batch, seq_len: s, heads, head_dim: d } = shape;
    let hidden = heads * d;
    let stride = 3 * hidden;
    assert_eq!(qkv.len(), batch * s * stride, "qkv shape");
    assert_eq!(mask.len(), batch * s, "mask shape");
    assert_eq!(ctx.len() % hidden.max(1), 0, "context shape");
    let end_token = first_token + ctx.len() / hidden.max(1);
    assert!(end_token <= batch * s, "query rows past the batch");
    let scale = extras.scale;
    let kernel = Kernel::for_arithmetic(arithmetic);
    let (mut kt, mut v, mut scores) = (PackedRhs::for_kernel(kernel), PackedRhs::for_kernel(kernel), Vec::new());
    let (mut pos_k, mut pos_q) = (PackedRhs::for_kernel(kernel), PackedRhs::for_kernel(kernel));
    let (mut c2p, mut p2c, mut row_keep) = (Vec::new(), Vec::new(), Vec::new());
    let mut inverse_sums = Vec::with_capacity(BLOCK);
    let mut token = first_token;
    while token < end_token {
        // The part of the range inside one sequence.
        let seq = token / s;
        let pos = token % s;
        let rows = (s - pos).min(end_token - token);
        let Keys { count: nk, keep } = keys_of(&mask[seq * s..(seq + 1) * s]);
        let base = seq * s * stride;
        // Keys `from..to` of the sequence, k^T and v packed (k^T: row j of k^T is column j
        // of k, so the strides swap).
        let pack = |kt: &mut PackedRhs, v: &mut PackedRhs, head: usize, from: usize, to: usize| {
            let at = base + from * stride + head * d;
            kt.pack(View {
                data: qkv,
                offset: at + hidden,
                rows: d,
                cols: to - from,
                row_stride: 1,
                col_stride: stride,
            });
            v.pack(View {
                data: qkv,
                offset: at + 2 * hidden,
                rows: to - from,
                cols: d,
                row_stride: stride,
                col_stride: 1,
            });
        };
        for head in 0..heads {
            if extras.window.is_none() {
                pack(&mut kt, &mut v, head, 0, nk);
            }
            if let Some(rel) = extras.relative {
                // Head `head` of a `[rows, hidden]` table, transposed: `[d, rows]`.
                fn table(data: &[f32], head: usize, d: usize, rows: usize, hidden: usize) -> View<'_> {
                    View { data, offset: head * d, rows: d, cols: rows, row_stride: 1, col_stride: hidden }
                }
                if rel.c2p {
                    pos_k.pack(table(rel.pos_k, head, d, rel.rows, hidden));
                }
                if rel.p2c {
                    // Every key against every table row, once per sequence and head.
                    pos_q.pack(table(rel.pos_q, head, d, rel.rows, hidden));
                    let k = View {
                        data: qkv,
                        offset: base + hidden + head * d,
                        rows: nk,
                        cols: d,
                        row_stride: stride,
                        col_stride: 1,
                    };
                    p2c.resize(nk * rel.rows, 0.0);
                    let dst = ViewMut { data: &mut p2c, offset: 0, rows: nk, cols: rel.rows, row_stride: rel.rows };
                    matmul_packed(dst, false, k, &pos_q, scale);
                }
            }
            for r0 in (0..rows).step_by(BLOCK) {
                let block = BLOCK.min(rows - r0);
                let first_row = pos + r0; // the block's first query, in the sequence
                let (from, to) = match extras.window {
                    None => (0, nk),
                    Some(w) => {
                        // Padded queries past every key's window still get one key (all
                        // masked: uniform), so their rows stay finite.
                        let to = (first_row + block + w).min(nk);
                        let from = first_row.saturating_sub(w).min(to - 1);
                        pack(&mut kt, &mut v, head, from, to);
                        (from, to)
                    }
                };
                let n = to - from;
                let q = View {
                    data: qkv,
                    offset: base + first_row * stride + head * d,
                    rows: block,
                    cols: d,
                    row_stride: stride,
                    col_stride: 1,
                };
                scores.resize(block * n, 0.0);
                let dst = ViewMut { data: &mut scores, offset: 0, rows: block, cols: n, row_stride: n };
                matmul_packed(dst, false, q, &kt, scale);
                if let Some(rel) = extras.relative {
                    if rel.c2p {
                        c2p.resize(block * rel.rows, 0.0);
                        let dst =
                            ViewMut { data: &mut c2p, offset: 0, rows: block, cols: rel.rows, row_stride: rel.rows };
                        matmul_packed(dst, false, q, &pos_k, scale);
                    }
                    for (row, out) in scores.chunks_exact_mut(n.max(1)).enumerate().take(block) {
                        let i = first_row + row;
                        for (jj, score) in out.iter_mut().enumerate() {
                            let j = from + jj;
                            let r = rel.index[i + rel.max_len - 1 - j] as usize;
                            if rel.c2p {
                                *score += c2p[row * rel.rows + r];
                            }
                            if rel.p2c {
                                *score += p2c[j * rel.rows + r];
                            }
                        }
                    }
                }
                inverse_sums.clear();
                for (row, out) in scores.chunks_exact_mut(n.max(1)).enumerate().take(block) {
                    let sum = match extras.window {
                        None => softmax_unnormalised(arithmetic, out, keep.as_deref()),
                        Some(w) => {
                            let i = first_row + row;
                            row_keep.clear();
                            row_keep
                                .extend((from..to).map(|j| i.abs_diff(j) <= w && keep.as_ref().is_none_or(|k| k[j])));
                            softmax_unnormalised(arithmetic, out, Some(&row_keep))
                        }
                    };
                    inverse_sums.push(sum);
                }
                let p = View::row_major(&scores, block, n);
                let first_out = (token - first_token + r0) * hidden + head * d;
                let dst = ViewMut { data: ctx, offset: first_out, rows: block, cols: d, row_stride: hidden };
                matmul_packed(dst, false, p, &v, 1.0);
                // The softmax's last step, on d outputs per query instead of nk scores.
                for (row, &inv) in inverse_sums.iter().enumerate() {
                    let out = first_out + row * hidden;
                    ctx[out..out + d].iter_mut().for_each(|x| *x *= inv);
                }
            }
        }
        token += rows;
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
                    let at = |t: usize, part: usize, c: usize| {
                        qkv[(b * s + t) * 3 * hidden + part * hidden + h * d + c] as f64
                    };
                    let scores: Vec<f64> = (0..s)
                        .map(|j| {
                            let dot: f64 = (0..d).map(|c| at(i, 0, c) * at(j, 1, c)).sum();
                            if mask[b * s + j] == 0 {
                                -1e9
                            } else {
                                dot / (d as f64).sqrt()
                            }
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                    let e: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
                    let z: f64 = e.iter().sum();
                    for c in 0..d {
                        ctx[(b * s + i) * hidden + h * d + c] =
                            ((0..s).map(|j| e[j] / z * at(j, 2, c)).sum::<f64>()) as f32;
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
        // In uneven row ranges that cross sequence and block boundaries, as threads get them.
        let want = naive(&qkv, &mask, sh);
        for arithmetic in [Arithmetic::Fastest, Arithmetic::Reproducible] {
            let mut ctx = vec![0.0; 4 * 70 * 15];
            let mut first = 0;
            for part in ctx.chunks_mut(15 * 93) {
                self_attention(arithmetic, &qkv, &mask, sh, Extras::plain(sh.head_dim), first, part);
                first += part.len() / 15;
            }
            let worst = ctx.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(worst < 1e-5, "{arithmetic:?}: max abs difference {worst}");
        }
    }
}
