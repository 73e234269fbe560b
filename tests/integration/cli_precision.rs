//! `--precision f32|int8` on every command that runs the encoder (issue 26): the int8
//! embeddings of the real model stay within cosine 0.99 of the f32 ones; every report's
//! provenance names the precision that ran; the GPU, training and monoT5 refuse int8 with a
//! message that says what to do; the bench measures both precisions side by side with the
//! int8 peer (ONNX Runtime's dynamic quantization) where ONNX Runtime is installed.
//! Fast: a tiny random BERT wherever the real model is not what is checked.

use crate::common;
use common::cli::{json, medrank, ok, random_model_folder, s, stderr_of, tiny_bert_config, tmp};
use medrank::model::config::HeadKind;
use serde_json::Value;
use std::path::PathBuf;

const MODEL: &str = "models/all-MiniLM-L6-v2";

/// A 2-layer BERT with hidden size 32 and the MiniLM tokenizer, written once (the tests of
/// this binary share it: written before any of them reads it).
fn tiny_model() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| random_model_folder("tiny-bert", tiny_bert_config(2, HeadKind::None, &[], 128), 7)).clone()
}

/// The provenance convention `key` of a JSON report.
fn convention(report: &Value, key: &str) -> Option<String> {
    report["provenance"]["conventions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c[0] == key)
        .map(|c| c[1].as_str().unwrap().to_owned())
}

const INT8: &str = "int8 (weights per output channel, activations 7-bit per token, i32 sums; ";

fn embeddings(precision: &str) -> Vec<Vec<f64>> {
    let out = tmp(&format!("embed-{precision}.jsonl"));
    let run = medrank(&[
        "embed",
        "--model",
        MODEL,
        "--input",
        "examples/sentences.txt",
        "--out",
        s(&out),
        "--precision",
        precision,
    ]);
    assert!(run.status.success(), "{}", stderr_of(&run));
    let want = if precision == "int8" { INT8.to_owned() } else { "f32".to_owned() };
    assert!(stderr_of(&run).contains(&format!("encoder precision: {want}")), "{}", stderr_of(&run));
    std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
        })
        .collect()
}

/// The real model's int8 embeddings of the example sentences point where the f32 ones do
/// (cosine >= 0.99 each; measured 0.996 to 0.997), and they are not the f32 ones.
#[test]
fn int8_embeddings_stay_within_cosine_0_99_of_f32() {
    let (int8, f32) = (embeddings("int8"), embeddings("f32"));
    assert_eq!((int8.len(), f32.len()), (5, 5));
    for (i, (a, b)) in int8.iter().zip(&f32).enumerate() {
        let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
        let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let cosine = dot / (norm(a) * norm(b));
        assert!(cosine >= 0.99, "line {}: cosine {cosine}", i + 1);
        assert!(a != b, "line {}: int8 gave the f32 vector", i + 1);
    }
}

fn evaluate(extra: &[&str]) -> std::process::Output {
    let model = tiny_model();
    let mut args = vec!["evaluate", "--bundle", "examples/bundle.jsonl", "--model", s(&model), "--quiet"];
    args.extend_from_slice(extra);
    medrank(&args)
}

/// `evaluate --model`'s provenance names the precision that ran: int8 with this
/// machine's kernel, f32 when asked, and the folder's own (f32 here) without the flag.
#[test]
fn evaluate_records_the_precision_that_ran() {
    for (precision, want) in [(Some("int8"), INT8), (Some("f32"), "f32"), (None, "f32")] {
        let report = tmp(&format!("evaluate-{}.json", precision.unwrap_or("own")));
        let mut extra = vec!["--json", s(&report)];
        if let Some(p) = precision {
            extra.extend(["--precision", p]);
        }
        let run = evaluate(&extra);
        assert!(run.status.success(), "{}", stderr_of(&run));
        let r = json(&report);
        let got = convention(&r, "precision").expect("a precision convention");
        if want == "f32" {
            assert_eq!(got, "f32");
        } else {
            assert!(got.starts_with(want) && got.ends_with(" kernel)"), "{got}");
        }
        assert_eq!(convention(&r, "backend").as_deref(), Some("cpu (candle)"));
    }
}

/// int8 runs on the CPU only: `--backend gpu` is refused naming int8 and the CPU path
/// (writing nothing); `--backend auto` runs on the CPU and says why in the provenance.
#[test]
fn the_gpu_refuses_int8_and_auto_runs_it_on_the_cpu() {
    let report = tmp("gpu-int8.json");
    let run = evaluate(&["--precision", "int8", "--backend", "gpu", "--json", s(&report)]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr_of(&run));
    assert!(
        stderr_of(&run).ends_with("error: model: the GPU backend was requested but cannot run: int8 precision runs on the CPU path (the GPU kernels are f32); choose f32 to use the GPU"),
        "{}",
        stderr_of(&run)
    );
    assert!(!report.exists());

    let report = tmp("auto-int8.json");
    let run = evaluate(&["--precision", "int8", "--backend", "auto", "--json", s(&report)]);
    assert!(run.status.success(), "{}", stderr_of(&run));
    let r = json(&report);
    assert_eq!(
        convention(&r, "backend").as_deref(),
        Some("cpu (candle); the GPU was not used: int8 precision runs on the CPU path (the GPU kernels are f32); choose f32 to use the GPU")
    );
    assert!(convention(&r, "precision").unwrap().starts_with(INT8));
}

