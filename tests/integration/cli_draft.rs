//! `medrank rubric-draft` (issue 44): rubrics drafted extractively from evidence. On the
//! vendored K-QA questions (physicians' key statements) and MedQuAD pages (the evidence),
//! the report gives recall and precision with the NLI model named, and its figures are the
//! arithmetic of its own judgements (recomputed here); every criterion is the evidence's
//! own words at the span it names; the drafted file feeds `medrank grade`. A dense ranker
//! orders passages and drops near-duplicates by cosine. Bad input is refused at file, line
//! and field, options out of range at parse time, and a failed run leaves nothing behind.
//! (The hand-worked figures, with an entailment rule injected: `jobs::draft`'s tests.)

use crate::common;
use common::cli::{json, medrank, ok, s, scratch_with, stderr_of, tmp};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const PROMPTS: &str = "data/kqa-mini/prompts.jsonl";
const EVIDENCE: &str = "data/medquad-mini/evidence.jsonl";
const MODEL: &str = "models/all-MiniLM-L6-v2";

/// An NLI head (entailment, contradiction) trained here on e-SNLI-mini's 300 pairs over the
/// frozen all-MiniLM-L6-v2 (dev accuracy about 0.7): a weak NLI model whose judgements are
/// mixed, so that the arithmetic below meets entailed and not entailed pairs. Its figures
/// say little about drafting; what is checked is that they are the arithmetic of its
/// judgements. (A random head judged every pair alike.)
fn trained_nli() -> PathBuf {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tmp("draft-nli");
        ok(&[
            "train",
            "--model",
            MODEL,
            "--train",
            "data/esnli-mini/train.jsonl",
            "--dev",
            "data/esnli-mini/dev.jsonl",
            "--task",
            "nli",
            "--arguments",
            "none",
            "--freeze",
            "head",
            "--epochs",
            "3",
            "--out",
            s(&dir),
        ]);
        dir
    })
    .clone()
}

fn csv_rows(path: &Path) -> Vec<HashMap<String, String>> {
    let mut reader = csv::Reader::from_path(path).unwrap();
    let headers = reader.headers().unwrap().clone();
    reader
        .records()
        .map(|r| headers.iter().map(String::from).zip(r.unwrap().iter().map(String::from)).collect())
        .collect()
}

fn jsonl(path: &str) -> Vec<Value> {
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn number(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("a number: {v}"))
}

/// The report's figure `v` is `want`: serde_json reads a float back within an ulp (its
/// parser without the `float_roundtrip` feature), so equal to 1e-15.
fn same(v: &Value, want: f64) {
    assert!((number(v) - want).abs() < 1e-15, "{v} against {want}");
}

/// Whether the words of `criterion` occur in `source`, in order (a lead-in's statement
/// skips the list items between its lead-in and its item).
fn words_in_order(criterion: &str, source: &str) -> bool {
    let mut source = source.split_whitespace();
    criterion.split_whitespace().all(|w| source.any(|s| s == w))
}

