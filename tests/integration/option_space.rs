//! The option space of every subcommand against hostile values (issue 23): every numeric
//! option at 0, -1, NaN, inf and u64::MAX, and every input file given a device that never
//! ends (/dev/zero), an empty device (/dev/null), a pipe without a writer and a folder.
//!
//! The options come from clap itself (`medrank::cli::command()`, hidden ones included). An
//! option this file does not classify is fuzzed as a number, so a new option is either
//! checked here or has to be classified below, with the reason it is left out.
//!
//! Every run must exit 0, 1 or 2 (never a panic's 101, an abort's 134 or a signal), name
//! the flag (or, for an input, the file) when it refuses the value, and leave no output
//! behind when it fails. Values that are accepted run the real command on the examples
//! (with one epoch for training), so this stays at a minute or two on 2 cores.

use crate::common;
use common::cli::{root, s, tiny_bert_folder, tmp};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const HOSTILE: [&str; 5] = ["0", "-1", "NaN", "inf", "18446744073709551615"];

const MODEL: &str = "models/all-MiniLM-L6-v2";

/// What an option takes.
enum Kind {
    /// Numbers: each template's `{}` takes every hostile value.
    Numeric(&'static [&'static str]),
    /// A file the run reads: each template's `{}` takes the device, pipe or folder.
    Input(&'static [&'static str]),
    /// Neither: why it is left out.
    Other(&'static str),
}

const ONE: &[&str] = &["{}"];
const OUTPUT: Kind =
    Kind::Other("an output path: tests/integration/cli.rs checks outputs (folders, links, devices, inputs)");
const MODEL_DIR: Kind = Kind::Other(
    "a model folder: the files in it are read as a model's (a pipe or device among them: `a_model_folder_of_pipes_and_devices_is_refused`)",
);

