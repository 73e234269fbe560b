//! Each WGSL kernel against a CPU reference written as plain f64 loops on seeded random
//! data (erf from statrs), max abs diff <= 1e-4. Runs on whatever adapter wgpu finds; here
//! that is lavapipe (software Vulkan). Without any adapter the tests say so loudly and
//! return, unless MEDRANK_REQUIRE_GPU=1 (CI), where they fail.

use medrank::gpu::ops::{Addend, Attention, GatherAdd, LayerNorm, Mat, MatMul, Pool, Tile};
use medrank::gpu::{Activation, GpuContext, GpuTensor};
use medrank::model::{Pooling, PoolingMode};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const TOL: f64 = 1e-4;

use crate::common;
use common::{context, random, run};

/// The f16-arithmetic products' bound, absolute (|y| reaches about 5 here): lavapipe gave
/// 1.4e-3 (k = 53) to 5.1e-3 (k = 384, 24 slices).
const F16_MATH_TOL: f64 = 1e-2;

fn assert_close(got: &[f32], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let (mut worst, mut at) = (0.0f64, 0);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let d = (*g as f64 - w).abs();
        assert!(d.is_finite(), "{what}[{i}]: got {g}, want {w}");
        if d > worst {
            worst = d;
            at = i;
        }
    }
    assert!(worst <= TOL, "{what}: max abs diff {worst:e} at {at} (got {}, want {})", got[at], want[at]);
}

fn erf_gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + statrs::function::erf::erf(x / std::f64::consts::SQRT_2))
}

fn upload(ctx: &GpuContext, data: &[f32], shape: &[usize]) -> GpuTensor {
    ctx.upload_f32("test", data, shape).unwrap()
}

fn matmul_reference(x: &[f32], w: &[f32], b: &[f32], m: usize, k: usize, n: usize, act: Activation) -> Vec<f64> {
    let mut y = vec![0.0; m * n];
    for r in 0..m {
        for c in 0..n {
            let mut s = b[c] as f64;
            for i in 0..k {
                s += x[r * k + i] as f64 * w[c * k + i] as f64;
            }
            y[r * n + c] = match act {
                Activation::None => s,
                Activation::Gelu => erf_gelu(s),
                Activation::Tanh => s.tanh(),
                Activation::GeluTanh => {
                    0.5 * s * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (s + 0.044715 * s.powi(3))).tanh())
                }
                Activation::Relu => s.max(0.0),
            };
        }
    }
    y
}

#[test]
fn matmul_matches_reference_with_bias_and_each_activation() {
    let Some(ctx) = context() else { return };
    let op = MatMul::new(&ctx);
    // Sizes that are not multiples of the tiles or of their k slices (16 and 8), a
    // BERT-sized case (hidden 384 -> intermediate 1536) with several tiles in each
    // direction, and a product large enough for the 128 x 128 tiles.
    let cases = [(1, 1, 1, 1), (37, 53, 70, 2), (130, 384, 1536, 3), (2100, 53, 2000, 4)];
    assert_eq!(Tile::for_product(130, 1536), Tile::Small);
    assert_eq!(Tile::for_product(2100, 2000), Tile::Large);
    for (m, k, n, seed) in cases {
        let x = random(m * k, seed);
        let w: Vec<f32> = random(n * k, seed + 100).iter().map(|v| v * 0.2).collect();
        let b = random(n, seed + 200);
        for act in [Activation::None, Activation::Gelu, Activation::Tanh, Activation::GeluTanh, Activation::Relu] {
            let (xt, wt, bt) = (upload(&ctx, &x, &[m, k]), upload(&ctx, &w, &[n, k]), upload(&ctx, &b, &[n]));
            let y = ctx.zeros_f32("y", &[m, n]).unwrap();
            run(&ctx, op.prepare(&ctx, &xt, &wt, &bt, act, &y).unwrap());
            let got = ctx.read_f32_blocking(&y).unwrap();
            assert_close(&got, &matmul_reference(&x, &w, &b, m, k, n, act), &format!("matmul {m}x{k}x{n} {act:?}"));
        }
    }
}

