//! Hostile model folders (issue 39): a generator of mutated model folders (config values,
//! label maps, tensors, tokenizers) run through every command that loads a model:
//! `statements`, `grade`, `embed`, `metrics --bertscore`, `nrp --dense-ranker`, `evaluate`,
//! `train` and `quantize`. Each mutation must be refused with exit code 1 and a message that
//! names the file and the field (or the tensor, or, for a model that computes NaN, the
//! model and the first input), nothing written, and the child's peak resident memory under
//! 1 GB: read from the kernel's own accounting of the child (`wait4`'s `ru_maxrss`, through
//! a small reaper), not a timer. The unmutated folder passes every command, so each refusal is the mutation's.

use crate::common;
use common::cli::{root, tiny_bert_config, tmp};
use medrank::model::load::{random_model, to_named_tensors, write_raw_safetensors, RawTensor};
use medrank::model::HeadKind;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The most resident memory a command may take (KiB).
const PEAK_LIMIT_KIB: u64 = 1024 * 1024;

/// What a finished child did: its exit code, what it said, its peak resident memory.
struct Ran {
    code: i32,
    stderr: String,
    peak_kib: u64,
}

/// Forks and execs the command, waits for it with `os.wait4` and prints its own resource
/// usage's peak resident set (`ru_maxrss`, KiB on Linux) as the last line of stderr, as
/// `/usr/bin/time -f %M` does. A process's peak starts from what its parent held when it
/// was forked (the kernel carries the old memory's high-water mark across `exec`), so the
/// reaper must be small: Python's 10 MB, where this test process (and any other test's
/// data in it) would count in every child's figure.
const REAPER: &str = "import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
sys.stderr.write(f'\\npeak-kib {usage.ru_maxrss}\\n')
sys.exit(os.waitstatus_to_exitcode(status))";

/// The interpreter `python3` names, resolved once: the tests run the reaper ~320 times, and
/// through pyenv's shim (a shell script) each start took ~100 ms instead of ~10 (with `-S`:
/// the reaper needs no site packages).
fn interpreter() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let out = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .expect("run python3 (scripts/setup.sh installs it)");
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    })
}

/// Runs medrank with `args` from the repository root under [`REAPER`].
fn run(args: &[String]) -> Ran {
    let out = Command::new(interpreter())
        .current_dir(root())
        .args(["-S", "-c", REAPER, env!("CARGO_BIN_EXE_medrank")])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run python3 (scripts/setup.sh installs it)");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let (said, peak) = stderr.trim_end().rsplit_once("\npeak-kib ").expect("the reaper's last line");
    let code = out
        .status
        .code()
        .unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&out.status).unwrap_or(0));
    Ran { code, stderr: said.to_string(), peak_kib: peak.parse().unwrap() }
}

/// Every command that loads a model, on the example files, with every output it writes
/// under `out`: (name, arguments).
fn commands(model: &Path, out: &Path) -> Vec<(&'static str, Vec<String>)> {
    let m = model.display().to_string();
    let o = |name: &str| out.join(name).display().to_string();
    let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    vec![
        (
            "statements",
            args(&["statements", "--input", "examples/statements/answers.jsonl", "--nli", &m, "--json", &o("r.json")]),
        ),
        (
            "grade",
            args(&[
                "grade",
                "--rubric",
                "examples/rubric/conversations.jsonl",
                "--grader",
                &m,
                "--out",
                &o("graded.jsonl"),
                "--json",
                &o("r.json"),
            ]),
        ),
        ("embed", args(&["embed", "--model", &m, "--input", "examples/sentences.txt", "--out", &o("e.jsonl")])),
        (
            "metrics --bertscore",
            args(&[
                "metrics",
                "--input",
                "examples/metrics/summaries.jsonl",
                "--bertscore",
                &m,
                "--json",
                &o("r.json"),
            ]),
        ),
        (
            "nrp --dense-ranker",
            args(&[
                "nrp",
                "--topics",
                "examples/nrp/topics.xml",
                "--qrels-combined",
                "examples/nrp/qrels.combined.txt",
                "--not-judgeable",
                "credibility=3",
                "--docs",
                "examples/nrp/docs.tsv",
                "--answers",
                "examples/nrp/answers.jsonl",
                "--dense-ranker",
                &format!("dense={m}"),
                "--json",
                &o("r.json"),
            ]),
        ),
        ("evaluate", args(&["evaluate", "--bundle", "examples/bundle.jsonl", "--model", &m, "--json", &o("r.json")])),
        (
            "train",
            args(&[
                "train",
                "--model",
                &m,
                "--train",
                "examples/bundle.jsonl",
                "--dev",
                "examples/bundle.jsonl",
                "--task",
                "nli",
                "--epochs",
                "1",
                "--out",
                &o("trained"),
            ]),
        ),
        ("quantize", args(&["quantize", "--model", &m, "--out", &o("int8"), "--texts", "examples/sentences.txt"])),
    ]
}

