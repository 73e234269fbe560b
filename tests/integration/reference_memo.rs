//! tests/reference/memo.py: a reference run (transformers writing a model, its forward pass)
//! is replayed from the cache only when its script, libraries and inputs are byte for byte
//! those of an earlier run that succeeded; anything else computes again, and a failed run is
//! never recorded. The test command relies on this to skip recomputing PyTorch's numbers, so
//! a replay that answered for other inputs would let a wrong medrank pass.

use crate::common;
use common::cli::{root, s, tmp};
use common::reference_available;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// python3 with `args`, the cache in `cache` ("off": none), and no run log of the test command.
fn python_with_cache(cache: &Path, args: &[&str]) -> Output {
    Command::new("python3")
        .current_dir(root())
        .env("MEDRANK_REFERENCE_CACHE", cache)
        .env_remove("MEDRANK_REFERENCE_LOG")
        .args(args)
        .output()
        .expect("run python3")
}

/// Whether the run, which must have succeeded, said it was replayed.
fn replayed(out: &Output, what: &str) -> bool {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{what} failed:\n{}\n{stderr}", String::from_utf8_lossy(&out.stdout));
    stderr.contains("replayed reference run")
}

/// Every file under `dir` (relative path -> bytes).
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut all = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else {
                all.insert(path.strip_prefix(dir).unwrap().to_path_buf(), std::fs::read(&path).unwrap());
            }
        }
    }
    all
}

/// The cache's recorded entries (its two-character shards' folders, staging ones aside).
fn entries(cache: &Path) -> usize {
    let Ok(shards) = std::fs::read_dir(cache) else { return 0 };
    shards
        .flat_map(|shard| std::fs::read_dir(shard.unwrap().path()).unwrap())
        .filter(|e| !e.as_ref().unwrap().file_name().to_string_lossy().starts_with(".staging-"))
        .count()
}

#[test]
fn a_reference_run_is_replayed_only_for_the_same_script_libraries_and_inputs() {
    if !reference_available() {
        return;
    }
    let cache = tmp("cache");
    let _ = std::fs::remove_dir_all(&cache);
    let script = "tests/reference/families_reference.py";
    let make = |name: &str, seed: &str| {
        let out = tmp(name);
        let _ = std::fs::remove_dir_all(&out);
        let args = ["make", "--config", "small-v3", "--head", "seq", "--labels", "a,b", "--vocab", "300"];
        let run = python_with_cache(&cache, &[&[script][..], &args, &["--out", s(&out), "--seed", seed]].concat());
        (replayed(&run, &format!("make {name}")), out)
    };

    // A model folder written by transformers, then the same command into another folder:
    // replayed, with the same bytes. Another seed is another model.
    let (first_replayed, first) = make("seed7-a", "7");
    assert!(!first_replayed, "an empty cache replayed a run");
    assert_eq!(entries(&cache), 1);
    let (again_replayed, again) = make("seed7-b", "7");
    assert!(again_replayed, "the same command was computed again");
    assert_eq!(files(&first), files(&again), "the replayed folder differs from the computed one");
    let (other_replayed, other) = make("seed8", "8");
    assert!(!other_replayed, "another seed was replayed");
    assert_ne!(files(&first), files(&other));

    // The forward pass: its input files' bytes are part of the key, their paths are not.
    let forward = |inputs_json: &str, name: &str| {
        let (inputs, prefix) = (tmp(&format!("{name}.json")), tmp(name));
        std::fs::write(&inputs, inputs_json).unwrap();
        let args = [script, "run", "--model", s(&first), "--inputs", s(&inputs), "--out", s(&prefix)];
        let run = python_with_cache(&cache, &args);
        let read = |ext: &str| std::fs::read(prefix.with_extension(ext)).unwrap();
        (replayed(&run, name), [read("hidden"), read("layer"), read("logits")])
    };
    let ids = r#"{"ids": [[1, 17, 42, 2], [1, 99, 2]]}"#;
    let (computed, outputs) = forward(ids, "forward-a");
    assert!(!computed);
    let (replay, replayed_outputs) = forward(ids, "forward-b");
    assert!(replay, "the same model and ids were computed again");
    assert_eq!(outputs, replayed_outputs, "the replayed states or logits differ");
    let (changed, changed_outputs) = forward(r#"{"ids": [[1, 17, 43, 2], [1, 99, 2]]}"#, "forward-c");
    assert!(!changed, "other ids were replayed");
    assert_ne!(outputs, changed_outputs);

    // A run that fails is not recorded: it fails again, computed each time.
    let before = entries(&cache);
    let (missing, inputs, prefix) = (tmp("no-such-model"), tmp("forward-a.json"), tmp("x"));
    for _ in 0..2 {
        let args = [script, "run", "--model", s(&missing), "--inputs", s(&inputs), "--out", s(&prefix)];
        let run = python_with_cache(&cache, &args);
        assert!(!run.status.success(), "a run on a missing model succeeded");
        assert!(!String::from_utf8_lossy(&run.stderr).contains("replayed reference run"));
    }
    assert_eq!(entries(&cache), before, "a failed run was recorded");

    // Off: computed even where an entry exists.
    let out = tmp("off");
    let args = ["make", "--config", "small-v3", "--head", "seq", "--labels", "a,b", "--vocab", "300", "--seed", "7"];
    let run = python_with_cache(Path::new("off"), &[&[script][..], &args, &["--out", s(&out)]].concat());
    assert!(!replayed(&run, "make with the cache off"));
    assert_eq!(files(&first), files(&out), "transformers' seeded folder is not reproducible");
}