/// The backward passes' views on both tile sizes: x and w transposed, strided rows, a
/// matrix addend and accumulation into y (`y += X . W^T + A`, X = x^T, W = w^T).
#[test]
fn matmul_on_transposed_strided_views_matches_reference_on_both_tiles() {
    let Some(ctx) = context() else { return };
    let op = MatMul::new(&ctx);
    for (m, k, n, seed) in [(45, 37, 70, 7), (2050, 19, 2100, 8)] {
        let stride = 3; // X's rows are every third row of a [m * stride, k] tensor, read as x^T below
        let x_t = random(k * m, seed); // X^T stored [k, m]
        let w_t: Vec<f32> = random(k * n, seed + 100).iter().map(|v| v * 0.2).collect(); // W^T stored [k, n]
        let addend = random(m * n, seed + 200);
        let y0 = random(m * stride * n, seed + 300); // y: every third row of [m * stride, n]
        let xt = upload(&ctx, &x_t, &[k, m]);
        let wt = upload(&ctx, &w_t, &[k, n]);
        let at = upload(&ctx, &addend, &[m, n]);
        let y = upload(&ctx, &y0, &[m * stride, n]);
        let (x_view, w_view) = (Mat::of(&xt).unwrap().t(), Mat::of(&wt).unwrap().t());
        let y_view = Mat::every_nth_row(&y, stride, m).unwrap();
        let d = op.prepare_product(&ctx, x_view, w_view, Addend::Matrix(&at), Activation::None, true, y_view).unwrap();
        run(&ctx, d);
        let mut want: Vec<f64> = y0.iter().map(|&v| v as f64).collect();
        for r in 0..m {
            for c in 0..n {
                let dot: f64 = (0..k).map(|i| x_t[i * m + r] as f64 * w_t[i * n + c] as f64).sum();
                want[r * stride * n + c] += dot + addend[r * n + c] as f64;
            }
        }
        let tile = Tile::for_product(m, n);
        assert_close(&ctx.read_f32_blocking(&y).unwrap(), &want, &format!("views {m}x{k}x{n} ({tile:?} tiles)"));
    }
    assert_eq!(Tile::for_product(2050, 2100), Tile::Large);
}

#[test]
fn matmul_with_f16_weights_matches_reference_on_the_rounded_weights() {
    let Some(ctx) = context() else { return };
    if !ctx.adapter.shader_f16 {
        eprintln!("\n!!!!! SKIPPED: {} has no shader-f16 !!!!!\n", ctx.adapter.name);
        return;
    }
    let op = MatMul::new(&ctx);
    // Odd element count (37 x 53) exercises the padding of the f16 upload.
    for (m, k, n, seed) in [(5, 53, 37, 4), (70, 384, 130, 5)] {
        let x = random(m * k, seed);
        let w: Vec<f32> = random(n * k, seed + 100).iter().map(|v| v * 0.2).collect();
        let b = random(n, seed + 200);
        let (xt, bt) = (upload(&ctx, &x, &[m, k]), upload(&ctx, &b, &[n]));
        let wt = ctx.upload_f16("w", &w, &[n, k]).unwrap();
        let y = ctx.zeros_f32("y", &[m, n]).unwrap();
        run(&ctx, op.prepare(&ctx, &xt, &wt, &bt, Activation::Gelu, &y).unwrap());
        // The reference sees the same f16-rounded weights (half 2.x rounds to nearest even).
        let rounded: Vec<f32> = w.iter().map(|&v| half::f16::from_f32(v).to_f32()).collect();
        let want = matmul_reference(&x, &rounded, &b, m, k, n, Activation::Gelu);
        assert_close(&ctx.read_f32_blocking(&y).unwrap(), &want, &format!("matmul f16 weights {m}x{k}x{n}"));
    }
}