/// Every value-taking option of every subcommand, by (subcommand, long name). Options with
/// listed choices (`--backend cpu|gpu`, `--ties`, ...) are not here: clap refuses any other
/// value, naming the flag.
fn kind(sub: &str, long: &str) -> Kind {
    use Kind::*;
    match (sub, long) {
        (_, "json" | "csv" | "out" | "save-predictions" | "trace") => OUTPUT,
        (_, "model" | "bertscore" | "grader" | "nli" | "learned") => MODEL_DIR,
        (_, "seed" | "resamples" | "confidence") => Numeric(ONE),
        (_, "control-systems" | "which" | "controls") => Other("names of control systems"),
        ("ranking-over-scoring", "no-argument") => Input(ONE),
        ("ranking-over-scoring", "source") => Input(&["gpt-4o={}"]),
        ("ranking-over-scoring", "control-source") => Input(&["label_only_file={}"]),
        ("controls" | "evaluate" | "agreement", "bundle") => Input(ONE),
        ("controls" | "evaluate", "corpus") => Input(ONE),
        ("evaluate", "predictions") => Input(&["{}", "judge={}"]),
        ("evaluate" | "agreement", "rankings") => Input(ONE),
        ("evaluate" | "embed" | "train" | "grade" | "statements", "batch-size") => Numeric(ONE),
        ("statements", "input") => Input(ONE),
        ("rubric-draft", "prompts" | "evidence") => Input(ONE),
        ("rubric-draft", "dense-ranker" | "cross-encoder") => MODEL_DIR,
        ("rubric-draft", "tag") => Other("a tag of the drafted criteria (any text but an empty one)"),
        (
            "rubric-draft",
            "criteria" | "passages" | "candidates" | "passage-words" | "min-words" | "points" | "duplicate-cosine"
            | "batch-size",
        ) => Numeric(ONE),
        ("grade", "rubric") => Input(ONE),
        ("nrp", "topics" | "qrels-combined" | "docs" | "answers" | "expert-rankings") => Input(ONE),
        ("nrp", "qrels") => Input(&["relevance={}"]),
        ("nrp", "ranker") => {
            Input(&["published={},examples/nrp/answer_scores.csv", "published=examples/nrp/run.bm25.txt,{}"])
        }
        ("nrp", "not-judgeable") => Numeric(&["credibility={}"]),
        ("nrp", "window") => Numeric(&["{},1", "200,{}"]),
        ("nrp", "weight") => Numeric(&["relevance={}"]),
        ("nrp", "dense-ranker" | "cross-encoder" | "monot5") => Other("NAME=a model folder"),
        ("nrp", "fuse") => Other("a fusion of rankers by name, [NAME=]rrf:A,B"),
        ("nrp", "force-ranker") => Other("DIMENSION=RANKER, two names"),
        ("metrics" | "rubric" | "embed", "input") => Input(ONE),
        ("healthbench", "input" | "completions") => Input(ONE),
        ("rubric-agreement", "input" | "grader-file") => Input(ONE),
        ("metrics", "kappa-bins") => Numeric(&["rougeL=1..5:{}", "rougeL={}..5:0.2,0.4,0.6,0.8"]),
        ("metrics", "bertscore-layer") => Numeric(ONE),
        ("metrics", "combine") => Other("the names of the scores combined (refused by name when unknown)"),
        ("metrics", "combine-fit") => {
            Other("a dev file read only with --combine, as --input reads its file (cli::metrics_combine_fits_on_the_dev_split)")
        }
        ("metrics", "bertscore-baseline") => Numeric(&["{},0.5,0.5"]),
        ("train", "train" | "dev") => Input(ONE),
        (
            "train",
            "dev-split" | "epochs" | "grad-accum" | "lr" | "layer-lr" | "weight-decay" | "warmup" | "dropout",
        ) => Numeric(ONE),
        ("train", "recipe") => Other("a recipe's name, fast or finetune (clap's list)"),
        ("train", "length") => Other("folder or full (clap's list)"),
        ("train", "score-input") => Other("what a score model reads, one of three names (clap's list)"),
        ("train", "head-pooling") => Other("how the head reads the last layer, one of two names (clap's list)"),
        ("train", "patience" | "trace-steps") => Numeric(ONE),
        ("train", "freeze") => Numeric(&["top:{}"]),
        ("train", "arguments") => Other("the argument source: none, system:NAME or random:A,B"),
        ("bench", "workload-data") => Input(ONE),
        ("quantize", "texts" | "dev" | "bundle") => Input(ONE),
        ("bench", "lengths" | "batches" | "repeats") => Numeric(ONE),
        ("bench", "peers") => Other("the folder of the peer scripts (Python files run by path)"),
        ("serve", "port" | "request-timeout") => Numeric(ONE),
        // Not classified: a new option. Fuzzed as a number; classify it here if it is not one.
        _ => Numeric(ONE),
    }
}

