//! Parity of the CPU encoder with an independent NumPy forward pass on the real default
//! model (all-MiniLM-L6-v2, fetched by `scripts/setup.sh model`), token ids against the
//! reference's own WordPiece, batched == unbatched, and truncation on the real tokenizer.

use medrank::model::{embed_lines, embed_texts, run_ready, Encoder, Part, TextModel};
use std::path::PathBuf;
use std::process::Command;

fn model_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2");
    assert!(dir.join("model.safetensors").exists(), "{} is missing: run `scripts/setup.sh model` first", dir.display());
    dir
}

const SENTENCES: [&str; 6] = [
    "The patient presents with acute chest pain radiating to the left arm.",
    "Café: naïve façade, 42°C fiebre alta — ¿diagnóstico diferencial?",
    "Metformin is first-line therapy for type 2 diabetes mellitus.",
    "Ein 67-jähriger Mann mit Dyspnoe und Ödemen.",
    "急性心肌梗死 acute myocardial infarction",
    "ok",
];

#[test]
fn embeddings_match_numpy_reference() {
    let dir = model_dir();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/minilm_numpy.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(&dir)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 (with numpy) must be installed: scripts/setup.sh");
    use std::io::Write;
    child.stdin.take().unwrap().write_all(SENTENCES.join("\n").as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "reference script failed");
    let reference: Vec<serde_json::Value> =
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(reference.len(), SENTENCES.len());

    let model = TextModel::read_dir(&dir).unwrap();
    // The checkpoint carries the `embeddings.position_ids` buffer: skipped with a warning.
    assert!(model.encoder.model.warnings.iter().any(|w| w.message.contains("position_ids")));
    let ours = embed_lines(&model, &SENTENCES).unwrap();
    for (i, (r, e)) in reference.iter().zip(&ours).enumerate() {
        let ids: Vec<u32> = r["ids"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        assert_eq!(model.tokenizer.encode(SENTENCES[i]).unwrap().ids, ids, "token ids of sentence {i}");
        let want: Vec<f64> = r["embedding"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert_eq!(want.len(), 384);
        let dot: f64 = want.iter().zip(e).map(|(a, b)| a * *b as f64).sum();
        let norm_e: f64 = e.iter().map(|x| (*x as f64).powi(2)).sum::<f64>().sqrt();
        let cos = dot / norm_e; // the reference is unit length
        assert!(cos >= 0.9999, "sentence {i}: cosine {cos}");
        assert!((norm_e - 1.0).abs() < 1e-5, "normalised (modules.json has Normalize)");
    }
}

#[test]
fn batched_equals_unbatched_and_known_ids() {
    let model = TextModel::read_dir(&model_dir()).unwrap();
    // Known ids (bert-base-uncased vocab, as the HF tokenizer gives them):
    // tokenizer("the patient") -> [101, 1996, 5776, 102].
    assert_eq!(model.tokenizer.encode("the patient").unwrap().ids, vec![101, 1996, 5776, 102]);
    let batched = run_ready(embed_texts(&model.encoder, &model.tokenizer, &model.pooling, &SENTENCES, 6)).unwrap().0;
    let single = run_ready(embed_texts(&model.encoder, &model.tokenizer, &model.pooling, &SENTENCES, 1)).unwrap().0;
    let max_diff =
        batched.iter().flatten().zip(single.iter().flatten()).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(max_diff < 1e-5, "batched vs unbatched max abs diff {max_diff}");
    // Intermediate layers are available (BERTScore picks one).
    let enc = model.tokenizer.encode("chest pain").unwrap();
    let batch = model.tokenizer.batch(&[&enc]);
    let layer3 = run_ready(model.encoder.encode(&batch, 3)).unwrap();
    assert_eq!((layer3.batch, layer3.seq_len, layer3.hidden), (1, enc.len(), 384));
    assert!(run_ready(model.encoder.encode(&batch, 7)).is_err());
}

#[test]
fn truncation_never_cuts_the_option() {
    let model = TextModel::read_dir(&model_dir()).unwrap();
    let case = "fever ".repeat(400); // 400 tokens
    let argument = "cough ".repeat(300); // 300 tokens
    let option = "community acquired pneumonia"; // 3 tokens
    let e = model
        .tokenizer
        .encode_parts(&[Part::cut_start(&case), Part::cut_end(&argument)], &[Part::keep(option)])
        .unwrap();
    // The folder's sentence_bert_config.json says max_seq_length 256 (as
    // sentence-transformers truncates), not the 512 positions of config.json.
    assert_eq!(e.len(), 256);
    // 703 content tokens, 253 allowed (3 special tokens): 450 go, longest first: case
    // 400->300 (100), then 350 alternating (175 each).
    assert_eq!(e.cut_per_part, vec![275, 175, 0]);
    let tail = &e.ids[e.len() - 5..];
    let want_option = model.tokenizer.raw_ids(option).unwrap();
    assert_eq!(&tail[1..4], want_option.as_slice());
    assert_eq!(tail[4], 102);
    // An option that cannot fit is an error, not a silent cut.
    let huge = "word ".repeat(600);
    assert!(model.tokenizer.encode_parts(&[Part::cut_end("case")], &[Part::keep(&huge)]).is_err());
}

/// The head-only training run on the vendored CasiMedicos files that BENCHMARKS.md reports (slow: run on demand):
/// `cargo test --test integration encoder_minilm:: -- --ignored --nocapture train_casimedicos`
/// Set MEDRANK_TRAIN_OUT=DIR to keep the trained evaluator folder.
#[test]
#[ignore]
fn train_casimedicos() {
    use medrank::model::HeadKind;
    use medrank::train::{read_hitz_mcqa, train, trained_files, ExampleOptions, TrainOptions};
    let dir = model_dir();
    let model = TextModel::read_dir(&dir).unwrap();
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/casimedicos");
    let read = |name: &str| {
        let text = std::fs::read_to_string(data.join(name)).unwrap();
        read_hitz_mcqa(name, &text, &model.tokenizer, &ExampleOptions::default()).unwrap().examples
    };
    let (train_set, dev_set) = (read("train.jsonl"), read("dev.jsonl"));
    let opts = TrainOptions::default();
    let t0 = std::time::Instant::now();
    let result = train(&model, HeadKind::MultipleChoice, &[], &train_set, &dev_set, &opts, &mut |log| {
        println!("{}", serde_json::to_string(log).unwrap())
    })
    .unwrap();
    println!(
        "best epoch {} dev accuracy {:.4} ({} dev examples), truncated train/dev {:?}, {:.0} s",
        result.best_epoch,
        result.best_dev_accuracy,
        dev_set.len(),
        result.truncated,
        t0.elapsed().as_secs_f64()
    );
    if let Ok(out) = std::env::var("MEDRANK_TRAIN_OUT") {
        let out = PathBuf::from(out);
        std::fs::create_dir_all(&out).unwrap();
        for (name, bytes) in trained_files(&result, &opts).unwrap() {
            std::fs::write(out.join(name), bytes).unwrap();
        }
        std::fs::copy(dir.join("tokenizer.json"), out.join("tokenizer.json")).unwrap();
    }
}

/// Dev accuracy of the zero-training similarity evaluator on CasiMedicos (on demand):
/// `cargo test --test integration encoder_minilm:: -- --ignored --nocapture similarity_casimedicos_dev`
#[test]
#[ignore]
fn similarity_casimedicos_dev() {
    use medrank::data::{Bundle, Instance, Problem};
    let model = TextModel::read_dir(&model_dir()).unwrap();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/casimedicos/dev.jsonl");
    let text = std::fs::read_to_string(path).unwrap();
    let instances: Vec<Instance> = text
        .lines()
        .enumerate()
        .map(|(n, l)| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let options = v["options"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, t)| (k.clone(), t.as_str().unwrap().to_string()))
                .collect();
            Instance {
                id: format!("dev:{}", n + 1),
                // The HiTZ question already carries the argument: it is the whole context.
                problem: Problem::Mcqa {
                    question: v["question"].as_str().unwrap().into(),
                    options,
                    answer: v["correct_option"].to_string(),
                },
                arguments: vec![("hitz".into(), String::new())],
                line: n + 1,
            }
        })
        .collect();
    let bundle = Bundle { name: "dev.jsonl".into(), instances, systems: vec!["hitz".into()], controls: Vec::new() };
    let (out, kind) = medrank::model::evaluate_bundle(&model, &bundle, 16).unwrap();
    assert_eq!(kind, medrank::model::EvaluatorKind::Similarity);
    let correct =
        out.predictions.iter().zip(&bundle.instances).filter(|(p, i)| p.predicted == i.problem.gold()).count();
    println!(
        "similarity evaluator: dev accuracy {:.4} ({correct}/{})",
        correct as f64 / bundle.instances.len() as f64,
        bundle.instances.len()
    );
}