/// f16 arithmetic (`MatMul::with_f16_math`, the encoder's `WeightFormat::F16Math`): x and
/// the weights rounded to f16, each slice's products summed in f16, f32 across slices. The
/// reference is the exact product (f64) of the f16-rounded operands, so what is measured is
/// the f16 summation alone; on both tiles, with k not a multiple of either slice.
#[test]
fn matmul_with_f16_math_stays_within_its_tolerance_on_both_tiles() {
    let Some(ctx) = context() else { return };
    if !ctx.adapter.shader_f16 {
        eprintln!("\n!!!!! SKIPPED: {} has no shader-f16 !!!!!\n", ctx.adapter.name);
        return;
    }
    let op = MatMul::with_f16_math(&ctx, true);
    let round = |v: &[f32]| -> Vec<f32> { v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect() };
    for (m, k, n, seed) in [(37, 53, 70, 21), (130, 384, 1536, 22), (2100, 53, 2000, 23)] {
        let x = random(m * k, seed);
        let w: Vec<f32> = random(n * k, seed + 100).iter().map(|v| v * 0.2).collect();
        let b = random(n, seed + 200);
        let (xt, bt) = (upload(&ctx, &x, &[m, k]), upload(&ctx, &b, &[n]));
        let wt = ctx.upload_f16("w", &w, &[n, k]).unwrap();
        let y = ctx.zeros_f32("y", &[m, n]).unwrap();
        run(&ctx, op.prepare(&ctx, &xt, &wt, &bt, Activation::None, &y).unwrap());
        let want = matmul_reference(&round(&x), &round(&w), &b, m, k, n, Activation::None);
        let got = ctx.read_f32_blocking(&y).unwrap();
        let worst = got.iter().zip(&want).map(|(g, w)| (*g as f64 - w).abs()).fold(0.0, f64::max);
        let tile = Tile::for_product(m, n);
        eprintln!("f16 math {m}x{k}x{n} ({tile:?} tiles): max abs diff {worst:e}");
        assert!(worst <= F16_MATH_TOL, "f16 math {m}x{k}x{n}: max abs diff {worst:e}");
        // Not the f32 kernel by mistake: f32 arithmetic on the same operands is far closer.
        assert!(worst > 1e-5, "f16 math {m}x{k}x{n}: as exact as f32 ({worst:e})");
    }
}

#[test]
fn matmul_rejects_mismatched_shapes() {
    let Some(ctx) = context() else { return };
    let op = MatMul::new(&ctx);
    let x = upload(&ctx, &random(6, 1), &[2, 3]);
    let w = upload(&ctx, &random(8, 2), &[2, 4]);
    let b = upload(&ctx, &random(2, 3), &[2]);
    let y = ctx.zeros_f32("y", &[2, 2]).unwrap();
    let err = op.prepare(&ctx, &x, &w, &b, Activation::None, &y).unwrap_err();
    assert!(err.to_string().contains("x is [2, 3] but w is [2, 4]"), "{err}");
}

