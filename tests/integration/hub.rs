//! Models by Hub id (issue 41), against a stand-in Hub on 127.0.0.1 (tests/integration/common/hub.rs:
//! the Hub's URL layout, its CDN redirect on another port, ETag and X-Repo-Commit, LFS
//! sha256) serving tiny random models; the real Hub is never asked (every run gets
//! HF_ENDPOINT, HF_HOME and HF_HUB_CACHE of its own).
//!
//! - every model job (`grade --grader`, `statements --nli`, `evaluate --model`, `train
//!   --model`, `nrp --dense-ranker`) gives with `ORG/NAME` the report it gives with the same
//!   model as a folder, the model's files named `hf://ORG/NAME@COMMIT/...` with their sha256;
//! - revisions pin (branch, tag, commit); the cache is reused (no file asked twice) and
//!   read alone offline; a path that exists wins over an id;
//! - Python's `huggingface_hub` and medrank share the cache both ways (needs the package:
//!   `scripts/setup.sh reference`; a failure without it under MEDRANK_REQUIRE_REFERENCE=1);
//! - every failure (a missing model, revision or file, a wrong sha256, a redirect to
//!   another host, 404, 401 of a gated model, a truncated transfer, more bytes than
//!   announced) exits 1 naming the id, the file and the cause, and leaves nothing partial.

use crate::common;
use common::cli::{random_model_folder, root, s, tiny_bert_config, tiny_bert_folder, tmp, NRP_JUDGED};
use common::hub::{folder_files, Fault, Server, StandIn};
use medrank::model::HeadKind;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A stand-in Hub and a cache and HF_HOME of this test's own.
struct Hub {
    stand_in: StandIn,
    cache: PathBuf,
    home: PathBuf,
}

