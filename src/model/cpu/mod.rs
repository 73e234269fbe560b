//! The CPU inference path of the encoder layers: plain `f32` buffers, the `gemm` crate for
//! products, and fused element-wise kernels. It computes what
//! [`super::encoder::forward`] (candle) computes — the tests hold the two within 1e-4 —
//! about 5x faster (BENCHMARKS.md), because it
//! - projects q, k and v with one fused product and reads the heads as strided views;
//! - starts each product from its bias and calls its kernel directly, in column tiles over
//!   the threads: `gemm` (AVX-512 where the CPU has it) or [`panel_kernel`] (weights
//!   packed at load; in the browser, with relaxed-SIMD fused multiply-add where the build
//!   has it, and natively on x86-64 CPUs with AVX2 but not AVX-512): [`matmul::Kernel`];
//! - skips the keys after the last real token of each sequence (right padding is free);
//! - uses vectorisable exp / erf (`math`) instead of scalar library calls;
//! - gives each thread whole sequences, or a range of rows, for a whole layer step, and
//!   allocates its buffers once per task rather than once per op.
//!
//! candle stays the path for training (autograd) and the reference of the tests.

mod attention;
pub mod int8;
pub mod math;
pub mod matmul;
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub mod panel_kernel;
pub mod profile;
pub mod view;

use super::config::{Activation, EncoderConfig};
use super::load::{Dense, EncoderWeights, Norm};
use super::precision::Precision;
use crate::error::Result;
use attention::{self_attention, AttentionShape, Extras, RelativeScores};
use int8::Int8Linear;
use matmul::Linear;
use profile::{time, time_on, Step};
use rayon::prelude::*;

/// One encoder layer with its weights laid out for the CPU path.
#[derive(Debug, Clone)]
struct Layer {
    qkv: Projection,
    attn_out: Projection,
    /// After attention (post-norm), or before it (ModernBERT; none in its first layer).
    attn_norm: Option<(Vec<f32>, Vec<f32>)>,
    ffn_in: Projection,
    ffn_out: Projection,
    ffn_norm: (Vec<f32>, Vec<f32>),
    /// DeBERTa-v2: the relative-position table through this layer's query and key maps.
    positions: Option<(Vec<f32>, Vec<f32>)>,
    /// ModernBERT: the rotary tables (cos, sin) of this layer's base, and its window.
    rotary: Option<std::sync::Arc<(Vec<f32>, Vec<f32>)>>,
    window: Option<usize>,
}

/// A linear layer in the precision the encoder runs: f32 ([`Linear`]) or int8
/// ([`Int8Linear`]); both start from the bias and split the work in the same tiles.
#[derive(Debug, Clone)]
enum Projection {
    F32(Linear),
    Int8(Int8Linear),
}

impl Projection {
    fn outputs(&self) -> usize {
        match self {
            Projection::F32(l) => l.outputs,
            Projection::Int8(l) => l.outputs,
        }
    }

    fn forward(&self, x: &[f32], rows: usize, out: &mut [f32], threads: usize) {
        match self {
            Projection::F32(l) => l.forward(x, rows, out, threads),
            Projection::Int8(l) => l.forward(x, rows, out, threads),
        }
    }
}

/// DeBERTa-v2's relative positions: the row of the table each distance reads.
#[derive(Debug, Clone)]
struct RelativeIndex {
    index: Vec<u32>,
    max_len: usize,
    rows: usize,
    c2p: bool,
    p2c: bool,
}

/// The encoder layers, copied out of candle tensors once at load (about the size of the
/// layers themselves: 43 MB for all-MiniLM-L6-v2; the embeddings are not copied).
#[derive(Debug, Clone)]
pub struct CpuLayers {
    layers: Vec<Layer>,
    heads: usize,
    eps: f32,
    activation: Activation,
    /// How the f32 steps round: fastest in f32, reproducible in int8.
    arithmetic: math::Arithmetic,
    /// ModernBERT's layers: norm, attention, residual sum; norm, GeGLU, residual sum.
    pre_norm: bool,
    /// The scores' scale (DeBERTa divides by more than sqrt(head_dim)).
    scale: f32,
    relative: Option<RelativeIndex>,
    /// ModernBERT's norm after the last layer.
    final_norm: Option<(Vec<f32>, Vec<f32>)>,
}

