//! `medrank train --freeze top:N --backend gpu`, `--freeze all --backend gpu` and `--freeze
//! head --backend gpu` (the features on the GPU, the head on the CPU) end to end on a tiny
//! random BERT saved as a model folder: the GPU run's training log has the CPU run's curve (losses within 1e-3, the same dev accuracies and best epoch) on the NLI
//! fixture, its evaluator folder loads and ranks, and the memory the GPU needs is printed
//! before training. Runs on lavapipe here; without an adapter the test says so loudly and
//! returns, unless MEDRANK_REQUIRE_GPU=1, where it fails.

use crate::common;
use common::cli::{json, medrank, ok, random_model_folder, s, tiny_bert_config, tmp};
use common::context;
use medrank::model::config::HeadKind;
use std::path::PathBuf;

/// A 3-layer BERT with hidden size 32 and the MiniLM tokenizer, written as the model folder
/// `name` (one per test: tests run in parallel and must not read each other's half-written
/// files).
fn tiny_model_dir(name: &str) -> PathBuf {
    random_model_folder(name, tiny_bert_config(3, HeadKind::None, &[], 128), 5)
}

#[test]
fn gpu_training_of_the_top_layers_logs_the_cpu_curve_and_saves_an_evaluator() {
    gpu_training_logs_the_cpu_curve("top:2", "fast");
}

#[test]
fn gpu_training_of_every_layer_logs_the_cpu_curve_and_saves_an_evaluator() {
    gpu_training_logs_the_cpu_curve("all", "fast");
}

/// `--recipe finetune` on both backends: the model's dropout (0.1, its config saying none)
/// on the GPU as on the CPU, the same curve, and both logs record it.
#[test]
fn gpu_training_with_the_finetune_recipes_dropout_logs_the_cpu_curve() {
    gpu_training_logs_the_cpu_curve("all", "finetune");
}

/// `medrank train` of `model` into `out` on the NLI fixture, the informative system's
/// arguments, with `extra`.
fn nli_args(model: &std::path::Path, out: &std::path::Path, extra: &[&str]) -> Vec<String> {
    let fx = "tests/fixtures/train_nli";
    let mut args: Vec<String> =
        ["train", "--model", s(model), "--train", &format!("{fx}/train.jsonl")].iter().map(|a| a.to_string()).collect();
    args.extend(
        ["--dev", &format!("{fx}/dev.jsonl"), "--task", "nli", "--arguments", "system:informative"].map(String::from),
    );
    args.extend(extra.iter().map(|a| a.to_string()));
    args.extend(["--out".to_string(), s(out).to_string()]);
    args
}

