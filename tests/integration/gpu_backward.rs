//! The training kernels (backward passes, loss, AdamW) against candle's autograd and
//! candle-nn's AdamW on seeded random tensors: each gradient tensor within a relative
//! difference ||g_gpu - g_candle|| / ||g_candle|| <= 1e-3. The upstream gradient of every
//! op is a random tensor R (the gradient of sum(y * R)). Runs on whatever adapter wgpu
//! finds; here that is lavapipe (software Vulkan). Without any adapter the tests say so
//! loudly and return, unless MEDRANK_REQUIRE_GPU=1, where they fail.

use candle_core::{Device, Tensor, Var, D};
use candle_nn::{AdamW as CandleAdamW, Optimizer, ParamsAdamW};
use medrank::gpu::ops::{
    ActivationOp, AdamW, AdamWConfig, Addend, Attention, AttentionBackward, AttentionDropout, ColumnSum, CrossEntropy,
    EmbeddingBackward, LayerNormBackward, LayerNormGrads, Mat, MatMul, SquaredError, TokensById,
};
use medrank::gpu::{Activation, GpuContext, GpuTensor};
use medrank::train::dropout::{attention_mask, draw, site_key, Site};

use crate::common;
use common::{context, random, run};

const REL_TOL: f64 = 1e-3;

fn upload(ctx: &GpuContext, data: &[f32], shape: &[usize]) -> GpuTensor {
    ctx.upload_f32("test", data, shape).unwrap()
}

fn zeros(ctx: &GpuContext, shape: &[usize]) -> GpuTensor {
    ctx.zeros_f32("test", shape).unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1().unwrap()
}

/// ||got - want|| / ||want||, asserted <= REL_TOL (and want not trivially zero).
fn assert_rel(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let diff: f64 = got.iter().zip(want).map(|(g, w)| (*g as f64 - *w as f64).powi(2)).sum::<f64>().sqrt();
    let norm: f64 = want.iter().map(|w| (*w as f64).powi(2)).sum::<f64>().sqrt();
    assert!(norm > 1e-6, "{what}: the reference gradient is zero ({norm:e}), the test would prove nothing");
    let rel = diff / norm;
    assert!(rel <= REL_TOL, "{what}: relative difference {rel:e} (norm {norm:e})");
    eprintln!("{what}: relative difference {rel:.2e}");
}

fn var(data: &[f32], shape: &[usize]) -> Var {
    Var::from_tensor(&Tensor::from_vec(data.to_vec(), shape, &Device::Cpu).unwrap()).unwrap()
}

/// Gradients of sum(y * r) with respect to `vars`.
fn grads(y: &Tensor, r: &[f32], vars: &[&Var]) -> Vec<Vec<f32>> {
    let r = Tensor::from_vec(r.to_vec(), y.shape(), &Device::Cpu).unwrap();
    let g = (y * r).unwrap().sum_all().unwrap().backward().unwrap();
    vars.iter().map(|v| values(g.get(v.as_tensor()).expect("a gradient"))).collect()
}

