//! `medrank grade` and `medrank train --task criterion` (issue 27): a grader trained by
//! medrank on the example rubric grades it; the graded file it writes scores to the same
//! means under `medrank rubric` and feeds `medrank rubric-agreement`; an NLI head is used
//! zero-shot; pairs over the model's limit lose the conversation's start first, and every
//! cut is reported; bad inputs give errors at file:line:field and leave no file behind.

use crate::common;
use common::cli::{json, medrank, ok, root, s, scratch_with, stderr_of, tiny_bert_folder, tmp};
use medrank::model::HeadKind;
use serde_json::Value;
use std::path::{Path, PathBuf};

const MODEL: &str = "models/all-MiniLM-L6-v2";
const RUBRIC: &str = "examples/rubric/conversations.jsonl";

/// A random BERT with 64 positions and an MNLI-style head (contradiction, neutral,
/// entailment).
fn tiny_nli_model() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        tiny_bert_folder("tiny-nli", HeadKind::SequenceClassification, &["contradiction", "neutral", "entailment"], 64)
    })
    .clone()
}

fn criteria(report: &Value) -> &Vec<Value> {
    report["criteria"].as_array().unwrap()
}

/// The overall system means of a report (grade's or rubric's), by system.
fn overall_means(report: &Value) -> Vec<(String, f64)> {
    report["system_scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let overall = s["scores"].as_array().unwrap().iter().find(|m| m["score"] == "overall").unwrap();
            (s["system"].as_str().unwrap().to_owned(), overall["mean"].as_f64().unwrap())
        })
        .collect()
}

#[test]
fn a_criterion_grader_trained_by_medrank_grades_the_example_rubric() {
    let grader = tmp("criterion-grader");
    let out = ok(&[
        "train",
        "--model",
        MODEL,
        "--train",
        RUBRIC,
        "--dev-split",
        "0.25",
        "--task",
        "criterion",
        "--epochs",
        "2",
        "--out",
        s(&grader),
    ]);
    assert!(out.contains(&format!("use: medrank grade --grader {}", grader.display())), "{out}");
    let config = json(&grader.join("config.json"));
    assert_eq!(config["id2label"], serde_json::json!({"0": "met", "1": "not_met"}));
    // The limit training cut at (all-MiniLM-L6-v2's sentence_bert_config.json), recorded.
    assert_eq!(config["max_seq_length"], 256);
    // 46 criteria judged by one physician each (met_by): 12 dev, 34 train.
    let log = json(&grader.join("train_log.json"));
    assert_eq!(log["task"], "criterion");

    let (report_path, graded) = (tmp("grade.json"), tmp("graded.jsonl"));
    ok(&["grade", "--rubric", RUBRIC, "--grader", s(&grader), "--out", s(&graded), "--json", s(&report_path), "-q"]);
    let report = json(&report_path);
    assert_eq!(report["grader"]["kind"], "criterion");
    assert_eq!(criteria(&report).len(), 46);
    assert!(report["truncated"].as_array().unwrap().is_empty());
    // The graded file: each criterion's met is P(met) >= 0.5, p_met the report's.
    let lines: Vec<Value> =
        std::fs::read_to_string(&graded).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let written: Vec<&Value> = lines.iter().flat_map(|l| l["criteria"].as_array().unwrap()).collect();
    assert_eq!(written.len(), 46);
    for (w, c) in written.iter().zip(criteria(&report)) {
        let p = c["p_met"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&p));
        assert_eq!(w["p_met"].as_f64().unwrap(), p);
        assert_eq!(w["met"].as_bool().unwrap(), p >= 0.5);
        assert_eq!(c["met"].as_bool().unwrap(), p >= 0.5);
        // The physician's judgement stays beside the grader's.
        assert!(w["met_by"]["physician-1"].is_boolean());
    }
    // `medrank rubric` on the graded file gives the same means (the same formula, one source).
    let rubric = tmp("rubric.json");
    ok(&["rubric", "--input", s(&graded), "--json", s(&rubric), "-q"]);
    assert_eq!(overall_means(&json(&rubric)), overall_means(&report));
    // And it feeds the meta-evaluation: 46 items, the grader against the physician.
    let agreement = tmp("agreement.json");
    ok(&["rubric-agreement", "--input", RUBRIC, "--grader-file", s(&graded), "--json", s(&agreement), "-q"]);
    let a = json(&agreement);
    assert_eq!(a["groups"][0]["items"], 46, "{}", a["groups"][0]);

    // Batches do not change P(met): one pair per pass gives the same numbers within 1e-6.
    let one = tmp("grade-batch1.json");
    ok(&["grade", "--rubric", RUBRIC, "--grader", s(&grader), "--batch-size", "1", "--json", s(&one), "-q"]);
    for (a, b) in criteria(&json(&one)).iter().zip(criteria(&report)) {
        assert!((a["p_met"].as_f64().unwrap() - b["p_met"].as_f64().unwrap()).abs() < 1e-6);
    }
}