/// A run's base arguments for testing `long` of `sub` (without `long` itself), reading the
/// examples, writing to `out` (a file, or a folder for `train`): fast, and failing fast.
fn base(sub: &str, long: &str, out: &Path) -> Vec<String> {
    let out = s(out).to_owned();
    let pairs: Vec<(&str, String)> = match sub {
        "ranking-over-scoring" => vec![
            ("no-argument", "examples/ros/no_argument.jsonl".into()),
            ("source", "gpt-4o=examples/ros/gpt-4o.jsonl".into()),
            ("out", out),
        ],
        "controls" => {
            vec![("bundle", "examples/bundle.jsonl".into()), ("corpus", "examples/corpus.jsonl".into()), ("out", out)]
        }
        "evaluate" if long == "batch-size" => {
            vec![("bundle", "examples/bundle.jsonl".into()), ("model", MODEL.into()), ("json", out)]
        }
        "evaluate" => vec![
            ("bundle", "examples/bundle.jsonl".into()),
            ("predictions", "examples/predictions.csv".into()),
            ("corpus", "examples/corpus.jsonl".into()),
            ("rankings", "examples/rankings.csv".into()),
            ("json", out),
        ],
        "agreement" => {
            vec![
                ("rankings", "examples/rankings.csv".into()),
                ("bundle", "examples/bundle.jsonl".into()),
                ("json", out),
            ]
        }
        "nrp" => vec![
            ("topics", "examples/nrp/topics.xml".into()),
            ("answers", "examples/nrp/answers.jsonl".into()),
            ("qrels-combined", "examples/nrp/qrels.combined.txt".into()),
            ("not-judgeable", "credibility=3".into()),
            ("docs", "examples/nrp/docs.tsv".into()),
            ("ranker", "published=examples/nrp/run.bm25.txt,examples/nrp/answer_scores.csv".into()),
            ("expert-rankings", "examples/nrp/expert_rankings.csv".into()),
            ("json", out),
        ],
        "metrics" => {
            let mut p = vec![("input", "examples/metrics/summaries.jsonl".to_owned()), ("json", out)];
            if long.starts_with("bertscore-") {
                p.push(("bertscore", MODEL.into()));
            }
            p
        }
        "rubric" => vec![("input", "examples/rubric/graded.jsonl".into()), ("json", out)],
        "healthbench" => vec![
            ("input", "examples/rubric/healthbench/eval.jsonl".into()),
            ("completions", "examples/rubric/healthbench/completions.jsonl".into()),
            ("out", out),
        ],
        "rubric-agreement" => vec![
            ("input", "examples/rubric/judged.jsonl".into()),
            ("grader-file", "examples/rubric/grader.jsonl".into()),
            ("json", out),
        ],
        "embed" => vec![("model", MODEL.into()), ("input", "examples/sentences.txt".into()), ("out", out)],
        "statements" => {
            vec![("input", "examples/statements/answers.jsonl".into()), ("nli", s(&tiny_nli()).into()), ("json", out)]
        }
        "rubric-draft" => vec![
            ("prompts", "examples/draft/prompts.jsonl".into()),
            ("evidence", "examples/draft/guideline.md".into()),
            ("out", out),
        ],
        "grade" => vec![
            ("rubric", "examples/rubric/conversations.jsonl".into()),
            ("grader", s(&tiny_grader()).into()),
            ("json", out),
        ],
        "train" => {
            let mut p = vec![
                ("model", MODEL.to_owned()),
                ("train", "examples/bundle.jsonl".into()),
                ("dev", "examples/bundle.jsonl".into()),
                ("epochs", "1".into()),
                ("out", out.clone()),
            ];
            if long == "dev-split" {
                p.retain(|(f, _)| *f != "dev");
            }
            if long == "trace-steps" {
                p.push(("trace", format!("{out}-trace")));
            }
            p
        }
        "bench" if long == "workload-data" => {
            vec![
                ("parts", "workload".into()),
                ("workload-backends", "cpu".into()),
                ("model", MODEL.into()),
                ("json", out),
            ]
        }
        // Fails at once on the missing model should a value be accepted.
        "bench" => vec![("parts", "workload".into()), ("model", format!("{out}-no-model")), ("json", out)],
        "serve" => return vec!["serve".into(), s(&site()).into()],
        "quantize" => vec![("model", MODEL.into()), ("out", out)],
        other => panic!("no base command for `{other}`: add one"),
    };
    let mut args = match sub {
        "ranking-over-scoring" | "healthbench" => vec!["import".to_owned(), sub.to_owned()],
        _ => vec![sub.to_owned()],
    };
    for (flag, value) in pairs.into_iter().filter(|(f, _)| *f != long) {
        args.push(format!("--{flag}"));
        args.push(value);
    }
    args
}

/// An NLI model for `statements`: a random BERT with MNLI's three labels (fast).
fn tiny_nli() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        tiny_bert_folder(
            "nli",
            medrank::model::HeadKind::SequenceClassification,
            &["contradiction", "neutral", "entailment"],
            512,
        )
    })
    .clone()
}

/// A criterion grader for `grade`: a random BERT with met / not_met labels (fast).
fn tiny_grader() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        tiny_bert_folder("grader", medrank::model::HeadKind::SequenceClassification, &["met", "not_met"], 512)
    })
    .clone()
}

/// A folder for `serve` (an index page).
fn site() -> PathBuf {
    let dir = tmp("site");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("index.html"), "<!doctype html>").unwrap();
    dir
}

