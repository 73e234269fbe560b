//! `medrank train --task score` (a metric learned from human scores) on the vendored
//! SQuALITY scores (data/squality-scores: 150 training and 60 dev answers, three raters'
//! 0-100 scores on three dimensions, stories as batches) with the real default model, head
//! only: the folder it writes reloads as a score model whose predictions
//! (`eval::metrics::learned::predict_scores`) are the trainer's own at the picked epoch,
//! with the training file's dimensions and standardisation computed here by hand from the
//! file, and its dev Spearman the per-batch mean recomputed here from those predictions.

use crate::common;
use common::cli::{medrank, root, s, stderr_of, tmp};
use medrank::data::candidates::parse_candidates;
use medrank::eval::metrics::learned::predict_scores;
use medrank::jobs::{self, DevData, NamedText, TrainForm};
use medrank::model::{ModelFiles, TextModel};
use serde_json::Value;

const MINILM: &str = "models/all-MiniLM-L6-v2";
const DATA: &str = "data/squality-scores";

fn read(file: &str) -> NamedText {
    NamedText::new(file, std::fs::read_to_string(root().join(DATA).join(file)).unwrap())
}

/// Each dimension's (mean, population standard deviation) over the lines of a metrics
/// file, a line's score being the mean of its raters' numbers (nulls skipped), written out
/// from the JSON without medrank's reader.
fn hand_scale(text: &str, dimension: &str) -> (f64, f64) {
    let mut values = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap();
        let Some(raters) = v["human"][dimension].as_object() else { continue };
        let given: Vec<f64> = raters.values().filter_map(Value::as_f64).collect();
        if !given.is_empty() {
            values.push(given.iter().sum::<f64>() / given.len() as f64);
        }
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (mean, (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt())
}

#[test]
fn a_learned_metric_reloads_and_predicts_what_training_measured() {
    let files = ModelFiles::read_dir(&root().join(MINILM)).unwrap();
    let base = TextModel::from_files(&files).unwrap();
    let form = TrainForm { task: "score".into(), freeze: "head".into(), epochs: 3, ..Default::default() };
    let (train, dev) = (read("train.jsonl"), read("dev.jsonl"));
    let req = form.request(train.clone(), DevData::File(dev.clone()), false).unwrap();
    let encoder = jobs::open_training_encoder(&base, medrank::gpu::BackendChoice::Cpu).unwrap();
    let mut notes = Vec::new();
    let trained =
        jobs::train(&req, &base, &files.tokenizer_json, &encoder, &mut |s| notes = s.notes.clone(), &mut |_| {})
            .unwrap();
    let out = tmp("squality-head");
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(&out).unwrap();
    for (name, bytes) in &trained.files {
        std::fs::write(out.join(name), bytes).unwrap();
    }

    // The dimensions in the training file's order, and its standardisation.
    let config: Value = serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["architectures"][0], "BertForSequenceClassification");
    assert_eq!((config["problem_type"].as_str(), config["num_labels"].as_u64()), (Some("regression"), Some(3)));
    let dimensions = ["correctness", "selection", "overall"];
    assert_eq!(config["id2label"], serde_json::json!({"0": "correctness", "1": "selection", "2": "overall"}));
    // What it read beside each answer (the default), kept so that predictions read the same.
    assert_eq!(config["medrank_score_input"], "candidate+question");
    // ... and the score task's head on the mean of the tokens (the default), kept in the
    // key medrank reads it back from.
    assert_eq!(config["medrank_head_pooling"], "mean");
    let log: Value = serde_json::from_slice(&std::fs::read(out.join("train_log.json")).unwrap()).unwrap();
    assert_eq!(log["options"]["head_pooling"], "mean");
    for d in dimensions {
        let (mean, std) = hand_scale(&train.text, d);
        let kept = &config["medrank_score_scale"][d];
        assert!((kept["mean"].as_f64().unwrap() - mean).abs() < 1e-9, "{d}: {kept} vs mean {mean}");
        assert!((kept["std"].as_f64().unwrap() - std).abs() < 1e-9, "{d}: {kept} vs std {std}");
    }

    // Reloaded, the folder predicts the dev answers as the trainer's picked epoch did: the
    // head-only trainer read the frozen encoder's mean states and ran the head in candle, the reload runs encoder and head through the inference path (f32 both; the
    // scores are on a 0-100 scale).
    let model = TextModel::read_dir(&out).unwrap();
    let (candidates, _) = parse_candidates(&dev.name, &dev.text).unwrap();
    let learned = medrank::model::run_ready(predict_scores(&model.encoder, &model, &candidates)).unwrap();
    assert_eq!(learned.dimensions, dimensions);
    let during = &trained.result.dev_predictions;
    assert_eq!((learned.scores.len(), during.len()), (60, 60));
    for (i, (a, b)) in learned.scores.iter().zip(during).enumerate() {
        for j in 0..3 {
            assert!(
                (a[j] - b[j]).abs() < 1e-3,
                "dev answer {i}, {}: reloaded {} vs trained {}",
                dimensions[j],
                a[j],
                b[j]
            );
        }
    }
    // Predictions on the human scale, not the standardised one, and not all alike.
    let overall: Vec<f64> = learned.scores.iter().map(|r| r[2]).collect();
    let spread = overall.iter().cloned().fold(f64::NEG_INFINITY, f64::max)
        - overall.iter().cloned().fold(f64::INFINITY, f64::min);
    assert!(overall.iter().all(|p| (-50.0..150.0).contains(p)) && spread > 0.01, "{overall:?}");

    // The picked epoch's dev Spearman: per story, then averaged over stories and dimensions.
    let picked = &trained.result.curve[trained.result.best_epoch - 1];
    let mut per_dimension = Vec::new();
    for (j, d) in dimensions.iter().enumerate() {
        let mut rhos = Vec::new();
        let mut batches: Vec<&str> = candidates.iter().map(|c| c.batch.as_str()).collect();
        batches.dedup();
        for b in batches {
            let (model_scores, human): (Vec<f64>, Vec<f64>) = candidates
                .iter()
                .zip(&learned.scores)
                .filter(|(c, _)| c.batch == b)
                .map(|(c, p)| (p[j], c.human.iter().find(|(h, _)| h == d).unwrap().1))
                .unzip();
            rhos.push(medrank::stats::spearman::spearman(&model_scores, &human).unwrap().r);
        }
        assert_eq!(rhos.len(), 4, "dev has 4 stories");
        let rho = rhos.iter().sum::<f64>() / 4.0;
        let logged = picked.dev_scores.as_ref().unwrap().dimensions[j].spearman.unwrap();
        assert!((rho - logged).abs() < 1e-3, "{d}: {rho} recomputed vs {logged} logged");
        per_dimension.push(rho);
    }
    let mean = per_dimension.iter().sum::<f64>() / 3.0;
    assert!((trained.result.best_dev_metric - mean).abs() < 1e-3, "{} vs {mean}", trained.result.best_dev_metric);
    assert!(trained.result.best_dev_accuracy.is_nan(), "a regression has no accuracy");
    assert_eq!(trained.result.dev_baseline, None, "a constant prediction has no Spearman: no baseline");

    // Which examples were cut to the model's 256 tokens, as many as the log counts.
    let log: Value =
        serde_json::from_slice(&trained.files.iter().find(|f| f.0 == "train_log.json").unwrap().1).unwrap();
    let cut = log["truncated_examples"]["train"].as_u64().unwrap() as usize;
    let note = notes.iter().find(|n| n.text.starts_with("training data: ")).expect("a truncation note");
    assert!(
        note.text.contains(&format!("{cut} of 150 examples are cut to the model's 256-token limit")),
        "{}",
        note.text
    );
    assert_eq!(note.ids.len(), cut);
    // The answer and its question (the default input) pass 256 tokens in a third of them.
    assert!(cut > 40, "SQuALITY's answers are long: {cut}");
    assert_eq!(log["select_by"], "spearman");
    assert!(log["best_dev_accuracy"].is_null());

    // A model of another kind is refused with a sentence.
    let e = medrank::model::run_ready(predict_scores(&base.encoder, &base, &candidates)).unwrap_err().to_string();
    assert!(e.contains("is not a score model") && e.contains("medrank train --task score"), "{e}");
}

