//! `medrank quantize` (issue 26): the int8 folder it writes (FORMATS.md §8) on the real
//! default model, what it measures, and how it fails.

use crate::common;
use common::cli::{json, medrank, ok, root, s, stderr_of, tmp};
use std::path::{Path, PathBuf};

const MODEL: &str = "models/all-MiniLM-L6-v2";

/// The real model quantized once for this binary (texts and the example bundle measured;
/// the dev check runs on a 20-question slice of the CasiMedicos dev file).
fn int8_folder() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dev: String = std::fs::read_to_string(root().join("data/casimedicos/dev.jsonl"))
            .unwrap()
            .lines()
            .take(20)
            .map(|l| format!("{l}\n"))
            .collect();
        let dev_file = tmp("dev20.jsonl");
        std::fs::write(&dev_file, dev).unwrap();
        let out = tmp("minilm-int8");
        ok(&[
            "quantize",
            "--model",
            MODEL,
            "--out",
            s(&out),
            "--texts",
            "examples/sentences.txt",
            "--bundle",
            "examples/bundle.jsonl",
            "--dev",
            s(&dev_file),
        ]);
        out
    })
    .clone()
}

fn header(file: &Path) -> serde_json::Map<String, serde_json::Value> {
    let bytes = std::fs::read(file).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    serde_json::from_slice(&bytes[8..8 + n]).unwrap()
}

#[test]
fn the_int8_folder_holds_int8_linear_weights_with_their_scales_and_the_measured_checks() {
    let dir = int8_folder();
    for f in [
        "config.json",
        "tokenizer.json",
        "model.safetensors",
        "quantization.json",
        "1_Pooling/config.json",
        "modules.json",
        "sentence_bert_config.json",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    let h = header(&dir.join("model.safetensors"));
    let int8: Vec<&String> = h.keys().filter(|k| h[*k]["dtype"] == "I8").collect();
    // Six layers x (query, key, value, attention output, two feed-forward) + the word table.
    assert_eq!(int8.len(), 6 * 6 + 1, "{int8:?}");
    for name in &int8 {
        let scale = format!("{}_scale", name);
        assert_eq!(h[&scale]["dtype"], "F32", "{scale}");
        assert_eq!(h[&scale]["shape"][0], h[*name]["shape"][0], "{scale}: one scale per row");
    }
    assert_eq!(h["encoder.layer.0.attention.output.LayerNorm.weight"]["dtype"], "F32");
    assert_eq!(h["embeddings.position_embeddings.weight"]["dtype"], "F32");
    let report = json(&dir.join("quantization.json"));
    assert_eq!(report["format"], "medrank-int8/1");
    assert_eq!(report["int8_bytes"].as_u64().unwrap(), std::fs::metadata(dir.join("model.safetensors")).unwrap().len());
    assert!(report["f32_bytes"].as_u64().unwrap() > 3 * report["int8_bytes"].as_u64().unwrap());
    let e = &report["embeddings"];
    assert_eq!(e["texts"], 5);
    assert!(e["worst_cosine"].as_f64().unwrap() >= 0.99, "{e}");
    let dev = &report["dev"];
    assert_eq!(dev["instances"], 20);
    for k in ["f32_accuracy", "int8_accuracy"] {
        let correct = dev[k].as_f64().unwrap() * 20.0;
        assert!((correct - correct.round()).abs() < 1e-9, "{k} is a share of 20 questions: {dev}");
    }
    let orders = report["system_order"].as_array().unwrap();
    assert!(!orders.is_empty());
    for o in orders {
        assert_eq!(o["f32_order"].as_array().unwrap().len(), o["int8_order"].as_array().unwrap().len());
        let differs =
            ["reversed", "f32_ties_broken", "int8_ties_made"].iter().any(|k| !o[*k].as_array().unwrap().is_empty());
        assert_eq!(o["same"], !differs, "{o}");
    }
}

/// `--precision int8` on the f32 folder computes what the int8 folder computes: the same
/// quantized weights (per row, again from q * scale) and the same word table.
#[test]
fn the_int8_folder_runs_in_int8_and_equals_the_f32_folder_quantized_on_load() {
    let dir = int8_folder();
    let embed = |model: &str, extra: &[&str]| -> (Vec<String>, String) {
        let out = tmp(&format!("embed-{}.jsonl", extra.len()));
        let mut args = vec!["embed", "--model", model, "--input", "examples/sentences.txt", "--out", s(&out)];
        args.extend(extra);
        let run = medrank(&args);
        assert!(run.status.success(), "{}", stderr_of(&run));
        (std::fs::read_to_string(&out).unwrap().lines().map(String::from).collect(), stderr_of(&run))
    };
    let (from_folder, note) = embed(s(&dir), &[]);
    assert!(note.contains("encoder precision: int8"), "{note}");
    let (on_load, _) = embed(MODEL, &["--precision", "int8"]);
    assert_eq!(from_folder, on_load);
    let (widened, note) = embed(s(&dir), &["--precision", "f32"]);
    assert!(!note.contains("int8"), "{note}");
    assert_ne!(widened, from_folder);
}

#[test]
fn an_int8_folder_is_not_quantized_again_and_a_damaged_one_is_named() {
    let dir = int8_folder();
    let again = medrank(&["quantize", "--model", s(&dir), "--out", s(&tmp("twice"))]);
    assert!(!again.status.success());
    assert!(stderr_of(&again).contains("this folder is already int8"), "{}", stderr_of(&again));
    assert!(!tmp("twice").exists());

    // The same folder with one of its scales renamed (the weight then has none).
    let damaged = tmp("damaged");
    std::fs::create_dir_all(&damaged).unwrap();
    for f in ["config.json", "tokenizer.json"] {
        std::fs::copy(dir.join(f), damaged.join(f)).unwrap();
    }
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut h = header(&dir.join("model.safetensors"));
    let scale = h.remove("encoder.layer.3.output.dense.weight_scale").unwrap();
    h.insert("encoder.layer.3.output.dense.scales".into(), scale);
    let mut head = serde_json::to_vec(&h).unwrap();
    while !head.len().is_multiple_of(8) {
        head.push(b' ');
    }
    let mut out = (head.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&head);
    out.extend_from_slice(&bytes[8 + n..]);
    std::fs::write(damaged.join("model.safetensors"), out).unwrap();
    let run =
        medrank(&["embed", "--model", s(&damaged), "--input", "examples/sentences.txt", "--out", s(&tmp("x.jsonl"))]);
    assert!(!run.status.success());
    assert!(
        stderr_of(&run).contains(&format!(
            "{}/model.safetensors: int8 tensor `encoder.layer.3.output.dense.weight`: its scales `encoder.layer.3.output.dense.weight_scale` are missing",
            damaged.display()
        )),
        "{}",
        stderr_of(&run)
    );
}

#[test]
fn a_failed_quantize_leaves_no_folder() {
    let bad = tmp("bad-bundle.jsonl");
    std::fs::write(&bad, "{\"id\": 1}\n").unwrap();
    let out = tmp("never");
    let run = medrank(&["quantize", "--model", MODEL, "--out", s(&out), "--bundle", s(&bad)]);
    assert!(!run.status.success());
    assert!(stderr_of(&run).contains("bad-bundle.jsonl:1"), "{}", stderr_of(&run));
    assert!(!out.exists());
}