#[test]
fn layer_norm_with_and_without_fused_residual() {
    let Some(ctx) = context() else { return };
    let op = LayerNorm::new(&ctx);
    // 384 columns (MiniLM), 768 (BERT-base: more columns than threads), 5 (fewer).
    for (rows, cols) in [(9, 384), (3, 768), (4, 5)] {
        let x: Vec<f32> = random(rows * cols, 11).iter().map(|v| v * 3.0 + 0.5).collect();
        let res = random(rows * cols, 12);
        let gamma = random(cols, 13);
        let beta = random(cols, 14);
        let eps = 1e-12f32;
        for with_residual in [false, true] {
            let (xt, rt) = (upload(&ctx, &x, &[rows, cols]), upload(&ctx, &res, &[rows, cols]));
            let (gt, bt) = (upload(&ctx, &gamma, &[cols]), upload(&ctx, &beta, &[cols]));
            let out = ctx.zeros_f32("out", &[rows, cols]).unwrap();
            let residual = with_residual.then_some(&rt);
            run(&ctx, op.prepare(&ctx, &xt, residual, &gt, &bt, eps, &out).unwrap());
            let mut want = vec![0.0f64; rows * cols];
            for r in 0..rows {
                let v: Vec<f64> = (0..cols)
                    .map(|c| x[r * cols + c] as f64 + if with_residual { res[r * cols + c] as f64 } else { 0.0 })
                    .collect();
                let mean = v.iter().sum::<f64>() / cols as f64;
                let var = v.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / cols as f64;
                for c in 0..cols {
                    want[r * cols + c] = (v[c] - mean) / (var + eps as f64).sqrt() * gamma[c] as f64 + beta[c] as f64;
                }
            }
            let got = ctx.read_f32_blocking(&out).unwrap();
            assert_close(&got, &want, &format!("layer_norm {rows}x{cols} residual={with_residual}"));
        }
    }
}

/// Pooling (kernels/pool.wgsl) against plain f64 loops over the real tokens: the mean, the
/// maximum and the first token, each with and without scaling to unit length, on rows
/// padded by different amounts (one row of a single real token), hidden sizes of fewer and
/// of more columns than the kernel's 128 threads.
#[test]
fn pooling_matches_reference_for_every_mode_with_padding() {
    let Some(ctx) = context() else { return };
    let op = Pool::new(&ctx);
    for (lengths, seq_len, hidden) in [(vec![7, 1, 5], 7, 48), (vec![3, 16, 9, 16], 16, 384), (vec![2, 4], 4, 5)] {
        let rows = lengths.len();
        let x: Vec<f32> = random(rows * seq_len * hidden, 21).iter().map(|v| v * 4.0).collect();
        let mask: Vec<f32> =
            lengths.iter().flat_map(|&n| (0..seq_len).map(move |t| if t < n { 1.0 } else { 0.0 })).collect();
        let (xt, mt) = (upload(&ctx, &x, &[rows * seq_len, hidden]), upload(&ctx, &mask, &[rows, seq_len]));
        for mode in [PoolingMode::Mean, PoolingMode::Max, PoolingMode::Cls] {
            for normalize in [false, true] {
                let out = ctx.zeros_f32("out", &[rows, hidden]).unwrap();
                run(&ctx, op.prepare(&ctx, &xt, &mt, Pooling { mode, normalize }, &out).unwrap());
                let mut want = Vec::with_capacity(rows * hidden);
                for (r, &n) in lengths.iter().enumerate() {
                    let value = |t: usize, c: usize| x[(r * seq_len + t) * hidden + c] as f64;
                    let mut v: Vec<f64> = (0..hidden)
                        .map(|c| match mode {
                            PoolingMode::Mean => (0..n).map(|t| value(t, c)).sum::<f64>() / n as f64,
                            PoolingMode::Max => (0..n).map(|t| value(t, c)).fold(f64::MIN, f64::max),
                            PoolingMode::Cls => value(0, c),
                        })
                        .collect();
                    if normalize {
                        let norm = v.iter().map(|a| a * a).sum::<f64>().sqrt();
                        v.iter_mut().for_each(|a| *a /= norm);
                    }
                    want.extend(v);
                }
                let got = ctx.read_f32_blocking(&out).unwrap();
                assert_close(&got, &want, &format!("pool {mode:?} normalize={normalize} {rows}x{seq_len}x{hidden}"));
            }
        }
    }
    // Shapes that disagree are refused before anything runs.
    let x = upload(&ctx, &random(12, 1), &[6, 2]);
    let mask = upload(&ctx, &[1.0; 4], &[2, 2]);
    let out = ctx.zeros_f32("out", &[2, 2]).unwrap();
    let err = op.prepare(&ctx, &x, &mask, Pooling::default(), &out).unwrap_err();
    assert!(err.to_string().contains("x has 6 token rows, the mask 2 x 2"), "{err}");
}