/// A model folder as the mutations see it: config.json's text, the tensors, tokenizer.json.
#[derive(Clone)]
struct Folder {
    config: String,
    tensors: Vec<(String, &'static str, Vec<usize>, Vec<u8>)>,
    tokenizer: Value,
}

impl Folder {
    /// A 2-layer random BERT (hidden 32, 128 positions, the MiniLM vocabulary) with an NLI
    /// head (contradiction, neutral, entailment): every command above runs it.
    fn base() -> Folder {
        let labels = ["contradiction", "neutral", "entailment"];
        let model = random_model(tiny_bert_config(2, HeadKind::SequenceClassification, &labels, 128), 11).unwrap();
        let tensors = to_named_tensors(&model)
            .into_iter()
            .map(|(name, t)| {
                let values: Vec<f32> = t.flatten_all().unwrap().to_vec1().unwrap();
                (name, "F32", t.dims().to_vec(), values.iter().flat_map(|v| v.to_le_bytes()).collect())
            })
            .collect();
        let tokenizer = std::fs::read(root().join("models/all-MiniLM-L6-v2/tokenizer.json")).unwrap();
        Folder { config: model.config.to_json(), tensors, tokenizer: serde_json::from_slice(&tokenizer).unwrap() }
    }

    fn write(&self, dir: &Path) {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("config.json"), &self.config).unwrap();
        let raw = self
            .tensors
            .iter()
            .map(|(name, dtype, shape, bytes)| RawTensor {
                name: name.clone(),
                dtype,
                shape: shape.clone(),
                bytes: bytes.clone(),
            })
            .collect();
        std::fs::write(dir.join("model.safetensors"), write_raw_safetensors(raw).unwrap()).unwrap();
        std::fs::write(dir.join("tokenizer.json"), serde_json::to_vec(&self.tokenizer).unwrap()).unwrap();
    }

    /// config.json with `key` set to the JSON text `value`.
    fn set(&mut self, key: &str, value: &str) {
        let mut config: serde_json::Map<String, Value> = serde_json::from_str(&self.config).unwrap();
        config.insert(key.into(), serde_json::from_str(value).unwrap());
        self.config = serde_json::to_string_pretty(&config).unwrap();
    }

    /// The tensor `name`'s f32 values, changed by `f`.
    fn values(&mut self, name: &str, f: impl Fn(&mut [f32])) {
        let t = self.tensors.iter_mut().find(|t| t.0 == name).unwrap_or_else(|| panic!("no tensor {name}"));
        let mut values: Vec<f32> = t.3.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        f(&mut values);
        t.3 = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    }
}

const QUERY: &str = "encoder.layer.0.attention.self.query.weight";
const KEY: &str = "encoder.layer.0.attention.self.key.weight";

/// One hostile change to the base folder and what its refusal must name.
struct Mutation {
    name: &'static str,
    apply: fn(&mut Folder),
    /// Every one of these is in the message of every command.
    expect: &'static [&'static str],
}

