//! medrank's training against an independent PyTorch fine-tune of the same folder
//! (tests/reference/train_reference.py: Hugging Face's BERT, torch's autograd and AdamW):
//! `medrank train --trace` writes the starting model and every recorded step's batch,
//! learning rates and loss; the reference replays the same batches and must give the same
//! loss at every step (within 1e-3; measured: ~1e-7 with f32 features, ~1e-5 where the
//! frozen lower layers are cached in f16). Then a whole training on the vendored e-SNLI
//! slice: the two trained evaluators score the test set within 0.02 of each other, and the
//! explanations rank above every control case.
//!
//! The reference needs PyTorch and transformers (`scripts/setup.sh reference`, which the
//! test command runs). Where they are missing the tests say so and pass, unless
//! MEDRANK_REQUIRE_REFERENCE=1 (set by scripts/test.sh), which makes that a failure.

use crate::common;
use common::cli::{json, ok, root, s, tmp};
use common::reference_available;
use std::path::Path;
use std::process::Command;

/// Runs the reference on a trace folder (`extra`: --full, --out ...); its JSON report.
fn reference(trace: &Path, extra: &[&str]) -> serde_json::Value {
    let report = trace.with_extension("reference.json");
    let out = Command::new("python3")
        .current_dir(root())
        .args(["tests/reference/train_reference.py", "--trace", s(trace), "--json", s(&report)])
        .args(extra)
        .output()
        .expect("run python3");
    assert!(
        out.status.success(),
        "the reference disagrees with medrank on {}:\n{}\n{}",
        trace.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    json(&report)
}

/// The first `n` lines of a repository file, in a file named by `name` and its contents'
/// digest in a folder shared by every test run. Where records have no id, a training
/// example's id is its file's path and line, and those ids are in the trace that the
/// reference's cache key digests (tests/reference/memo.py): in this process's scratch
/// folder the path changed with every run, and the reference was computed again every time
/// (two trainings, 245 of the integration tests' 980 s of CPU).
fn first_lines(file: &str, n: usize, name: &str) -> String {
    let text: String =
        std::fs::read_to_string(root().join(file)).unwrap().lines().take(n).map(|l| format!("{l}\n")).collect();
    let digest = medrank::report::sha256_hex(text.as_bytes());
    let dir = std::env::temp_dir().join("medrank-reference-slices");
    std::fs::create_dir_all(&dir).unwrap();
    let (stem, extension) = name.rsplit_once('.').unwrap_or((name, "jsonl"));
    let path = dir.join(format!("{stem}-{}.{extension}", &digest[..16]));
    if !path.exists() {
        // Written aside and renamed: another test process may be reading the same file.
        let aside = tmp(name);
        std::fs::write(&aside, &text).unwrap();
        std::fs::rename(&aside, &path).unwrap();
    }
    s(&path).to_string()
}

const MINILM: &str = "models/all-MiniLM-L6-v2";

/// `medrank train` of `model` with a trace of the first `steps` steps into a fresh folder;
/// the folder.
fn traced(name: &str, model: &str, args: &[&str], steps: &str) -> std::path::PathBuf {
    let (out, trace) = (tmp(&format!("{name}-evaluator")), tmp(&format!("{name}-trace")));
    for d in [&out, &trace] {
        let _ = std::fs::remove_dir_all(d);
    }
    let mut all = vec!["train", "--model", model, "--out", s(&out), "--trace", s(&trace)];
    all.extend_from_slice(&["--trace-steps", steps]);
    all.extend_from_slice(args);
    ok(&all);
    trace
}

/// `train` arguments of one epoch of class-weighted misinformation classification in
/// batches of 8, with `freeze`.
fn misinformation_args<'a>(train: &'a str, dev: &'a str, freeze: &'a str) -> Vec<&'a str> {
    vec![
        "--train",
        train,
        "--dev",
        dev,
        "--task",
        "misinformation",
        "--arguments",
        "system:informative",
        "--freeze",
        freeze,
        "--batch-size",
        "8",
        "--epochs",
        "1",
    ]
}