#[test]
fn embedding_gather_sums_tables_and_handles_a_split_vocabulary() {
    let Some(ctx) = context() else { return };
    let op = GatherAdd::new(&ctx);
    let (vocab, positions, types, cols) = (1000, 16, 2, 24);
    let word = random(vocab * cols, 21);
    let pos = random(positions * cols, 22);
    let typ = random(types * cols, 23);
    let mut rng = ChaCha8Rng::seed_from_u64(24);
    let tokens = 3 * positions;
    let ids: Vec<u32> = (0..tokens).map(|_| rng.gen_range(0..vocab as u32)).collect();
    let pos_ids: Vec<u32> = (0..tokens).map(|t| (t % positions) as u32).collect();
    let type_ids: Vec<u32> = (0..tokens).map(|t| ((t / 5) % types) as u32).collect();
    // Word table forced into blocks of at most 7 KiB: 74 rows a block, 14 blocks.
    let word_table = ctx.upload_table_in_blocks("word", &word, vocab, cols, 7 * 1024).unwrap();
    assert_eq!(word_table.chunks.len(), 14);
    let pos_table = ctx.upload_table("pos", &pos, positions, cols).unwrap();
    let type_table = ctx.upload_table("type", &typ, types, cols).unwrap();
    assert_eq!(pos_table.chunks.len(), 1);
    let out = ctx.zeros_f32("out", &[tokens, cols]).unwrap();
    let id_t = ctx.upload_u32("ids", &ids, &[tokens]).unwrap();
    let pos_t = ctx.upload_u32("pos_ids", &pos_ids, &[tokens]).unwrap();
    let type_t = ctx.upload_u32("type_ids", &type_ids, &[tokens]).unwrap();
    let dispatches = [
        op.prepare(&ctx, &id_t, &word_table.blocks(), &out).unwrap(),
        op.prepare(&ctx, &pos_t, &pos_table.blocks(), &out).unwrap(),
        op.prepare(&ctx, &type_t, &type_table.blocks(), &out).unwrap(),
    ];
    run(&ctx, dispatches.into_iter().flatten().collect());
    let mut want = vec![0.0f64; tokens * cols];
    for t in 0..tokens {
        for c in 0..cols {
            want[t * cols + c] = word[ids[t] as usize * cols + c] as f64
                + pos[pos_ids[t] as usize * cols + c] as f64
                + typ[type_ids[t] as usize * cols + c] as f64;
        }
    }
    assert_close(&ctx.read_f32_blocking(&out).unwrap(), &want, "embedding gather");
}