#[test]
fn matmul_backward_gives_the_gradients_of_input_weight_and_bias() {
    let Some(ctx) = context() else { return };
    let (mm, colsum) = (MatMul::new(&ctx), ColumnSum::new(&ctx));
    // Sizes off the 64-tile and 16-slice, and one with several tiles each way.
    for (m, k, n, seed) in [(5, 7, 3, 1), (37, 53, 70, 2), (130, 96, 200, 3)] {
        let (x, w, b, r) =
            (random(m * k, seed), random(n * k, seed + 10), random(n, seed + 20), random(m * n, seed + 30));
        let (xv, wv, bv) = (var(&x, &[m, k]), var(&w, &[n, k]), var(&b, &[n]));
        let y = xv.as_tensor().matmul(&wv.as_tensor().t().unwrap()).unwrap().broadcast_add(bv.as_tensor()).unwrap();
        let want = grads(&y, &r, &[&xv, &wv, &bv]);

        let (xt, wt, rt) = (upload(&ctx, &x, &[m, k]), upload(&ctx, &w, &[n, k]), upload(&ctx, &r, &[m, n]));
        let (dx, db) = (zeros(&ctx, &[m, k]), zeros(&ctx, &[n]));
        // dW is accumulated onto what it holds: start from a known tensor, subtract after.
        let start = random(n * k, seed + 40);
        let dw = upload(&ctx, &start, &[n, k]);
        let mut d = mm
            .prepare_product(
                &ctx,
                Mat::of(&rt).unwrap(),
                Mat::of(&wt).unwrap().t(),
                Addend::None,
                Activation::None,
                false,
                Mat::of(&dx).unwrap(),
            )
            .unwrap();
        d.extend(
            mm.prepare_product(
                &ctx,
                Mat::of(&rt).unwrap().t(),
                Mat::of(&xt).unwrap().t(),
                Addend::None,
                Activation::None,
                true,
                Mat::of(&dw).unwrap(),
            )
            .unwrap(),
        );
        d.extend(colsum.prepare(&ctx, &rt, false, &db).unwrap());
        run(&ctx, d);
        let got_dw: Vec<f32> = ctx.read_f32_blocking(&dw).unwrap().iter().zip(&start).map(|(g, s)| g - s).collect();
        assert_rel(&ctx.read_f32_blocking(&dx).unwrap(), &want[0], &format!("matmul {m}x{k}x{n} dx"));
        assert_rel(&got_dw, &want[1], &format!("matmul {m}x{k}x{n} dw"));
        assert_rel(&ctx.read_f32_blocking(&db).unwrap(), &want[2], &format!("matmul {m}x{k}x{n} db"));
    }
}

#[test]
fn matmul_reads_strided_rows_and_adds_a_matrix() {
    let Some(ctx) = context() else { return };
    let mm = MatMul::new(&ctx);
    // y = x[every 3rd row] . w^T + a, written into every 3rd row of a zeroed [3 b, n].
    let (b, step, k, n) = (5, 3, 9, 4);
    let (x, w, a) = (random(b * step * k, 1), random(n * k, 2), random(b * n, 3));
    let (xt, wt, at) = (upload(&ctx, &x, &[b * step, k]), upload(&ctx, &w, &[n, k]), upload(&ctx, &a, &[b, n]));
    let y = zeros(&ctx, &[b * step, n]);
    let d = mm
        .prepare_product(
            &ctx,
            Mat::every_nth_row(&xt, step, b).unwrap(),
            Mat::of(&wt).unwrap(),
            Addend::Matrix(&at),
            Activation::None,
            false,
            Mat::every_nth_row(&y, step, b).unwrap(),
        )
        .unwrap();
    run(&ctx, d);
    let got = ctx.read_f32_blocking(&y).unwrap();
    for row in 0..b * step {
        for c in 0..n {
            let want = if row % step == 0 {
                let r = row / step;
                (0..k).map(|i| x[row * k + i] * w[c * k + i]).sum::<f32>() + a[r * n + c]
            } else {
                0.0
            };
            assert!((got[row * n + c] - want).abs() < 1e-5, "row {row} col {c}: {} vs {want}", got[row * n + c]);
        }
    }
    // A view that does not fit its tensor is refused.
    assert!(Mat::every_nth_row(&xt, step, b + 1).is_err());
}

#[test]
fn activation_gradients_match_candle() {
    let Some(ctx) = context() else { return };
    let op = ActivationOp::new(&ctx);
    let n = 1000;
    let x: Vec<f32> = random(n, 5).iter().map(|v| v * 4.0).collect();
    let r = random(n, 6);
    let xv = var(&x, &[n]);
    let (xt, rt) = (upload(&ctx, &x, &[n]), upload(&ctx, &r, &[n]));
    for act in [Activation::Gelu, Activation::Tanh, Activation::Relu] {
        let y = match act {
            Activation::Gelu => xv.as_tensor().gelu_erf(),
            Activation::Tanh => xv.as_tensor().tanh(),
            _ => xv.as_tensor().relu(),
        }
        .unwrap();
        let want = grads(&y, &r, &[&xv]);
        // The forward mode gives the activation (the saved output of tanh and ReLU).
        let out = zeros(&ctx, &[n]);
        run(&ctx, op.prepare_forward(&ctx, &xt, act, false, &out).unwrap());
        assert_rel(&ctx.read_f32_blocking(&out).unwrap(), &values(&y), &format!("{act:?} forward"));
        let saved = if act == Activation::Gelu { &xt } else { &out };
        let dx = zeros(&ctx, &[n]);
        run(&ctx, op.prepare(&ctx, act, saved, &rt, &dx).unwrap());
        assert_rel(&ctx.read_f32_blocking(&dx).unwrap(), &want[0], &format!("{act:?} backward"));
    }
}