fn values(t: &candle_core::Tensor) -> Result<Vec<f32>> {
    Ok(t.to_dtype(candle_core::DType::F32)?.flatten_all()?.to_vec1()?)
}

fn linear(parts: &[&Dense], inputs: usize, precision: Precision) -> Result<Projection> {
    let data: Vec<(Vec<f32>, Vec<f32>)> =
        parts.iter().map(|d| Ok((values(&d.weight)?, values(&d.bias)?))).collect::<Result<_>>()?;
    let refs: Vec<(&[f32], &[f32])> = data.iter().map(|(w, b)| (w.as_slice(), b.as_slice())).collect();
    Ok(match precision {
        Precision::F32 => Projection::F32(Linear::from_torch(&refs, inputs)),
        // Weights read from an int8 folder were widened to q * scale at load; quantizing
        // them again gives back the same q (every row's largest |q| is 127).
        Precision::Int8 => Projection::Int8(Int8Linear::from_torch(&refs, inputs)),
    })
}

/// One layer's relative-position table through its query and key maps: `(pos_q, pos_k)`.
pub type PositionTables = (Vec<f32>, Vec<f32>);

fn norm(n: &Norm) -> Result<(Vec<f32>, Vec<f32>)> {
    Ok((values(&n.weight)?, values(&n.bias)?))
}

/// DeBERTa-v2's relative-position table (normed where the model says, with the layers' row
/// norm) through every layer's query and key maps: `(pos_q, pos_k)` per layer, `[2 span,
/// hidden]` each; `None` for a model without relative positions. What the CPU path adds to
/// its scores, and what the GPU path uploads (in f32).
pub fn relative_position_tables(
    cfg: &EncoderConfig,
    w: &EncoderWeights,
    precision: Precision,
) -> Result<Option<Vec<PositionTables>>> {
    let (Some(r), Some(rel), Some(_)) = (&w.relative, cfg.relative(), cfg.deberta()) else { return Ok(None) };
    let h = cfg.hidden_size;
    let arithmetic = match precision {
        Precision::F32 => math::Arithmetic::Fastest,
        Precision::Int8 => math::Arithmetic::Reproducible,
    };
    let mut table = values(&r.table)?;
    if let Some(n) = &r.norm {
        let (gamma, beta) = norm(n)?;
        let zeros = vec![0.0; h];
        for row in table.chunks_exact_mut(h) {
            math::add_layer_norm_row(arithmetic, row, &zeros, &gamma, &beta, cfg.layer_norm_eps as f32);
        }
    }
    let rows = 2 * rel.span();
    w.layers
        .iter()
        .map(|l| relative_positions(&table, rows, (&l.query, &l.key), h, precision))
        .collect::<Result<_>>()
        .map(Some)
}

/// The table (`[rows, hidden]`) through one layer's query and key maps: `(pos_q, pos_k)`.
/// In int8 the maps' weights are first rounded through int8 as the layer's own products
/// see them, and the products run on the reproducible kernel, so the page and the CLI
/// compute the same bits.
fn relative_positions(
    table: &[f32],
    rows: usize,
    (query, key): (&Dense, &Dense),
    inputs: usize,
    precision: Precision,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let kernel = match precision {
        Precision::F32 => matmul::Kernel::this_machine(),
        Precision::Int8 => matmul::Kernel::Reproducible,
    };
    let project = |d: &Dense| -> Result<Vec<f32>> {
        let mut w = values(&d.weight)?;
        if precision == Precision::Int8 {
            let (q, scales) = super::quant::quantize_weight_rows(&w, inputs);
            w = super::quant::dequantize_rows(&q, &scales);
        }
        let b = values(&d.bias)?;
        let map = Linear::from_torch_for(kernel, &[(&w, &b)], inputs);
        let mut out = vec![0.0; rows * map.outputs];
        map.forward(table, rows, &mut out, 1);
        Ok(out)
    };
    Ok((project(query)?, project(key)?))
}