#[test]
fn an_nli_head_grades_zero_shot_and_cuts_are_reported() {
    let model = tiny_nli_model();
    // 64 positions: the long conversation is cut from its start, the response kept; a
    // response that cannot fit beside the criterion loses its end, and then the whole
    // conversation is left out.
    let long = "I have had a cough for a while and it keeps me awake at night. ".repeat(8);
    let rubric = format!(
        "{}\n{}\n",
        serde_json::json!({"id": "r1", "system": "a", "prompt": [{"role": "user", "content": long}],
            "response": "Please see a doctor.", "criteria": [{"criterion": "Advises seeing a doctor", "points": 5}]}),
        serde_json::json!({"id": "r2", "system": "a", "prompt": "Short question?",
            "response": long, "criteria": [{"criterion": "Advises seeing a doctor", "points": 5}]})
    );
    let dir = scratch_with(&[("long.jsonl", &rubric)]);
    let report_path = tmp("nli.json");
    let out =
        medrank(&["grade", "--rubric", s(&dir.join("long.jsonl")), "--grader", s(&model), "--json", s(&report_path)]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let report = json(&report_path);
    assert_eq!(report["grader"]["kind"], "zero_shot_nli");
    assert_eq!(
        (report["grader"]["entailment"].as_u64(), report["grader"]["contradiction"].as_u64()),
        (Some(2), Some(0))
    );
    let cut = report["truncated"].as_array().unwrap();
    assert_eq!(cut.len(), 2, "{cut:?}");
    assert!(cut[0]["conversation_tokens_cut"].as_u64().unwrap() > 0);
    assert_eq!(cut[0]["response_tokens_cut"], 0);
    assert!(cut[1]["response_tokens_cut"].as_u64().unwrap() > 0);
    // "Short question?" is 3 tokens, all left out with it.
    assert_eq!(cut[1]["conversation_tokens_cut"], 3);
    assert!(stderr_of(&out).contains("2 of 2 (response, criterion) pairs were longer than the model's 64-token limit"));
}

fn fails(args: &[&str]) -> String {
    let out = medrank(args);
    assert!(!out.status.success(), "medrank {args:?} succeeded");
    stderr_of(&out)
}

#[test]
fn bad_graders_and_rubrics_are_refused_at_their_place() {
    let model = tiny_nli_model();
    let out = tmp("never.jsonl");
    let no_text = r#"{"id": "r1", "system": "a", "criteria": [{"criterion": "x", "points": 1}]}"#;
    let no_points = r#"{"id": "r1", "system": "a", "response": "y", "criteria": [{"criterion": "x", "points": 1}, {"criterion": "z"}]}"#;
    let long_criterion = format!(
        r#"{{"id": "r1", "system": "a", "response": "y", "criteria": [{{"criterion": "{}", "points": 1}}]}}"#,
        "very ".repeat(80)
    );
    let dir =
        scratch_with(&[("no_text.jsonl", no_text), ("no_points.jsonl", no_points), ("long.jsonl", &long_criterion)]);
    let grade = |file: &str, grader: &Path| {
        fails(&["grade", "--rubric", s(&dir.join(file)), "--grader", s(grader), "--out", s(&out)])
    };
    let e = grade("no_text.jsonl", &model);
    assert!(e.contains("no_text.jsonl:1: field `response`: missing field `response`"), "{e}");
    let e = grade("no_points.jsonl", &model);
    assert!(e.contains("no_points.jsonl:1: field `criteria[1].points`: missing field `points`"), "{e}");
    let e = grade("long.jsonl", &model);
    assert!(
        e.contains("long.jsonl:1: field `criteria[0].criterion`: longer than the model's 64-token limit on its own"),
        "{e}"
    );
    // A model without a classification head cannot grade.
    let e = fails(&["grade", "--rubric", RUBRIC, "--grader", MODEL, "--out", s(&out)]);
    assert!(e.contains("has no sequence-classification head"), "{e}");
    assert!(!out.exists(), "a failed run leaves no file behind");
    // Task and file must match in training.
    let grader = tmp("never-trained");
    let e = fails(&["train", "--model", MODEL, "--train", RUBRIC, "--dev-split", "0.2", "--out", s(&grader)]);
    assert!(e.contains("a rubric file trains a criterion grader: choose task criterion"), "{e}");
    let e = fails(&[
        "train",
        "--model",
        MODEL,
        "--train",
        "examples/bundle.jsonl",
        "--dev-split",
        "0.2",
        "--task",
        "criterion",
        "--out",
        s(&grader),
    ]);
    assert!(e.contains("task criterion trains on a rubric file"), "{e}");
    let e = fails(&[
        "train",
        "--model",
        MODEL,
        "--train",
        s(&dir.join("no_text.jsonl")),
        "--dev-split",
        "0.2",
        "--task",
        "criterion",
        "--out",
        s(&grader),
    ]);
    assert!(e.contains("no_text.jsonl:1: field `response`"), "{e}");
}

#[test]
fn training_labels_come_from_met_or_the_peoples_majority() {
    // The people's majority labels an example (2 of 3 -> met, 2 of 3 -> not met, 1 of 1);
    // an even split (1 of 2) and a criterion nobody judged are left out, and said.
    let text = [
        r#"{"id": "r1", "system": "a", "response": "Call an ambulance.", "criteria": [{"criterion": "Advises emergency care", "points": 5, "met_by": {"p": true, "q": true, "r": false}}, {"criterion": "Asks about allergies", "points": 2, "met_by": {"p": true, "q": false}}, {"criterion": "Uses plain words", "points": 1}]}"#,
        r#"{"id": "r2", "system": "a", "response": "Rest at home.", "criteria": [{"criterion": "Advises emergency care", "points": 5, "met_by": {"p": false}}, {"criterion": "Asks about allergies", "points": 2, "met_by": {"q": false, "r": false, "s": true}}]}"#,
    ]
    .join("\n");
    let dir = scratch_with(&[("people.jsonl", &text)]);
    let grader = tmp("people-grader");
    let out = medrank(&[
        "train",
        "--model",
        MODEL,
        "--train",
        s(&dir.join("people.jsonl")),
        "--dev-split",
        "0.34",
        "--task",
        "criterion",
        "--epochs",
        "1",
        "--out",
        s(&grader),
    ]);
    let err = stderr_of(&out);
    assert!(out.status.success(), "{err}");
    // 3 examples: r1#0 (met), r2#0 (not met), r2#1 (not met, 2 of 3); 1 dev, 2 train.
    assert!(err.contains("training on 2 examples"), "{err}");
    assert!(err.contains("1 criteria nobody judged (no met, no met_by) are not examples"), "{err}");
    assert!(err.contains("1 criteria whose people split evenly (met_by) are left out: r1@a#criteria[1]"), "{err}");
}

/// Statement checks: every answer's figures follow from its judgements as K-QA defines
/// them (recomputed here from the report's judgement rows), the system means from the
/// answers, and a model that cannot say "contradiction" is refused.
#[test]
fn statement_checks_follow_from_the_judgements() {
    let model = tiny_nli_model();
    let report_path = tmp("statements.json");
    ok(&[
        "statements",
        "--input",
        "examples/statements/answers.jsonl",
        "--nli",
        s(&model),
        "--json",
        s(&report_path),
        "-q",
    ]);
    let report = json(&report_path);
    let judgements = report["judgements"].as_array().unwrap();
    // 3 prompts x 2 systems; statements 4, 3, 2 per prompt: (4 + 3 + 2) x 2 = 18 pairs.
    assert_eq!(judgements.len(), 18);
    let answers = report["answers"].as_array().unwrap();
    assert_eq!(answers.len(), 6);
    for a in answers {
        let own: Vec<&Value> = judgements.iter().filter(|j| j["id"] == a["id"] && j["system"] == a["system"]).collect();
        let must: Vec<&&Value> = own.iter().filter(|j| j["must_have"] == true).collect();
        let entailed = must.iter().filter(|j| j["entailed"] == true).count();
        let contradicted = own.iter().filter(|j| j["contradicted"] == true).count();
        assert_eq!(a["must_have"].as_u64().unwrap() as usize, must.len());
        assert_eq!(a["entailed_must_have"].as_u64().unwrap() as usize, entailed);
        assert_eq!(a["contradicted"].as_u64().unwrap() as usize, contradicted);
        assert_eq!(a["comprehensiveness"].as_f64().unwrap(), entailed as f64 / must.len() as f64);
        assert_eq!(a["hallucination"].as_f64().unwrap(), contradicted as f64 / own.len() as f64);
        for j in own {
            // A judgement is at most one of the two, and the probabilities are a softmax's.
            assert!(!(j["entailed"] == true && j["contradicted"] == true));
            let (pe, pc) = (j["p_entailment"].as_f64().unwrap(), j["p_contradiction"].as_f64().unwrap());
            assert!(pe > 0.0 && pc > 0.0 && pe + pc < 1.0, "{j}");
        }
    }
    for s in report["systems"].as_array().unwrap() {
        let own: Vec<&Value> = answers.iter().filter(|a| a["system"] == s["system"]).collect();
        let mean = |field: &str| own.iter().map(|a| a[field].as_f64().unwrap()).sum::<f64>() / own.len() as f64;
        let figure =
            |name: &str| s["figures"].as_array().unwrap().iter().find(|f| f["figure"] == name).unwrap().clone();
        assert!((figure("comprehensiveness")["mean"].as_f64().unwrap() - mean("comprehensiveness")).abs() < 1e-12);
        assert!((figure("hallucination")["mean"].as_f64().unwrap() - mean("hallucination")).abs() < 1e-12);
        assert!((figure("contradicted")["mean"].as_f64().unwrap() - mean("contradicted")).abs() < 1e-12);
    }
    // A head without a contradiction label cannot check for contradictions.
    static TWO: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let two = TWO.get_or_init(|| {
        tiny_bert_folder("tiny-rte", HeadKind::SequenceClassification, &["entailment", "not_entailment"], 64)
    });
    let e = fails(&["statements", "--input", "examples/statements/answers.jsonl", "--nli", s(two)]);
    assert!(e.contains("do not name both `entailment` and `contradiction`"), "{e}");
}

/// Issue 39, defect 9: a grader is run with the input limit it was trained with. The base
/// (64 positions) says 32 tokens in its sentence_bert_config.json, as all-MiniLM-L6-v2 says
/// 256 of 512: training cut there, the trained folder had no such file, and `grade` with it
/// cut at 64; the truncation warnings of `grade` and `statements` named 64 for inputs cut
/// to 32. Also defect 8: labels of one class are warned of for the criterion task too.
#[test]
fn a_trained_grader_runs_with_the_limit_it_was_trained_with_and_warnings_state_it() {
    let base = tiny_bert_folder("tiny-capped", HeadKind::None, &[], 64);
    std::fs::write(base.join("sentence_bert_config.json"), r#"{"max_seq_length": 32, "do_lower_case": false}"#)
        .unwrap();
    let grader = tmp("capped-grader");
    let out = medrank(&[
        "train",
        "--model",
        s(&base),
        "--train",
        RUBRIC,
        "--dev-split",
        "0.25",
        "--task",
        "criterion",
        "--epochs",
        "1",
        "--out",
        s(&grader),
    ]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert_eq!(json(&grader.join("config.json"))["max_seq_length"], 32);
    let report_path = tmp("capped-grade.json");
    let out = medrank(&["grade", "--rubric", RUBRIC, "--grader", s(&grader), "--json", s(&report_path)]);
    let err = stderr_of(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("(response, criterion) pairs were longer than the model's 32-token limit"), "{err}");
    // What was cut is what a 32-token limit cuts: every input is at most 32 tokens long,
    // so every pair of the example (conversations of 40 tokens and more) lost tokens.
    let report = json(&report_path);
    assert_eq!(report["truncated"].as_array().unwrap().len(), 46);

    // statements on an NLI model with the same cap states 32 too.
    let nli = tiny_bert_folder(
        "tiny-capped-nli",
        HeadKind::SequenceClassification,
        &["contradiction", "neutral", "entailment"],
        64,
    );
    std::fs::write(nli.join("sentence_bert_config.json"), r#"{"max_seq_length": 32}"#).unwrap();
    let out = medrank(&["statements", "--input", "examples/statements/answers.jsonl", "--nli", s(&nli)]);
    let err = stderr_of(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("(answer, statement) pairs were longer than the model's 32-token limit"), "{err}");

    // Every criterion met: nothing tells the classes apart, and dev macro-F1 1.0 says nothing.
    let all_met = std::fs::read_to_string(root().join(RUBRIC))
        .unwrap()
        .replace("\"physician-1\": false", "\"physician-1\": true");
    let dir = scratch_with(&[("all-met.jsonl", &all_met)]);
    let out = medrank(&[
        "train",
        "--model",
        s(&base),
        "--train",
        s(&dir.join("all-met.jsonl")),
        "--dev-split",
        "0.25",
        "--task",
        "criterion",
        "--epochs",
        "1",
        "--out",
        s(&tmp("one-class-grader")),
    ]);
    let err = stderr_of(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("training examples have the label `met`: the model learns nothing that tells the classes apart"),
        "{err}"
    );
    assert!(err.contains("dev examples have the label `met`: the dev figures measure that one class only"), "{err}");
}