#[test]
fn layer_norm_backward_matches_candle_with_and_without_residual() {
    let Some(ctx) = context() else { return };
    let op = LayerNormBackward::new(&ctx);
    for (rows, cols) in [(9, 384), (3, 768), (4, 5)] {
        let x: Vec<f32> = random(rows * cols, 11).iter().map(|v| v * 3.0 + 0.5).collect();
        let (res, gamma, beta, r) =
            (random(rows * cols, 12), random(cols, 13), random(cols, 14), random(rows * cols, 15));
        let eps = 1e-12;
        for with_residual in [false, true] {
            let (xv, resv, gv, bv) =
                (var(&x, &[rows, cols]), var(&res, &[rows, cols]), var(&gamma, &[cols]), var(&beta, &[cols]));
            let input =
                if with_residual { (xv.as_tensor() + resv.as_tensor()).unwrap() } else { xv.as_tensor().clone() };
            // The differentiable LayerNorm the trainer uses (model/encoder.rs).
            let y = candle_nn::ops::layer_norm_slow(&input, gv.as_tensor(), bv.as_tensor(), eps).unwrap();
            let want = grads(&y, &r, &[&xv, &gv, &bv]);
            let (xt, rest, gt, rt) = (
                upload(&ctx, &x, &[rows, cols]),
                upload(&ctx, &res, &[rows, cols]),
                upload(&ctx, &gamma, &[cols]),
                upload(&ctx, &r, &[rows, cols]),
            );
            let (dx, scratch, dg, db) =
                (zeros(&ctx, &[rows, cols]), zeros(&ctx, &[rows, cols]), zeros(&ctx, &[cols]), zeros(&ctx, &[cols]));
            let t = LayerNormGrads {
                x: &xt,
                residual: with_residual.then_some(&rest),
                gamma: &gt,
                eps,
                dy: &rt,
                dx: &dx,
                scratch: &scratch,
                dgamma: &dg,
                dbeta: &db,
            };
            run(&ctx, op.prepare(&ctx, &t).unwrap());
            let what = format!("layer norm {rows}x{cols} residual {with_residual}");
            assert_rel(&ctx.read_f32_blocking(&dx).unwrap(), &want[0], &format!("{what} dx"));
            assert_rel(&ctx.read_f32_blocking(&dg).unwrap(), &want[1], &format!("{what} dgamma"));
            assert_rel(&ctx.read_f32_blocking(&db).unwrap(), &want[2], &format!("{what} dbeta"));
            if with_residual {
                let want_res = grads(&y, &r, &[&resv]);
                assert_rel(&ctx.read_f32_blocking(&dx).unwrap(), &want_res[0], &format!("{what} dresidual"));
            }
        }
    }
}

/// Attention in candle ops as the trainer writes it (model/encoder.rs `layers_forward`):
/// qkv `[b * l, 3 hidden]`, mask 1/0 `[b * l]` -> `[b * l, hidden]`; with `dropped`, the
/// probabilities `[b, heads, l, l]` times those multipliers (the CPU trainer's dropout).
fn candle_attention(
    qkv: &Tensor,
    mask: &[f32],
    (b, l, heads, hidden): (usize, usize, usize, usize),
    dropped: Option<&[f32]>,
) -> Tensor {
    let d = hidden / heads;
    let split = |i: usize| {
        qkv.narrow(1, i * hidden, hidden)
            .unwrap()
            .reshape((b, l, heads, d))
            .unwrap()
            .transpose(1, 2)
            .unwrap()
            .contiguous()
            .unwrap()
    };
    let q = (split(0) * (1.0 / (d as f64).sqrt())).unwrap();
    let (k, v) = (split(1), split(2));
    let neg: Vec<f32> = mask.iter().map(|&m| if m != 0.0 { 0.0 } else { -1e9 }).collect();
    let neg = Tensor::from_vec(neg, (b, 1, 1, l), &Device::Cpu).unwrap();
    let scores = q.matmul(&k.t().unwrap()).unwrap().broadcast_add(&neg).unwrap();
    let mut probs = candle_nn::ops::softmax(&scores, D::Minus1).unwrap();
    if let Some(m) = dropped {
        probs = (probs * Tensor::from_slice(m, (b, heads, l, l), &Device::Cpu).unwrap()).unwrap();
    }
    probs.matmul(&v).unwrap().transpose(1, 2).unwrap().reshape((b * l, hidden)).unwrap()
}

