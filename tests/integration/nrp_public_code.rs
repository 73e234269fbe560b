//! NRP with judged documents the ranker did not score: ranked below (the default) or
//! dropped (the NRP paper's public code, `--as-public-code`), on full qrels and a run that
//! scores only some of the judged documents. Every number is worked out by hand below.
use crate::common;
use common::cli::{nrp_in, nrp_report, scratch_with};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Relevance qrels: q1 judges d1..d5, but the run scores only d1, d2, d3 (d4, d5 have no
/// text, say); q2 judges d6, d7, both scored. The one answer per query scores 1.5 and 0.5.
const TOPICS: &str = "{\"qid\": \"q1\", \"query\": \"first\"}\n{\"qid\": \"q2\", \"query\": \"second\"}\n";
const QRELS: &str = "q1 0 d1 2\nq1 0 d2 1\nq1 0 d3 0\nq1 0 d4 1\nq1 0 d5 0\nq2 0 d6 1\nq2 0 d7 0\n";
const RUN: &str =
    "q1 Q0 d1 1 3.0 run\nq1 Q0 d2 2 2.0 run\nq1 Q0 d3 3 1.0 run\nq2 Q0 d6 1 2.0 run\nq2 Q0 d7 2 1.0 run\n";
const ANSWERS: &str = "{\"qid\": \"q1\", \"system\": \"gpt\", \"prompt\": \"p\", \"sample\": 0, \"text\": \"a\"}\n\
                       {\"qid\": \"q2\", \"system\": \"gpt\", \"prompt\": \"p\", \"sample\": 0, \"text\": \"b\"}\n";
const SCORES: &str = "qid,system,prompt,sample,score\nq1,gpt,p,0,1.5\nq2,gpt,p,0,0.5\n";

fn fixture() -> PathBuf {
    scratch_with(&[
        ("topics.jsonl", TOPICS),
        ("qrels.txt", QRELS),
        ("run.txt", RUN),
        ("answers.jsonl", ANSWERS),
        ("scores.csv", SCORES),
    ])
}

/// The one ranker of the fixture.
const RANKER: [&str; 2] = ["--ranker", "run=run.txt,scores.csv"];

fn medrank(dir: &Path, extra: &[&str], report: &str) -> Output {
    nrp_in(dir, &[&RANKER[..], extra].concat(), report)
}

fn run(dir: &Path, extra: &[&str], report: &str) -> Value {
    nrp_report(dir, &[&RANKER[..], extra].concat(), report)
}

fn nrps(r: &Value) -> Vec<f64> {
    r["answers"].as_array().unwrap().iter().map(|a| a["combined"].as_f64().unwrap()).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

fn convention<'a>(r: &'a Value, key: &str) -> &'a str {
    let list = r["provenance"]["conventions"].as_array().unwrap();
    list.iter()
        .find(|c| c[0] == key)
        .and_then(|c| c[1].as_str())
        .unwrap_or_else(|| panic!("no convention {key}: {list:?}"))
}