/// How a run ended: its exit code (None: killed by a signal, or still running after
/// `serve` printed its address), its stderr.
struct Ran {
    code: Option<i32>,
    signal: Option<i32>,
    stderr: String,
    served: bool,
}

/// Runs medrank with `args` from the repository root, draining both pipes; `serve` runs
/// until it prints its address (then it is stopped: the value was accepted).
fn run(args: &[String]) -> Ran {
    let mut child = Command::new(env!("CARGO_BIN_EXE_medrank"))
        .current_dir(root())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run medrank");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let (stdout_pipe, stderr_pipe) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let serving = args[0] == "serve";
    // serve prints its address and goes on: read that line, then stop it.
    let stdout = if serving {
        let mut reader = std::io::BufReader::new(stdout_pipe);
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut reader, &mut line);
        if line.contains("serving") {
            let _ = child.kill();
            let _ = child.wait();
            return Ran { code: None, signal: None, stderr: String::new(), served: true };
        }
        drain(Box::new(reader))
    } else {
        drain(Box::new(stdout_pipe))
    };
    let stderr = drain(Box::new(stderr_pipe));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(300) {
            let _ = child.kill();
            panic!("medrank {args:?} ran for 5 minutes: a hang");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stdout.join());
    use std::os::unix::process::ExitStatusExt;
    Ran { code: status.code(), signal: status.signal(), stderr: stderr.join().unwrap(), served: false }
}

/// Every (subcommand, option) that takes a value, leaf subcommands by name.
fn options() -> Vec<(String, String)> {
    fn walk(cmd: &clap::Command, out: &mut Vec<(String, String)>) {
        if cmd.get_subcommands().next().is_some() {
            for sub in cmd.get_subcommands() {
                walk(sub, out);
            }
            return;
        }
        for arg in cmd.get_arguments() {
            let takes_value = arg.get_action().takes_values();
            let choices = !arg.get_possible_values().is_empty();
            if let (Some(long), true, false, false) = (arg.get_long(), takes_value, arg.is_positional(), choices) {
                out.push((cmd.get_name().to_owned(), long.to_owned()));
            }
        }
    }
    let mut out = Vec::new();
    walk(&medrank::cli::command(), &mut out);
    out
}

/// What a failed run may not leave: its output, or a temporary of it.
fn nothing_left(out: &Path) -> Result<(), String> {
    if out.exists() {
        return Err(format!("a failed run left {}", out.display()));
    }
    let stem = out.file_name().unwrap().to_string_lossy().into_owned();
    let temporaries: Vec<String> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("medrank-tmp") && n.contains(&stem))
        .collect();
    if temporaries.is_empty() {
        Ok(())
    } else {
        Err(format!("temporaries left: {temporaries:?}"))
    }
}

/// A run to make: what it tests, its arguments, its output, and what its outcome must be
/// besides an exit code of 0, 1 or 2.
type Case = (String, Vec<String>, PathBuf, Box<dyn Fn(&Ran) -> Result<(), String> + Send>);

