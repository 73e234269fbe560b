//! The GPU trainer (src/gpu/train.rs) against candle's autograd on tiny random models:
//! the gradient of every trained tensor of the top layers and the head after one
//! micro-batch (relative difference <= 1e-3 per tensor), and a few epochs of training
//! giving the CPU trainer's losses and dev accuracies (within 1e-3) with the same data,
//! order and hyper-parameters. Runs on lavapipe here; without an adapter the tests say so
//! loudly and return, unless MEDRANK_REQUIRE_GPU=1, where they fail.

use candle_core::{Device, IndexOp, Tensor, Var, D};
use half::f16;
use medrank::gpu::ops::AdamWConfig;
use medrank::gpu::train::GpuTrainer;
use medrank::model::config::{Activation, Arch, EncoderConfig, HeadKind};
use medrank::model::embed::TextModel;
use medrank::model::encoder::layers_forward;
use medrank::model::heads::head_forward;
use medrank::model::load::{random_model, Dense, HeadWeights, LoadedModel, Norm};
use medrank::model::train::{train, train_with_events, Freeze, TrainExample, TrainOptions};
use medrank::model::{CpuEncoder, Part, Pooling, TextTokenizer};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::PathBuf;

mod common;
use common::context;

const REL_TOL: f64 = 1e-3;

fn tiny(arch: Arch, layers: usize, head: HeadKind, labels: &[&str]) -> EncoderConfig {
    EncoderConfig {
        arch,
        vocab_size: 30522, // the MiniLM tokenizer's vocabulary, so real text can be used
        hidden_size: 32,
        num_layers: layers,
        num_heads: 4,
        intermediate_size: 64,
        max_position_embeddings: 64,
        type_vocab_size: if arch == Arch::DistilBert { 0 } else { 2 },
        layer_norm_eps: 1e-12,
        activation: Activation::Gelu,
        pad_token_id: 0,
        position_offset: 0,
        head,
        labels: labels.iter().map(|s| s.to_string()).collect(),
    }
}

/// A random model whose layer weights are scaled up from random_model's 0.02 (attention
/// then is far from uniform) and whose norms are not the identity.
fn model(arch: Arch, layers: usize, head: HeadKind, labels: &[&str], seed: u64) -> LoadedModel {
    let mut m = random_model(tiny(arch, layers, head, labels), seed).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed + 1);
    let mut jitter = |t: &Tensor, base: f32, spread: f32| {
        let n = t.elem_count();
        let v: Vec<f32> = (0..n).map(|_| base + rng.gen_range(-spread..spread)).collect();
        Tensor::from_vec(v, t.dims(), &Device::Cpu).unwrap()
    };
    for l in &mut m.weights.layers {
        for d in [&mut l.query, &mut l.key, &mut l.value, &mut l.attn_out, &mut l.ffn_in, &mut l.ffn_out] {
            d.weight = (&d.weight * 10.0).unwrap();
        }
        for n in [&mut l.attn_norm, &mut l.ffn_norm] {
            n.weight = jitter(&n.weight, 1.0, 0.3);
            n.bias = jitter(&n.bias, 0.0, 0.3);
        }
    }
    m
}

fn random_states(lens: &[usize], h: usize, seed: u64) -> Vec<Vec<f16>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    lens.iter().map(|&n| (0..n * h).map(|_| f16::from_f32(rng.gen_range(-2.0f32..2.0))).collect()).collect()
}