/// Trains `model` with a trace of 6 steps and has the reference replay them: every step's
/// loss within 1e-3 of PyTorch's; the trace folder.
fn steps_equal_the_pytorch_fine_tune(name: &str, model: &str, args: &[&str]) -> std::path::PathBuf {
    let trace = traced(name, model, args, "6");
    let report = reference(&trace, &[]);
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 6, "{name}: {report}");
    let max = report["max_diff"].as_f64().unwrap();
    assert!(max <= 1e-3, "{name}: a step's loss differs by {max}: {report}");
    eprintln!("{name}: {} steps, max |medrank - PyTorch| loss {max:.2e}", steps.len());
    trace
}

/// Multiple-choice arguments: `questions` of CasiMedicos' training file in micro-batches of
/// `batch` accumulated by 2, two epochs (3 steps each), `dev` questions to pick the epoch.
/// `tag` keeps each test's files apart (tests run in parallel).
fn mcqa_args(tag: &str, questions: usize, batch: &'static str, dev: usize, extra: &[&'static str]) -> Vec<String> {
    let train = first_lines("data/casimedicos/train.jsonl", questions, &format!("{tag}-casimedicos{questions}.jsonl"));
    let dev = first_lines("data/casimedicos/dev.jsonl", dev, &format!("{tag}-casimedicos{dev}.jsonl"));
    let base = ["--train", &train, "--dev", &dev, "--batch-size", batch, "--grad-accum", "2", "--epochs", "2"];
    base.iter().map(|a| a.to_string()).chain(extra.iter().map(|a| a.to_string())).collect()
}

// Each case is a test of its own, so that the slow ones run beside the others instead of
// one after another at the end of the test binary.

/// Class-weighted classification, 6 steps (one epoch of 48 examples in batches of 8): the
/// head alone, the top layer (its input cached in f16), every layer and the embeddings.
#[test]
fn classification_steps_equal_the_pytorch_fine_tune() {
    if !reference_available() {
        return;
    }
    let scifact = first_lines("data/scifact-mini/train.jsonl", 48, "classification-scifact48.jsonl");
    let scifact_dev = first_lines("data/scifact-mini/dev.jsonl", 16, "classification-scifact16.jsonl");
    let classification = |freeze: &'static str| misinformation_args(&scifact, &scifact_dev, freeze);
    steps_equal_the_pytorch_fine_tune("head", MINILM, &classification("head"));
    steps_equal_the_pytorch_fine_tune("top1", MINILM, &[classification("top:1"), vec!["--layer-lr", "1e-4"]].concat());
    steps_equal_the_pytorch_fine_tune("all", MINILM, &classification("all"));
}

/// Multiple choice (a softmax over each question's own non-empty options) with the top
/// layer: 24 questions in micro-batches of 4 accumulated into one step, two epochs.
#[test]
fn multiple_choice_steps_equal_the_pytorch_fine_tune() {
    if !reference_available() {
        return;
    }
    let args = mcqa_args("mcqa", 24, "4", 8, &["--freeze", "top:1"]);
    steps_equal_the_pytorch_fine_tune("mcqa", MINILM, &args.iter().map(String::as_str).collect::<Vec<_>>());
}