/// Runs `cases` (what, args, output, check) on two threads; panics with every failure.
fn run_all(cases: Vec<Case>) {
    let total = cases.len();
    let cases = std::sync::Mutex::new(cases.into_iter().collect::<Vec<_>>());
    let failures = std::sync::Mutex::new(Vec::new());
    let exits = std::sync::Mutex::new(std::collections::BTreeMap::<String, usize>::new());
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| loop {
                let Some((what, args, out, check)) = cases.lock().unwrap().pop() else { return };
                let _ = std::fs::remove_file(&out);
                let _ = std::fs::remove_dir_all(&out);
                let ran = run(&args);
                let exit = if ran.served { "served".into() } else { format!("exit {:?}", ran.code) };
                *exits.lock().unwrap().entry(exit).or_default() += 1;
                let verdict = match (ran.code, ran.signal) {
                    _ if ran.served => Ok(()),
                    (Some(0..=2), _) => check(&ran),
                    (code, signal) => Err(format!("exit code {code:?}, signal {signal:?}: {}", ran.stderr)),
                };
                let verdict =
                    verdict.and_then(|()| if ran.code.is_some_and(|c| c != 0) { nothing_left(&out) } else { Ok(()) });
                if let Err(e) = verdict {
                    failures.lock().unwrap().push(format!("{what} (medrank {}): {e}", args.join(" ")));
                }
                // What accepted runs wrote (a trained model is 91 MB) goes at once.
                let _ = std::fs::remove_file(&out);
                let _ = std::fs::remove_dir_all(&out);
            });
        }
    });
    eprintln!("{total} runs: {:?}", exits.into_inner().unwrap());
    let failures = failures.into_inner().unwrap();
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn every_numeric_option_takes_hostile_numbers_without_a_crash() {
    assert!(root().join(MODEL).join("model.safetensors").exists(), "run scripts/setup.sh model first");
    let mut cases: Vec<Case> = Vec::new();
    let mut numeric = 0;
    for (sub, long) in options() {
        let templates = match kind(&sub, &long) {
            Kind::Numeric(templates) => templates,
            Kind::Input(_) => continue, // the next test
            Kind::Other(why) => {
                eprintln!("not a number: {sub} --{long}: {why}");
                continue;
            }
        };
        numeric += 1;
        for template in templates {
            for value in HOSTILE {
                let n = cases.len();
                let out = tmp(&format!("numeric-{n}.out"));
                let mut args = base(&sub, &long, &out);
                // `--flag=-1`: as a word of its own, `-1` would read as a flag.
                args.push(format!("--{long}={}", template.replace("{}", value)));
                let flag = format!("--{long}");
                let check = Box::new(move |ran: &Ran| {
                    if ran.code != Some(0) && !ran.stderr.contains(&flag) {
                        return Err(format!("refused without naming {flag}: {}", ran.stderr.trim()));
                    }
                    Ok(())
                });
                cases.push((format!("{sub} --{long} {value}"), args, out, check));
            }
        }
    }
    // What the table expects to find: every numeric option of the list.
    assert!(numeric >= 30, "only {numeric} numeric options found: is the table out of date?");
    run_all(cases);
}