#[test]
fn attention_backward_matches_candle_with_padding() {
    let Some(ctx) = context() else { return };
    let op = AttentionBackward::new(&ctx);
    // (batch, padded length, heads, hidden, real lengths): MiniLM's 12 x 32 heads, a
    // length over the 64-thread stride, and the kernels' maximum length.
    let cases: [(usize, usize, usize, usize, Vec<usize>); 3] =
        [(3, 20, 12, 384, vec![20, 7, 1]), (2, 90, 4, 64, vec![90, 71]), (1, 512, 2, 16, vec![300])];
    for (b, l, heads, hidden, lengths) in cases {
        let qkv: Vec<f32> = random(b * l * 3 * hidden, 31).iter().map(|v| v * 2.0).collect();
        let mask: Vec<f32> = (0..b * l).map(|t| if t % l < lengths[t / l] { 1.0 } else { 0.0 }).collect();
        let r = random(b * l * hidden, 32);
        let qv = var(&qkv, &[b * l, 3 * hidden]);
        let y = candle_attention(qv.as_tensor(), &mask, (b, l, heads, hidden), None);
        let want = grads(&y, &r, &[&qv]);
        let (qt, mt, rt) = (
            upload(&ctx, &qkv, &[b * l, 3 * hidden]),
            upload(&ctx, &mask, &[b, l]),
            upload(&ctx, &r, &[b * l, hidden]),
        );
        let stats = zeros(&ctx, &[AttentionBackward::stats_len(b * l, heads)]);
        let dqkv = zeros(&ctx, &[b * l, 3 * hidden]);
        run(&ctx, op.prepare(&ctx, &qt, &mt, heads, &rt, &stats, &dqkv).unwrap());
        let got = ctx.read_f32_blocking(&dqkv).unwrap();
        // q, k and v separately: each part's own relative difference.
        for (part, name) in ["q", "k", "v"].iter().enumerate() {
            let pick = |v: &[f32]| -> Vec<f32> {
                v.chunks(3 * hidden).flat_map(|row| row[part * hidden..(part + 1) * hidden].to_vec()).collect()
            };
            assert_rel(&pick(&got), &pick(&want[0]), &format!("attention b={b} l={l} d{name}"));
        }
    }
}

