//! The public Ranking-Over-Scoring MCQA files as published: control files marked as
//! control cases (`--control-source`), their coexistence with generated controls, and the
//! empty-option convention (an empty option is not a candidate of any evaluator). The
//! fixtures in `tests/fixtures/ros_published/` (written by its `make.py`) carry the public
//! files' quirks: options shuffled per file and line, an empty fifth option on lines 1, 3
//! and 5, and the Label_Only / Noise / IR_Passages control files.

use medrank::data::{parse_bundle, write_bundle_jsonl, Bundle, Problem};
use medrank::model::config::{Arch, EncoderConfig, HeadKind};
use medrank::model::evaluate::{evaluate_with_head, EmptyOptions};
use medrank::model::load::random_model;
use medrank::model::{run_ready, CpuEncoder, TextTokenizer};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

const FIXTURES: &str = "tests/fixtures/ros_published";
const MODEL: &str = "models/all-MiniLM-L6-v2";

use crate::common;
use common::cli::*;

fn fixture(name: &str) -> String {
    format!("{FIXTURES}/{name}.jsonl")
}

/// `medrank import ranking-over-scoring` of the fixtures: the two systems as sources, the
/// three control files as `--control-source NAME=FILE` with `NAME = <file>{suffix}`.
fn import(out: &Path, suffix: &str, extra: &[&str]) -> String {
    let mut args: Vec<String> =
        ["import", "ranking-over-scoring", "--no-argument", &fixture("no_argument")].map(String::from).to_vec();
    for system in ["gpt-4o", "llama-3-70b"] {
        args.extend(["--source".into(), format!("{system}={}", fixture(system))]);
    }
    for control in ["label_only", "noise", "ir_passages"] {
        args.extend(["--control-source".into(), format!("{control}{suffix}={}", fixture(control))]);
    }
    args.extend(["--out".into(), s(out).into()]);
    args.extend(extra.iter().map(|a| a.to_string()));
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn control_files_are_marked_in_the_bundle_and_the_import_counts_empty_options() {
    let bundle = tmp("marked.jsonl");
    let report = tmp("import.json");
    let stdout = import(&bundle, "_file", &["--json", s(&report)]);
    assert!(
        stdout.contains(
            "wrote 6 instances x 5 systems (3 marked as control cases: label_only_file, noise_file, ir_passages_file)"
        ),
        "{stdout}"
    );

    let r = json(&report);
    assert_eq!(r["controls"], serde_json::json!(["label_only_file", "noise_file", "ir_passages_file"]));
    // make.py empties option 5 on lines 1, 3 and 5 of every file: 3 records each.
    assert_eq!(r["empty_options"]["no_argument"], 3);
    let per_source: BTreeMap<String, u64> = r["empty_options"]["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["system"].as_str().unwrap().into(), x["records"].as_u64().unwrap()))
        .collect();
    assert_eq!(per_source.values().copied().collect::<Vec<_>>(), [3, 3, 3, 3, 3]);
    // Every shuffled file keeps the identity order on exactly one of its six lines
    // (make.py's ORDERS[2]); label_only is not shuffled.
    let reordered: BTreeMap<String, u64> = r["reordered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["system"].as_str().unwrap().into(), x["records"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        reordered,
        BTreeMap::from([
            ("gpt-4o".into(), 5),
            ("llama-3-70b".into(), 5),
            ("label_only_file".into(), 0),
            ("noise_file".into(), 5),
            ("ir_passages_file".into(), 5)
        ])
    );

    // The bundle marks the control files on every line, and reads back with them.
    let text = std::fs::read_to_string(&bundle).unwrap();
    assert!(
        text.lines().all(|l| l.ends_with(r#""controls":["label_only_file","noise_file","ir_passages_file"]}"#)),
        "{text}"
    );
    let (parsed, _) = parse_bundle("marked.jsonl", &text).unwrap();
    assert_eq!(parsed.controls, ["label_only_file", "noise_file", "ir_passages_file"]);

    // A --control-source name given twice is refused like a --source name given twice.
    let out = medrank(&[
        "import",
        "ranking-over-scoring",
        "--no-argument",
        &fixture("no_argument"),
        "--source",
        &format!("noise={}", fixture("gpt-4o")),
        "--control-source",
        &format!("noise={}", fixture("noise")),
        "--out",
        s(&tmp("twice.jsonl")),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), "error: system `noise` is given for two source files");
}

#[test]
fn a_control_file_stands_for_its_control_and_a_named_clash_is_explained_with_the_fix() {
    // The paper's control files imported under the generated controls' names...
    let bundle = tmp("clash.jsonl");
    import(&bundle, "", &["--quiet"]);
    let report = tmp("clash.json");
    // ...and `--controls` (all the inputs allow): the files are those controls, so only
    // no_argument is generated, and each one left out is said (ControlChoice::resolve).
    let out = medrank(&["evaluate", "--bundle", s(&bundle), "--model", MODEL, "--controls", "--json", s(&report)]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for name in ["label_only", "noise", "ir_passages"] {
        let said = format!(
            "warning: the {name} control was not generated: the bundle already has a control case from a file, `{name}`, of that kind"
        );
        assert!(stderr.contains(&said), "{said}\n{stderr}");
    }
    let r = json(&report);
    let mut controls: Vec<&str> = systems(&r).into_iter().filter(|(_, c)| *c).map(|(s, _)| s).collect();
    controls.sort_unstable();
    assert_eq!(controls, ["ir_passages", "label_only", "no_argument", "noise"]);
    assert_eq!(r["controls_added"]["added"], serde_json::json!(["no_argument"]));
    std::fs::remove_file(&report).unwrap();

    // Naming a control the bundle already has is refused with the fix.
    let out = medrank(&[
        "evaluate",
        "--bundle",
        s(&bundle),
        "--model",
        MODEL,
        "--controls",
        "no_argument,label_only",
        "--json",
        s(&report),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim(),
        format!(
            "error: {} the bundle already has a control case from a file named `label_only`, and the generated label_only \
             control would take the same name. To keep both, import the file under another name (`medrank import \
             ranking-over-scoring --control-source label_only_file=FILE`; in the page, rename its system to \
             `label_only_file`); to keep only the file's, do not generate label_only (--controls no_argument; in the \
             page, remove it from Options > Controls)",
            format_args!("{}:", s(&bundle))
        )
    );
    assert!(!report.exists(), "a failed run leaves no report");
}

/// (system, is_control) of the MCQA task of the first evaluator.
fn systems(report: &Value) -> Vec<(&str, bool)> {
    let task = &report["evaluators"][0]["report"]["tasks"][0];
    assert_eq!(task["task"], "mcqa");
    task["systems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["system"].as_str().unwrap(), s["is_control"].as_bool().unwrap()))
        .collect()
}

/// CSV predictions as (instance, system) -> (predicted, label -> probability).
type Probs = BTreeMap<(String, String), (String, BTreeMap<String, f64>)>;

fn read_predictions(path: &Path) -> Probs {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut out = Probs::new();
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let mut probs = BTreeMap::new();
        for (h, c) in header.iter().zip(&cells) {
            if let Some(label) = h.strip_prefix("prob:") {
                if !c.is_empty() {
                    probs.insert(label.to_string(), c.parse::<f64>().unwrap());
                }
            }
        }
        out.insert((cells[0].into(), cells[1].into()), (cells[2].into(), probs));
    }
    out
}

#[test]
fn the_default_model_ranks_file_and_generated_controls_and_leaves_empty_options_out() {
    let bundle = tmp("ranked.jsonl");
    import(&bundle, "_file", &["--quiet"]);
    let report = tmp("ranked.json");
    let saved = tmp("ranked.csv");
    ok(&[
        "evaluate",
        "--bundle",
        s(&bundle),
        "--model",
        MODEL,
        "--controls",
        "--json",
        s(&report),
        "--save-predictions",
        s(&saved),
        "--quiet",
    ]);
    let r = json(&report);
    // File controls and generated controls side by side, all of them control cases.
    assert_eq!(
        systems(&r).into_iter().collect::<BTreeMap<_, _>>(),
        BTreeMap::from([
            ("gpt-4o", false),
            ("llama-3-70b", false),
            ("label_only_file", true),
            ("noise_file", true),
            ("ir_passages_file", true),
            ("no_argument", true),
            ("label_only", true),
            ("noise", true),
        ])
    );
    let robustness = &r["evaluators"][0]["report"]["tasks"][0]["robustness"];
    assert!(robustness["robust"].is_boolean(), "a verdict, not undefined: {robustness}");
    // The noise control takes its arguments from the first primary system, never from a
    // control file.
    assert_eq!(r["controls_added"]["noise_source"], "gpt-4o");

    // Option 5 of instances 1, 3 and 5 is empty: left out, counted, listed.
    let empty = &r["empty_options"];
    assert_eq!(empty["treatment"], "leave_out");
    assert_eq!(empty["left_out"], 3);
    assert_eq!(
        empty["options"],
        serde_json::json!([{"instance": "1", "option": "5"}, {"instance": "3", "option": "5"}, {"instance": "5", "option": "5"}])
    );
    assert!(r["warnings"].as_array().unwrap().iter().any(|w| w["message"].as_str().unwrap().starts_with(
        "3 empty options (3 instances) were left out of the evaluator's candidates (probability 0, never predicted; --keep-empty-options keeps them): 1 option 5, 3 option 5, 5 option 5"
    )), "{}", r["warnings"]);
    let predictions = read_predictions(&saved);
    assert_eq!(predictions.len(), 6 * 8);
    for ((instance, system), (predicted, probs)) in &predictions {
        if ["1", "3", "5"].contains(&instance.as_str()) {
            assert_eq!(probs["5"], 0.0, "{instance} {system}");
            assert_ne!(predicted, "5");
        } else {
            assert!(probs["5"] > 0.0);
        }
    }

    // The softmax over the remaining candidates is the softmax of a bundle without the
    // empty option: the same cosines, the same option batches, so the same numbers.
    let (mut without, _) = parse_bundle("b", &std::fs::read_to_string(&bundle).unwrap()).unwrap();
    remove_empty_options(&mut without);
    let without_path = tmp("without.jsonl");
    std::fs::write(&without_path, write_bundle_jsonl(&without)).unwrap();
    let saved_without = tmp("without.csv");
    let report_without = tmp("without.json");
    ok(&[
        "evaluate",
        "--bundle",
        s(&without_path),
        "--model",
        MODEL,
        "--controls",
        "--json",
        s(&report_without),
        "--save-predictions",
        s(&saved_without),
        "--quiet",
    ]);
    assert_eq!(json(&report_without)["empty_options"]["left_out"], 0);
    for (key, (predicted, mut probs)) in read_predictions(&saved_without) {
        let (p, with) = &predictions[&key];
        if ["1", "3", "5"].contains(&key.0.as_str()) {
            probs.insert("5".into(), 0.0);
        }
        assert_eq!((p, with), (&predicted, &probs), "{key:?}");
    }

    // --keep-empty-options restores the empty option as a candidate: it gets a probability,
    // and the others keep their ratios (softmax: p_k = p_k(left out) * (1 - p_5)). The
    // option batches differ, so the CPU's sums may differ in their last bits: 1e-6.
    let saved_kept = tmp("kept.csv");
    let report_kept = tmp("kept.json");
    ok(&[
        "evaluate",
        "--bundle",
        s(&bundle),
        "--model",
        MODEL,
        "--controls",
        "--keep-empty-options",
        "--json",
        s(&report_kept),
        "--save-predictions",
        s(&saved_kept),
        "--quiet",
    ]);
    let kept = json(&report_kept);
    assert_eq!(kept["empty_options"], serde_json::json!({"treatment": "keep", "left_out": 0, "options": []}));
    for (key, (_, probs)) in read_predictions(&saved_kept) {
        let (_, left) = &predictions[&key];
        if ["1", "3", "5"].contains(&key.0.as_str()) {
            assert!(probs["5"] > 0.0);
            for k in ["1", "2", "3", "4"] {
                assert!(
                    (probs[k] - left[k] * (1.0 - probs["5"])).abs() < 1e-6,
                    "{key:?} option {k}: {} vs {}",
                    probs[k],
                    left[k]
                );
            }
        } else {
            for k in ["1", "2", "3", "4", "5"] {
                assert!((probs[k] - left[k]).abs() < 1e-6, "{key:?} option {k}");
            }
        }
    }
}

fn remove_empty_options(bundle: &mut Bundle) {
    for inst in &mut bundle.instances {
        if let Problem::Mcqa { options, .. } = &mut inst.problem {
            options.retain(|(_, t)| !medrank::data::is_empty_option(t));
        }
    }
}

/// A 2-layer random multiple-choice model with the real MiniLM tokenizer (a real forward
/// pass; the weights do not matter for the convention).
#[test]
fn the_trained_head_leaves_empty_options_out_of_its_softmax() {
    let config = EncoderConfig {
        arch: Arch::Bert,
        vocab_size: 30522,
        hidden_size: 16,
        num_layers: 2,
        num_heads: 4,
        intermediate_size: 32,
        max_position_embeddings: 512,
        type_vocab_size: 2,
        layer_norm_eps: 1e-12,
        activation: medrank::model::Activation::Gelu,
        pad_token_id: 0,
        position_offset: 0,
        head: HeadKind::MultipleChoice,
        labels: Vec::new(),
        max_seq_length: None,
        score_scale: None,
        score_input: Default::default(),
        head_pooling: medrank::model::config::HeadPooling::Cls,
        dropout: Default::default(),
        options: medrank::model::config::ArchOptions::None,
    };
    let model = random_model(config, 5).unwrap();
    let bytes = std::fs::read(root().join(MODEL).join("tokenizer.json")).unwrap();
    let tok = TextTokenizer::from_bytes("tokenizer.json", &bytes, model.config.max_tokens(), 0).unwrap();
    let enc = CpuEncoder::new(model.clone());
    let (bundle, _) =
        parse_bundle("b", &std::fs::read_to_string(root().join("examples/bundle.jsonl")).unwrap()).unwrap();
    let mut with_empty = bundle.clone();
    with_empty.instances.retain(|i| matches!(i.problem, Problem::Mcqa { .. }));
    with_empty.instances.truncate(3);
    for inst in with_empty.instances.iter_mut().take(2) {
        let Problem::Mcqa { options, .. } = &mut inst.problem else { unreachable!() };
        options[4].1 = "  ".into(); // option 5, never the gold one in these instances
    }
    let mut without = with_empty.clone();
    remove_empty_options(&mut without);

    let left = run_ready(evaluate_with_head(&enc, &[], &tok, &with_empty, 8, EmptyOptions::LeaveOut)).unwrap();
    let reference = run_ready(evaluate_with_head(&enc, &[], &tok, &without, 8, EmptyOptions::LeaveOut)).unwrap();
    let ids: Vec<(&str, &str)> = left.left_out.iter().map(|o| (o.instance.as_str(), o.option.as_str())).collect();
    assert_eq!(ids, [(with_empty.instances[0].id.as_str(), "5"), (with_empty.instances[1].id.as_str(), "5")]);
    assert!(reference.left_out.is_empty());
    for (p, q) in left.predictions.iter().zip(&reference.predictions) {
        assert_eq!(
            (&p.instance, &p.system, &p.predicted, p.p_correct),
            (&q.instance, &q.system, &q.predicted, q.p_correct)
        );
        let mut expected = q.probs.clone();
        if expected.len() == 4 {
            expected.push(("5".into(), 0.0));
        }
        assert_eq!(p.probs, expected, "{} {}", p.instance, p.system);
    }

    // Kept, the blank option is a candidate again with a probability of its own.
    let kept = run_ready(evaluate_with_head(&enc, &[], &tok, &with_empty, 8, EmptyOptions::Keep)).unwrap();
    assert!(kept.left_out.is_empty());
    for (k, l) in kept.predictions.iter().zip(&left.predictions) {
        let p5 = k.probs[4].1;
        assert!(p5 > 0.0);
        let had_empty = ids.iter().any(|(i, _)| *i == k.instance);
        for ((_, pk), (_, pl)) in k.probs.iter().zip(&l.probs).take(if had_empty { 4 } else { 5 }) {
            // Softmax: p_k = p_k(left out) * (1 - p_5) where option 5 was left out.
            let expected = if had_empty { pl * (1.0 - p5) } else { *pl };
            assert!((pk - expected).abs() < 1e-6, "{} {}: {pk} vs {expected}", k.instance, k.system);
        }
    }

    // Every option empty: nothing to choose from, an error naming the instance.
    let mut all_empty = with_empty.clone();
    all_empty.instances.truncate(1);
    if let Problem::Mcqa { options, .. } = &mut all_empty.instances[0].problem {
        options.iter_mut().for_each(|o| o.1.clear());
    }
    let err =
        run_ready(evaluate_with_head(&enc, &[], &tok, &all_empty, 8, EmptyOptions::LeaveOut)).unwrap_err().to_string();
    assert!(err.contains("every option text is empty, so no option is a candidate"), "{err}");
}