/// The options of `train` and `bench` that used to be checked only after the model loaded
/// (190 MB) or after parts had run (13 s of `--parts core`, 90 s of `train` before
/// `--workload-backends NaN`) are refused by their flag's parser: exit code 2 naming the
/// flag, before any work. The model folder given does not exist, so a value that got past
/// the parser would fail to load it with exit code 1 instead.
#[test]
fn train_and_bench_options_are_refused_at_parse_time() {
    let missing = s(&tmp("no-such-model")).to_owned();
    let train = |flag: &str, value: &str| {
        let mut args: Vec<String> =
            ["train", "--model", &missing, "--train", "examples/bundle.jsonl"].iter().map(|a| a.to_string()).collect();
        if flag != "--dev-split" {
            args.extend(["--dev".into(), "examples/bundle.jsonl".into()]);
        }
        args.extend([format!("{flag}={value}"), "--out".into(), s(&tmp("never-written")).into()]);
        args
    };
    let mut cases: Vec<(Vec<String>, &str)> = Vec::new();
    for (flag, values) in [
        ("--lr", &["NaN", "inf", "0", "-1", "2", "x"][..]),
        ("--layer-lr", &["NaN", "-inf", "0", "1.5"][..]),
        ("--weight-decay", &["NaN", "-0.1", "2"][..]),
        ("--warmup", &["NaN", "-1", "1.5"][..]),
        ("--dev-split", &["NaN", "0", "1", "inf"][..]),
        ("--freeze", &["bogus", "top:0", "top:x", "top:100000"][..]),
        ("--arguments", &["bogus", "system:", "random:a,,b"][..]),
        ("--dropout", &["NaN", "-0.1", "1", "inf"][..]),
        ("--recipe", &["slow", ""][..]),
        ("--length", &["512", "max"][..]),
        ("--score-input", &["answer", ""][..]),
        ("--head-pooling", &["max", ""][..]),
    ] {
        for value in values {
            cases.push((train(flag, value), flag));
        }
    }
    let bench = |extra: &[&str]| {
        let mut args: Vec<String> = vec!["bench".into(), "--model".into(), missing.clone()];
        args.extend(extra.iter().map(|a| a.to_string()));
        args
    };
    cases.push((bench(&["--parts", "core,bogus"]), "--parts"));
    cases.push((bench(&["--parts", "workload", "--workload-backends", "NaN"]), "--workload-backends"));
    cases.push((bench(&["--parts", "workload", "--workload-backends", "cpu,tpu"]), "--workload-backends"));
    let mut failures = Vec::new();
    for (args, flag) in cases {
        let ran = run(&args);
        if ran.code != Some(2) || !ran.stderr.contains(flag) {
            failures.push(format!("medrank {}: exit {:?}: {}", args.join(" "), ran.code, ran.stderr.trim()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The values the flags document still pass the parser (and then fail on the missing model).
    let ran = run(&train("--lr", "1e-3"));
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);
    assert!(ran.stderr.contains("no-such-model"), "{}", ran.stderr);
}

/// Every input file option, given what is not a regular file: refused naming the file,
/// before any read (a pipe without a writer would otherwise wait forever, /dev/zero fill the
/// memory).
#[test]
fn every_input_refuses_devices_pipes_and_folders() {
    let fifo = tmp("no-writer.fifo");
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success(), "mkfifo");
    let folder = tmp("a-folder");
    std::fs::create_dir_all(&folder).unwrap();
    let specials: Vec<(String, &str)> = vec![
        ("/dev/zero".into(), "a device, pipe or socket"),
        ("/dev/null".into(), "a device, pipe or socket"),
        (s(&fifo).into(), "a device, pipe or socket"),
        (s(&folder).into(), "a folder"),
    ];
    let mut cases: Vec<Case> = Vec::new();
    let mut inputs = 0;
    for (sub, long) in options() {
        let Kind::Input(templates) = kind(&sub, &long) else { continue };
        inputs += 1;
        for template in templates {
            for (path, what) in &specials {
                let out = tmp(&format!("input-{}.out", cases.len()));
                let mut args = base(&sub, &long, &out);
                args.push(format!("--{long}"));
                args.push(template.replace("{}", path));
                let expected = format!("{path}: not a regular file ({what})");
                let check = Box::new(move |ran: &Ran| match ran.code {
                    Some(1) if ran.stderr.contains(&expected) => Ok(()),
                    _ => Err(format!("expected exit 1 and `{expected}`: {:?} {}", ran.code, ran.stderr.trim())),
                });
                cases.push((format!("{sub} --{long} {path}"), args, out, check));
            }
        }
    }
    assert!(inputs >= 20, "only {inputs} input options found: is the table out of date?");
    run_all(cases);
}

/// A model folder whose weights are a pipe without a writer, or whose config is a device:
/// refused naming the file, instead of waiting for a writer or reading without end.
#[test]
fn a_model_folder_of_pipes_and_devices_is_refused() {
    let dir = tmp("pipe-model");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    assert!(Command::new("mkfifo").arg(dir.join("model.safetensors")).status().unwrap().success());
    let out = tmp("pipe-model.jsonl");
    let args: Vec<String> =
        ["embed", "--model", s(&dir), "--input", "examples/sentences.txt", "--out", s(&out)].map(String::from).to_vec();
    let ran = run(&args);
    let expected = format!("{}/model.safetensors: not a regular file", s(&dir));
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);
    assert!(ran.stderr.contains(&expected), "{}", ran.stderr);
    // Real weights, the config a link to /dev/zero.
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    std::fs::copy(root().join(MODEL).join("model.safetensors"), dir.join("model.safetensors")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.join("config.json")).unwrap();
    let ran = run(&args);
    assert_eq!(ran.code, Some(1), "{}", ran.stderr);
    assert!(ran.stderr.contains(&format!("{}/config.json: not a regular file", s(&dir))), "{}", ran.stderr);
    nothing_left(&out).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