#[test]
fn the_kqa_medquad_draft_reports_recall_and_precision_with_the_nli_model_named() {
    let nli = trained_nli();
    let (report_path, csv_dir, draft) = (tmp("draft.json"), tmp("draft-csv"), tmp("draft.jsonl"));
    ok(&[
        "rubric-draft",
        "--prompts",
        PROMPTS,
        "--evidence",
        EVIDENCE,
        "--nli",
        s(&nli),
        "--out",
        s(&draft),
        "--json",
        s(&report_path),
        "--csv",
        s(&csv_dir),
        "-q",
    ]);
    let report = json(&report_path);
    assert!(report["drafting"].as_str().unwrap().starts_with("extractive:"), "{}", report["drafting"]);
    assert_eq!(report["nli_model"], s(&nli));
    let coverage = &report["coverage"];
    assert_eq!(coverage["nli_model"], s(&nli));

    // The figures, recomputed from the report's own judgements and the experts' statements
    // as the vendored file has them.
    let prompts = jsonl(PROMPTS);
    let judgements = csv_rows(&csv_dir.join("draft_coverage_judgements.csv"));
    let criteria_rows = csv_rows(&csv_dir.join("draft_criteria.csv"));
    let (mut pooled_statements, mut pooled_entailed, mut pooled_criteria, mut pooled_entailing) = (0, 0, 0, 0);
    let mut recalls = Vec::new();
    for (p, figures) in prompts.iter().zip(coverage["prompts"].as_array().unwrap()) {
        let id = p["id"].as_str().unwrap();
        assert_eq!(figures["prompt"], id);
        let statements: Vec<&str> = p["must_have"]
            .as_array()
            .unwrap()
            .iter()
            .chain(p["nice_to_have"].as_array().unwrap())
            .map(|s| s.as_str().unwrap())
            .collect();
        let criteria = criteria_rows.iter().filter(|r| r["prompt"] == id).count();
        let of_prompt: Vec<_> = judgements.iter().filter(|j| j["prompt"] == id).collect();
        assert_eq!(of_prompt.len(), criteria * statements.len(), "{id}: every (criterion, statement) judged");
        let entailed_statements = statements
            .iter()
            .filter(|s| of_prompt.iter().any(|j| j["statement"] == **s && j["entailed"] == "yes"))
            .count();
        let entailing_criteria = (1..=criteria)
            .filter(|c| of_prompt.iter().any(|j| j["criterion"] == c.to_string() && j["entailed"] == "yes"))
            .count();
        assert_eq!(figures["statements"], statements.len());
        assert_eq!(figures["criteria"], criteria);
        assert_eq!(figures["statements_entailed"], entailed_statements);
        assert_eq!(figures["criteria_entailing"], entailing_criteria);
        same(&figures["recall"], entailed_statements as f64 / statements.len() as f64);
        same(&figures["precision"], entailing_criteria as f64 / criteria as f64);
        let must: Vec<&str> = p["must_have"].as_array().unwrap().iter().map(|s| s.as_str().unwrap()).collect();
        let must_entailed =
            must.iter().filter(|s| of_prompt.iter().any(|j| j["statement"] == **s && j["entailed"] == "yes")).count();
        same(&figures["must_have_recall"], must_entailed as f64 / must.len() as f64);
        recalls.push(entailed_statements as f64 / statements.len() as f64);
        pooled_statements += statements.len();
        pooled_entailed += entailed_statements;
        pooled_criteria += criteria;
        pooled_entailing += entailing_criteria;
    }
    // 12 questions with 89 statements (49 must-have), every question drafted; the
    // judgements are mixed, so both branches of the arithmetic ran.
    assert_eq!((prompts.len(), pooled_statements), (12, 89));
    let entailed = judgements.iter().filter(|j| j["entailed"] == "yes").count();
    assert!(entailed > 0 && entailed < judgements.len(), "{entailed} of {}", judgements.len());
    let pooled = &coverage["pooled"];
    same(&pooled["recall"], pooled_entailed as f64 / 89.0);
    same(&pooled["precision"], pooled_entailing as f64 / pooled_criteria as f64);
    assert_eq!(pooled["must_have"], 49);
    same(&coverage["mean_recall"], recalls.iter().sum::<f64>() / 12.0);

    // Every criterion is the evidence's own words at the character span it names.
    let documents: HashMap<String, String> = jsonl(EVIDENCE)
        .into_iter()
        .map(|d| (d["docno"].as_str().unwrap().to_owned(), d["text"].as_str().unwrap().to_owned()))
        .collect();
    let lines = jsonl(s(&draft));
    assert_eq!(lines.len(), 12, "one line per question: the physician's answer as the response");
    for line in &lines {
        assert_eq!(line["system"], "k-qa-physician");
        for c in line["criteria"].as_array().unwrap() {
            let source = &c["source"];
            let text = &documents[source["document"].as_str().unwrap()];
            let (start, end) = (source["start"].as_u64().unwrap() as usize, source["end"].as_u64().unwrap() as usize);
            let span: String = text.chars().skip(start).take(end - start).collect();
            let criterion = c["criterion"].as_str().unwrap();
            assert!(words_in_order(criterion, &span), "{criterion:?} is not in {span:?}");
            assert!(span.split_whitespace().next() == criterion.split_whitespace().next());
            assert!(source["contradicted"].is_boolean(), "with --nli every criterion is checked");
            assert_eq!((c["points"].as_f64(), &c["tags"]), (Some(5.0), &serde_json::json!(["axis:completeness"])));
        }
    }

    // The drafted file feeds grade as it is, and grade keeps each criterion's source.
    let graded = tmp("draft-graded.jsonl");
    let out = medrank(&["grade", "--rubric", s(&draft), "--grader", s(&nli), "--out", s(&graded), "-q"]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(stderr_of(&out).is_empty(), "no warning (the source is a field of the format): {}", stderr_of(&out));
    let graded_lines = jsonl(s(&graded));
    for (g, d) in graded_lines.iter().zip(&lines) {
        for (gc, dc) in g["criteria"].as_array().unwrap().iter().zip(d["criteria"].as_array().unwrap()) {
            assert_eq!(gc["source"], dc["source"]);
            assert!(gc["p_met"].is_number());
        }
    }
}

#[test]
fn a_dense_ranker_orders_the_passages_and_tells_near_duplicates_by_cosine() {
    // Three questions keep the real model's run short: gout, whose NIHSeniorHealth page
    // repeats paragraphs word for word, scabies and shingles.
    let prompts: Vec<String> = std::fs::read_to_string(PROMPTS)
        .unwrap()
        .lines()
        .filter(|l| l.contains("\"kqa-80\"") || l.contains("\"kqa-2\"") || l.contains("\"kqa-79\""))
        .map(str::to_owned)
        .collect();
    let dir = scratch_with(&[("three.jsonl", &(prompts.join("\n") + "\n"))]);
    let (report_path, draft) = (tmp("dense.json"), tmp("dense.jsonl"));
    let evidence = Path::new(env!("CARGO_MANIFEST_DIR")).join(EVIDENCE);
    ok(&[
        "rubric-draft",
        "--prompts",
        s(&dir.join("three.jsonl")),
        "--evidence",
        s(&evidence),
        "--dense-ranker",
        MODEL,
        "--out",
        s(&draft),
        "--json",
        s(&report_path),
        "-q",
    ]);
    let report = json(&report_path);
    assert_eq!(report["rankers"], serde_json::json!([format!("{MODEL}: dense bi-encoder (cosine)")]));
    assert!(report["duplicates_rule"].as_str().unwrap().contains("cosine of pooled embeddings at or above 0.9"));
    assert!(report["coverage"].is_null(), "no NLI model: no recall and precision");
    let duplicates = report["duplicates"].as_array().unwrap();
    assert!(!duplicates.is_empty());
    for d in duplicates {
        let cosine: f64 = d["rule"].as_str().unwrap().strip_prefix("cosine ").unwrap().parse().unwrap();
        assert!(cosine >= 0.9, "{d}");
    }
    // The gout page's paragraph repeated word for word is dropped, cosine 1.
    assert!(duplicates.iter().any(|d| d["prompt"] == "kqa-80" && d["rule"] == "cosine 1.0000"), "{duplicates:?}");
    for p in report["prompts"].as_array().unwrap() {
        let passages = p["passages"].as_array().unwrap();
        assert_eq!(passages.len(), 5);
        // Fused scores best first; BM25 alone would order them otherwise somewhere.
        let scores: Vec<f64> = passages.iter().map(|x| number(&x["score"])).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
        assert_eq!(p["criteria"].as_array().unwrap().len(), 8);
    }
}

#[test]
fn markdown_and_text_evidence_draft_without_a_model() {
    let guide = "# Scabies\n\nScabies spreads by skin-to-skin contact.\n\n## Treatment\n\nThe first treatment is \
                 permethrin 5% cream, e.g. applied at night.\nThe cream is washed off after 8 to 14 hours.\n\n```\ncode\n```\n";
    let notes = "Ivermectin 200 mcg/kg is taken by mouth, then again after 7 days.\n\nBedding is washed hot.\n";
    let prompts = r#"{"id": "s", "prompt": "How is scabies treated with cream?"}"#;
    let dir = scratch_with(&[("guide.md", guide), ("notes.txt", notes), ("p.jsonl", prompts)]);
    let (draft, report_path) = (dir.join("draft.jsonl"), dir.join("r.json"));
    let out = medrank(&[
        "rubric-draft",
        "--prompts",
        s(&dir.join("p.jsonl")),
        "--evidence",
        s(&dir.join("guide.md")),
        "--evidence",
        s(&dir.join("notes.txt")),
        "--criteria",
        "3",
        "--points",
        "2",
        "--tag",
        "axis:accuracy",
        "--tag",
        "drafted",
        "--out",
        s(&draft),
        "--json",
        s(&report_path),
        "-q",
    ]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    let report = json(&report_path);
    assert_eq!(report["duplicates_rule"], "no model: a statement whose words are all among a kept one's");
    assert!(report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w["message"] == "1 fenced code block(s) left out of the evidence (code is not evidence)"));
    let lines = jsonl(s(&draft));
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["system"], "draft");
    assert!(lines[0].get("response").is_none());
    let criteria = lines[0]["criteria"].as_array().unwrap();
    assert_eq!(criteria.len(), 3);
    let texts: Vec<&str> = criteria.iter().map(|c| c["criterion"].as_str().unwrap()).collect();
    assert!(texts.contains(&"The first treatment is permethrin 5% cream, e.g. applied at night."), "{texts:?}");
    for c in criteria {
        assert_eq!(c["points"], 2);
        assert_eq!(c["tags"], serde_json::json!(["axis:accuracy", "drafted"]));
        assert!(c["source"].get("contradicted").is_none(), "no NLI model: not checked");
    }
    // The permethrin sentence's span in guide.md, in characters.
    let permethrin = criteria.iter().find(|c| c["criterion"].as_str().unwrap().starts_with("The first")).unwrap();
    let start = guide.find("The first").unwrap();
    let end = guide.find("at night.").unwrap() + "at night.".len();
    assert_eq!(
        permethrin["source"],
        serde_json::json!({"document": s(&dir.join("guide.md")), "start": start, "end": end})
    );
}

