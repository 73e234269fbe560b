//! `medrank train --freeze top:N` end to end, with the real default model: the top layers
//! train on states the lower layers computed once, the log reports examples/s, and the
//! trained evaluator ranks an argument that carries the answer above every control case.
//! Also the shared conventions of training and evaluation: empty MCQA options are no
//! candidates, misinformation's `not_enough_evidence` instances are dropped.

use medrank::model::embed::TextModel;
use medrank::model::HeadKind;
use medrank::train::{
    examples_from_bundle, read_hitz_mcqa, task_labels, train, ArgumentSource, ExampleOptions, Freeze, TrainOptions,
};
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn model_dir() -> PathBuf {
    root().join("models/all-MiniLM-L6-v2")
}

fn medrank(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_medrank")).current_dir(root()).args(args).output().expect("run medrank");
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert!(out.status.success(), "medrank {args:?} failed:\n{stderr}");
    (stdout, stderr)
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("medrank-train-top-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The fixture (tests/fixtures/train_nli, written by its make.py): statement and evidence
/// never tell the label; only the `informative` argument does, in words of its own (not
/// those of the label_only control). The evaluator is trained on that system's arguments
/// (the expert-trained evaluator), top 2 layers.
#[test]
fn top_layers_trained_evaluator_ranks_the_informative_argument_above_every_control() {
    let fx = Path::new("tests/fixtures/train_nli");
    let dir = scratch("nli");
    let out = dir.join("evaluator");
    let (_, stderr) = medrank(&[
        "train",
        "--model",
        "models/all-MiniLM-L6-v2",
        "--train",
        fx.join("train.jsonl").to_str().unwrap(),
        "--dev",
        fx.join("dev.jsonl").to_str().unwrap(),
        "--task",
        "nli",
        "--arguments",
        "system:informative",
        "--freeze",
        "top:2",
        "--epochs",
        "5",
        "--batch-size",
        "8",
        "--layer-lr",
        "1e-4",
        "--out",
        out.to_str().unwrap(),
    ]);
    // The CLI prints the speed of every epoch, and the log keeps it.
    assert!(stderr.contains("frozen layers computed once for 88 inputs"), "{stderr}");
    assert!(stderr.contains("examples/s"), "{stderr}");
    let log: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("train_log.json")).unwrap()).unwrap();
    let curve = log["curve"].as_array().unwrap();
    assert!(!curve.is_empty());
    for epoch in curve {
        assert!(epoch["examples_per_second"].as_f64().unwrap() > 0.0, "{epoch}");
    }
    assert_eq!(log["options"]["freeze"]["top_layers"], 2, "{log}");
    assert_eq!(log["data"]["train"]["examples"], 64);
    assert!(log["threads"].as_u64().unwrap() >= 1);
    // Head-only training stays at chance on this fixture (0.50 at best: the frozen
    // first-token states do not carry the argument's yes/no); two layers learn it.
    assert!(log["best_dev_accuracy"].as_f64().unwrap() >= 0.8, "{log}");

    // Evaluate the dev bundle with every control (ir_passages from the fixture's corpus).
    let report = dir.join("report.json");
    medrank(&[
        "evaluate",
        "--bundle",
        fx.join("dev.jsonl").to_str().unwrap(),
        "--corpus",
        fx.join("corpus.jsonl").to_str().unwrap(),
        "--model",
        out.to_str().unwrap(),
        "--controls",
        "--json",
        report.to_str().unwrap(),
    ]);
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let systems = report["evaluators"][0]["report"]["tasks"][0]["systems"].as_array().unwrap();
    let score = |name: &str| {
        systems.iter().find(|s| s["system"] == name).unwrap_or_else(|| panic!("no {name} in {systems:?}"))["score"]
            .as_f64()
            .unwrap()
    };
    let informative = score("informative");
    assert!(informative >= 0.8, "{systems:?}");
    let controls: Vec<&serde_json::Value> = systems.iter().filter(|s| s["is_control"] == true).collect();
    let names: Vec<&str> = controls.iter().map(|s| s["system"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 4, "{names:?}");
    for c in ["no_argument", "label_only", "noise", "ir_passages"] {
        assert!(names.contains(&c), "{names:?}");
        assert!(score(c) < informative, "{c} scores {} against {informative}: {systems:?}", score(c));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Empty options are no candidates in training: the example has no input for them, its
/// softmax runs over the others, and the reader counts them; the flag keeps them.
#[test]
fn training_leaves_empty_options_out_and_counts_them() {
    let model = TextModel::read_dir(&model_dir()).unwrap();
    // Three questions; the second has an empty 4th option and a blank 5th (spaces only).
    let line = |q: &str, opts: [&str; 5], correct: usize| {
        let options: serde_json::Map<String, serde_json::Value> =
            opts.iter().enumerate().map(|(i, t)| ((i + 1).to_string(), serde_json::Value::from(*t))).collect();
        serde_json::json!({"question": q, "options": options, "correct_option": correct}).to_string()
    };
    let text = [
        line("Which organ filters blood?", ["Kidney.", "Skin.", "Hair.", "Nail.", "Tooth."], 1),
        line("Which drug is an anticoagulant?", ["Warfarin.", "Paracetamol.", "Insulin.", "", "   "], 1),
        line("Which vitamin prevents scurvy?", ["Vitamin A.", "Vitamin C.", "Vitamin D.", "Vitamin K.", ""], 2),
    ]
    .join("\n");
    let data = read_hitz_mcqa("q.jsonl", &text, &model.tokenizer, &ExampleOptions::default()).unwrap();
    assert_eq!(data.examples.iter().map(|e| e.inputs.len()).collect::<Vec<_>>(), vec![5, 3, 4]);
    assert_eq!(data.examples.iter().map(|e| e.gold).collect::<Vec<_>>(), vec![0, 0, 1]);
    assert_eq!(data.counts.empty_options_left_out, 3);
    let kept = read_hitz_mcqa(
        "q.jsonl",
        &text,
        &model.tokenizer,
        &ExampleOptions { keep_empty_options: true, ..Default::default() },
    )
    .unwrap();
    assert_eq!(kept.examples.iter().map(|e| e.inputs.len()).collect::<Vec<_>>(), vec![5, 5, 5]);
    assert_eq!(kept.counts.empty_options_left_out, 0);
    // Examples of 5, 3 and 4 candidates train together in one batch (head only, and the top
    // layer with its own learning rate): every softmax runs over its own candidates.
    for freeze in [Freeze::HeadOnly, Freeze::TopLayers(1)] {
        let opts = TrainOptions { freeze, epochs: 2, batch_size: 3, ..Default::default() };
        let r =
            train(&model, HeadKind::MultipleChoice, &[], &data.examples, &data.examples, &opts, &mut |_| {}).unwrap();
        assert_eq!(r.curve.len(), 2);
        assert!(r.curve.iter().all(|e| e.train_loss.is_finite() && e.examples_per_second > 0.0), "{:?}", r.curve);
    }
    // An empty correct option is an error naming file, line and field.
    let bad = line("Which organ filters blood?", ["", "Skin.", "Hair.", "Nail.", "Tooth."], 1);
    let err = read_hitz_mcqa("bad.jsonl", &bad, &model.tokenizer, &ExampleOptions::default()).unwrap_err().to_string();
    assert!(err.contains("bad.jsonl:1") && err.contains("`options`") && err.contains("empty"), "{err}");
}

/// Training drops not_enough_evidence instances as evaluation does (ids kept for the log);
/// the flag keeps them as targets.
#[test]
fn training_drops_not_enough_evidence_like_evaluation() {
    use medrank::data::{Bundle, Instance, Problem, Task};
    let model = TextModel::read_dir(&model_dir()).unwrap();
    let instances: Vec<Instance> = Task::MISINFORMATION_LABELS
        .iter()
        .enumerate()
        .map(|(i, label)| Instance {
            id: format!("c{i}"),
            problem: Problem::Misinformation {
                claim: "Garlic lowers blood pressure.".into(),
                label: label.to_string(),
            },
            arguments: vec![("gold".into(), format!("The evidence says {label}."))],
            line: i + 1,
        })
        .collect();
    let bundle = Bundle { name: "hfc.jsonl".into(), instances, systems: vec!["gold".into()], controls: Vec::new() };
    let labels = task_labels(Task::Misinformation);
    let source = ArgumentSource::System("gold".into());
    let data =
        examples_from_bundle(&bundle, &source, &labels, &model.tokenizer, 1, &ExampleOptions::default()).unwrap();
    assert_eq!(data.examples.iter().map(|e| e.gold).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(data.counts.not_enough_evidence_dropped, vec!["c2".to_string()]);
    let keep = ExampleOptions { keep_not_enough_evidence: true, ..Default::default() };
    let all = examples_from_bundle(&bundle, &source, &labels, &model.tokenizer, 1, &keep).unwrap();
    assert_eq!(all.examples.iter().map(|e| e.gold).collect::<Vec<_>>(), vec![0, 1, 2]);
    assert!(all.counts.not_enough_evidence_dropped.is_empty());
}

/// What top:N training computes: the CPU path's states after the lower layers, then the top
/// layers in candle with the last one for the first token only, equal the whole candle
/// forward pass's first-token states (the reference), with padding in the batch.
#[test]
fn top_layers_from_cached_states_match_the_whole_forward_pass() {
    use candle_core::{IndexOp, Tensor};
    use medrank::model::encoder::{forward, layers_forward};
    use medrank::model::Part;
    let model = TextModel::read_dir(&model_dir()).unwrap();
    let (cfg, w) = (&model.encoder.model.config, &model.encoder.model.weights);
    let texts = ["Metoprolol is a beta-blocker.", "The trial excluded patients with any systemic autoimmune disease."];
    let items: Vec<_> = texts
        .iter()
        .map(|t| model.tokenizer.encode_parts(&[Part::cut_end(t)], &[Part::keep("yes")]).unwrap())
        .collect();
    let batch = model.tokenizer.batch(&items.iter().collect::<Vec<_>>());
    assert!(batch.mask.contains(&0), "the batch has padding");
    let whole = forward(cfg, w, &batch, cfg.num_layers).unwrap().i((.., 0, ..)).unwrap().to_vec2::<f32>().unwrap();
    for lower in [4, 5] {
        let h = model.encoder.hidden_states(&batch, lower).unwrap();
        let x = Tensor::from_vec(h.data.clone(), (h.batch, h.seq_len, h.hidden), &candle_core::Device::Cpu).unwrap();
        let top = layers_forward(cfg, w, lower..cfg.num_layers, x, &batch.mask, true).unwrap();
        assert_eq!(top.dims(), &[2, 1, cfg.hidden_size]);
        let top = top.i((.., 0, ..)).unwrap().to_vec2::<f32>().unwrap();
        // The CPU path is held within 1e-4 of candle per layer (tests/integration/encoder_minilm.rs).
        let diff = whole.iter().flatten().zip(top.iter().flatten()).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        assert!(diff < 1e-4, "lower {lower}: max difference {diff}");
    }
}