#[test]
fn classification_evaluator_from_a_bundle_trains_and_evaluates() {
    use medrank::data::{Bundle, Instance, Problem, Task};
    use medrank::model::evaluate::{evaluate_with_head, EmptyOptions};
    use medrank::model::{CpuEncoder, HeadKind};
    use medrank::train::{examples_from_bundle, task_labels, train, ArgumentSource, ExampleOptions, TrainOptions};
    // The real encoder: a tiny random one gives nearly identical first-token states, which
    // a classification head (unlike a multiple-choice softmax) cannot separate quickly.
    let base = TextModel::read_dir(&model_dir()).unwrap();
    let tok = base.tokenizer.clone();
    // The label is readable from the argument's wording: learnable on frozen features.
    let say = |label: &str| match label {
        "supported" => "the evidence confirms it",
        "refuted" => "the evidence contradicts it",
        _ => "nothing is known",
    };
    let claims = ["vitamin c cures colds", "garlic lowers pressure", "coffee causes cancer", "walking helps sleep"];
    let instances: Vec<Instance> = (0..24)
        .map(|i| {
            let label = Task::MISINFORMATION_LABELS[i % 3];
            Instance {
                id: format!("c{i}"),
                problem: Problem::Misinformation { claim: claims[i % 4].into(), label: label.into() },
                arguments: vec![("gold".into(), say(label).into()), ("llm".into(), say(label).into())],
                line: i + 1,
            }
        })
        .collect();
    let bundle = Bundle {
        name: "hfc.jsonl".into(),
        instances,
        systems: vec!["gold".into(), "llm".into()],
        controls: Vec::new(),
    };
    let labels = task_labels(Task::Misinformation);
    // Every label is a target here (the evaluation below keeps not_enough_evidence too).
    let keep = ExampleOptions { keep_not_enough_evidence: true, ..Default::default() };
    let expert = examples_from_bundle(&bundle, &ArgumentSource::System("gold".into()), &labels, &tok, 1, &keep)
        .unwrap()
        .examples;
    assert_eq!(expert.len(), 24);
    assert_eq!(expert[1].gold, 1); // refuted
    let missing =
        examples_from_bundle(&bundle, &ArgumentSource::System("gpt".into()), &labels, &tok, 1, &keep).unwrap_err();
    assert!(missing.to_string().contains("hfc.jsonl:1") && missing.to_string().contains("gpt"), "{missing}");
    let opts = TrainOptions { epochs: 60, batch_size: 8, learning_rate: 0.01, patience: 60, ..Default::default() };
    let r = train(&base, HeadKind::SequenceClassification, &labels, &expert, &expert, &opts, &mut |_| {}).unwrap();
    assert_eq!(r.best_dev_accuracy, 1.0, "{:?}", r.curve);
    // The trained head evaluates the bundle: every prediction right, labels in task order.
    let m = &r.model;
    let enc = CpuEncoder::new(m.clone());
    let out = run_ready(evaluate_with_head(&enc, &m.config.labels, &tok, &bundle, 8, EmptyOptions::LeaveOut)).unwrap();
    assert_eq!(out.predictions.len(), 48);
    for (p, inst) in out.predictions.iter().zip(bundle.instances.iter().flat_map(|i| [i, i])) {
        assert_eq!(p.predicted, inst.problem.gold());
        assert_eq!(p.probs.iter().map(|(l, _)| l.as_str()).collect::<Vec<_>>(), Task::MISINFORMATION_LABELS.to_vec());
    }
}