impl CpuLayers {
    pub fn new(cfg: &EncoderConfig, w: &EncoderWeights, precision: Precision) -> Result<CpuLayers> {
        let h = cfg.hidden_size;
        // int8 rounds activations to 7 bits before each product: every f32 step before one
        // must give the same bits in the page and the CLI (see `Arithmetic::Reproducible`).
        let arithmetic = match precision {
            Precision::F32 => math::Arithmetic::Fastest,
            Precision::Int8 => math::Arithmetic::Reproducible,
        };
        let eps = cfg.layer_norm_eps as f32;
        let mut positions = relative_position_tables(cfg, w, precision)?.map(Vec::into_iter);
        let max_len = cfg.max_tokens();
        let head_dim = cfg.head_dim();
        let rotary: Vec<std::sync::Arc<(Vec<f32>, Vec<f32>)>> = match cfg.modernbert() {
            Some(m) => [m.global_theta, m.local_theta]
                .iter()
                .map(|&theta| std::sync::Arc::new(super::config::family::rotary_tables(theta, head_dim, max_len)))
                .collect(),
            None => Vec::new(),
        };
        let layers = w
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| {
                let positions = positions.as_mut().and_then(Iterator::next);
                let window = cfg.modernbert().and_then(|m| m.window(i));
                Ok(Layer {
                    qkv: linear(&[&l.query, &l.key, &l.value], h, precision)?,
                    attn_out: linear(&[&l.attn_out], h, precision)?,
                    attn_norm: l.attn_norm.as_ref().map(norm).transpose()?,
                    ffn_in: linear(&[&l.ffn_in], h, precision)?,
                    ffn_out: linear(&[&l.ffn_out], cfg.intermediate_size, precision)?,
                    ffn_norm: norm(&l.ffn_norm)?,
                    positions,
                    rotary: rotary.get(usize::from(window.is_some())).cloned(),
                    window,
                })
            })
            .collect::<Result<_>>()?;
        let relative = cfg.relative().map(|r| RelativeIndex {
            index: r.index_table(max_len),
            max_len,
            rows: 2 * r.span(),
            c2p: r.c2p,
            p2c: r.p2c,
        });
        let factor = cfg.relative().map_or(1, |r| r.scale_factor());
        Ok(CpuLayers {
            layers,
            heads: cfg.num_heads,
            eps,
            activation: cfg.activation,
            arithmetic,
            pre_norm: cfg.pre_norm(),
            scale: 1.0 / ((head_dim * factor) as f32).sqrt(),
            relative,
            final_norm: w.final_norm.as_ref().map(norm).transpose()?,
        })
    }

    /// Run the first `n_layers` layers over `hidden` (`[batch * seq_len, hidden]`, the
    /// embedding layer's output) in place. `mask` is `[batch, seq_len]`, 1 = real token.
    /// Running every layer ends with ModernBERT's final norm.
    pub fn run(&self, hidden: &mut [f32], batch: usize, seq_len: usize, mask: &[u32], n_layers: usize) {
        let Some(first) = self.layers.first() else { return };
        let h = first.attn_out.outputs();
        assert_eq!(hidden.len(), batch * seq_len * h, "hidden states shape");
        assert_eq!(mask.len(), batch * seq_len, "mask shape");
        if hidden.is_empty() {
            return; // no tokens (and zero-sized chunks below would panic)
        }
        let threads = worker_threads();
        // Sequences never look at each other, so with whole sequences per task every
        // layer runs without a single fork or join. About 256 tokens per task measured
        // fastest here (128 to 512 tokens, batch 8 and 32): fewer re-pack the weights too
        // often, more fall out of the thread's cache. One thread takes the same tasks in
        // turn rather than the whole batch at once (BENCHMARKS.md, 2026-11-24).
        let per_task = (256 / seq_len.max(1)).clamp(1, batch.div_ceil(threads));
        let task = |(states, mask): (&mut [f32], &[u32])| {
            self.run_on(states, mask.len() / seq_len, seq_len, mask, n_layers, 1)
        };
        if threads > 1 && batch >= threads {
            hidden.par_chunks_mut(per_task * seq_len * h).zip(mask.par_chunks(per_task * seq_len)).for_each(task);
        } else if threads == 1 {
            hidden.chunks_mut(per_task * seq_len * h).zip(mask.chunks(per_task * seq_len)).for_each(task);
        } else {
            // Run the whole pass on a pool thread: its two parallel steps per layer then
            // start from inside the pool, and the calling thread waits once per pass
            // instead of being woken at the end of every step.
            rayon::scope(|_| self.run_on(hidden, batch, seq_len, mask, n_layers, threads));
        }
    }

    /// [`Self::run`] on `threads` tasks. Per layer the fused QKV product is split in
    /// tiles; everything after it (attention, output projection, feed-forward, norms) only
    /// needs all tokens' keys and values, so each task takes a range of token rows through
    /// the rest of the layer: two parallel steps per layer instead of eight (ModernBERT
    /// adds its norm before the product and the rotation of q and k after it).
    fn run_on(&self, hidden: &mut [f32], batch: usize, seq_len: usize, mask: &[u32], n_layers: usize, threads: usize) {
        let first = &self.layers[0];
        let (h, inter) = (first.attn_out.outputs(), first.ffn_in.outputs());
        let tokens = batch * seq_len;
        let shape = AttentionShape { batch, seq_len, heads: self.heads, head_dim: h / self.heads };
        let rows_per_task = tokens.div_ceil(threads).max(1);
        let mut qkv = vec![0.0; tokens * 3 * h];
        let mut ctx = vec![0.0; tokens * h];
        let mut branch = vec![0.0; tokens * h];
        let mut inner = vec![0.0; tokens * inter];
        // ModernBERT's normed input to the QKV product.
        let mut normed = if self.pre_norm { vec![0.0; tokens * h] } else { Vec::new() };
        let zeros = vec![0.0; h];
        let by_rows = |data: &mut [f32], width: usize, f: &(dyn Fn(usize, &mut [f32]) + Sync)| {
            if threads == 1 {
                f(0, data);
            } else {
                data.par_chunks_mut(rows_per_task * width).enumerate().for_each(|(task, rows)| f(task, rows));
            }
        };
        for layer in self.layers.iter().take(n_layers) {
            let input: &[f32] = if self.pre_norm {
                match &layer.attn_norm {
                    Some((gamma, beta)) => {
                        normed.copy_from_slice(hidden);
                        time(Step::AddNorm, || {
                            by_rows(&mut normed, h, &|_, rows| {
                                for row in rows.chunks_exact_mut(h) {
                                    math::add_layer_norm_row(self.arithmetic, row, &zeros, gamma, beta, self.eps);
                                }
                            })
                        });
                        &normed
                    }
                    None => hidden,
                }
            } else {
                hidden
            };
            time_on(Step::Qkv, threads, || layer.qkv.forward(input, tokens, &mut qkv, threads));
            if let Some(tables) = &layer.rotary {
                let d = h / self.heads;
                time(Step::Attention, || {
                    by_rows(&mut qkv, 3 * h, &|task, rows| {
                        for (r, row) in rows.chunks_exact_mut(3 * h).enumerate() {
                            let position = (task * rows_per_task + r) % seq_len;
                            rotate(&mut row[..2 * h], d, position, tables);
                        }
                    })
                });
            }
            let qkv = &qkv;
            let positions = layer.positions.as_ref();
            let relative = self.relative.as_ref().zip(positions).map(|(r, (pos_q, pos_k))| RelativeScores {
                pos_q,
                pos_k,
                rows: r.rows,
                index: &r.index,
                max_len: r.max_len,
                c2p: r.c2p,
                p2c: r.p2c,
            });
            let extras = Extras { scale: self.scale, relative, window: layer.window };
            let rest = |(task, (((states, ctx), branch), inner)): TaskRows| {
                let rows = states.len() / h;
                time(Step::Attention, || {
                    self_attention(self.arithmetic, qkv, mask, shape, extras, task * rows_per_task, ctx)
                });
                time(Step::AttentionOutput, || layer.attn_out.forward(ctx, rows, branch, 1));
                if self.pre_norm {
                    // x += attn; ctx = LN(x); x += ffn(ctx).
                    time(Step::AddNorm, || {
                        states.iter_mut().zip(&*branch).for_each(|(x, b)| *x += b);
                        ctx.copy_from_slice(states);
                        self.add_norm(ctx, &zeros, &layer.ffn_norm);
                    });
                    time(Step::FeedForwardIn, || layer.ffn_in.forward(ctx, rows, inner, 1));
                    time(Step::Activation, || self.geglu(inner, rows));
                    let half = inner.len() / 2;
                    time(Step::FeedForwardOut, || layer.ffn_out.forward(&inner[..half], rows, branch, 1));
                    time(Step::AddNorm, || states.iter_mut().zip(&*branch).for_each(|(x, b)| *x += b));
                } else {
                    let attn_norm = layer.attn_norm.as_ref().expect("a post-norm layer has its norm");
                    time(Step::AddNorm, || self.add_norm(states, branch, attn_norm));
                    time(Step::FeedForwardIn, || layer.ffn_in.forward(states, rows, inner, 1));
                    time(Step::Activation, || self.activate(inner));
                    time(Step::FeedForwardOut, || layer.ffn_out.forward(inner, rows, branch, 1));
                    time(Step::AddNorm, || self.add_norm(states, branch, &layer.ffn_norm));
                }
            };
            if threads == 1 {
                rest((0, (((&mut *hidden, &mut ctx[..]), &mut branch[..]), &mut inner[..])));
            } else {
                hidden
                    .par_chunks_mut(rows_per_task * h)
                    .zip(ctx.par_chunks_mut(rows_per_task * h))
                    .zip(branch.par_chunks_mut(rows_per_task * h))
                    .zip(inner.par_chunks_mut(rows_per_task * inter))
                    .enumerate()
                    .for_each(rest);
            }
        }
        if let (Some(final_norm), true) = (&self.final_norm, n_layers >= self.layers.len()) {
            time(Step::AddNorm, || by_rows(hidden, h, &|_, rows| self.add_norm(rows, &zeros, final_norm)));
        }
    }

    /// `x = LayerNorm(x + branch)` row by row (the post-norm residual of BERT); a branch of
    /// one row's length (zeros) is added to every row.
    fn add_norm(&self, x: &mut [f32], branch: &[f32], (gamma, beta): &(Vec<f32>, Vec<f32>)) {
        let h = gamma.len();
        for (r, row) in x.chunks_exact_mut(h).enumerate() {
            let b = if branch.len() == h { branch } else { &branch[r * h..(r + 1) * h] };
            math::add_layer_norm_row(self.arithmetic, row, b, gamma, beta, self.eps);
        }
    }

    fn activate(&self, x: &mut [f32]) {
        match self.activation {
            Activation::Gelu => math::gelu_erf(self.arithmetic, x),
            Activation::GeluTanh => math::gelu_tanh(self.arithmetic, x),
            Activation::Relu => math::relu(x),
        }
    }

    /// ModernBERT's GeGLU over `rows` rows of `[input | gate]` (each half `inner` values):
    /// `act(input) * gate`, packed into the first `rows x inner` values.
    fn geglu(&self, x: &mut [f32], rows: usize) {
        let half = x.len() / rows.max(1) / 2;
        for r in 0..rows {
            let row = &mut x[r * 2 * half..(r + 1) * 2 * half];
            let (input, gate) = row.split_at_mut(half);
            self.activate(input);
            input.iter_mut().zip(&*gate).for_each(|(a, g)| *a *= g);
            // Row r's result moves to r * half, before any row still to be read.
            x.copy_within(r * 2 * half..r * 2 * half + half, r * half);
        }
    }
}