fn gpu_training_logs_the_cpu_curve(freeze: &str, recipe: &str) {
    let Some(_) = context() else { return };
    let model = tiny_model_dir(&format!("tiny-bert-{freeze}-{recipe}"));
    let fx = "tests/fixtures/train_nli";
    let run = |backend: &str| {
        let out = tmp(&format!("evaluator-{freeze}-{recipe}-{backend}"));
        let extra = [
            "--freeze",
            freeze,
            "--epochs",
            "3",
            "--batch-size",
            "8",
            "--grad-accum",
            "2",
            "--lr",
            "1e-2",
            "--layer-lr",
            "1e-3",
            // The engines compared on one recipe (on a GPU the default is finetune).
            "--recipe",
            recipe,
            "--backend",
            backend,
        ];
        let args = nli_args(&model, &out, &extra);
        let run = medrank(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let stderr = String::from_utf8_lossy(&run.stderr).to_string();
        assert!(run.status.success(), "medrank {args:?} failed:\n{stderr}");
        if backend == "gpu" && freeze == "head" {
            assert!(!stderr.contains("they need "), "no layer trains on the GPU: {stderr}");
        } else if backend == "gpu" {
            // Before the first epoch: what the GPU holds (weights, gradients, moments and
            // copy; the largest micro-batch's activations, 8 examples of 1 input each).
            let note = stderr.find("they need ").expect(&stderr);
            let epoch = stderr.find("epoch  1").expect(&stderr);
            assert!(note < epoch, "{stderr}");
            assert!(stderr.contains("for a micro-batch of 8 inputs of up to "), "{stderr}");
        }
        out
    };
    let (cpu, gpu) = (run("cpu"), run("gpu"));
    let (cpu_log, gpu_log) = (json(&cpu.join("train_log.json")), json(&gpu.join("train_log.json")));
    let (c, g) = (cpu_log["curve"].as_array().unwrap(), gpu_log["curve"].as_array().unwrap());
    assert_eq!(c.len(), 3, "{cpu_log}");
    assert_eq!(g.len(), c.len(), "{gpu_log}");
    for (g, c) in g.iter().zip(c) {
        let (gl, cl) = (g["train_loss"].as_f64().unwrap(), c["train_loss"].as_f64().unwrap());
        assert!((gl - cl).abs() <= 1e-3 * cl.abs(), "loss gpu {gl} cpu {cl}");
        assert_eq!(g["dev_accuracy"], c["dev_accuracy"]);
        assert_eq!(g["steps"], c["steps"]);
    }
    assert_eq!(gpu_log["best_epoch"], cpu_log["best_epoch"]);
    assert_eq!(gpu_log["data"], cpu_log["data"]);
    let dropout = if recipe == "finetune" { 0.1 } else { 0.0 };
    for log in [&cpu_log, &gpu_log] {
        let applied = &log["options"]["dropout"];
        assert_eq!(applied, &serde_json::json!({"hidden": dropout, "attention": dropout}), "{applied}");
    }
    // The GPU run's folder is an evaluator `medrank evaluate --model` ranks with.
    let report = tmp("report.json");
    ok(&["evaluate", "--bundle", &format!("{fx}/dev.jsonl"), "--model", s(&gpu), "--json", s(&report)]);
    let report = json(&report);
    let systems = report["evaluators"][0]["report"]["tasks"][0]["systems"].as_array().unwrap();
    assert_eq!(systems.len(), 2, "the informative and the vague system are ranked: {report}");
}

#[test]
fn with_the_head_alone_the_gpu_computes_the_features_and_the_cpu_trains_the_head() {
    // The one placement rule of both front ends (`jobs::TrainingJob::place`): the frozen
    // encoder runs on --backend, trained layers follow it, the head alone trains on the CPU.
    gpu_training_logs_the_cpu_curve("head", "fast");
}

/// Training on a GPU without a recipe named takes `finetune` (every layer, one rate 5e-5,
/// no weight decay, the model's dropout, the model's full length), says so, and records it:
/// the GPU trainer drops as the CPU trainer does, and the log records the model's dropout
/// (0.1 where its config says none).
#[test]
fn on_a_gpu_the_default_recipe_is_finetune() {
    let Some(_) = context() else { return };
    let model = tiny_model_dir("tiny-bert-recipe");
    let out = tmp("evaluator-recipe-gpu");
    let args = nli_args(&model, &out, &["--epochs", "1", "--batch-size", "8", "--backend", "gpu"]);
    let run = medrank(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let stderr = String::from_utf8_lossy(&run.stderr).to_string();
    assert!(run.status.success(), "medrank {args:?} failed:\n{stderr}");
    assert!(stderr.contains("note: recipe finetune (the default where training runs (a GPU)): --freeze all, --lr 0.00005, --layer-lr 0.00005, --weight-decay 0,"), "{stderr}");
    assert!(!stderr.contains("no dropout"), "{stderr}");
    let log = json(&out.join("train_log.json"));
    let o = &log["options"];
    assert_eq!(o["recipe"]["name"], "finetune", "{o}");
    assert_eq!(o["freeze"], "all");
    assert_eq!((o["learning_rate"].as_f64(), o["weight_decay"].as_f64()), (Some(5e-5), Some(0.0)));
    assert_eq!(o["dropout"], serde_json::json!({"hidden": 0.1, "attention": 0.1}), "what the GPU trainer applied");
    assert_eq!((o["length"].as_str(), log["max_tokens"].as_u64()), (Some("full"), Some(128)));
}

/// A head on the mean of the tokens (`--head-pooling mean`, the score task's default) beside
/// a GPU: the GPU trainer's last layer computes the first token only, so the placement rule
/// keeps the trained layers on the CPU and says why; the folder keeps the pooling.
#[test]
fn a_mean_pooled_head_trains_its_layers_on_the_cpu_beside_a_gpu() {
    let Some(_) = context() else { return };
    let model = tiny_model_dir("tiny-bert-mean");
    let out = tmp("evaluator-mean-gpu");
    let extra =
        ["--epochs", "1", "--batch-size", "8", "--freeze", "top:2", "--head-pooling", "mean", "--backend", "gpu"];
    let args = nli_args(&model, &out, &extra);
    let run = medrank(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let stderr = String::from_utf8_lossy(&run.stderr).to_string();
    assert!(run.status.success(), "medrank {args:?} failed:\n{stderr}");
    assert!(
        stderr.contains(
            "note: the head reads the mean of the tokens, which the GPU trainer does not compute: every trained \
             layer runs on the CPU (--head-pooling cls would train on the GPU)"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("the trained layers run on"), "{stderr}");
    let log = json(&out.join("train_log.json"));
    assert_eq!(log["options"]["head_pooling"], "mean");
    assert_eq!(json(&out.join("config.json"))["medrank_head_pooling"], "mean");
}