/// Replaces the trained tensors of `m` (top layers from `first`, head) by variables,
/// named as GpuTrainer::gradients names them.
fn make_vars(m: &mut LoadedModel, first: usize) -> Vec<(String, Var)> {
    let mut vars = Vec::new();
    let mut var = |name: String, t: &mut Tensor| {
        let v = Var::from_tensor(t).unwrap();
        *t = v.as_tensor().clone();
        vars.push((name, v));
    };
    for (i, l) in m.weights.layers.iter_mut().enumerate().skip(first) {
        let dense: [(&str, &mut Dense); 6] = [
            ("query", &mut l.query),
            ("key", &mut l.key),
            ("value", &mut l.value),
            ("attn_out", &mut l.attn_out),
            ("ffn_in", &mut l.ffn_in),
            ("ffn_out", &mut l.ffn_out),
        ];
        for (n, d) in dense {
            var(format!("layer{i}.{n}.weight"), &mut d.weight);
            var(format!("layer{i}.{n}.bias"), &mut d.bias);
        }
        let norms: [(&str, &mut Norm); 2] = [("attn_norm", &mut l.attn_norm), ("ffn_norm", &mut l.ffn_norm)];
        for (n, d) in norms {
            var(format!("layer{i}.{n}.weight"), &mut d.weight);
            var(format!("layer{i}.{n}.bias"), &mut d.bias);
        }
    }
    let mut dense = |name: &str, d: &mut Dense| {
        var(format!("{name}.weight"), &mut d.weight);
        var(format!("{name}.bias"), &mut d.bias);
    };
    match m.head.as_mut().unwrap() {
        HeadWeights::PooledLinear { classifier } => {
            dense("pooler", m.weights.pooler.as_mut().unwrap());
            dense("classifier", classifier);
        }
        HeadWeights::RobertaClassifier { dense: d, out_proj } => {
            dense("classifier.dense", d);
            dense("classifier.out_proj", out_proj);
        }
        HeadWeights::DistilClassifier { pre_classifier, classifier } => {
            dense("pre_classifier", pre_classifier);
            dense("classifier", classifier);
        }
    }
    vars
}

/// The CPU trainer's computation (model/train.rs): padded f32 states, the top layers in
/// candle ops (the last for the first token only), the head, the summed cross-entropy of
/// each example over its own segment, divided by `step_examples`.
fn candle_loss(
    m: &LoadedModel,
    first: usize,
    states: &[Vec<f16>],
    examples: &[(usize, usize)],
    step_examples: usize,
) -> (Tensor, Vec<f32>) {
    let h = m.config.hidden_size;
    let s = states.iter().map(|v| v.len() / h).max().unwrap();
    let mut x = vec![0f32; states.len() * s * h];
    let mut mask = vec![0u32; states.len() * s];
    for (k, st) in states.iter().enumerate() {
        for (dst, src) in x[k * s * h..].iter_mut().zip(st) {
            *dst = src.to_f32();
        }
        mask[k * s..k * s + st.len() / h].fill(1);
    }
    let x = Tensor::from_vec(x, (states.len(), s, h), &Device::Cpu).unwrap();
    let top = layers_forward(&m.config, &m.weights.layers[first..], x, &mask, true).unwrap();
    let cls = top.i((.., 0, ..)).unwrap().contiguous().unwrap();
    let logits = head_forward(m.head.as_ref().unwrap(), m.weights.pooler.as_ref(), &cls).unwrap();
    let flat = logits.flatten_all().unwrap();
    let n_out = logits.dims2().unwrap().1;
    let (mut at, mut losses) = (0, Vec::new());
    for &(count, gold) in examples {
        let seg = flat.narrow(0, at, count * n_out).unwrap();
        let logp = candle_nn::ops::log_softmax(&seg, D::Minus1).unwrap();
        losses.push(logp.get(gold).unwrap().neg().unwrap());
        at += count * n_out;
    }
    let losses = Tensor::stack(&losses, 0).unwrap();
    let values = losses.to_vec1::<f32>().unwrap();
    ((losses.sum_all().unwrap() / step_examples as f64).unwrap(), values)
}

fn rel(got: &[f32], want: &[f32]) -> (f64, f64) {
    let diff: f64 = got.iter().zip(want).map(|(g, w)| (*g as f64 - *w as f64).powi(2)).sum::<f64>().sqrt();
    let norm: f64 = want.iter().map(|w| (*w as f64).powi(2)).sum::<f64>().sqrt();
    (diff / norm, norm)
}