/// The finetune recipe with dropout off (the reference replays without dropout): every
/// layer and the embeddings at one rate 5e-5 with warm-up, no weight decay, and the model's
/// full length (CasiMedicos' clinical cases run past all-MiniLM-L6-v2's 256-token
/// sentence-transformers limit). Its CPU training at full length is the slowest of the
/// cases (6 minutes, mostly on one core of a 2-core machine, with 24 questions in fours),
/// so it takes 12 questions in micro-batches of 2: the same 6 steps, each accumulated over
/// two micro-batches.
#[test]
fn the_finetune_recipes_steps_equal_the_pytorch_fine_tune() {
    if !reference_available() {
        return;
    }
    let args = mcqa_args("finetune", 12, "2", 4, &["--recipe", "finetune", "--dropout", "0", "--backend", "cpu"]);
    let trace =
        steps_equal_the_pytorch_fine_tune("finetune", MINILM, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let t = json(&trace.join("trace.json"));
    let o = &t["options"];
    assert_eq!((t["freeze"].as_str(), o["recipe"]["name"].as_str()), (Some("all"), Some("finetune")), "{o}");
    assert_eq!((o["learning_rate"].as_f64(), o["layer_learning_rate"].as_f64()), (Some(5e-5), Some(5e-5)));
    assert_eq!((o["weight_decay"].as_f64(), o["length"].as_str()), (Some(0.0), Some("full")));
    assert!(t["warmup_steps"].as_u64().unwrap() > 0, "{t}");
    let longest = t["examples"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["inputs"].as_array().unwrap().iter().map(|i| i["input_ids"].as_array().unwrap().len()))
        .max()
        .unwrap();
    assert!(longest > 256, "the full length reads past the folder's 256 tokens: longest {longest}");
}

/// The score task (a regression head over SQuALITY's three human score dimensions, its
/// targets standardised with the training scores' mean and deviation): the head alone and
/// the top layer with the head, 6 steps each, every step's loss equal to transformers'
/// fine-tune of the same folder (loaded as a `BertForSequenceClassification` with
/// `problem_type: "regression"`), which recomputes the standardisation from the trace's
/// scores; each epoch's dev Spearman (per story, averaged) and dev loss equal the
/// reference's (scipy's spearmanr on its own predictions). One training line lacks its
/// `selection` score: its loss is the mean over the two dimensions it has, in both.
#[test]
fn score_steps_equal_the_pytorch_fine_tune() {
    if !reference_available() {
        return;
    }
    let text = std::fs::read_to_string(root().join("data/squality-scores/train.jsonl")).unwrap();
    let mut lines: Vec<serde_json::Value> = text.lines().take(24).map(|l| serde_json::from_str(l).unwrap()).collect();
    lines[1]["human"].as_object_mut().unwrap().remove("selection").expect("SQuALITY scores selection");
    let train = tmp("squality24.jsonl");
    std::fs::write(&train, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let dev = first_lines("data/squality-scores/dev.jsonl", 9, "squality9.jsonl");
    for (name, freeze) in [("score-head", "head"), ("score-top1", "top:1")] {
        let args = [
            "--train",
            s(&train),
            "--dev",
            &dev,
            "--task",
            "score",
            "--freeze",
            freeze,
            "--batch-size",
            "8",
            "--epochs",
            "2",
            "--layer-lr",
            "1e-4",
        ];
        let trace = traced(name, MINILM, &args, "all");
        let t = json(&trace.join("trace.json"));
        assert_eq!((t["head"].as_str(), t["select_by"].as_str()), (Some("regression"), Some("spearman")), "{t}");
        assert_eq!(t["labels"], serde_json::json!(["correctness", "selection", "overall"]));
        assert!(t["examples"][1]["scores"][1].is_null(), "the missing score travels as null: {}", t["examples"][1]);
        // Every epoch replayed (`--full`), with its dev figures: the per-story Spearman of
        // the reference's predictions (scipy's spearmanr) is medrank's dev metric.
        let report = reference(&trace, &["--full"]);
        let log = json(&tmp(&format!("{name}-evaluator")).join("train_log.json"));
        for (ours, theirs) in log["curve"].as_array().unwrap().iter().zip(report["epochs"].as_array().unwrap()) {
            let (a, b) = (ours["dev_metric"].as_f64().unwrap(), theirs["spearman"].as_f64().unwrap());
            assert!((a - b).abs() <= 1e-3, "{name} epoch {}: dev Spearman medrank {a}, PyTorch {b}", ours["epoch"]);
            let (a, b) = (ours["dev_loss"].as_f64().unwrap(), theirs["loss"].as_f64().unwrap());
            assert!(
                (a - b).abs() <= 1e-3 * b.max(1.0),
                "{name} epoch {}: dev loss medrank {a}, PyTorch {b}",
                ours["epoch"]
            );
        }
        assert_eq!(report["best_epoch"], log["best_epoch"]);
        let steps = report["steps"].as_array().unwrap();
        assert_eq!(steps.len(), 6, "{name}: {report}");
        let max = report["max_diff"].as_f64().unwrap();
        assert!(max <= 1e-3, "{name}: a step's loss differs by {max}: {report}");
        eprintln!("{name}: {} steps, max |medrank - PyTorch| loss {max:.2e}", steps.len());
    }
}

/// DeBERTa-v3 and ModernBERT (random weights written by transformers, tests/integration/common/families.rs):
/// the head alone and the top layer with the head, 6 steps each of class-weighted
/// classification, every step's loss equal to transformers' fine-tune of the same folder.
#[test]
fn deberta_and_modernbert_steps_equal_the_pytorch_fine_tune() {
    if !reference_available() {
        return;
    }
    use common::families::{make, DEBERTA_TOKENIZER, MODERNBERT_TOKENIZER, MODERNBERT_VOCAB, SPM_PIECES};
    let scifact = first_lines("data/scifact-mini/train.jsonl", 48, "scifact48.jsonl");
    let scifact_dev = first_lines("data/scifact-mini/dev.jsonl", 16, "scifact16.jsonl");
    let bases = [
        ("deberta", make("deberta-base", "small-v3", "none", "", SPM_PIECES, &DEBERTA_TOKENIZER)),
        (
            "modernbert",
            make("modernbert-base", "small-modernbert", "none", "", MODERNBERT_VOCAB, &MODERNBERT_TOKENIZER),
        ),
    ];
    for (family, base) in &bases {
        for freeze in ["head", "top:1"] {
            let args = [misinformation_args(&scifact, &scifact_dev, freeze), vec!["--layer-lr", "1e-4"]].concat();
            let name = format!("{family}-{}", freeze.replace(':', ""));
            steps_equal_the_pytorch_fine_tune(&name, s(base), &args);
        }
        std::fs::remove_dir_all(base).unwrap();
    }
}

/// The proxy-task score of `system` and whether it ranks above every control, from
/// `medrank evaluate`'s report.
fn score_of(report: &serde_json::Value, system: &str) -> (f64, bool) {
    let systems = report["evaluators"][0]["report"]["tasks"][0]["systems"].as_array().unwrap();
    let score = |name: &str| systems.iter().find(|x| x["system"] == name).map(|x| x["score"].as_f64().unwrap());
    let value = score(system).unwrap_or_else(|| panic!("{system} is not scored: {systems:?}"));
    let above = ["no_argument", "label_only", "noise"].iter().all(|c| score(c).is_some_and(|v| v < value));
    (value, above)
}

/// The vendored e-SNLI slice (data/esnli-mini: SNLI pairs with a person's explanation of
/// the label as the argument): the head trains on the explanations (10 epochs, the
/// defaults otherwise), every step traced; the reference trains the same batches, keeps its
/// own best epoch by dev macro-F1 and saves its model; both evaluators then score the test
/// set, and the explanations must rank above every control case (measured: explanation
/// 0.71, label_only 0.67, no_argument 0.60, noise 0.51 test accuracy). With `top:2` the
/// evaluator reads the label-only sentence as well as the explanations (0.97 both): a tie,
/// which is not "above".
#[test]
fn a_medrank_evaluator_scores_the_test_set_as_the_pytorch_one() {
    if !reference_available() {
        return;
    }
    let trace = traced(
        "esnli-full",
        MINILM,
        &[
            "--train",
            "data/esnli-mini/train.jsonl",
            "--dev",
            "data/esnli-mini/dev.jsonl",
            "--task",
            "nli",
            "--arguments",
            "system:explanation",
            "--freeze",
            "head",
            "--epochs",
            "10",
        ],
        "all",
    );
    let torch_model = tmp("esnli-torch");
    let _ = std::fs::remove_dir_all(&torch_model);
    let full = reference(&trace, &["--full", "--out", s(&torch_model)]);
    let medrank_log = json(&tmp("esnli-full-evaluator").join("train_log.json"));
    assert_eq!(full["best_epoch"], medrank_log["best_epoch"], "{full}\n{medrank_log}");
    let evaluate = |model: &Path, name: &str| {
        let report = tmp(name);
        ok(&[
            "evaluate",
            "--model",
            s(model),
            "--bundle",
            "data/esnli-mini/test.jsonl",
            "--controls",
            "no_argument,label_only,noise",
            "--json",
            s(&report),
        ]);
        json(&report)
    };
    let ours = evaluate(&tmp("esnli-full-evaluator"), "ours.json");
    let theirs = evaluate(&torch_model, "theirs.json");
    let ((ours_score, ours_above), (theirs_score, _)) =
        (score_of(&ours, "explanation"), score_of(&theirs, "explanation"));
    eprintln!("test score of the explanations: medrank {ours_score:.4}, PyTorch {theirs_score:.4}");
    assert!((ours_score - theirs_score).abs() <= 0.02, "medrank {ours_score} vs PyTorch {theirs_score}");
    assert!(ours_above, "the explanation ranks above every control: {ours}");
}