/// Training is f32: `train --precision int8` is refused before any work, pointing at
/// `medrank quantize`; no output folder is made.
#[test]
fn training_refuses_int8_and_points_at_quantize() {
    let model = tiny_model();
    let out = tmp("trained-int8");
    let run = medrank(&[
        "train",
        "--model",
        s(&model),
        "--train",
        "examples/bundle.jsonl",
        "--dev",
        "examples/bundle.jsonl",
        "--epochs",
        "1",
        "--out",
        s(&out),
        "--precision",
        "int8",
    ]);
    assert_eq!(run.status.code(), Some(1), "{}", stderr_of(&run));
    assert_eq!(
        stderr_of(&run),
        format!(
            "error: --precision int8: training runs in f32 (gradients through int8 products are not computed); train without --precision, then quantize the trained folder with `medrank quantize` ({} will hold the f32 evaluator)",
            s(&out)
        )
    );
    assert!(!out.exists());
}

/// A precision other than f32 and int8, or `--precision` where nothing runs an encoder,
/// is a usage error (exit 2) naming the flag.
#[test]
fn bad_precisions_are_usage_errors() {
    let model = tiny_model();
    let out = tmp("bad-precision.jsonl");
    let runs = [
        vec![
            "embed",
            "--model",
            s(&model),
            "--input",
            "examples/sentences.txt",
            "--out",
            s(&out),
            "--precision",
            "f16",
        ],
        vec!["evaluate", "--bundle", "examples/bundle.jsonl", "--model", s(&model), "--precision", "int4"],
        vec!["bench", "--parts", "encoder", "--precision", "f32,bf16"],
        // Only with the flags that run an encoder.
        vec![
            "evaluate",
            "--bundle",
            "examples/bundle.jsonl",
            "--predictions",
            "examples/predictions.csv",
            "--precision",
            "int8",
        ],
        vec!["metrics", "--input", "examples/metrics/summaries.jsonl", "--precision", "int8"],
    ];
    for args in runs {
        let run = medrank(&args);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {}", stderr_of(&run));
        assert!(stderr_of(&run).contains("--precision"), "{args:?}: {}", stderr_of(&run));
        assert!(!out.exists());
    }
}

fn nrp(extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "nrp",
        "--topics",
        "examples/nrp/topics.xml",
        "--answers",
        "examples/nrp/answers.jsonl",
        "--qrels-combined",
        "examples/nrp/qrels.combined.txt",
        "--docs",
        "examples/nrp/docs.tsv",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    medrank(&args)
}

/// NRP's model rankers run in the precision asked for (recorded); monoT5 (candle's T5,
/// f32 only) refuses int8, and `--precision` without a neural ranker is refused.
#[test]
fn nrp_model_rankers_record_their_precision_and_monot5_refuses_int8() {
    let model = tiny_model();
    let dense = format!("tiny={}", s(&model));
    for (precision, want) in [("int8", INT8), ("f32", "f32")] {
        let report = tmp(&format!("nrp-{precision}.json"));
        let run = nrp(&["--dense-ranker", &dense, "--precision", precision, "--json", s(&report)]);
        assert!(run.status.success(), "{}", stderr_of(&run));
        let got = convention(&json(&report), "precision").unwrap();
        assert!(got.starts_with(want), "{got}");
    }
    let report = tmp("nrp-bm25.json");
    let run = nrp(&["--json", s(&report)]);
    assert!(run.status.success(), "{}", stderr_of(&run));
    assert_eq!(convention(&json(&report), "precision"), None, "no neural ranker, no precision");

    let report = tmp("nrp-refused.json");
    let t5 = format!("t5={}", s(&model));
    let run = nrp(&["--dense-ranker", &dense, "--monot5", &t5, "--precision", "int8", "--json", s(&report)]);
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(
        stderr_of(&run),
        "error: --precision int8: the monoT5 ranker `t5` runs candle's T5 in f32 only (int8 products are for the BERT-family encoder of --dense-ranker and --cross-encoder); leave out --precision or give f32, or rank without --monot5"
    );
    let run = nrp(&["--precision", "f32", "--json", s(&report)]);
    assert_eq!(run.status.code(), Some(1));
    assert_eq!(
        stderr_of(&run),
        "error: --precision f32: only the neural rankers (--dense-ranker, --cross-encoder) run an encoder, and none is given"
    );
    assert!(!report.exists());
}