/// Reference attention over qkv [B*L, 3H] with a 0/1 mask [B, L]; masked keys get -1e9
/// added, as in the CPU encoder (model/encoder.rs).
fn attention_reference(qkv: &[f32], mask: &[f32], b: usize, l: usize, heads: usize, hidden: usize) -> Vec<f64> {
    let d = hidden / heads;
    let scale = 1.0 / (d as f64).sqrt();
    let mut out = vec![0.0; b * l * hidden];
    for s in 0..b {
        for h in 0..heads {
            for i in 0..l {
                let t = s * l + i;
                let q = |x: usize| qkv[t * 3 * hidden + h * d + x] as f64;
                let scores: Vec<f64> = (0..l)
                    .map(|j| {
                        let k = (s * l + j) * 3 * hidden + hidden + h * d;
                        let dot: f64 = (0..d).map(|x| q(x) * qkv[k + x] as f64).sum::<f64>() * scale;
                        if mask[s * l + j] == 0.0 {
                            dot - 1e9
                        } else {
                            dot
                        }
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|v| (v - max).exp()).collect();
                let total: f64 = e.iter().sum();
                for x in 0..d {
                    let v: f64 =
                        (0..l).map(|j| e[j] * qkv[(s * l + j) * 3 * hidden + 2 * hidden + h * d + x] as f64).sum();
                    out[t * hidden + h * d + x] = v / total;
                }
            }
        }
    }
    out
}

#[test]
fn attention_matches_reference_with_padding() {
    let Some(ctx) = context() else { return };
    let op = Attention::new(&ctx);
    // (batch, padded length, heads, hidden, real lengths): MiniLM's 12 x 32 heads with
    // lengths that leave padding, a length that is no multiple of the 64-query block or
    // of the key block, the maximum, and a head of 10 values (not a multiple of 4) over
    // a sequence whose last key block is part padding, and heads of 48 and 64 values (the
    // kernel holds a head in up to four 4 x 4 matrices; 48 stages 20 keys a block).
    let cases: [(usize, usize, usize, usize, Vec<usize>); 6] = [
        (3, 20, 12, 384, vec![20, 7, 1]),
        (2, 150, 4, 64, vec![150, 131]),
        (1, 512, 2, 16, vec![300]),
        (2, 37, 3, 30, vec![37, 5]),
        (2, 45, 2, 96, vec![45, 23]),
        (1, 70, 2, 128, vec![67]),
    ];
    for (b, l, heads, hidden, lengths) in cases {
        let qkv: Vec<f32> = random(b * l * 3 * hidden, 31).iter().map(|v| v * 2.0).collect();
        let mask: Vec<f32> = (0..b * l).map(|t| if t % l < lengths[t / l] { 1.0 } else { 0.0 }).collect();
        let qkv_t = upload(&ctx, &qkv, &[b * l, 3 * hidden]);
        let mask_t = upload(&ctx, &mask, &[b, l]);
        let out = ctx.zeros_f32("out", &[b * l, hidden]).unwrap();
        run(&ctx, op.prepare(&ctx, &qkv_t, &mask_t, heads, &out).unwrap());
        let want = attention_reference(&qkv, &mask, b, l, heads, hidden);
        assert_close(&ctx.read_f32_blocking(&out).unwrap(), &want, &format!("attention b={b} l={l}"));
    }
}

#[test]
fn attention_refuses_heads_over_64_values() {
    let Some(ctx) = context() else { return };
    let qkv = ctx.zeros_f32("qkv", &[4, 3 * 160]).unwrap();
    let mask = ctx.zeros_f32("mask", &[1, 4]).unwrap();
    let out = ctx.zeros_f32("out", &[4, 160]).unwrap();
    let err = Attention::new(&ctx).prepare(&ctx, &qkv, &mask, 2, &out).unwrap_err();
    assert!(err.to_string().contains("heads of 80 values exceed the kernel's 64"), "{err}");
}

/// The forward kernel walks the keys in blocks and holds no row of scores: past the backward
/// kernels' 512 tokens it runs, up to ModernBERT's 8,192; one token more is refused.
#[test]
fn attention_refuses_sequences_longer_than_its_limit() {
    let Some(ctx) = context() else { return };
    let attention = Attention::new(&ctx);
    let prepare = |n: usize| {
        let qkv = ctx.zeros_f32("qkv", &[n, 48]).unwrap();
        let mask = ctx.zeros_f32("mask", &[1, n]).unwrap();
        let out = ctx.zeros_f32("out", &[n, 16]).unwrap();
        attention.prepare(&ctx, &qkv, &mask, 2, &out).map(|_| ())
    };
    assert_eq!(Attention::MAX_FORWARD_SEQ_LEN, 8192);
    prepare(Attention::MAX_SEQ_LEN + 1).unwrap();
    let err = prepare(Attention::MAX_FORWARD_SEQ_LEN + 1).unwrap_err();
    assert!(err.to_string().contains("sequences of 8193 tokens exceed the kernel's 8192"), "{err}");
}
