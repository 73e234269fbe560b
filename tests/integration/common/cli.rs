//! Running the `medrank` binary from the repository root, for the CLI test binaries.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn medrank(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_medrank")).current_dir(root()).args(args).output().expect("run medrank")
}

/// Runs medrank, fails the test with its output unless it succeeds, returns its stdout.
pub fn ok(args: &[&str]) -> String {
    let out = medrank(args);
    assert!(
        out.status.success(),
        "medrank {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A path in the calling test file's own scratch folder: one folder per run of the test
/// binary, and in it one per test file (the caller's, through `#[track_caller]`), since every
/// file's tests share the one binary and the same names (`model`, `out.json`) in two files
/// must not meet. A helper that calls `tmp` for its caller carries `#[track_caller]` too.
#[track_caller]
pub fn tmp(name: &str) -> PathBuf {
    let prefix = format!("medrank-{}-", env!("CARGO_CRATE_NAME"));
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| remove_stale(&prefix));
    let file = Path::new(std::panic::Location::caller().file());
    let test_file = file.file_stem().and_then(|s| s.to_str()).unwrap_or("common");
    let dir = std::env::temp_dir().join(format!("{prefix}{}", std::process::id())).join(test_file);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Removes the scratch folders (`PREFIX<pid>`) of earlier runs of this test binary whose
/// process is gone: a test process cannot clean up after itself (statics are never
/// dropped), and some folders hold trained models of a gigabyte, which filled the disk
/// over many runs. Where there is no /proc to ask, nothing is removed.
fn remove_stale(prefix: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let Some(pid) = name.strip_prefix(prefix).and_then(|p| p.parse::<u32>().ok()) else { continue };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// The NRP example's judged documents: the combined qrels (credibility grade 3 means "not
/// able to judge") and the documents' texts.
pub const NRP_JUDGED: [&str; 6] = [
    "--qrels-combined",
    "examples/nrp/qrels.combined.txt",
    "--not-judgeable",
    "credibility=3",
    "--docs",
    "examples/nrp/docs.tsv",
];

pub fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// What a run printed on stderr, without the final newline.
pub fn stderr_of(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim().to_owned()
}

pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A scratch folder of this test binary holding `files` (name, text): fixtures a test writes.
#[track_caller]
pub fn scratch_with(files: &[(&str, &str)]) -> PathBuf {
    let dir = tmp("fixture");
    std::fs::create_dir_all(&dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
    dir
}

/// `medrank nrp` inside `dir` on its `topics.jsonl`, relevance `qrels.txt` and
/// `answers.jsonl`, without BM25, writing the JSON `report` there; then `extra`.
pub fn nrp_in(dir: &Path, extra: &[&str], report: &str) -> Output {
    let mut args = vec![
        "nrp",
        "--topics",
        "topics.jsonl",
        "--qrels",
        "relevance=qrels.txt",
        "--answers",
        "answers.jsonl",
        "--no-bm25",
        "--json",
        report,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    Command::new(env!("CARGO_BIN_EXE_medrank")).current_dir(dir).args(&args).output().expect("run medrank")
}

/// [`nrp_in`] that must succeed: its JSON report.
pub fn nrp_report(dir: &Path, extra: &[&str], report: &str) -> Value {
    let out = nrp_in(dir, extra, report);
    assert!(out.status.success(), "medrank nrp {extra:?}: {}", String::from_utf8_lossy(&out.stderr));
    json(&dir.join(report))
}

/// A small random BERT's configuration: `layers` layers of hidden size 32 (4 heads, FFN
/// 64), the MiniLM vocabulary, `head` with `labels`, and `positions` position embeddings.
pub fn tiny_bert_config(
    layers: usize,
    head: medrank::model::HeadKind,
    labels: &[&str],
    positions: usize,
) -> medrank::model::EncoderConfig {
    use medrank::model::{Arch, EncoderConfig};
    EncoderConfig {
        vocab_size: 30522,
        max_position_embeddings: positions,
        ..EncoderConfig::tiny(Arch::Bert, layers, head, labels)
    }
}

/// A model folder (config.json, model.safetensors, the MiniLM tokenizer) of a random model
/// of `config`, its weights drawn from `seed`, written under `name` in the scratch folder
/// on every call: one name per test, as tests run in parallel and must not read each
/// other's half-written files (or one call per test binary, from a `OnceLock`).
#[track_caller]
pub fn random_model_folder(name: &str, config: medrank::model::EncoderConfig, seed: u64) -> PathBuf {
    use medrank::model::load::{random_model, to_safetensors};
    let model = random_model(config, seed).unwrap();
    let dir = tmp(name);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), model.config.to_json()).unwrap();
    std::fs::write(dir.join("model.safetensors"), to_safetensors(&model).unwrap()).unwrap();
    std::fs::copy(root().join("models/all-MiniLM-L6-v2/tokenizer.json"), dir.join("tokenizer.json")).unwrap();
    dir
}

/// A 2-layer random BERT folder (seed 11; [`tiny_bert_config`], [`random_model_folder`]):
/// a fast stand-in wherever the real model's numbers are not what a test checks.
#[track_caller]
pub fn tiny_bert_folder(name: &str, head: medrank::model::HeadKind, labels: &[&str], positions: usize) -> PathBuf {
    random_model_folder(name, tiny_bert_config(2, head, labels, positions), 11)
}