impl Hub {
    fn new(name: &str) -> Hub {
        let dir = tmp(&format!("hub-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        let (cache, home) = (dir.join("cache"), dir.join("home"));
        std::fs::create_dir_all(&home).unwrap();
        Hub { stand_in: StandIn::start(), cache, home }
    }

    /// The folder's files as a new commit of `repo` on `branch`.
    fn publish(&self, repo: &str, branch: &str, folder: &Path) -> String {
        self.stand_in.commit(repo, branch, &folder_files(folder))
    }

    fn command(&self, program: &str, env: &[(&str, &str)]) -> Command {
        let mut c = Command::new(program);
        for v in ["HF_TOKEN", "HF_TOKEN_PATH", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HUGGINGFACE_HUB_CACHE"] {
            c.env_remove(v);
        }
        c.env("HF_ENDPOINT", &self.stand_in.endpoint)
            .env("HF_HOME", &self.home)
            .env("HF_HUB_CACHE", &self.cache)
            .envs(env.iter().copied());
        c
    }

    /// medrank in the repository root.
    fn medrank(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.medrank_in(&root(), args, env)
    }

    fn medrank_in(&self, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(env!("CARGO_BIN_EXE_medrank"), env).current_dir(dir).args(args).output().unwrap()
    }

    /// `medrank embed` of the example sentences: the embeddings' JSONL, and stderr.
    fn embed(&self, model: &str, env: &[(&str, &str)]) -> (String, String) {
        let out = tmp(&format!("embed-{}.jsonl", model.replace(['/', '@', ':'], "_")));
        let o = self.medrank(&["embed", "--model", model, "--input", "examples/sentences.txt", "--out", s(&out)], env);
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "embed --model {model}: {stderr}");
        (std::fs::read_to_string(&out).unwrap(), stderr)
    }

    fn repo_dir(&self, repo: &str) -> PathBuf {
        self.cache.join(format!("models--{}", repo.replace('/', "--")))
    }

    /// Every file under the cache (relative paths), links included.
    fn cache_files(&self) -> Vec<String> {
        fn walk(dir: &Path, base: &Path, out: &mut Vec<String>) {
            let Ok(entries) = std::fs::read_dir(dir) else { return };
            for e in entries.flatten() {
                let p = e.path();
                if e.file_type().unwrap().is_dir() {
                    walk(&p, base, out);
                } else {
                    out.push(p.strip_prefix(base).unwrap().display().to_string());
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.cache, &self.cache, &mut out);
        out.sort();
        out
    }
}

/// `medrank embed` of a model folder.
fn embed_folder(folder: &Path) -> String {
    let out = tmp(&format!("embed-folder-{}.jsonl", folder.file_name().unwrap().to_string_lossy()));
    common::cli::ok(&["embed", "--model", s(folder), "--input", "examples/sentences.txt", "--out", s(&out)]);
    std::fs::read_to_string(&out).unwrap()
}

/// A 2-layer random BERT without a head and with sentence-transformers' files (mean
/// pooling, normalisation, a 128-token limit), weights drawn from `seed`.
fn encoder_folder(name: &str, seed: u64) -> PathBuf {
    let dir = random_model_folder(name, tiny_bert_config(2, HeadKind::None, &[], 512), seed);
    std::fs::create_dir_all(dir.join("1_Pooling")).unwrap();
    std::fs::write(
        dir.join("1_Pooling/config.json"),
        r#"{"word_embedding_dimension": 32, "pooling_mode_mean_tokens": true}"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("modules.json"),
        r#"[{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},
            {"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},
            {"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}]"#,
    )
    .unwrap();
    std::fs::write(dir.join("sentence_bert_config.json"), r#"{"max_seq_length": 128, "do_lower_case": false}"#)
        .unwrap();
    // What a repository also holds and medrank does not read.
    std::fs::write(dir.join("README.md"), "# a tiny test model\n").unwrap();
    std::fs::write(dir.join("tf_model.h5"), vec![7u8; 4096]).unwrap();
    dir
}

/// A random BERT with an MNLI head (NLI zero-shot for grade and statements).
fn nli_folder(name: &str) -> PathBuf {
    tiny_bert_folder(name, HeadKind::SequenceClassification, &["contradiction", "neutral", "entailment"], 512)
}

/// Runs `args` (where `{MODEL}` stands for the model and `{OUT}` for an output path) with
/// the folder and with the Hub id: both succeed, and the outputs (the `--json` report, or
/// the files written under `{OUT}`) are the same, the folder's path read as the Hub
/// model's name `hf://ORG/NAME@COMMIT`, and the folder's own name (what names an evaluator)
/// as `NAME@COMMIT` (so every figure is equal and the report names the id, the commit and
/// each file's sha256). Returns the Hub run's output.
fn same_as_folder(
    hub: &Hub,
    folder: &Path,
    id: &str,
    commit: &str,
    args: &[&str],
    out_is_dir: bool,
) -> Vec<(String, String)> {
    let name = format!("hf://{id}@{commit}");
    let run = |model: &str, tag: &str| {
        let out = tmp(&format!("same-{}-{tag}", args[0]));
        let _ = std::fs::remove_dir_all(&out);
        let _ = std::fs::remove_file(&out);
        let args: Vec<String> = args.iter().map(|a| a.replace("{MODEL}", model).replace("{OUT}", s(&out))).collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = hub.medrank(&args, &[]);
        assert!(o.status.success(), "medrank {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        let mut files =
            if out_is_dir { folder_files(&out) } else { vec![(String::new(), std::fs::read(&out).unwrap())] };
        files.retain(|(n, _)| n != "model.safetensors");
        let weights = out.join("model.safetensors");
        let weights = weights.exists().then(|| std::fs::read(&weights).unwrap());
        (files, weights)
    };
    let (from_folder, folder_weights) = run(s(folder), "folder");
    let (from_hub, hub_weights) = run(id, "hub");
    assert_eq!(folder_weights, hub_weights, "{args:?}: the trained weights differ");
    let texts = |files: Vec<(String, Vec<u8>)>| -> Vec<(String, String)> {
        files.into_iter().map(|(n, b)| (n, String::from_utf8(b).unwrap())).collect()
    };
    let (from_folder, from_hub) = (texts(from_folder), texts(from_hub));
    assert_eq!(from_folder.len(), from_hub.len());
    for ((n, f), (_, h)) in from_folder.iter().zip(&from_hub) {
        let folder_name = folder.file_name().unwrap().to_str().unwrap();
        let hub_name = format!("{}@{commit}", id.rsplit('/').next().unwrap());
        let f = f.replace(s(folder), &name).replace(folder_name, &hub_name);
        let f = without_timings(serde_json::from_str(&f).unwrap());
        let h = without_timings(serde_json::from_str(h).unwrap());
        assert_eq!(f, h, "{args:?} {n}: the Hub model's output differs from the folder's");
    }
    from_hub
}

/// A report without what the clock measured (`cache_seconds`, an epoch's `train_seconds`
/// and `examples_per_second`): no two runs share those.
fn without_timings(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(k, _)| !k.ends_with("seconds") && !k.ends_with("per_second"))
                .map(|(k, v)| (k, without_timings(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_timings).collect()),
        other => other,
    }
}

/// The fingerprints a report's provenance gives the Hub model's files: name -> sha256.
fn model_fingerprints(report: &str, name: &str) -> Vec<(String, String)> {
    let v: Value = serde_json::from_str(report).unwrap();
    v["provenance"]["inputs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["name"].as_str().unwrap().starts_with(name))
        .map(|i| (i["name"].as_str().unwrap().to_owned(), i["sha256"].as_str().unwrap().to_owned()))
        .collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    medrank::report::sha256_hex(bytes)
}

#[test]
fn grade_and_statements_take_an_nli_model_by_its_hub_id() {
    let hub = Hub::new("nli");
    let folder = nli_folder("hub-nli");
    let commit = hub.publish("tiny-org/nli-tiny", "main", &folder);
    let grade = same_as_folder(
        &hub,
        &folder,
        "tiny-org/nli-tiny",
        &commit,
        &["grade", "--rubric", "examples/rubric/conversations.jsonl", "--grader", "{MODEL}", "--json", "{OUT}", "-q"],
        false,
    );
    // The provenance names the id, the commit and each file with its sha256.
    let name = format!("hf://tiny-org/nli-tiny@{commit}");
    let fingerprints = model_fingerprints(&grade[0].1, &name);
    let expected: Vec<(String, String)> = ["config.json", "tokenizer.json", "model.safetensors"]
        .iter()
        .map(|f| (format!("{name}/{f}"), sha256_hex(&std::fs::read(folder.join(f)).unwrap())))
        .collect();
    assert_eq!(fingerprints, expected);
    same_as_folder(
        &hub,
        &folder,
        "tiny-org/nli-tiny",
        &commit,
        &["statements", "--input", "examples/statements/answers.jsonl", "--nli", "{MODEL}", "--json", "{OUT}", "-q"],
        false,
    );
}

#[test]
fn evaluate_and_nrp_take_an_encoder_by_its_hub_id() {
    let hub = Hub::new("encoder");
    let folder = encoder_folder("hub-encoder", 11);
    let commit = hub.publish("tiny-org/encoder-tiny", "main", &folder);
    let evaluate = same_as_folder(
        &hub,
        &folder,
        "tiny-org/encoder-tiny",
        &commit,
        &["evaluate", "--bundle", "examples/bundle.jsonl", "--model", "{MODEL}", "--json", "{OUT}", "-q"],
        false,
    );
    // The sentence-transformers files are read too (and named), the README and the other
    // framework's weights are not even downloaded.
    let name = format!("hf://tiny-org/encoder-tiny@{commit}");
    let named: Vec<String> = model_fingerprints(&evaluate[0].1, &name).into_iter().map(|(n, _)| n).collect();
    let files = ["config.json", "tokenizer.json", "model.safetensors", "1_Pooling/config.json", "modules.json"];
    assert_eq!(named, files.map(|f| format!("{name}/{f}")));
    let fetched: Vec<String> = hub
        .stand_in
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && r.path.contains("/resolve/"))
        .map(|r| r.path.rsplit_once(&format!("{commit}/")).unwrap().1.to_owned())
        .collect();
    assert_eq!(
        fetched,
        [
            "config.json",
            "tokenizer.json",
            "model.safetensors",
            "modules.json",
            "sentence_bert_config.json",
            "1_Pooling/config.json"
        ]
    );
    let mut nrp = vec!["nrp", "--topics", "examples/nrp/topics.xml", "--answers", "examples/nrp/answers.jsonl"];
    nrp.extend(NRP_JUDGED);
    nrp.extend(["--dense-ranker", "tiny={MODEL}", "--json", "{OUT}", "-q"]);
    same_as_folder(&hub, &folder, "tiny-org/encoder-tiny", &commit, &nrp, false);
}

#[test]
fn train_takes_its_base_model_by_its_hub_id() {
    let hub = Hub::new("train");
    let folder = encoder_folder("hub-train-base", 11);
    let commit = hub.publish("tiny-org/base-tiny", "main", &folder);
    let written = same_as_folder(
        &hub,
        &folder,
        "tiny-org/base-tiny",
        &commit,
        &[
            "train",
            "--model",
            "{MODEL}",
            "--train",
            "tests/fixtures/train_nli/train.jsonl",
            "--dev-split",
            "0.25",
            "--task",
            "nli",
            "--arguments",
            "system:informative",
            "--epochs",
            "1",
            "--batch-size",
            "8",
            "--out",
            "{OUT}",
        ],
        true,
    );
    let log = &written.iter().find(|(n, _)| n == "train_log.json").unwrap().1;
    let log: Value = serde_json::from_str(log).unwrap();
    assert_eq!(log["base_model"], format!("hf://tiny-org/base-tiny@{commit}"));
}

#[test]
fn revisions_pin_and_the_cache_is_reused_and_read_alone_offline() {
    let hub = Hub::new("cache");
    let (v1, v2) = (encoder_folder("hub-v1", 11), encoder_folder("hub-v2", 12));
    let repo = "tiny-org/pinned";
    let first = hub.publish(repo, "main", &v1);
    hub.stand_in.tag(repo, "v1", &first);
    let second = hub.publish(repo, "main", &v2);
    let (e1, e2) = (embed_folder(&v1), embed_folder(&v2));
    assert_ne!(e1, e2);

    // Offline before anything is cached: refused without a request.
    let offline = [("HF_HUB_OFFLINE", "1")];
    let o = hub.medrank(
        &["embed", "--model", repo, "--input", "examples/sentences.txt", "--out", s(&tmp("offline.jsonl"))],
        &offline,
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("hf://{repo}: not in the Hugging Face cache"))
            && stderr.contains("HF_HUB_OFFLINE is set"),
        "{stderr}"
    );
    assert!(hub.stand_in.requests().is_empty());

    // A branch, a tag and a commit, each its own weights; the plan names the commit and
    // the sizes before the download.
    let (main, stderr) = hub.embed(repo, &[]);
    assert_eq!(main, e2);
    assert!(stderr.contains(&format!("hf://{repo}@{second}: 6 files,")), "{stderr}");
    assert!(stderr.contains("to download from the Hub") && stderr.contains("  model.safetensors "), "{stderr}");
    assert_eq!(hub.embed(&format!("{repo}@v1"), &[]).0, e1);
    assert_eq!(hub.embed(&format!("{repo}@{first}"), &[]).0, e1);
    let refs = hub.repo_dir(repo).join("refs");
    assert_eq!(std::fs::read_to_string(refs.join("main")).unwrap(), second);
    assert_eq!(std::fs::read_to_string(refs.join("v1")).unwrap(), first);
    // Each file once in blobs/ (tokenizer and pooling files are the same in both commits).
    let blobs = std::fs::read_dir(hub.repo_dir(repo).join("blobs")).unwrap().count();
    assert_eq!(blobs, 6 + 1, "the second commit differs in its weights only");

    // Run again: only the listing is asked, no file.
    hub.stand_in.clear_log();
    let (again, stderr) = hub.embed(repo, &[]);
    assert_eq!(again, e2);
    assert!(stderr.contains("(all in the cache)"), "{stderr}");
    let asked: Vec<String> = hub.stand_in.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(asked, [format!("/api/models/{repo}/revision/main")]);

    // Offline: no request at all, the ref says which commit.
    hub.stand_in.clear_log();
    let (offline_main, stderr) = hub.embed(repo, &offline);
    assert_eq!(offline_main, e2);
    assert!(stderr.contains(&format!("from the cache, commit {second} (HF_HUB_OFFLINE is set)")), "{stderr}");
    assert_eq!(hub.embed(&format!("hf://{repo}@v1"), &offline).0, e1);
    assert!(hub.stand_in.requests().is_empty());

    // A path that exists wins over an id of the same spelling.
    let here = tmp("path-wins");
    std::fs::create_dir_all(here.join("tiny-org")).unwrap();
    let _ = std::fs::remove_file(here.join(repo));
    std::os::unix::fs::symlink(&v1, here.join(repo)).unwrap();
    let out = here.join("e.jsonl");
    let sentences = root().join("examples/sentences.txt");
    let o = hub.medrank_in(&here, &["embed", "--model", repo, "--input", s(&sentences), "--out", s(&out)], &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), e1);
    assert!(hub.stand_in.requests().is_empty());
    assert!(hub.cache_files().iter().all(|f| !f.contains("incomplete")));
}

/// Python's `huggingface_hub`, or None when it is not installed (a failure under
/// MEDRANK_REQUIRE_REFERENCE=1).
fn python_hub() -> Option<()> {
    let ok = Command::new("python3").args(["-c", "import huggingface_hub"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("MEDRANK_REQUIRE_REFERENCE").as_deref() != Ok("1"),
            "Python's huggingface_hub is required here (scripts/setup.sh reference)"
        );
        eprintln!("skipped: the cache shared with Python needs huggingface_hub (scripts/setup.sh reference)");
    }
    ok.then_some(())
}

const PYTHON: &str = r#"
import json, sys
from pathlib import Path
from huggingface_hub import snapshot_download, hf_hub_download, scan_cache_dir
mode, repo = sys.argv[1], sys.argv[2]
if mode == "download":
    print(json.dumps({"path": snapshot_download(repo)}))
else:
    path = snapshot_download(repo, local_files_only=True)
    weights = hf_hub_download(repo, "model.safetensors", local_files_only=True)
    info = scan_cache_dir()
    repos = [{"id": r.repo_id,
              "refs": sorted(ref for rev in r.revisions for ref in rev.refs),
              "files": sorted(str(f.file_path.relative_to(rev.snapshot_path)) for rev in r.revisions for f in rev.files)}
             for r in info.repos]
    print(json.dumps({"path": path, "weights": weights, "warnings": [str(w) for w in info.warnings], "repos": repos}))
"#;

fn python(hub: &Hub, mode: &str, repo: &str, env: &[(&str, &str)]) -> Value {
    let quiet = [("HF_HUB_DISABLE_TELEMETRY", "1"), ("HF_HUB_DISABLE_PROGRESS_BARS", "1"), ("HF_HUB_DISABLE_XET", "1")];
    let o = hub.command("python3", &quiet).envs(env.iter().copied()).args(["-c", PYTHON, mode, repo]).output().unwrap();
    assert!(o.status.success(), "python {mode}: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn python_and_medrank_share_the_cache_both_ways() {
    if python_hub().is_none() {
        return;
    }
    let folder = encoder_folder("hub-python", 11);
    let expected = embed_folder(&folder);
    let offline = [("HF_HUB_OFFLINE", "1")];

    // Python downloads (every file of the repository); medrank reads it offline.
    let hub = Hub::new("python-first");
    let commit = hub.publish("tiny-org/shared", "main", &folder);
    let downloaded = python(&hub, "download", "tiny-org/shared", &[]);
    let snapshot = hub.repo_dir("tiny-org/shared").join("snapshots").join(&commit);
    assert_eq!(PathBuf::from(downloaded["path"].as_str().unwrap()), snapshot);
    assert!(snapshot.join("README.md").exists(), "Python takes the whole repository");
    hub.stand_in.clear_log();
    let (embedded, stderr) = hub.embed("tiny-org/shared", &offline);
    assert_eq!(embedded, expected);
    assert!(stderr.contains(&format!("commit {commit}")), "{stderr}");
    assert!(hub.stand_in.requests().is_empty(), "offline: no request");
    // Online, Python's blobs serve as they are: only the listing is asked.
    assert_eq!(hub.embed("tiny-org/shared", &[]).0, expected);
    let asked: Vec<String> = hub.stand_in.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(asked, ["/api/models/tiny-org/shared/revision/main"]);

    // medrank downloads (the files it reads); Python finds them offline, and its own cache
    // scan sees a sound repository.
    let hub = Hub::new("medrank-first");
    let commit = hub.publish("tiny-org/shared", "main", &folder);
    assert_eq!(hub.embed("tiny-org/shared", &[]).0, expected);
    hub.stand_in.clear_log();
    let found = python(&hub, "offline", "tiny-org/shared", &offline);
    assert!(hub.stand_in.requests().is_empty(), "offline: no request");
    let snapshot = hub.repo_dir("tiny-org/shared").join("snapshots").join(&commit);
    assert_eq!(PathBuf::from(found["path"].as_str().unwrap()), snapshot);
    let weights = std::fs::read(found["weights"].as_str().unwrap()).unwrap();
    assert_eq!(weights, std::fs::read(folder.join("model.safetensors")).unwrap());
    assert_eq!(found["warnings"], serde_json::json!([]));
    assert_eq!(
        found["repos"],
        serde_json::json!([{"id": "tiny-org/shared", "refs": ["main"], "files": [
            "1_Pooling/config.json", "config.json", "model.safetensors", "modules.json",
            "sentence_bert_config.json", "tokenizer.json"]}])
    );
}

#[test]
fn failures_name_the_id_the_file_and_the_cause_and_leave_nothing_partial() {
    let hub = Hub::new("failures");
    let folder = encoder_folder("hub-failing", 11);
    let files = folder_files(&folder);
    let publish = |repo: &str| hub.stand_in.commit(repo, "main", &files);
    let elsewhere = hub.stand_in.elsewhere.clone();
    // (repo, what goes wrong, the file named, words of the cause)
    type Case<'a> = (&'a str, Option<(&'a str, Fault)>, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        ("wrong-sha", Some(("model.safetensors", Fault::WrongSha256)), "model.safetensors", "do not match the Hub's published sha256"),
        ("redirected", Some(("model.safetensors", Fault::RedirectTo(elsewhere))), "model.safetensors", "a redirect to `127.0.0.2`, which is not the Hub"),
        ("truncated-cdn", Some(("model.safetensors", Fault::Truncate)), "model.safetensors", "truncated"),
        ("truncated-hub", Some(("tokenizer.json", Fault::Truncate)), "tokenizer.json", "truncated"),
        ("larger-chunked", Some(("model.safetensors", Fault::Larger { with_length: false })), "model.safetensors", "more than the"),
        ("larger-length", Some(("config.json", Fault::Larger { with_length: true })), "config.json", "more than the"),
        ("file-404", Some(("tokenizer.json", Fault::Status(404))), "tokenizer.json", "404 Not Found (a fault of the stand-in): the file is not at this commit"),
        ("gated", None, "config.json", "401 Unauthorized (Access to this model is restricted: you must be authenticated): the model is gated: accept its conditions on its Hub page, then give a Hugging Face access token in HF_TOKEN"),
    ];
    for (repo, fault, file, cause) in &cases {
        let repo = format!("tiny-org/{repo}");
        let commit = publish(&repo);
        if let Some((path, fault)) = fault {
            hub.stand_in.fault(&repo, path, fault.clone());
        }
        if repo.ends_with("gated") {
            hub.stand_in.gate(&repo, "secret-token");
        }
        let out = tmp("failed.jsonl");
        let o = hub.medrank(&["embed", "--model", &repo, "--input", "examples/sentences.txt", "--out", s(&out)], &[]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{repo}: {stderr}");
        let named = format!("error: hf://{repo}@{commit}/{file}: ");
        assert!(
            stderr.contains(&named) && stderr.contains(cause),
            "{repo}: expected `{named}` ... `{cause}` in:\n{stderr}"
        );
        assert!(!out.exists(), "{repo}: an output was written");
        // Whole, checked blobs of the other files may stay (the next run reuses them);
        // nothing partial, nothing under the failed file's name, no snapshot, no ref.
        let folder = format!("models--tiny-org--{}/", repo.trim_start_matches("tiny-org/"));
        let blobs = format!("{folder}blobs/");
        let whole: Vec<String> = files
            .iter()
            .filter(|(p, _)| p != file)
            .map(|(p, b)| if p.ends_with(".safetensors") { sha256_hex(b) } else { common::hub::git_blob_id(b) })
            .collect();
        for cached in hub.cache_files().iter().filter(|f| f.starts_with(&folder)) {
            let blob = cached.strip_prefix(&blobs);
            assert!(blob.is_some_and(|b| whole.iter().any(|w| w == b)), "{repo}: {cached} is in the cache");
        }
    }
    // Nothing reached the host the redirect named.
    assert!(hub.stand_in.requests().iter().all(|r| r.server != Server::Elsewhere));

    // The gated model with the token: downloaded; the token went to the Hub, never to the CDN.
    hub.stand_in.clear_log();
    let (embedded, _) = hub.embed("tiny-org/gated", &[("HF_TOKEN", "secret-token")]);
    assert_eq!(embedded, embed_folder(&folder));
    let requests = hub.stand_in.requests();
    assert!(requests.iter().any(|r| r.server == Server::Cdn), "the weights came from the CDN");
    for r in &requests {
        let expected = (r.server == Server::Hub).then(|| "Bearer secret-token".to_string());
        assert_eq!(r.authorization, expected, "{r:?}");
    }

    // Sizes beyond the bounds are refused from the listing, before any file is asked for.
    hub.stand_in.clear_log();
    let read = ["config.json", "tokenizer.json", "modules.json", "sentence_bert_config.json", "1_Pooling/config.json"];
    let small: u64 = files.iter().filter(|(p, _)| read.contains(&p.as_str())).map(|(_, b)| b.len() as u64).sum();
    let total = (5u64 << 30) + small;
    let over = format!("the model's files hold {total} bytes, more than the 4294967296 (4 GiB) a model may have here; nothing was downloaded");
    for (repo, file, size, expected) in [
        ("oversized", "model.safetensors", 5u64 << 30, over.as_str()),
        ("huge-tokenizer", "tokenizer.json", 100 << 20, "tokenizer.json: 104857600 bytes, more than the 64 MiB a configuration or tokenizer file may have here; nothing was downloaded"),
    ] {
        let repo = format!("tiny-org/{repo}");
        let commit = publish(&repo);
        hub.stand_in.fault(&repo, file, Fault::Announce(size));
        let o = hub.medrank(&["embed", "--model", &repo, "--input", "examples/sentences.txt", "--out", s(&tmp("x.jsonl"))], &[]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{repo}: {stderr}");
        assert!(stderr.contains(&format!("error: hf://{repo}@{commit}: {expected}")), "{repo}: {stderr}");
    }
    assert!(hub.stand_in.requests().iter().all(|r| r.path.starts_with("/api/")), "no file was asked for");

    // No such model, revision or file.
    let missing_tokenizer: Vec<(String, Vec<u8>)> =
        files.iter().filter(|(p, _)| p != "tokenizer.json").cloned().collect();
    let no_tokenizer = hub.stand_in.commit("tiny-org/no-tokenizer", "main", &missing_tokenizer);
    for (id, expected) in [
        ("tiny-org/nowhere".to_string(), "error: hf://tiny-org/nowhere: the Hub answered 404 Not Found (Repository not found): no model `tiny-org/nowhere` on the Hub, or a private one: for a private model, set HF_TOKEN".to_string()),
        ("tiny-org/wrong-sha@v9".to_string(), "error: hf://tiny-org/wrong-sha@v9: the Hub answered 404 Not Found (Invalid rev id: v9): the model has no revision `v9` (a branch, tag or commit)".to_string()),
        ("tiny-org/no-tokenizer".to_string(), format!("error: hf://tiny-org/no-tokenizer@{no_tokenizer}: the repository has no tokenizer.json (nor spm.model)")),
    ] {
        let o = hub.medrank(&["embed", "--model", &id, "--input", "examples/sentences.txt", "--out", s(&tmp("x.jsonl"))], &[]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{id}: {stderr}");
        assert!(stderr.contains(&expected), "{id}: expected `{expected}` in:\n{stderr}");
    }
    assert!(!hub.repo_dir("tiny-org/no-tokenizer").exists() && !hub.repo_dir("tiny-org/nowhere").exists());
}