/// Both answers have 2 scored documents above them (q1: 3.0, 2.0 > 1.5; q2: 2.0, 1.0 > 0.5).
/// - ranked below, |D_q|: q1 1 - 2/5 = 0.6, q2 1 - 2/2 = 0 (the default);
/// - ranked below, |D_q|+1: q1 1 - 2/6 = 2/3, q2 1 - 2/3 = 1/3 (the denominator alone);
/// - dropped, |D_q|+1 (`--as-public-code`): q1 1 - 2/4 = 0.5, q2 1 - 2/3 = 1/3.
///
/// nDCG@10 of the run (linear gain): q2 is perfect (1). q1 ranks d1, d2, d3 (gains 2, 1, 0):
/// DCG = 2 + 1/log2 3; ranked below, the ideal has all five grades 2, 1, 1, 0, 0:
/// IDCG = 2 + 1/log2 3 + 1/log2 4, nDCG = 0.8403030283801005, mean 0.9201515141900503;
/// dropped, the ideal is d1, d2, d3 only: nDCG 1, mean 1.
#[test]
fn unscored_judged_documents_ranked_below_or_dropped_as_the_public_code() {
    let dir = fixture();
    let below = run(&dir, &[], "below.json");
    assert_eq!(nrps(&below), [0.6, 0.0]);
    assert_eq!(below["unscored"], "rank_below");
    let dim = &below["dimensions"][0];
    assert_eq!((dim["unscored_documents"].as_u64(), dim["unscored_queries"].as_u64()), (Some(2), Some(1)));
    assert!(close(dim["validation"][0]["mean_ndcg_at_10"].as_f64().unwrap(), 0.9201515141900503));
    assert!(convention(&below, "unscored").contains("ranks below"));

    let plus_one = run(&dir, &["--denominator", "docs+1"], "plus_one.json");
    let v = nrps(&plus_one);
    assert!(close(v[0], 2.0 / 3.0) && close(v[1], 1.0 / 3.0), "{v:?}");

    let public = run(&dir, &["--as-public-code"], "public.json");
    let v = nrps(&public);
    assert!(close(v[0], 0.5) && close(v[1], 1.0 / 3.0), "{v:?}");
    assert_eq!(public["unscored"], "drop");
    assert_eq!(public["denominator"], "judged_documents_plus_answer");
    let dim = &public["dimensions"][0];
    assert_eq!((dim["unscored_documents"].as_u64(), dim["unscored_queries"].as_u64()), (Some(2), Some(1)));
    assert_eq!(dim["validation"][0]["mean_ndcg_at_10"].as_f64(), Some(1.0));
    let group = public["groups"][0]["mean"].as_f64().unwrap();
    assert!(close(group, (0.5 + 1.0 / 3.0) / 2.0), "{group}");
    assert!(convention(&public, "settings").contains("public code"));
    assert!(convention(&public, "not_judgeable").starts_with("none: every grade is a gain"));
    let warnings = public["warnings"].as_array().unwrap();
    assert!(
        warnings.iter().any(|w| w.to_string().contains("2 judged documents of 1 queries; they are left out of D_q")),
        "{warnings:?}"
    );

    // --unscored drop alone keeps the paper's |D_q|: q1 1 - 2/3, q2 1 - 2/2.
    let dropped = run(&dir, &["--unscored", "drop"], "dropped.json");
    let v = nrps(&dropped);
    assert!(close(v[0], 1.0 / 3.0) && v[1] == 0.0, "{v:?}");
}

#[test]
fn the_public_code_choice_is_one_choice() {
    let dir = fixture();
    // It sets the denominator and the treatment itself: giving them too is a usage error.
    for extra in [
        &["--as-public-code", "--denominator", "docs"][..],
        &["--as-public-code", "--unscored", "below"],
        &["--as-public-code", "--not-judgeable", "relevance=0"],
    ] {
        let out = medrank(&dir, extra, "never.json");
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("cannot be used with"), "{extra:?}");
        assert!(!dir.join("never.json").exists());
    }
    // The job refuses "not able to judge" grades with the public code's settings (the page
    // sends both), naming the conflict.
    let req = medrank::jobs::NrpRequest {
        topics: medrank::jobs::NamedText::new("topics.jsonl", TOPICS),
        qrels: vec![medrank::jobs::QrelsFile {
            dimension: Some("relevance".into()),
            file: medrank::jobs::NamedText::new("qrels.txt", QRELS),
        }],
        documents: None,
        answers: vec![medrank::jobs::AnswerFile {
            file: medrank::jobs::NamedText::new("answers.jsonl", ANSWERS),
            system: None,
            prompt: None,
        }],
        rankers: vec![medrank::jobs::PrecomputedRanker {
            name: "run".into(),
            run: medrank::jobs::NamedText::new("run.txt", RUN),
            answer_scores: medrank::jobs::NamedText::new("scores.csv", SCORES),
        }],
        expert_rankings: None,
        options: medrank::jobs::NrpRequestOptions {
            bm25: false,
            as_public_code: true,
            not_judgeable: vec![("credibility".into(), vec![3])],
            ..Default::default()
        },
    };
    let err = medrank::jobs::nrp(&req).unwrap_err().to_string();
    assert!(err.contains("count every grade as a gain"), "{err}");
    // With a grade convention given, the provenance states it.
    let req = medrank::jobs::NrpRequest {
        options: medrank::jobs::NrpRequestOptions {
            bm25: false,
            not_judgeable: vec![("relevance".into(), vec![1])],
            ..Default::default()
        },
        ..req
    };
    let report = medrank::jobs::nrp(&req).unwrap().report;
    let conv = &report.provenance.conventions.iter().find(|(k, _)| k == "not_judgeable").unwrap().1;
    assert_eq!(conv, "relevance 1: missing data, out of D_q and of nDCG@10");
}