/// With dropout of the probabilities (training): the forward kernel's output and both
/// backward kernels' dq, dk and dv against candle with the CPU trainer's masks multiplied
/// into the probabilities (train::dropout's `attention_mask`, the same site key and inputs).
#[test]
fn attention_with_dropout_and_its_backward_match_candle_with_the_cpu_masks() {
    let Some(ctx) = context() else { return };
    let (forward, backward) = (Attention::new(&ctx), AttentionBackward::new(&ctx));
    let (positions, inputs) = (512, [41u32, 2, 7]);
    let cases: [(usize, usize, usize, usize, Vec<usize>, f64); 3] =
        [(3, 20, 12, 384, vec![20, 7, 1], 0.1), (2, 90, 4, 64, vec![90, 71], 0.1), (1, 300, 2, 16, vec![257], 0.3)];
    for (case, (b, l, heads, hidden, lengths, p)) in cases.into_iter().enumerate() {
        let qkv: Vec<f32> = random(b * l * 3 * hidden, 51).iter().map(|v| v * 2.0).collect();
        let mask: Vec<f32> = (0..b * l).map(|t| if t % l < lengths[t / l] { 1.0 } else { 0.0 }).collect();
        let r = random(b * l * hidden, 52);
        let key = site_key(5 + case as u64, 2, 1, Site::AttentionProbs);
        let dropped = attention_mask(key, &inputs[..b], heads, (l, l), positions, p);
        let qv = var(&qkv, &[b * l, 3 * hidden]);
        let y = candle_attention(qv.as_tensor(), &mask, (b, l, heads, hidden), Some(&dropped));
        let want = grads(&y, &r, &[&qv]);
        let (qt, mt, rt) = (
            upload(&ctx, &qkv, &[b * l, 3 * hidden]),
            upload(&ctx, &mask, &[b, l]),
            upload(&ctx, &r, &[b * l, hidden]),
        );
        let indices = ctx.upload_u32("inputs", &inputs[..b], &[b]).unwrap();
        let dropout = AttentionDropout { draw: draw(key, p), inputs: &indices, positions };
        let (out, stats, dqkv) = (
            zeros(&ctx, &[b * l, hidden]),
            zeros(&ctx, &[AttentionBackward::stats_len(b * l, heads)]),
            zeros(&ctx, &[b * l, 3 * hidden]),
        );
        let mut dispatches = forward.prepare_dropping(&ctx, &qt, &mt, heads, &dropout, &out).unwrap();
        dispatches.extend(backward.prepare_dropping(&ctx, &qt, &mt, heads, &dropout, &rt, &stats, &dqkv).unwrap());
        run(&ctx, dispatches);
        let what = format!("attention with dropout b={b} l={l}");
        assert_rel(&ctx.read_f32_blocking(&out).unwrap(), &values(&y), &format!("{what} output"));
        let got = ctx.read_f32_blocking(&dqkv).unwrap();
        for (part, name) in ["q", "k", "v"].iter().enumerate() {
            let pick = |v: &[f32]| -> Vec<f32> {
                v.chunks(3 * hidden).flat_map(|row| row[part * hidden..(part + 1) * hidden].to_vec()).collect()
            };
            assert_rel(&pick(&got), &pick(&want[0]), &format!("{what} d{name}"));
        }
        // The masks mattered: without them the gradient of v is another.
        let plain = grads(&candle_attention(qv.as_tensor(), &mask, (b, l, heads, hidden), None), &r, &[&qv]);
        let pick_v =
            |v: &[f32]| -> Vec<f32> { v.chunks(3 * hidden).flat_map(|row| row[2 * hidden..].to_vec()).collect() };
        let (dv, dv_plain) = (pick_v(&want[0]), pick_v(&plain[0]));
        let diff: f64 = dv.iter().zip(&dv_plain).map(|(a, b)| (*a as f64 - *b as f64).powi(2)).sum::<f64>().sqrt();
        let norm: f64 = dv_plain.iter().map(|v| (*v as f64).powi(2)).sum::<f64>().sqrt();
        assert!(diff > 10.0 * REL_TOL * norm, "{what}: the masks changed dv by {diff:e} of {norm:e} only");
    }
}

#[test]
fn cross_entropy_loss_and_gradient_match_candle_per_segment() {
    let Some(ctx) = context() else { return };
    let op = CrossEntropy::new(&ctx);
    // Multiple choice: examples of 4, 2 and 5 candidates (one logit each); then
    // classification: 4 examples of 3 labels, unweighted and weighted by class as
    // `--class-weights balanced` weighs them (each term times its gold class's weight).
    let classification = vec![(3, 2, 1.0), (3, 0, 1.0), (3, 1, 1.0), (3, 1, 1.0)];
    let weighted = vec![(3, 2, 2.5), (3, 0, 0.5), (3, 1, 1.25), (3, 1, 1.25)];
    for (examples, seed) in [(vec![(4, 1, 1.0), (2, 0, 1.0), (5, 4, 1.0)], 41), (classification, 42), (weighted, 43)] {
        let total: usize = examples.iter().map(|e| e.0).sum();
        let logits: Vec<f32> = random(total, seed).iter().map(|v| v * 3.0).collect();
        let scale = 1.0 / examples.len() as f32;
        let lv = var(&logits, &[total]);
        let (mut at, mut losses) = (0, Vec::new());
        for &(count, gold, weight) in &examples {
            let logp = candle_nn::ops::log_softmax(&lv.as_tensor().narrow(0, at, count).unwrap(), D::Minus1).unwrap();
            losses.push((logp.get(gold).unwrap().neg().unwrap() * weight as f64).unwrap());
            at += count;
        }
        let losses = Tensor::stack(&losses, 0).unwrap();
        let g = (losses.sum_all().unwrap() * scale as f64).unwrap().backward().unwrap();
        let want_grad = values(g.get(lv.as_tensor()).unwrap());

        let segments = CrossEntropy::weighted_segments(&examples).unwrap();
        let st = ctx.upload_u32("segments", &segments, &[segments.len()]).unwrap();
        let lt = upload(&ctx, &logits, &[total]);
        let (loss, dl) = (zeros(&ctx, &[examples.len()]), zeros(&ctx, &[total]));
        run(&ctx, op.prepare(&ctx, &lt, &st, scale, &loss, &dl).unwrap());
        assert_rel(&ctx.read_f32_blocking(&loss).unwrap(), &values(&losses), "cross-entropy losses");
        assert_rel(&ctx.read_f32_blocking(&dl).unwrap(), &want_grad, "cross-entropy gradient");
    }
    assert!(CrossEntropy::segments(&[(2, 2)]).is_err(), "a gold index outside its segment");
    assert!(CrossEntropy::weighted_segments(&[(2, 1, f32::NAN)]).is_err(), "a weight that is not a number");
}