/// BERTScore runs in the precision asked for, recorded in the metrics report.
#[test]
fn bertscore_records_its_precision() {
    let model = tiny_model();
    let mut f1 = Vec::new();
    for (precision, want) in [("int8", INT8), ("f32", "f32")] {
        let report = tmp(&format!("metrics-{precision}.json"));
        ok(&[
            "metrics",
            "--input",
            "examples/metrics/summaries.jsonl",
            "--bertscore",
            s(&model),
            "--precision",
            precision,
            "--json",
            s(&report),
            "--quiet",
        ]);
        let r = json(&report);
        let got = convention(&r, "precision").unwrap();
        assert!(got.starts_with(want), "{got}");
        f1.push(r["bertscore"]["candidates"][0]["f1"].as_f64().unwrap());
    }
    assert!((f1[0] - f1[1]).abs() < 0.05, "int8 {} against f32 {}", f1[0], f1[1]);
}

/// Whether ONNX Runtime (and its quantization tool) can run here.
fn onnxruntime_available() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import onnx, onnxruntime.quantization"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The bench's CPU grid in both precisions: a row per shape and precision in the JSON
/// report and in the table (with int8 / f32), each peer in its precision, ONNX Runtime's
/// int8 graph measured where ONNX Runtime is installed; `--precision int8` alone runs int8
/// and its peer only.
#[test]
fn bench_measures_f32_and_int8_side_by_side() {
    let model = tiny_model();
    let report = tmp("bench.json");
    let csv = tmp("bench-csv");
    ok(&[
        "bench",
        "--parts",
        "encoder",
        "--model",
        s(&model),
        "--lengths",
        "8",
        "--batches",
        "1,2",
        "--repeats",
        "1",
        "--json",
        s(&report),
        "--csv",
        s(&csv),
        "--quiet",
    ]);
    let r = json(&report);
    let e = &r["encoder"];
    let rows: Vec<(u64, u64, &str)> = e["ours"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["seq_len"].as_u64().unwrap(), p["batch"].as_u64().unwrap(), p["precision"].as_str().unwrap()))
        .collect();
    assert_eq!(rows, [(8, 1, "f32"), (8, 2, "f32"), (8, 1, "int8"), (8, 2, "int8")]);
    assert!(e["int8_kernel"].is_string());
    let peers: Vec<(&str, &str)> = e["peers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["precision"].as_str().unwrap()))
        .collect();
    assert_eq!(peers, [("onnxruntime", "f32"), ("numpy", "f32"), ("onnxruntime", "int8")]);
    let ort_int8 = &e["peers"][2];
    if onnxruntime_available() {
        assert!(ort_int8["error"].is_null(), "{}", ort_int8["error"]);
        let points = ort_int8["points"].as_array().unwrap();
        assert_eq!(points.len(), 2);
        assert!(points.iter().all(|p| p["precision"] == "int8" && p["tokens_per_s"].as_f64().unwrap() > 0.0));
    } else {
        eprintln!("onnxruntime is not installed here: the int8 peer says why ({})", ort_int8["error"]);
        assert!(ort_int8["error"].is_string());
    }
    let table = std::fs::read_to_string(csv.join("bench_encoder.csv")).unwrap();
    let mut lines = table.lines();
    assert_eq!(
        lines.next().unwrap(),
        "length,batch,precision,medrank seq/s,medrank tokens/s,onnxruntime tokens/s,numpy tokens/s,medrank / fastest peer,medrank int8 / f32,onnxruntime int8 / f32"
    );
    let cells: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let shape_precision: Vec<(&str, &str, &str)> = cells.iter().map(|c| (c[0], c[1], c[2])).collect();
    assert_eq!(shape_precision, [("8", "1", "f32"), ("8", "1", "int8"), ("8", "2", "f32"), ("8", "2", "int8")]);
    for c in &cells {
        assert_eq!(c.len(), 10, "{c:?}");
        if c[2] == "int8" {
            assert_eq!(c[6], "-", "no NumPy int8 peer");
            let speedup: f64 = c[8].parse().unwrap();
            assert!(speedup > 0.0);
        } else {
            assert_eq!((c[8], c[9]), ("", ""));
        }
    }

    // int8 alone: int8 rows and the int8 peer only, no int8 / f32 column.
    let report = tmp("bench-int8.json");
    ok(&[
        "bench",
        "--parts",
        "encoder",
        "--model",
        s(&model),
        "--lengths",
        "8",
        "--batches",
        "1",
        "--repeats",
        "1",
        "--precision",
        "int8",
        "--json",
        s(&report),
        "--quiet",
    ]);
    let e = &json(&report)["encoder"];
    assert_eq!(e["ours"].as_array().unwrap().len(), 1);
    assert_eq!(e["ours"][0]["precision"], "int8");
    let peers: Vec<&str> = e["peers"].as_array().unwrap().iter().map(|p| p["precision"].as_str().unwrap()).collect();
    assert_eq!(peers, ["int8"]);
}