#[test]
fn bad_input_is_refused_at_its_place_and_leaves_nothing_behind() {
    let dir = scratch_with(&[
        ("bad.jsonl", "{\"id\": \"a\", \"prompt\": \"Is it contagious?\"}\n{\"id\": \"b\", \"prompt\": \"q\", \"responses\": {\"m\": 1}}\n"),
        ("good.jsonl", "{\"id\": \"a\", \"prompt\": \"Is scabies contagious?\"}\n"),
        ("nothing.jsonl", "{\"id\": \"a\", \"prompt\": \"zzz qqq\"}\n"),
        ("guide.pdf", "Scabies is contagious."),
        ("a.tsv", "d1\tScabies is contagious between people.\n"),
        ("b.jsonl", "{\"docno\": \"d1\", \"text\": \"Scabies is itchy.\"}\n"),
    ]);
    let out_file = dir.join("out.jsonl");
    let report = dir.join("r.json");
    let run = |prompts: &str, evidence: &[&str], extra: &[&str]| {
        let mut args = vec!["rubric-draft".to_owned(), "--prompts".into(), s(&dir.join(prompts)).into()];
        for e in evidence {
            args.push("--evidence".into());
            args.push(s(&dir.join(e)).into());
        }
        args.extend(["--out", s(&out_file), "--json", s(&report)].map(String::from));
        args.extend(extra.iter().map(|a| a.to_string()));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = medrank(&refs);
        assert!(!out_file.exists() && !report.exists(), "a failed run leaves no output");
        (out.status.code(), stderr_of(&out))
    };
    let (code, err) = run("bad.jsonl", &["a.tsv"], &[]);
    assert_eq!(code, Some(1));
    assert!(err.ends_with("bad.jsonl:2: field `responses.m`: expected a string, found a number"), "{err}");
    let (code, err) = run("good.jsonl", &["guide.pdf"], &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("guide.pdf: the evidence format is read from the file's extension: .jsonl or .tsv"), "{err}");
    let (code, err) = run("good.jsonl", &["a.tsv", "b.jsonl"], &[]);
    assert_eq!(code, Some(1));
    let (a, b) = (dir.join("a.tsv"), dir.join("b.jsonl"));
    assert!(
        err.ends_with(&format!("{}: document id `d1` is also in {}: ids name one document", s(&b), s(&a))),
        "{err}"
    );
    let (code, err) = run("nothing.jsonl", &["a.tsv"], &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("nothing.jsonl: no prompt got a criterion"), "{err}");
    let (code, err) = run("good.jsonl", &["a.tsv"], &["--precision", "int8"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--precision: no model runs"), "{err}");
    // Options out of range: usage errors naming the flag, before anything is read.
    for (flag, value) in
        [("--points", "0"), ("--criteria", "101"), ("--duplicate-cosine", "1.5"), ("--passage-words", "9")]
    {
        let (code, err) = run("good.jsonl", &["a.tsv"], &[flag, value]);
        assert_eq!(code, Some(2), "{flag} {value}: {err}");
        assert!(err.contains(flag), "{err}");
    }
    // The same file as input and output is refused before any work.
    let out = medrank(&[
        "rubric-draft",
        "--prompts",
        s(&dir.join("good.jsonl")),
        "--evidence",
        s(&dir.join("a.tsv")),
        "--out",
        s(&dir.join("a.tsv")),
    ]);
    assert!(stderr_of(&out).contains("it is an input of this run"), "{}", stderr_of(&out));
    assert_eq!(std::fs::read_to_string(dir.join("a.tsv")).unwrap(), "d1\tScabies is contagious between people.\n");
}
