//! The GPU trainer (src/gpu/train.rs) against candle's autograd on tiny random models:
//! the gradient of every trained tensor of the top layers and the head after one
//! micro-batch (relative difference <= 1e-3 per tensor), and a few epochs of training
//! giving the CPU trainer's losses and dev accuracies (within 1e-3) with the same data,
//! order and hyper-parameters. Runs on lavapipe here; without an adapter the tests say so
//! loudly and return, unless MEDRANK_REQUIRE_GPU=1, where they fail.

use medrank::gpu::ops::AdamWConfig;
use medrank::model::config::{Arch, EncoderConfig, HeadKind, HeadPooling};
use medrank::model::embed::TextModel;
use medrank::model::load::{HeadWeights, LoadedModel};
use medrank::model::{Part, TextTokenizer};
use medrank::train::gpu::gradient_check::{jittered_model, relative};
use medrank::train::gpu::{GpuMemory, GpuTrainer};
use medrank::train::{train, train_with_events, Dropout, Freeze, TrainExample, TrainOptions};

use crate::common;
use common::{context, minilm_tokenizer, tiny_text_model};

const REL_TOL: f64 = 1e-3;

/// The gradient check's tiny random model, with the MiniLM tokenizer's vocabulary so real
/// text can be used.
fn model(arch: Arch, layers: usize, head: HeadKind, labels: &[&str], seed: u64) -> LoadedModel {
    let config = EncoderConfig { vocab_size: 30522, ..EncoderConfig::tiny(arch, layers, head, labels) };
    jittered_model(config, seed).unwrap()
}

/// The library's self-check (`train::gpu::gradient_check`, which the bench page runs on WebGPU):
/// every trained tensor of BERT multiple-choice, BERT, RoBERTa and DistilBERT
/// classification models, micro-batches whole and in parts, training the top 2 of 3
/// layers and then every layer with the embeddings; then BERT multiple choice and RoBERTa
/// classification with dropout (hidden 0.1, attention 0.2), the GPU's kernels drawing the
/// masks candle's reference multiplies in (the CPU trainer's).
#[test]
fn gradients_of_every_trained_tensor_match_candle() {
    let Some(ctx) = context() else { return };
    let checks = pollster::block_on(medrank::train::gpu::gradient_check::gradient_check(&ctx)).unwrap();
    // Top layers: 4 models x (whole, in parts) x (the losses + 2 layers of 16 tensors + 4
    // head tensors). Every layer: 3 layers, and the word, position and token-type tables and
    // the embedding norm's two (DistilBERT has no token types).
    let top = 4 * 2 * (1 + 2 * 16 + 4);
    let every = 2 * (3 * (1 + 3 * 16 + 4 + 5) + (1 + 3 * 16 + 4 + 4));
    // With dropout: 2 models (both with token types) x (whole, in parts), both ways.
    let dropping = 2 * 2 * (1 + 2 * 16 + 4) + 2 * 2 * (1 + 3 * 16 + 4 + 5);
    assert_eq!(checks.len(), top + every + dropping);
    assert_eq!(checks.iter().filter(|c| c.case.contains(", dropout")).count(), dropping);
    for c in &checks {
        eprintln!("{} {}: {:.2e}", c.case, c.tensor, c.difference);
        assert!(c.ok, "{c:?}");
        if !c.zero_by_construction {
            assert!(c.difference <= 1e-3 && c.reference_norm > 1e-7, "{c:?}");
        }
    }
    for table in ["word_embeddings", "position_embeddings", "token_type_embeddings", "embedding_norm.weight"] {
        let n = checks.iter().filter(|c| c.tensor == table && !c.zero_by_construction).count();
        assert_eq!(n, if table == "token_type_embeddings" { 6 + 4 } else { 8 + 4 }, "{table}");
    }
    // Each run's key biases (2 or 3 layers), and the multiple-choice classifier's bias in
    // its four runs; with dropout, the same of its two models (dropout after the softmax
    // keeps the key bias's gradient zero: a shift of all scores still changes nothing).
    let zero = 4 * 2 * 2 + 4 * 2 * 3 + 4 + (2 * 2 * 2 + 2 * 2 * 3 + 4);
    assert_eq!(checks.iter().filter(|c| c.zero_by_construction).count(), zero);
}