#[test]
fn gradients_of_the_top_layers_and_the_head_match_candle() {
    let Some(_) = context() else { return };
    // (architecture, head, labels, examples as (inputs, gold), lengths of the inputs)
    type Case = (Arch, HeadKind, Vec<&'static str>, Vec<(usize, usize)>);
    let cases: Vec<Case> = vec![
        // Multiple choice: examples of 3, 2 and 4 candidates (BERT: pooler + classifier).
        (Arch::Bert, HeadKind::MultipleChoice, vec![], vec![(3, 1), (2, 0), (4, 3)]),
        // Classification over 3 labels, one input each.
        (Arch::Bert, HeadKind::SequenceClassification, vec!["a", "b", "c"], vec![(1, 2), (1, 0), (1, 1), (1, 2)]),
        // RoBERTa's classification head: classifier.dense + tanh + classifier.out_proj.
        (Arch::Roberta, HeadKind::SequenceClassification, vec!["p", "q"], vec![(1, 0), (1, 1), (1, 1)]),
        // DistilBERT's head: pre_classifier + ReLU + classifier.
        (Arch::DistilBert, HeadKind::SequenceClassification, vec!["x", "y"], vec![(1, 1), (1, 0), (1, 1)]),
    ];
    for (c, (arch, kind, labels, examples)) in cases.into_iter().enumerate() {
        let m = model(arch, 3, kind, &labels, 20 + c as u64);
        let first = 1; // top 2 of 3 layers: the gradient also flows from one layer to the next
        let h = m.config.hidden_size;
        let n_inputs: usize = examples.iter().map(|e| e.0).sum();
        // Lengths with padding in every batch, and a 1-token input.
        let lens: Vec<usize> = (0..n_inputs).map(|i| [7, 12, 1, 9, 5][i % 5]).collect();
        let states = random_states(&lens, h, 30 + c as u64);
        let step_examples = examples.len() + 2; // a micro-batch of a larger step

        let mut reference = m.clone();
        let vars = make_vars(&mut reference, first);
        let (loss, losses) = candle_loss(&reference, first, &states, &examples, step_examples);
        let grads = loss.backward().unwrap();

        // Whole, and split into one part per example (as a micro-batch too large for the
        // adapter's bindings runs): the same sums.
        for split in [false, true] {
            let ctx = context().unwrap();
            let mut trainer = GpuTrainer::new(ctx, &m, first, AdamWConfig::default(), AdamWConfig::default()).unwrap();
            if split {
                trainer.set_max_pass_bytes(1);
            }
            let c = format!("{c} split {split}");
            let inputs: Vec<&[f16]> = states.iter().map(|s| s.as_slice()).collect();
            let got_losses = pollster::block_on(trainer.accumulate(&inputs, &examples, step_examples)).unwrap();
            let (r, _) = rel(&got_losses, &losses);
            assert!(r <= REL_TOL, "case {c}: losses {got_losses:?} vs {losses:?}");
            let got = pollster::block_on(trainer.gradients()).unwrap();
            assert_eq!(got.len(), vars.len(), "case {c}: one gradient per trained tensor");
            for (name, v) in &vars {
                let want: Vec<f32> = grads.get(v.as_tensor()).unwrap().flatten_all().unwrap().to_vec1().unwrap();
                let g = &got.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no gradient {name}")).1;
                let (r, norm) = rel(g, &want);
                // Softmax ignores a shift of all its scores, so the key bias (the same shift of
                // a query's every score) and a multiple-choice classifier's bias (of every
                // candidate's) have no gradient: both sides must give rounding-level zeros.
                if name.ends_with("key.bias") || (kind == HeadKind::MultipleChoice && name == "classifier.bias") {
                    let largest = g.iter().chain(&want).fold(0f32, |a, v| a.max(v.abs()));
                    assert!(largest < 1e-6, "case {c} {name}: {largest:e}, expected 0");
                    continue;
                }
                assert!(norm > 1e-7, "case {c} {name}: zero reference gradient, nothing tested");
                assert!(r <= REL_TOL, "case {c} {name}: relative difference {r:e} (norm {norm:e})");
                eprintln!("case {c} {name}: relative difference {r:.2e}");
            }
        }
    }
}

fn tokenizer(cfg: &EncoderConfig) -> TextTokenizer {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2/tokenizer.json");
    let bytes = std::fs::read(&path).expect("run scripts/setup.sh model");
    TextTokenizer::from_bytes("tokenizer.json", &bytes, cfg.max_tokens(), cfg.pad_token_id).unwrap()
}

/// The same training as the CPU trainer with `--freeze top:2`: per-epoch train loss and dev
/// accuracy within 1e-3, over epochs of several optimiser steps each (micro-batches summed
/// into a step, warm-up, two learning rates), and the trained weights close to candle's.
#[test]
fn a_few_epochs_on_the_gpu_give_the_cpu_trainers_losses() {
    let Some(ctx) = context() else { return };
    let base_model = model(Arch::Bert, 3, HeadKind::None, &[], 40);
    let tok = tokenizer(&base_model.config);
    let base = TextModel {
        name: "tiny".into(),
        tokenizer: tok.clone(),
        encoder: CpuEncoder::new(base_model),
        pooling: Pooling::default(),
    };
    let words = ["fever", "cough", "pain", "rash", "edema", "syncope", "dyspnea", "nausea", "the lungs are clear"];
    let options = ["lung", "colon", "skin", "the heart and the great vessels"];
    // Multiple choice with 2 to 4 candidates of varied lengths; the right one is "lung".
    let make = |n: usize, offset: usize| -> Vec<TrainExample> {
        (0..n)
            .map(|i| {
                let q = words[(i + offset) % words.len()];
                let count = 2 + (i + offset) % 3;
                let gold = (i * 7 + offset) % count;
                let inputs = (0..count)
                    .map(|k| {
                        let o = if k == gold { options[0] } else { options[1 + (k + i) % 3] };
                        tok.encode_parts(&[Part::cut_start(q)], &[Part::keep(o)]).unwrap()
                    })
                    .collect();
                TrainExample { id: format!("e{i}"), inputs, gold }
            })
            .collect()
    };
    let (train_set, dev_set) = (make(14, 0), make(9, 3));
    let opts = TrainOptions {
        freeze: Freeze::TopLayers(2),
        epochs: 3,
        batch_size: 3,
        grad_accum: 2,
        learning_rate: 1e-2,
        layer_learning_rate: 1e-3,
        patience: 10,
        ..Default::default()
    };
    let cpu = train(&base, HeadKind::MultipleChoice, &[], &train_set, &dev_set, &opts, &mut |_| {}).unwrap();

    // The same trainer, its trained part on the GPU.
    let gpu =
        train_with_events(&base, HeadKind::MultipleChoice, &[], &train_set, &dev_set, &opts, Some(ctx), &mut |_| {})
            .unwrap();
    assert_eq!(gpu.curve.len(), cpu.curve.len());
    for (g, c) in gpu.curve.iter().zip(&cpu.curve) {
        eprintln!(
            "epoch {}: loss gpu {} cpu {}; dev {} / {}",
            g.epoch, g.train_loss, c.train_loss, g.dev_accuracy, c.dev_accuracy
        );
        assert_eq!(g.steps, c.steps);
        assert!((g.train_loss - c.train_loss).abs() <= 1e-3 * c.train_loss.abs().max(1.0), "epoch {}", g.epoch);
        assert!((g.dev_accuracy - c.dev_accuracy).abs() <= 1e-3, "epoch {}", g.epoch);
        assert_eq!(g.learning_rate, c.learning_rate);
    }
    assert_eq!(gpu.best_epoch, cpu.best_epoch);
    // The loss moved: the steps did something (the comparison above is not of constants).
    assert!(cpu.curve[0].train_loss != cpu.curve[2].train_loss);
    // The trained top layer and head match; the frozen bottom layer is untouched.
    let pick = |m: &LoadedModel| -> Vec<Vec<f32>> {
        let l = &m.weights.layers[2];
        let head = match m.head.as_ref().unwrap() {
            HeadWeights::PooledLinear { classifier } => classifier.weight.flatten_all().unwrap().to_vec1().unwrap(),
            _ => unreachable!(),
        };
        vec![l.query.weight.flatten_all().unwrap().to_vec1().unwrap(), l.ffn_norm.weight.to_vec1().unwrap(), head]
    };
    for (g, c) in pick(&gpu.model).iter().zip(pick(&cpu.model)) {
        let (r, _) = rel(g, &c);
        assert!(r <= REL_TOL, "trained weights differ by {r:e}");
    }
    assert_eq!(
        gpu.model.weights.layers[0].query.weight.to_vec2::<f32>().unwrap(),
        base.encoder.model.weights.layers[0].query.weight.to_vec2::<f32>().unwrap()
    );
}
