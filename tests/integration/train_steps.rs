//! The step-wise trainer (`train::Trainer`, driven one step at a time by the page
//! through `jobs::TrainingJob`, in one loop by `medrank train`) gives the curve the
//! one-call trainer gave before it was split into steps; the dev split both front ends
//! offer is seeded.

use medrank::data::Task;
use medrank::jobs::{self, DevData, NamedText, TrainRequest};
use medrank::model::HeadKind;
use medrank::train::{read_hitz_mcqa, train, ExampleOptions, TrainOptions};
use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn first_lines(path: &str, n: usize) -> String {
    let text = std::fs::read_to_string(root().join(path)).unwrap();
    text.lines().take(n).map(|l| format!("{l}\n")).collect()
}

/// (train_loss, dev_accuracy, learning_rate) per epoch.
fn points(curve: &[medrank::train::EpochLog]) -> Vec<(f64, f64, f64)> {
    curve.iter().map(|e| (e.train_loss, e.dev_accuracy, e.learning_rate)).collect()
}

#[test]
fn step_wise_training_gives_the_curve_of_the_one_call_trainer() {
    let m = crate::common::minilm();
    let opts = TrainOptions { epochs: 5, patience: 2, ..Default::default() };
    let (train_text, dev_text) =
        (first_lines("data/casimedicos/train.jsonl", 48), first_lines("data/casimedicos/dev.jsonl", 32));
    let conv = ExampleOptions::default();
    let tr = read_hitz_mcqa("train", &train_text, &m.tokenizer, &conv).unwrap();
    let dv = read_hitz_mcqa("dev", &dev_text, &m.tokenizer, &conv).unwrap();
    let one_call = train(&m, HeadKind::MultipleChoice, &[], &tr.examples, &dv.examples, &opts, &mut |_| {}).unwrap();
    // Recorded with the one-call trainer before it was split into steps (commit 6b0d3ca,
    // 2 threads); the losses may move in the last digits with another thread count (the
    // shards' gradients are summed in another order).
    let before = [
        (1.459247092405955, 0.25, 0.001),
        (1.4420316418011982, 0.4375, 0.0007692307692307692),
        (1.425152877966563, 0.46875, 0.0005384615384615384),
        (1.4120144645373027, 0.46875, 0.0003076923076923077),
        (1.4031704862912495, 0.46875, 7.692307692307693e-5),
    ];
    let now = points(&one_call.curve);
    assert_eq!(now.len(), before.len(), "{now:?}");
    for (n, b) in now.iter().zip(&before) {
        assert!((n.0 - b.0).abs() < 1e-6 && n.1 == b.1 && (n.2 - b.2).abs() < 1e-15, "{now:?}");
    }
    assert_eq!(one_call.best_epoch, 3);

    // The page's way: the job reads the same files, encodes one batch per call, trains one
    // epoch per call.
    let req = TrainRequest {
        train: NamedText::new("train", train_text),
        dev: DevData::File(NamedText::new("dev", dev_text)),
        task: medrank::jobs::TrainTask::Proxy(Task::Mcqa),
        arguments: "none".into(),
        options: opts.clone(),
        conventions: conv,
        trace_steps: 0,
    };
    let mut job = jobs::TrainingJob::start(&req, &m, medrank::train::native_clock).unwrap();
    assert_eq!((job.summary().train_examples, job.summary().dev_examples), (48, 32));
    let mut done = 0;
    loop {
        let finished = medrank::model::run_ready(job.encode(&m.encoder, 1)).unwrap();
        // One batch per call: at most 32 inputs more.
        let now = job.inputs().0;
        assert!(now > done && now - done <= 32, "{done} -> {now}");
        done = now;
        if finished {
            break;
        }
    }
    assert_eq!(done, job.inputs().1);
    // Training before the frozen pass is complete was refused above by construction; now
    // epochs one call at a time.
    let mut epochs = 0;
    while pollster::block_on(job.epoch(&mut |_| {})).unwrap().is_some() {
        epochs += 1;
    }
    assert_eq!(epochs, 5);
    assert_eq!(job.curve(), one_call.curve.as_slice());
    let out = pollster::block_on(job.finish(b"{}")).unwrap();
    assert_eq!(out.result.best_epoch, 3);
    let names: Vec<&str> = out.files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["config.json", "model.safetensors", "train_log.json", "tokenizer.json"]);
    let log: serde_json::Value = serde_json::from_slice(&out.files[2].1).unwrap();
    assert_eq!(log["task"], "mcqa");
    assert_eq!(log["best_epoch"], 3);
    assert_eq!(log["inputs"][0]["name"], "train");
}

#[test]
fn an_epoch_before_the_frozen_pass_is_an_error() {
    let m = crate::common::minilm();
    let req = TrainRequest {
        train: NamedText::new("train", first_lines("data/casimedicos/train.jsonl", 4)),
        dev: DevData::Split(0.5),
        task: medrank::jobs::TrainTask::Proxy(Task::Mcqa),
        arguments: "none".into(),
        options: TrainOptions::default(),
        conventions: ExampleOptions::default(),
        trace_steps: 0,
    };
    let mut job = jobs::TrainingJob::start(&req, &m, medrank::train::native_clock).unwrap();
    assert_eq!((job.summary().train_examples, job.summary().dev_examples), (2, 2));
    let err = pollster::block_on(job.epoch(&mut |_| {})).unwrap_err().to_string();
    assert!(err.contains("not computed yet"), "{err}");
}