fn config_mutations() -> Vec<Mutation> {
    macro_rules! set {
        ($name:literal, $key:literal, $value:literal) => {
            Mutation {
                name: $name,
                apply: |f| f.set($key, $value),
                expect: &["config.json", concat!("field `", $key, "`")],
            }
        };
    }
    vec![
        set!("1e9 layers", "num_hidden_layers", "1e9"),
        set!("u64::MAX layers", "num_hidden_layers", "18446744073709551615"),
        set!("no layer", "num_hidden_layers", "0"),
        set!("negative hidden size", "hidden_size", "-32"),
        set!("heads that do not divide the hidden size", "num_attention_heads", "5"),
        set!("a string for a size", "intermediate_size", "\"64\""),
        set!("1e18 words", "vocab_size", "1e18"),
        set!("a million positions", "max_position_embeddings", "1000000"),
        set!("no token type", "type_vocab_size", "0"),
        set!("layer_norm_eps -1", "layer_norm_eps", "-1"),
        set!("layer_norm_eps 0", "layer_norm_eps", "0"),
        set!("layer_norm_eps 1e300", "layer_norm_eps", "1e300"),
        set!("a string for layer_norm_eps", "layer_norm_eps", "\"1e-12\""),
        set!("pad_token_id 2^32", "pad_token_id", "4294967296"),
        set!("pad_token_id u64::MAX", "pad_token_id", "18446744073709551615"),
        set!("pad_token_id = vocab_size", "pad_token_id", "30522"),
        set!("an unknown activation", "hidden_act", "\"swish\""),
        // Shapes that disagree with the weights: named by the config's field.
        set!("more layers than the file holds", "num_hidden_layers", "3"),
        set!("a vocabulary the embeddings do not have", "vocab_size", "30000"),
        set!("a feed-forward size the weights do not have", "intermediate_size", "128"),
        set!("positions the table does not have", "max_position_embeddings", "512"),
        Mutation {
            name: "NaN (Python's json.dump writes it)",
            apply: |f| f.config = f.config.replace("\"layer_norm_eps\": 1e-12", "\"layer_norm_eps\": NaN"),
            expect: &["config.json:", "not valid JSON"],
        },
        Mutation {
            name: "Infinity",
            apply: |f| f.config = f.config.replace("\"hidden_size\": 32", "\"hidden_size\": Infinity"),
            expect: &["config.json:", "not valid JSON"],
        },
        Mutation {
            name: "a key given twice",
            apply: |f| f.config = f.config.replace("\"hidden_size\": 32", "\"hidden_size\": 32, \"hidden_size\": 64"),
            expect: &["config.json", "field `hidden_size`", "duplicate key"],
        },
    ]
}