/// What the score task refuses, before any training: a file of another kind, options that
/// make no sense for a regression, and a training file without human scores.
#[test]
fn the_score_task_refuses_what_it_cannot_train_on() {
    let out = tmp("refused");
    let refused = |extra: &[&str], train: &str, expected: &str| {
        let mut args = vec!["train", "--model", MINILM, "--train", train, "--dev-split", "0.2", "--task", "score"];
        args.extend_from_slice(&["--out", s(&out)]);
        args.extend_from_slice(extra);
        let run = medrank(&args);
        let err = stderr_of(&run);
        assert!(!run.status.success() && err.contains(expected), "{args:?}:\n{err}");
        assert!(!out.exists(), "a failed run leaves no output");
    };
    let squality = format!("{DATA}/train.jsonl");
    refused(&[], "data/scifact-mini/train.jsonl", "task score trains on a metrics JSONL file");
    refused(&["--select-by", "accuracy"], &squality, "a score model has no classes: use --select-by spearman or loss");
    refused(&["--class-weights", "balanced"], &squality, "use --class-weights none");
    let unscored = tmp("unscored.jsonl");
    std::fs::write(&unscored, "{\"id\": \"q\", \"system\": \"a\", \"candidate\": \"x\", \"references\": [\"y\"]}\n")
        .unwrap();
    refused(&[], s(&unscored), "no line has a human score (`human`)");
    // The metrics file under another task is pointed to this one.
    let run = medrank(&["train", "--model", MINILM, "--train", &squality, "--dev-split", "0.2", "--out", s(&out)]);
    assert!(stderr_of(&run).contains("choose task score"), "{}", stderr_of(&run));
    // What a score model reads is the score task's option only.
    let run = medrank(&[
        "train",
        "--model",
        MINILM,
        "--train",
        "examples/bundle.jsonl",
        "--dev-split",
        "0.2",
        "--score-input",
        "candidate",
        "--out",
        s(&out),
    ]);
    assert!(stderr_of(&run).contains("--score-input applies to task score only"), "{}", stderr_of(&run));
    assert!(!out.exists(), "a failed run leaves no output");
}
