//! The GPU trainer's dropout masks against the CPU trainer's (`train::dropout`), bit for bit:
//! the hidden-state kernel (kernels/dropout.wgsl) and the attention kernel's dropped
//! probabilities (kernels/attention.wgsl with attention_dropout.wgsl) draw exactly the
//! multipliers the CPU trainer multiplies in, for many elements and several (seed, step,
//! layer, site, input). Runs on lavapipe here; without an adapter the tests say so loudly
//! and return, unless MEDRANK_REQUIRE_GPU=1, where they fail.

use medrank::gpu::ops::{Attention, AttentionDropout, DropoutOp};
use medrank::train::dropout::{attention_mask, draw, hidden_mask, site_key, Site};

use crate::common;
use common::{context, random, run};

/// The (seed, step, layer, site, p) of the compared masks: seeds with both halves set,
/// steps and layers from 0, every hidden site, probabilities from the usual 0.1 to 0.5.
const HIDDEN_CASES: [(u64, u32, u32, Site, f64); 6] = [
    (42, 0, 0, Site::Embeddings, 0.1),
    (42, 7, 3, Site::FeedForwardOutput, 0.1),
    (0x0123_4567_89ab_cdef, 1, 11, Site::AttentionOutput, 0.1),
    (1, 123_456, 5, Site::FeedForwardOutput, 0.25),
    (u64::MAX, 2, 0, Site::Classifier, 0.5),
    (7, 3, 2, Site::AttentionOutput, 0.05),
];

/// Every element of a `[inputs x tokens, width]` tensor of ones through the kernel is the
/// CPU trainer's multiplier (0 or `1 / (1 - p)` in f32) bit for bit, with each input's index
/// in the training set as the CPU keys it (not 0, 1, ...: large and out of order), for a
/// tensor of all tokens (rows_per_input = tokens) and of first tokens only (1); and a random
/// tensor comes out as its values times those multipliers, exactly.
#[test]
fn the_dropout_kernel_draws_the_cpu_trainers_masks_bit_for_bit() {
    let Some(ctx) = context() else { return };
    let op = DropoutOp::new(&ctx);
    let inputs: [u32; 5] = [9, 0, 100_003, 4, 4_000_000_000];
    let mut compared = 0;
    for (case, &(seed, step, layer, site, p)) in HIDDEN_CASES.iter().enumerate() {
        for (tokens, width) in [(37, 384), (1, 96)] {
            let rows = inputs.len() * tokens;
            let ones = ctx.upload_f32("ones", &vec![1.0; rows * width], &[rows, width]).unwrap();
            let x_values = random(rows * width, 60 + case as u64);
            let x = ctx.upload_f32("x", &x_values, &[rows, width]).unwrap();
            let indices = ctx.upload_u32("inputs", &inputs, &[inputs.len()]).unwrap();
            let (out_ones, out_x) =
                (ctx.zeros_f32("out", &[rows, width]).unwrap(), ctx.zeros_f32("out", &[rows, width]).unwrap());
            let key = site_key(seed, step, layer, site);
            let d = draw(key, p);
            let mut dispatches = op.prepare(&ctx, &ones, d, &indices, tokens, &out_ones).unwrap();
            dispatches.extend(op.prepare(&ctx, &x, d, &indices, tokens, &out_x).unwrap());
            run(&ctx, dispatches);
            let want = hidden_mask(key, &inputs, tokens, width, p);
            let got = ctx.read_f32_blocking(&out_ones).unwrap();
            let what = format!("seed {seed} step {step} layer {layer} {site:?} p {p}, {tokens} tokens");
            assert_eq!(got.len(), want.len(), "{what}");
            let differ = got.iter().zip(&want).filter(|(g, w)| g.to_bits() != w.to_bits()).count();
            assert_eq!(differ, 0, "{what}: {differ} multipliers differ");
            let got_x = ctx.read_f32_blocking(&out_x).unwrap();
            let want_x: Vec<f32> = x_values.iter().zip(&want).map(|(v, m)| v * m).collect();
            assert!(got_x.iter().zip(&want_x).all(|(g, w)| g.to_bits() == w.to_bits()), "{what}: x times the mask");
            // Not a trivial mask: about p of the elements dropped (the largest case, 71,040
            // elements: the share's standard deviation is below 0.002 at p <= 0.5).
            if tokens > 1 {
                let dropped = want.iter().filter(|&&m| m == 0.0).count() as f64 / want.len() as f64;
                assert!((dropped - p).abs() < 0.01, "{what}: dropped share {dropped}");
            }
            compared += want.len();
        }
    }
    assert_eq!(compared, 6 * 5 * (37 * 384 + 96));
}