fn label_mutations() -> Vec<Mutation> {
    vec![
        Mutation {
            name: "id2label as a list",
            apply: |f| f.set("id2label", r#"["contradiction", "neutral", "entailment"]"#),
            expect: &["config.json", "field `id2label`", "found an array"],
        },
        Mutation {
            name: "entailment twice",
            apply: |f| f.set("id2label", r#"{"0": "entailment", "1": "entailment", "2": "contradiction"}"#),
            expect: &["config.json", "field `id2label`", "names both class 0 and class 1"],
        },
        Mutation {
            name: "met twice",
            apply: |f| f.set("id2label", r#"{"0": "met", "1": "met", "2": "not_met"}"#),
            expect: &["config.json", "field `id2label`", "names both class 0 and class 1"],
        },
        Mutation {
            name: "a grader's labels beside an NLI label",
            apply: |f| f.set("id2label", r#"{"0": "met", "1": "not_met", "2": "entailment"}"#),
            expect: &["config.json", "field `id2label`", "which class means met is not known"],
        },
        Mutation {
            name: "label2id against id2label",
            apply: |f| f.set("label2id", r#"{"contradiction": 2, "neutral": 1, "entailment": 0}"#),
            expect: &["config.json", "field `label2id.contradiction`", "contradict each other"],
        },
    ]
}

fn tensor_mutations() -> Vec<Mutation> {
    vec![
        Mutation {
            name: "a NaN weight",
            apply: |f| f.values(QUERY, |v| v[5] = f32::NAN),
            expect: &["model.safetensors", QUERY, "NaN or infinite value (element 5 of 1024)"],
        },
        Mutation {
            name: "an infinite embedding",
            apply: |f| f.values("embeddings.word_embeddings.weight", |v| v[0] = f32::NEG_INFINITY),
            expect: &["model.safetensors", "embeddings.word_embeddings.weight", "NaN or infinite value (element 0"],
        },
        Mutation {
            name: "f32 bytes labelled I32",
            apply: |f| f.tensors.iter_mut().find(|t| t.0 == QUERY).unwrap().1 = "I32",
            expect: &["model.safetensors", QUERY, "is stored as I32"],
        },
        Mutation {
            name: "an int8 tensor of zero rows the model does not use",
            apply: |f| {
                f.tensors.push(("cls.predictions.transform.dense.weight".into(), "I8", vec![0, 32], Vec::new()));
                f.tensors.push(("cls.predictions.transform.dense.weight_scale".into(), "F32", vec![0], Vec::new()));
            },
            expect: &["model.safetensors", "cls.predictions.transform.dense.weight", "holds no weight"],
        },
        Mutation {
            name: "a layer's tensor of another shape than the config's",
            apply: |f| {
                let t = f.tensors.iter_mut().find(|t| t.0 == QUERY).unwrap();
                t.2 = vec![16, 64];
            },
            expect: &["model.safetensors", QUERY, "has shape [16, 64], the config implies [32, 32]"],
        },
    ]
}

fn tokenizer_mutations() -> Vec<Mutation> {
    vec![
        Mutation {
            name: "an added token beyond the vocabulary",
            apply: |f| {
                let added = f.tokenizer["added_tokens"].as_array_mut().unwrap();
                added.push(serde_json::json!({"id": 10_000_000, "content": "[HUGE]", "special": true,
                    "single_word": false, "lstrip": false, "rstrip": false, "normalized": false}));
            },
            expect: &["tokenizer.json", "field `added_tokens[5].id`", "config.json: vocab_size"],
        },
        Mutation {
            // 2,000,000 entries past the model's 30,522 words (a 50 MB file): refused at the
            // first, in a streaming read, before the tokenizer is built (10 million such
            // entries took 44 s and 2.95 GB to build).
            name: "a tokenizer vocabulary larger than the model's",
            apply: |f| {
                let vocab = f.tokenizer["model"]["vocab"].as_object_mut().unwrap();
                for i in 0..2_000_000u64 {
                    vocab.insert(format!("extra{i}"), Value::from(30_522 + i));
                }
            },
            expect: &["tokenizer.json", "field `model.vocab.extra0`", "has id 30522", "vocab_size"],
        },
    ]
}

/// Writes each mutation's folder, runs every command on it, and checks the refusal: exit
/// code 1, the expected names in the message, no output, peak memory under the limit.
fn refused_everywhere(group: &str, mutations: Vec<Mutation>) {
    let base = Folder::base();
    let mut failures = Vec::new();
    let mut peak = 0;
    for (i, m) in mutations.iter().enumerate() {
        let mut folder = base.clone();
        (m.apply)(&mut folder);
        let dir = tmp(&format!("{group}-{i}"));
        folder.write(&dir);
        for (command, args) in commands(&dir, &tmp(&format!("{group}-{i}-out"))) {
            let out = tmp(&format!("{group}-{i}-out"));
            let _ = std::fs::remove_dir_all(&out);
            std::fs::create_dir_all(&out).unwrap();
            let ran = run(&args);
            peak = peak.max(ran.peak_kib);
            let missing: Vec<&&str> = m.expect.iter().filter(|e| !ran.stderr.contains(**e)).collect();
            let written: Vec<PathBuf> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().path()).collect();
            if ran.code != 1 || !missing.is_empty() || !written.is_empty() || ran.peak_kib >= PEAK_LIMIT_KIB {
                failures.push(format!(
                    "{} / {command}: exit {}, missing {missing:?}, written {written:?}, peak {} MiB:\n{}",
                    m.name,
                    ran.code,
                    ran.peak_kib / 1024,
                    ran.stderr.trim()
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    eprintln!("{group}: {} mutations x 8 commands, the largest peak {} MiB", mutations.len(), peak / 1024);
    assert!(failures.is_empty(), "{} refusals were wrong:\n\n{}", failures.len(), failures.join("\n\n"));
}

#[test]
fn the_unmutated_folder_passes_every_command() {
    let dir = tmp("base");
    Folder::base().write(&dir);
    for (command, args) in commands(&dir, &tmp("base-out")) {
        let ran = run(&args);
        assert_eq!(ran.code, 0, "{command} failed on the valid folder:\n{}", ran.stderr);
        assert!(ran.peak_kib < PEAK_LIMIT_KIB, "{command}: {} MiB", ran.peak_kib / 1024);
    }
    // A byte-order mark before config.json (as some Windows editors write) is read.
    let mut bom = Folder::base();
    bom.config = format!("\u{feff}{}", bom.config);
    let dir = tmp("bom");
    bom.write(&dir);
    let (_, args) = commands(&dir, &tmp("bom-out")).swap_remove(2);
    let ran = run(&args);
    assert_eq!(ran.code, 0, "embed with a BOM: {}", ran.stderr);
}

#[test]
fn mutated_config_values_are_refused_by_every_command() {
    refused_everywhere("config", config_mutations());
}

#[test]
fn mutated_label_maps_are_refused_by_every_command() {
    refused_everywhere("labels", label_mutations());
}

#[test]
fn mutated_tensors_are_refused_by_every_command() {
    refused_everywhere("tensors", tensor_mutations());
}

#[test]
fn tokenizers_beyond_the_vocabulary_are_refused_by_every_command() {
    refused_everywhere("tokenizer", tokenizer_mutations());
}

/// The first input each command gives a model, as its message names it.
const FIRST_INPUTS: [(&str, &str); 8] = [
    ("statements", "examples/statements/answers.jsonl:1: answer `contagious-a` of system `model-a`, must_have[0]"),
    ("grade", "examples/rubric/conversations.jsonl:1: response"),
    ("embed", "line 1 of examples/sentences.txt"),
    ("metrics --bertscore", "examples/metrics/summaries.jsonl:1: the candidate of system `gold-like` for `q1`"),
    ("nrp --dense-ranker", "(ranker dense) computed NaN or infinite embedding for the text of query"),
    ("evaluate", "computed NaN or infinite logits for instance"),
    ("train", "computed NaN or infinite loss for training step 1 of epoch 1"),
    ("quantize", "computed NaN or infinite embedding for examples/sentences.txt:1"),
];

#[test]
fn a_model_that_computes_nan_is_refused_by_every_command_naming_the_model_and_the_first_input() {
    // Finite weights of about 1e19 (the random ones times 1e21) in the first layer's query
    // and key: every weight passes the load checks, and the attention scores overflow f32
    // (about 1e40), so the model computes NaN. (One constant would not: a row after layer
    // norm sums to 0, and so would its product with a constant matrix.) `statements` used to exit 0 with every statement "contradicted" (the
    // NaN argmax is class 0), `embed` wrote null vectors, `quantize` printed "cosine worst
    // inf" and wrote the folder, `train` logged a null loss and wrote the folder.
    let mut folder = Folder::base();
    folder.values(QUERY, |v| v.iter_mut().for_each(|x| *x *= 1e21));
    folder.values(KEY, |v| v.iter_mut().for_each(|x| *x *= 1e21));
    let dir = tmp("nan-model");
    folder.write(&dir);
    let model = dir.display().to_string();
    let mut failures = Vec::new();
    for (command, args) in commands(&dir, &tmp("nan-out")) {
        let out = tmp("nan-out");
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let ran = run(&args);
        let first = FIRST_INPUTS.iter().find(|(c, _)| *c == command).unwrap().1;
        let written = std::fs::read_dir(&out).unwrap().count();
        let named = ran.stderr.contains(&format!("model {model}")) && ran.stderr.contains("computed NaN or infinite");
        if ran.code != 1 || !named || !ran.stderr.contains(first) || written > 0 {
            failures.push(format!("{command}: exit {}, {written} written:\n{}", ran.code, ran.stderr.trim()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn long_inputs_are_tokenized_in_pieces_so_memory_does_not_grow_with_the_text_tokenized() {
    // A 5 MB response took 775-906 MB in grade, statements and train (the tokenizers crate
    // holds about 150 bytes per input byte while it tokenises), a 50 MB line in quantize
    // --texts 2.76 GB; inputs are cut to the model's limit anyway. Tokenised in pieces of
    // 32 KiB (only the kept end held), a run holds the text itself (a few copies of it: the
    // file, its parsed line, the part) and one piece's tokens. (Here two responses of 5 MB,
    // and a line of 20 MB.)
    let dir = tmp("long-inputs");
    Folder::base().write(&dir.join("model"));
    let model = dir.join("model").display().to_string();
    let sentence = "The patient reports chest pain radiating to the left arm since two hours. ";
    let response = sentence.repeat(5_000_000 / sentence.len());
    let rubric = serde_json::json!({"id": "r1", "system": "a", "prompt": "What now?", "response": response,
        "criteria": [{"criterion": "Advises calling emergency services", "points": 5, "met": true}]});
    let statements = serde_json::json!({"id": "r1", "system": "a", "response": response,
        "must_have": ["Call emergency services"]});
    std::fs::write(dir.join("rubric.jsonl"), format!("{rubric}\n{}\n", rubric.to_string().replace("\"r1\"", "\"r2\"")))
        .unwrap();
    std::fs::write(dir.join("answers.jsonl"), format!("{statements}\n")).unwrap();
    let line = sentence.repeat(20_000_000 / sentence.len());
    std::fs::write(dir.join("texts.txt"), format!("{line}\n")).unwrap();
    let p = |name: &str| dir.join(name).display().to_string();
    let runs: Vec<(&str, Vec<String>, u64)> = vec![
        ("grade", vec!["grade".into(), "--rubric".into(), p("rubric.jsonl"), "--grader".into(), model.clone()], 10),
        (
            "statements",
            vec!["statements".into(), "--input".into(), p("answers.jsonl"), "--nli".into(), model.clone()],
            5,
        ),
        (
            "train",
            vec![
                "train".into(),
                "--model".into(),
                model.clone(),
                "--train".into(),
                p("rubric.jsonl"),
                "--dev".into(),
                p("rubric.jsonl"),
                "--task".into(),
                "criterion".into(),
                "--epochs".into(),
                "1".into(),
                "--out".into(),
                p("trained"),
            ],
            10,
        ),
        (
            "quantize",
            vec![
                "quantize".into(),
                "--model".into(),
                model.clone(),
                "--out".into(),
                p("int8"),
                "--texts".into(),
                p("texts.txt"),
            ],
            20,
        ),
    ];
    for (command, args, megabytes) in runs {
        let ran = run(&args);
        assert_eq!(ran.code, 0, "{command}: {}", ran.stderr);
        let peak_mib = ran.peak_kib / 1024;
        eprintln!("{command} on {megabytes} MB of input: peak resident memory {peak_mib} MiB");
        // The README's bound: 150 MiB plus 8 bytes per input byte (the old tokenising took
        // about 150 per byte).
        let bound = 150 + 8 * megabytes;
        assert!(peak_mib < bound, "{command}: peak {peak_mib} MiB, over {bound} MiB");
    }
}

#[test]
fn a_row_of_subnormal_weights_quantizes_and_its_folder_loads() {
    // A valid f32 model whose row maximum is 1e-44 got the scale 1e-44 / 127 = 0, and
    // quantize refused its own output, blaming the input file. With the scale floor the row
    // quantizes to zeros and the int8 folder runs.
    let mut folder = Folder::base();
    folder.values(QUERY, |v| v[..32].iter_mut().for_each(|x| *x = 1e-44));
    let dir = tmp("subnormal-row");
    folder.write(&dir.join("f32"));
    let p = |name: &str| dir.join(name).display().to_string();
    let args = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let ran = run(&args(&["quantize", "--model", &p("f32"), "--out", &p("int8"), "--texts", "examples/sentences.txt"]));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    let ran =
        run(&args(&["embed", "--model", &p("int8"), "--input", "examples/sentences.txt", "--out", &p("e.jsonl")]));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
}