/// Turns the query and key heads of one token (`qk`: `[q | k]`, heads of `d` values) by the
/// rotary angles of `position` (`tables`: cos and sin, `[positions, d / 2]`): value `c`
/// and `c + d / 2` of a head as HF's `rotate_half` pairs them.
fn rotate(qk: &mut [f32], d: usize, position: usize, tables: &(Vec<f32>, Vec<f32>)) {
    let half = d / 2;
    let (cos, sin) =
        (&tables.0[position * half..(position + 1) * half], &tables.1[position * half..(position + 1) * half]);
    for head in qk.chunks_exact_mut(d) {
        let (x1, x2) = head.split_at_mut(half);
        for c in 0..half {
            let (a, b) = (x1[c], x2[c]);
            x1[c] = a * cos[c] - b * sin[c];
            x2[c] = b * cos[c] + a * sin[c];
        }
    }
}

/// One task's share of a layer: its index, then its rows of the hidden states, the
/// attention context, the branch output and the feed-forward activations (zipped).
type TaskRows<'a> = (usize, (((&'a mut [f32], &'a mut [f32]), &'a mut [f32]), &'a mut [f32]));

/// Threads the CPU path may use: rayon's pool. In the browser that pool exists only in the
/// threaded build (shared memory, started by the page's worker); the single-threaded build
/// has no threads at all.
pub fn worker_threads() -> usize {
    if cfg!(all(target_arch = "wasm32", not(target_feature = "atomics"))) {
        1
    } else {
        rayon::current_num_threads()
    }
}