/// A folder with `pytorch_model.bin` instead of `model.safetensors` (written by
/// tests/reference/safetensors_to_torch_bin.py in torch.save's zip format, without
/// PyTorch) loads to the same weights: identical embeddings; reports fingerprint the .bin.
#[test]
fn pytorch_bin_folder_loads_the_same_weights() {
    let src = model_dir();
    let dir = std::env::temp_dir().join(format!("medrank-pth-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    for f in ["config.json", "tokenizer.json", "modules.json", "sentence_bert_config.json", "1_Pooling/config.json"] {
        std::fs::copy(src.join(f), dir.join(f)).unwrap();
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference/safetensors_to_torch_bin.py");
    let status = std::process::Command::new("python3")
        .arg(&script)
        .arg(src.join("model.safetensors"))
        .arg(dir.join("pytorch_model.bin"))
        .status()
        .expect("python3");
    assert!(status.success());
    let files = medrank::model::ModelFiles::read_dir(&dir).unwrap();
    let fingerprints = medrank::jobs::model_fingerprints(&files);
    assert!(fingerprints.iter().any(|f| f.name.ends_with("pytorch_model.bin")), "{fingerprints:?}");
    let from_bin = TextModel::from_files(&files).unwrap();
    let from_safetensors = TextModel::read_dir(&src).unwrap();
    let lines = ["A patient with chest pain.", "Sjögren's syndrome causes dry eyes."];
    let a = medrank::model::embed_lines(&from_bin, &lines).unwrap();
    let b = medrank::model::embed_lines(&from_safetensors, &lines).unwrap();
    assert_eq!(a, b);
    std::fs::remove_dir_all(&dir).ok();
}