fn medrank(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_medrank")).current_dir(root()).args(args).output().expect("run medrank")
}

/// `--dev-split`: the fraction of the training file's examples, drawn with the seed, picks
/// the epoch; the log says so. The same seed draws the same split (equal curves), another
/// seed another one.
#[test]
fn cli_dev_split_is_seeded() {
    let dir = std::env::temp_dir().join(format!("medrank-train-steps-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let run = |out: &str, seed: &str| {
        let out = dir.join(out);
        let args = format!(
            "train --model models/all-MiniLM-L6-v2 --train tests/fixtures/train_nli/train.jsonl --dev-split 0.25 \
             --task nli --arguments system:informative --epochs 2 --batch-size 8 --seed {seed} --out {}",
            out.display()
        );
        let o = medrank(&args.split_whitespace().collect::<Vec<_>>());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(String::from_utf8_lossy(&o.stderr)
            .contains("picking the epoch with the best dev macro-F1 on 16 dev examples (a 0.25 split"));
        let log: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("train_log.json")).unwrap()).unwrap();
        assert_eq!(log["dev_split"], 0.25);
        // 64 instances: round(64 * 0.25) = 16 for dev, 48 train.
        assert_eq!(
            (log["data"]["train"]["examples"].clone(), log["data"]["dev"]["examples"].clone()),
            (48.into(), 16.into())
        );
        log["curve"].as_array().unwrap().iter().map(|e| e["train_loss"].as_f64().unwrap()).collect::<Vec<f64>>()
    };
    let (a, b, c) = (run("a", "5"), run("b", "5"), run("c", "6"));
    assert_eq!(a, b);
    assert_ne!(a, c);
    let args = format!(
        "train --model models/all-MiniLM-L6-v2 --train tests/fixtures/train_nli/train.jsonl --dev-split 1.5 \
         --task nli --out {}",
        dir.join("d").display()
    );
    let o = medrank(&args.split_whitespace().collect::<Vec<_>>());
    let err = String::from_utf8_lossy(&o.stderr);
    // Refused by the flag's parser (a usage error, exit 2) before the model loads.
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("invalid value '1.5' for '--dev-split <FRACTION>': expected a fraction between 0 and 1"),
        "{err}"
    );
    assert!(!dir.join("d").exists(), "a failed run leaves no output");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Dropout (`--dropout`, the finetune recipe's) changes the training steps, draws the same
/// masks for the same seed (the same curve twice), and never touches a dev pass: the dev
/// loss the trainer logs is the one the inference path (no dropout at all) gives the
/// trained model, and a run with dropout logs the dev figures of its own weights, not of
/// dropped ones.
#[test]
fn dropout_changes_training_but_never_a_dev_pass() {
    use medrank::model::{run_ready, CpuEncoder, Encoder};
    use medrank::train::{Dropout, Freeze};
    let m = crate::common::minilm();
    let conv = ExampleOptions::default();
    let (train_text, dev_text) =
        (first_lines("data/casimedicos/train.jsonl", 8), first_lines("data/casimedicos/dev.jsonl", 4));
    let tr = read_hitz_mcqa("train", &train_text, &m.tokenizer, &conv).unwrap();
    let dv = read_hitz_mcqa("dev", &dev_text, &m.tokenizer, &conv).unwrap();
    let run = |dropout: Dropout| {
        let opts = TrainOptions {
            freeze: Freeze::TopLayers(1),
            epochs: 1,
            batch_size: 4,
            dropout: Some(dropout),
            ..Default::default()
        };
        train(&m, HeadKind::MultipleChoice, &[], &tr.examples, &dv.examples, &opts, &mut |_| {}).unwrap()
    };
    let p = Dropout { hidden: 0.1, attention: 0.1 };
    let (dropped, again, plain) = (run(p), run(p), run(Dropout::NONE));
    assert_eq!(dropped.curve[0].train_loss, again.curve[0].train_loss, "the same seed draws the same masks");
    assert_eq!(dropped.curve[0].dev_loss, again.curve[0].dev_loss);
    assert_ne!(dropped.curve[0].train_loss, plain.curve[0].train_loss, "dropout changes the steps");
    // The trained model through the inference path: each question's softmax over its
    // options, the mean cross-entropy of the gold one, as the trainer's dev loss.
    let encoder = CpuEncoder::new(dropped.model.clone());
    let head = dropped.model.head.as_ref().unwrap();
    let mut loss = 0.0;
    for e in &dv.examples {
        let items: Vec<&medrank::model::tokenize::Encoded> = e.inputs.iter().collect();
        let batch = m.tokenizer.batch(&items);
        let hidden = run_ready(encoder.encode(&batch, dropped.model.config.num_layers)).unwrap();
        let logits = medrank::model::heads::logits(
            head,
            dropped.model.config.head_pooling,
            &dropped.model.weights,
            &hidden,
            &batch.mask,
        )
        .unwrap();
        let scores: Vec<f32> = logits.iter().map(|r| r[0]).collect();
        loss -= medrank::model::heads::softmax(&scores, 1.0)[e.gold].ln();
    }
    let loss = loss / dv.examples.len() as f64;
    let logged = dropped.curve[0].dev_loss;
    assert!((loss - logged).abs() < 1e-4, "dev loss: inference {loss}, trainer {logged}");
}