/// The score task's loss: each example's squared error over its outputs, weighted per
/// output (1 / the dimensions it has, 0 where one is missing), and its gradient scaled to
/// the step's mean, against candle's autograd of the same sum.
#[test]
fn squared_error_loss_and_gradient_match_candle_with_masked_outputs() {
    let Some(ctx) = context() else { return };
    let op = SquaredError::new(&ctx);
    // 5 examples of 3 outputs: the second lacks its middle dimension, the fourth has only
    // its last (70 examples too: more than one workgroup of 64).
    for (n, seed) in [(5usize, 71u64), (70, 72)] {
        let outputs = 3;
        let logits: Vec<f32> = random(n * outputs, seed).iter().map(|v| v * 2.0).collect();
        let targets: Vec<f32> = random(n * outputs, seed + 100);
        let present = |e: usize, j: usize| !(e % 5 == 1 && j == 1 || e % 5 == 3 && j != 2);
        let weights: Vec<f32> = (0..n * outputs)
            .map(|i| {
                let (e, j) = (i / outputs, i % outputs);
                let k = (0..outputs).filter(|&j| present(e, j)).count() as f32;
                if present(e, j) {
                    1.0 / k
                } else {
                    0.0
                }
            })
            .collect();
        let scale = 1.0 / n as f32;
        let lv = var(&logits, &[n, outputs]);
        let t = Tensor::from_vec(targets.clone(), (n, outputs), &Device::Cpu).unwrap();
        let w = Tensor::from_vec(weights.clone(), (n, outputs), &Device::Cpu).unwrap();
        let per_example = ((lv.as_tensor() - &t).unwrap().sqr().unwrap() * &w).unwrap().sum(1).unwrap();
        let g = (per_example.sum_all().unwrap() * scale as f64).unwrap().backward().unwrap();
        let want_grad = values(g.get(lv.as_tensor()).unwrap());

        let shape = [n, outputs];
        let (lt, tt, wt) =
            (upload(&ctx, &logits, &shape), upload(&ctx, &targets, &shape), upload(&ctx, &weights, &shape));
        let (loss, dl) = (zeros(&ctx, &[n]), zeros(&ctx, &shape));
        run(&ctx, op.prepare(&ctx, &lt, &tt, &wt, scale, &loss, &dl).unwrap());
        assert_rel(&ctx.read_f32_blocking(&loss).unwrap(), &values(&per_example), "squared-error losses");
        let got = ctx.read_f32_blocking(&dl).unwrap();
        assert_rel(&got, &want_grad, "squared-error gradient");
        // A missing dimension gets no gradient at all.
        assert_eq!((got[outputs + 1], got[3 * outputs], got[3 * outputs + 1]), (0.0, 0.0, 0.0));
    }
}