/// A 3-layer random BERT (the gradient check's, seed `seed`) as a base model with the
/// MiniLM tokenizer, and the tokenizer.
fn tiny_base(seed: u64) -> (TextModel, TextTokenizer) {
    let base_model = model(Arch::Bert, 3, HeadKind::None, &[], seed);
    let tok = minilm_tokenizer(&base_model.config);
    (tiny_text_model(base_model, tok.clone()), tok)
}

/// Three epochs of several optimiser steps each (micro-batches of 3 summed by 2, warm-up,
/// the head's and the layers' own rates), training what `freeze` says.
fn few_epochs(freeze: Freeze) -> TrainOptions {
    TrainOptions {
        freeze,
        epochs: 3,
        batch_size: 3,
        grad_accum: 2,
        learning_rate: 1e-2,
        layer_learning_rate: 1e-3,
        patience: 10,
        ..Default::default()
    }
}

/// The same training as the CPU trainer with `--freeze top:2`: per-epoch train loss and dev
/// accuracy within 1e-3, over epochs of several optimiser steps each (micro-batches summed
/// into a step, warm-up, two learning rates), and the trained weights close to candle's.
#[test]
fn a_few_epochs_on_the_gpu_give_the_cpu_trainers_losses() {
    gpu_and_cpu_train_alike(Freeze::TopLayers(2), Dropout::NONE);
}

/// The same with `--freeze all`: every layer and the embeddings train on the GPU.
#[test]
fn a_few_epochs_of_every_layer_on_the_gpu_give_the_cpu_trainers_losses() {
    gpu_and_cpu_train_alike(Freeze::All, Dropout::NONE);
}

/// Dropout 0.1 (the `finetune` recipe's): the GPU's kernels drop what the CPU trainer
/// drops at every site of the top layers and the head, so the curves agree as without it;
/// and dropout changed the CPU's curve by far more than that tolerance, so a GPU trainer
/// that ignored it (as it did before it had the kernels) fails here.
#[test]
fn a_few_epochs_with_dropout_on_the_gpu_give_the_cpu_trainers_losses() {
    gpu_and_cpu_train_alike(Freeze::TopLayers(2), Dropout { hidden: 0.1, attention: 0.1 });
}

/// The same with every layer: the embeddings' output drops too.
#[test]
fn a_few_epochs_of_every_layer_with_dropout_on_the_gpu_give_the_cpu_trainers_losses() {
    gpu_and_cpu_train_alike(Freeze::All, Dropout { hidden: 0.1, attention: 0.1 });
}

fn gpu_and_cpu_train_alike(freeze: Freeze, dropout: Dropout) {
    let Some(ctx) = context() else { return };
    let (base, tok) = tiny_base(40);
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
                TrainExample { id: format!("e{i}"), inputs, gold, scores: None }
            })
            .collect()
    };
    let (train_set, dev_set) = (make(14, 0), make(9, 3));
    let opts = TrainOptions { dropout: Some(dropout), ..few_epochs(freeze) };
    let cpu = train(&base, HeadKind::MultipleChoice, &[], &train_set, &dev_set, &opts, &mut |_| {}).unwrap();
    if dropout.is_active() {
        // Without dropout the CPU's losses are others, beyond the tolerance below: the
        // comparison tells a trainer that drops from one that does not.
        let plain = TrainOptions { dropout: Some(Dropout::NONE), ..opts.clone() };
        let without = train(&base, HeadKind::MultipleChoice, &[], &train_set, &dev_set, &plain, &mut |_| {}).unwrap();
        let moved =
            without.curve.iter().zip(&cpu.curve).map(|(w, c)| (w.train_loss - c.train_loss).abs()).fold(0.0, f64::max);
        eprintln!("dropout moved the CPU's train loss by up to {moved}");
        assert!(
            moved > 10.0 * 1e-3 * cpu.curve[0].train_loss.abs().max(1.0),
            "dropout changed the losses by {moved} only"
        );
    }

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
    // The trained top layer and head match (and with `all`, the bottom layer and the
    // embeddings); a frozen bottom layer is untouched.
    let flat = |t: &candle_core::Tensor| -> Vec<f32> { t.flatten_all().unwrap().to_vec1().unwrap() };
    let pick = |m: &LoadedModel| -> Vec<Vec<f32>> {
        let (l, w) = (&m.weights.layers[2], &m.weights);
        let head = match m.head.as_ref().unwrap() {
            HeadWeights::PooledLinear { classifier } => flat(&classifier.weight),
            _ => unreachable!(),
        };
        let mut picked = vec![flat(&l.query.weight), flat(&l.ffn_norm.weight), head];
        if freeze == Freeze::All {
            picked.extend([
                flat(&w.layers[0].key.weight),
                flat(&w.word_embeddings),
                flat(w.position_embeddings.as_ref().unwrap()),
                flat(w.token_type_embeddings.as_ref().unwrap()),
                flat(&w.embedding_norm.weight),
            ]);
        }
        picked
    };
    for (g, c) in pick(&gpu.model).iter().zip(pick(&cpu.model)) {
        let (r, _) = relative(g, &c);
        assert!(r <= REL_TOL, "trained weights differ by {r:e}");
    }
    let bottom = |m: &LoadedModel| flat(&m.weights.layers[0].query.weight);
    let words = |m: &LoadedModel| flat(&m.weights.word_embeddings);
    if freeze == Freeze::All {
        // Training moved them (the comparison above is not of the base's values).
        assert_ne!(bottom(&gpu.model), bottom(&base.encoder.model));
        assert_ne!(words(&gpu.model), words(&base.encoder.model));
    } else {
        assert_eq!(bottom(&gpu.model), bottom(&base.encoder.model));
    }
}