/// The attention kernel with dropout multiplies each probability by the CPU trainer's
/// multiplier for (input, head, query, key), bit for bit. With every query zero all the
/// scores of a sequence's real keys are equal, so its probabilities are exactly 1 / len
/// (len a power of two: exact in f32) and 0 at padded keys; with value j of every head the
/// one-hot vector e_j (head size 16 >= the 16 keys), output column j of query i is the
/// multiplier of probability (i, j) divided by len: times len, the multiplier itself.
#[test]
fn attention_drops_the_cpu_trainers_probabilities_bit_for_bit() {
    let Some(ctx) = context() else { return };
    let op = Attention::new(&ctx);
    let (heads, d, l) = (2, 16, 16);
    let hidden = heads * d;
    let inputs: [u32; 3] = [12, 3, 70_001];
    let lengths = [16, 8, 16];
    let b = inputs.len();
    // (seed, step, layer, p, the model's position limit)
    for (seed, step, layer, p, positions) in [(42, 0, 0, 0.1, 512), (9, 5, 4, 0.1, 64), (3, 1, 11, 0.5, 514)] {
        let keys = random(b * l * hidden, seed);
        let mut qkv = vec![0f32; b * l * 3 * hidden];
        for t in 0..b * l {
            let row = &mut qkv[t * 3 * hidden..(t + 1) * 3 * hidden];
            row[hidden..2 * hidden].copy_from_slice(&keys[t * hidden..(t + 1) * hidden]);
            for h in 0..heads {
                // Value of key j = t % l: e_j in every head.
                row[2 * hidden + h * d + t % l] = 1.0;
            }
        }
        let mask: Vec<f32> = (0..b * l).map(|t| if t % l < lengths[t / l] { 1.0 } else { 0.0 }).collect();
        let qkv_t = ctx.upload_f32("qkv", &qkv, &[b * l, 3 * hidden]).unwrap();
        let mask_t = ctx.upload_f32("mask", &mask, &[b, l]).unwrap();
        let indices = ctx.upload_u32("inputs", &inputs, &[b]).unwrap();
        let out = ctx.zeros_f32("out", &[b * l, hidden]).unwrap();
        let key = site_key(seed, step, layer, Site::AttentionProbs);
        let dropout = AttentionDropout { draw: draw(key, p), inputs: &indices, positions };
        run(&ctx, op.prepare_dropping(&ctx, &qkv_t, &mask_t, heads, &dropout, &out).unwrap());
        let got = ctx.read_f32_blocking(&out).unwrap();
        // [input, head, query, key]
        let want = attention_mask(key, &inputs, heads, (l, l), positions, p);
        let mut dropped = 0;
        for s in 0..b {
            let len = lengths[s];
            for h in 0..heads {
                for i in 0..l {
                    for j in 0..l {
                        let g = got[(s * l + i) * hidden + h * d + j] * len as f32;
                        // Padded keys have probability 0 whatever their mask.
                        let w = if j < len { want[((s * heads + h) * l + i) * l + j] } else { 0.0 };
                        assert_eq!(g.to_bits(), w.to_bits(), "seed {seed}: input {s} head {h} query {i} key {j}");
                        dropped += usize::from(j < len && w == 0.0);
                    }
                }
            }
        }
        assert!(dropped > 0, "seed {seed}: nothing dropped, the test would prove nothing");
    }
}