#[test]
fn adamw_steps_match_candle_nn() {
    let Some(ctx) = context() else { return };
    let op = AdamW::new(&ctx);
    let n = 777;
    let theta = random(n, 51);
    let config = AdamWConfig { lr: 3e-3, weight_decay: 0.1, ..Default::default() };
    let tv = var(&theta, &[n]);
    let mut reference = CandleAdamW::new(
        vec![tv.clone()],
        ParamsAdamW { lr: config.lr, weight_decay: config.weight_decay, ..Default::default() },
    )
    .unwrap();
    let (tt, m, v) = (upload(&ctx, &theta, &[n]), zeros(&ctx, &[n]), zeros(&ctx, &[n]));
    let state = op.new_step(&ctx, &config);
    // Three steps with their own gradients and learning rates (a schedule), so the bias
    // corrections and the moments carried between steps are checked too.
    for step in 1..=3u32 {
        let lr = config.lr * step as f64;
        let g = random(n, 60 + step as u64);
        // candle: the gradient of sum(theta * g) is g.
        let gt = Tensor::from_vec(g.clone(), n, &Device::Cpu).unwrap();
        let store = (tv.as_tensor() * &gt).unwrap().sum_all().unwrap().backward().unwrap();
        reference.set_learning_rate(lr);
        reference.step(&store).unwrap();
        let gpu_g = upload(&ctx, &g, &[n]);
        op.set_step(&ctx, &state, &AdamWConfig { lr, ..config }, step);
        run(&ctx, op.prepare(&ctx, &state, &tt, &gpu_g, &m, &v).unwrap());
        let want = values(tv.as_tensor());
        let got = ctx.read_f32_blocking(&tt).unwrap();
        // The update itself (theta_t - theta_0) is what the optimiser computes: compare that.
        let upd = |x: &[f32]| -> Vec<f32> { x.iter().zip(&theta).map(|(a, b)| a - b).collect() };
        assert_rel(&upd(&got), &upd(&want), &format!("adamw step {step}"));
    }
}

/// The embedding gradient (`EmbeddingBackward`) against candle's autograd through
/// `Tensor::embedding`: repeated ids, padding left out, and a table of 37 rows in blocks
/// of 10, 10, 10 and 7 (as a vocabulary larger than one binding is kept), each block
/// written only for its own ids, the gradient added to what it held.
#[test]
fn embedding_backward_sums_each_ids_tokens_into_its_row_block_by_block() {
    let Some(ctx) = context() else { return };
    let op = EmbeddingBackward::new(&ctx);
    let (rows, cols) = (37, 24);
    // 3 sequences of 6; id 9 in every sequence, 36 (the last block) twice, padding (0).
    let ids: Vec<u32> = vec![9, 3, 36, 9, 12, 0, 9, 36, 25, 20, 0, 0, 9, 1, 5, 30, 11, 19];
    let mask: Vec<u32> = vec![1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1];
    let dy = random(ids.len() * cols, 7);
    let before = random(rows * cols, 8);

    // candle: the gradient of sum(embedding(real ids) * dy) with respect to the table.
    let table = var(&random(rows * cols, 9), &[rows, cols]);
    let real: Vec<u32> = ids.iter().zip(&mask).filter(|(_, &m)| m != 0).map(|(&i, _)| i).collect();
    let real_dy: Vec<f32> =
        (0..ids.len()).filter(|&t| mask[t] != 0).flat_map(|t| dy[t * cols..(t + 1) * cols].to_vec()).collect();
    let gathered = table.as_tensor().embedding(&Tensor::new(real.as_slice(), &Device::Cpu).unwrap()).unwrap();
    let want_grad = &grads(&gathered, &real_dy, &[&table])[0];
    let want: Vec<f32> = before.iter().zip(want_grad).map(|(b, g)| b + g).collect();

    let lists = TokensById::new(&ids, &mask).unwrap().upload(&ctx, "test").unwrap();
    let dy_gpu = upload(&ctx, &dy, &[ids.len(), cols]);
    let blocks: Vec<(usize, GpuTensor)> = [0..10, 10..20, 20..30, 30..37]
        .into_iter()
        .map(|r| (r.start, upload(&ctx, &before[r.start * cols..r.end * cols], &[r.len(), cols])))
        .collect();
    let views: Vec<(usize, &GpuTensor)> = blocks.iter().map(|(s, t)| (*s, t)).collect();
    run(&ctx, op.prepare(&ctx, &lists, &dy_gpu, &views).unwrap());
    let got: Vec<f32> = blocks.iter().flat_map(|(_, t)| ctx.read_f32_blocking(t).unwrap()).collect();
    assert_rel(&got, &want, "embedding table gradient");
    // Rows no real token carries (id 0 is only padding here) keep what they held, exactly.
    for row in [0, 2, 4, 35] {
        assert_eq!(got[row * cols..(row + 1) * cols], before[row * cols..(row + 1) * cols], "row {row}");
    }
}