/// The score task's regression head (task `score`: the masked squared error of
/// standardised human scores) on the GPU as on the CPU trainer, with `top:2` and with every
/// layer: per-epoch train and dev loss within 1e-3, and the picked epoch's dev predictions
/// (on the human scale) within 1e-3 of the scores' standard deviation. One dimension is missing on some
/// examples (masked in both). The head reads the first token (`--head-pooling cls`): the GPU
/// trainer's last layer computes nothing else, and it refuses the task's default mean head
/// (which the placement rule trains on the CPU: gpu_train_cli.rs).
#[test]
fn a_score_model_trains_on_the_gpu_as_on_the_cpu() {
    use medrank::train::ScoreTargets;
    let Some(ctx) = context() else { return };
    let (base, tok) = tiny_base(41);
    let answers = ["fever and cough", "a rash on the arm", "the lungs are clear", "syncope after exercise", "nausea"];
    let make = |n: usize, offset: usize| -> Vec<TrainExample> {
        (0..n)
            .map(|i| {
                let k = i + offset;
                let input =
                    tok.encode_parts(&[Part::cut_end(answers[k % 5])], &[Part::cut_end("what is wrong?")]).unwrap();
                let overall = (k * 37 % 101) as f64;
                let scores = vec![Some(overall), (!k.is_multiple_of(3)).then_some(100.0 - overall / 2.0)];
                let scores = Some(ScoreTargets { batch: format!("b{}", k % 2), scores });
                TrainExample { id: format!("e{i}"), inputs: vec![input], gold: 0, scores }
            })
            .collect()
    };
    let (train_set, dev_set) = (make(14, 0), make(9, 3));
    let labels = ["overall".to_string(), "selection".to_string()];
    let head = HeadKind::SequenceClassification;
    let refused = train_with_events(
        &base,
        head,
        &labels,
        &train_set,
        &dev_set,
        &few_epochs(Freeze::All),
        Some(ctx.clone()),
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(refused.contains(medrank::train::gpu::MEAN_POOLED_HEAD), "{refused}");
    for freeze in [Freeze::TopLayers(2), Freeze::All] {
        let opts = TrainOptions { head_pooling: Some(HeadPooling::Cls), ..few_epochs(freeze) };
        let cpu = train(&base, head, &labels, &train_set, &dev_set, &opts, &mut |_| {}).unwrap();
        let gpu = train_with_events(&base, head, &labels, &train_set, &dev_set, &opts, Some(ctx.clone()), &mut |_| {})
            .unwrap();
        assert_eq!(gpu.curve.len(), cpu.curve.len());
        for (g, c) in gpu.curve.iter().zip(&cpu.curve) {
            eprintln!(
                "{freeze:?} epoch {}: loss gpu {} cpu {}; dev loss {} / {}",
                g.epoch, g.train_loss, c.train_loss, g.dev_loss, c.dev_loss
            );
            assert!((g.train_loss - c.train_loss).abs() <= 1e-3 * c.train_loss.abs().max(1.0), "epoch {}", g.epoch);
            assert!((g.dev_loss - c.dev_loss).abs() <= 1e-3 * c.dev_loss.abs().max(1.0), "epoch {}", g.epoch);
            assert!(g.dev_scores.is_some() && g.dev_accuracy.is_nan());
        }
        assert!(cpu.curve[0].train_loss != cpu.curve[2].train_loss, "the steps did something");
        // Both pick by dev Spearman, a rank statistic that a tiny difference may flip; the
        // predictions of the epoch each picked are compared when they picked the same one.
        let scale = cpu.model.config.score_scale.as_ref().unwrap();
        if gpu.best_epoch == cpu.best_epoch {
            for (g, c) in gpu.dev_predictions.iter().zip(&cpu.dev_predictions) {
                for j in 0..2 {
                    let off = (g[j] - c[j]).abs() / scale.std[j];
                    assert!(off <= 1e-3, "dev prediction {} on the GPU, {} on the CPU: {off:e} deviations", g[j], c[j]);
                }
            }
        }
        assert_eq!(gpu.model.config.score_scale.as_ref(), Some(scale), "the same standardisation");
    }
}

/// The memory figure shown before training counts what the trainer allocates: its weights'
/// bytes (with gradients, moments and best copies) equal the figure's, for the top layers,
/// every layer, and every layer with frozen embeddings.
#[test]
fn the_memory_figure_is_what_the_trainer_allocates() {
    let Some(ctx) = context() else { return };
    for (first, embeddings) in [(1, false), (0, true), (0, false)] {
        let m = jittered_model(EncoderConfig::tiny(Arch::Roberta, 3, HeadKind::SequenceClassification, &["a", "b"]), 3)
            .unwrap();
        let (head, layers) = (AdamWConfig::default(), AdamWConfig::default());
        let trainer = pollster::block_on(GpuTrainer::new(ctx.clone(), &m, first, embeddings, head, layers)).unwrap();
        let figure = GpuMemory::estimate(&m.config, 2, first, embeddings, 1, 1, Dropout::NONE);
        assert_eq!(trainer.parameter_bytes(), figure.parameters, "first layer {first}, embeddings {embeddings}");
    }
}

/// DeBERTa-v2's relative attention and ModernBERT's rotary, windowed, pre-norm layers have
/// no backward kernels: `--backend gpu` refuses them with a sentence naming the family and
/// the path (they train on the CPU trainer, tests/integration/train_reference.rs), before any step.
#[test]
fn the_gpu_trainer_refuses_deberta_and_modernbert() {
    let Some(ctx) = context() else { return };
    for (arch, name) in [(Arch::DebertaV2, "DeBERTa-v2"), (Arch::ModernBert, "ModernBERT")] {
        let config = EncoderConfig { vocab_size: 30522, ..EncoderConfig::tiny(arch, 2, HeadKind::None, &[]) };
        let tok = minilm_tokenizer(&config);
        let base = tiny_text_model(medrank::model::load::random_model(config, 3).unwrap(), tok.clone());
        let example = |i: usize| TrainExample {
            id: format!("e{i}"),
            inputs: vec![tok.encode_parts(&[Part::keep("fever and cough")], &[]).unwrap()],
            gold: i % 2,
            scores: None,
        };
        let set: Vec<TrainExample> = (0..4).map(example).collect();
        let opts = TrainOptions { freeze: Freeze::TopLayers(1), epochs: 1, batch_size: 2, ..Default::default() };
        let (head, labels) = (HeadKind::SequenceClassification, ["a".to_string(), "b".to_string()]);
        let err = train_with_events(&base, head, &labels, &set, &set, &opts, Some(ctx.clone()), &mut |_| {})
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("the GPU trainer runs BERT, RoBERTa and DistilBERT layers only: a {name} model")),
            "{err}"
        );
    }
}
