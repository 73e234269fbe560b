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
use attention::{self_attention, AttentionShape};
use int8::Int8Linear;
use matmul::Linear;
use profile::{time, time_on, Step};
use rayon::prelude::*;

/// One encoder layer with its weights laid out for the CPU path.
#[derive(Debug, Clone)]
struct Layer {
    qkv: Projection,
    attn_out: Projection,
    attn_norm: (Vec<f32>, Vec<f32>),
    ffn_in: Projection,
    ffn_out: Projection,
    ffn_norm: (Vec<f32>, Vec<f32>),
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

fn norm(n: &Norm) -> Result<(Vec<f32>, Vec<f32>)> {
    Ok((values(&n.weight)?, values(&n.bias)?))
}

impl CpuLayers {
    pub fn new(cfg: &EncoderConfig, w: &EncoderWeights, precision: Precision) -> Result<CpuLayers> {
        let h = cfg.hidden_size;
        let layers = w
            .layers
            .iter()
            .map(|l| {
                Ok(Layer {
                    qkv: linear(&[&l.query, &l.key, &l.value], h, precision)?,
                    attn_out: linear(&[&l.attn_out], h, precision)?,
                    attn_norm: norm(&l.attn_norm)?,
                    ffn_in: linear(&[&l.ffn_in], h, precision)?,
                    ffn_out: linear(&[&l.ffn_out], cfg.intermediate_size, precision)?,
                    ffn_norm: norm(&l.ffn_norm)?,
                })
            })
            .collect::<Result<_>>()?;
        // int8 rounds activations to 7 bits before each product: every f32 step before one
        // must give the same bits in the page and the CLI (see `Arithmetic::Reproducible`).
        let arithmetic = match precision {
            Precision::F32 => math::Arithmetic::Fastest,
            Precision::Int8 => math::Arithmetic::Reproducible,
        };
        Ok(CpuLayers {
            layers,
            heads: cfg.num_heads,
            eps: cfg.layer_norm_eps as f32,
            activation: cfg.activation,
            arithmetic,
        })
    }

    /// Run the first `n_layers` layers over `hidden` (`[batch * seq_len, hidden]`, the
    /// embedding layer's output) in place. `mask` is `[batch, seq_len]`, 1 = real token.
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
    /// the rest of the layer: two parallel steps per layer instead of eight.
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
        for layer in self.layers.iter().take(n_layers) {
            time_on(Step::Qkv, threads, || layer.qkv.forward(hidden, tokens, &mut qkv, threads));
            let qkv = &qkv;
            let rest = |(task, (((states, ctx), branch), inner)): TaskRows| {
                let rows = states.len() / h;
                time(Step::Attention, || self_attention(self.arithmetic, qkv, mask, shape, task * rows_per_task, ctx));
                time(Step::AttentionOutput, || layer.attn_out.forward(ctx, rows, branch, 1));
                time(Step::AddNorm, || self.add_norm(states, branch, &layer.attn_norm));
                time(Step::FeedForwardIn, || layer.ffn_in.forward(states, rows, inner, 1));
                time(Step::Activation, || self.activate(inner));
                time(Step::FeedForwardOut, || layer.ffn_out.forward(inner, rows, branch, 1));
                time(Step::AddNorm, || self.add_norm(states, branch, &layer.ffn_norm));
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
    }

    /// `x = LayerNorm(x + branch)` row by row (the post-norm residual of BERT).
    fn add_norm(&self, x: &mut [f32], branch: &[f32], (gamma, beta): &(Vec<f32>, Vec<f32>)) {
        let h = gamma.len();
        for (row, b) in x.chunks_exact_mut(h).zip(branch.chunks_exact(h)) {
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
