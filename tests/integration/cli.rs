//! The `medrank` binary on the example files: every subcommand runs, writes its report, and
//! refuses bad input with a located message and no half-written output.

use serde_json::Value;
use std::path::Path;
use std::process::Output;

use crate::common;
use common::cli::*;

/// controls -> evaluate with predictions and rankings: the numbers a user reads.
/// The example's published ranker (its run and answer scores) and the expert rankings.
const PUBLISHED_RANKER: [&str; 4] = [
    "--ranker",
    "published=examples/nrp/run.bm25.txt,examples/nrp/answer_scores.csv",
    "--expert-rankings",
    "examples/nrp/expert_rankings.csv",
];

/// `medrank nrp` on the example's XML topics, judged documents and JSONL answers, then `extra`.
fn nrp_example<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["nrp", "--topics", "examples/nrp/topics.xml", "--answers", "examples/nrp/answers.jsonl"];
    args.extend(NRP_JUDGED);
    args.extend_from_slice(extra);
    args
}

#[test]
fn controls_then_evaluate_reproduces_hand_counted_scores() {
    let with_controls = tmp("bundle_controls.jsonl");
    ok(&[
        "controls",
        "--bundle",
        "examples/bundle.jsonl",
        "--corpus",
        "examples/corpus.jsonl",
        "--seed",
        "7",
        "--out",
        s(&with_controls),
        "--quiet",
    ]);
    let report = tmp("evaluate.json");
    let csv_dir = tmp("evaluate_csv");
    let stdout = ok(&[
        "evaluate",
        "--bundle",
        s(&with_controls),
        "--predictions",
        "examples/predictions.csv",
        "--rankings",
        "examples/rankings.csv",
        "--json",
        s(&report),
        "--csv",
        s(&csv_dir),
    ]);
    assert!(stdout.contains("Ranking over scoring — mcqa"), "{stdout}");

    let r = json(&report);
    assert_eq!(r["provenance"]["program"], "medrank");
    assert_eq!(r["provenance"]["inputs"].as_array().unwrap().len(), 3);
    assert!(r.get("controls_added").is_none(), "the bundle already has the controls");
    assert_eq!(r["evaluators"].as_array().unwrap().len(), 1);
    assert_eq!(r["evaluators"][0]["evaluator"], "predictions");
    let mcqa = r["evaluators"][0]["report"]["tasks"].as_array().unwrap().iter().find(|t| t["task"] == "mcqa").unwrap();
    let score = |system: &str| {
        mcqa["systems"].as_array().unwrap().iter().find(|s| s["system"] == system).unwrap()["score"].as_f64().unwrap()
    };
    // Counted by hand from examples/predictions.csv against the answers in bundle.jsonl:
    // expert 12/12, gpt-4o 12/12, llama-3-70b 7/12, openbiollm-70b 6/12, noise 5/12, ir 4/12.
    assert_eq!(score("expert"), 1.0);
    assert_eq!(score("gpt-4o"), 1.0);
    assert!((score("llama-3-70b") - 7.0 / 12.0).abs() < 1e-12);
    assert!((score("openbiollm-70b") - 0.5).abs() < 1e-12);
    assert!((score("noise") - 5.0 / 12.0).abs() < 1e-12);
    assert!((score("ir_passages") - 4.0 / 12.0).abs() < 1e-12);
    // Human average ranks from examples/rankings.csv (mcqa rows): expert 20/18, llama 66/18.
    let human = &mcqa["human"];
    let avg = |system: &str| {
        human["systems"].as_array().unwrap().iter().find(|s| s["system"] == system).unwrap()["average_rank"]
            .as_f64()
            .unwrap()
    };
    assert!((avg("expert") - 20.0 / 18.0).abs() < 1e-12);
    assert!((avg("llama-3-70b") - 66.0 / 18.0).abs() < 1e-12);
    // scipy 1.17.1: kendalltau([1, 1, 7/12, 0.5], [-10/9, -73/36, -11/3, -109/36])
    //   -> statistic 0.5477225575051662, pvalue 0.2785986718379625
    assert!((human["kendall_tau_b"]["tau"].as_f64().unwrap() - 0.5477225575051662).abs() < 1e-12);
    assert!((human["kendall_tau_b"]["p_value"].as_f64().unwrap() - 0.2785986718379625).abs() < 1e-9);

    // The CSV export is the printed table.
    let ranking = std::fs::read_to_string(csv_dir.join("ranking_mcqa.csv")).unwrap();
    assert!(ranking.starts_with("rank,system,kind,accuracy,95% lo,95% hi,mean p(correct),n\n"), "{ranking}");
    assert!(ranking.contains(",llama-3-70b,primary,0.5833,"), "{ranking}");
}

/// Predictions that score control cases the bundle lacks: the controls are added (seeded),
/// and the same seed gives the same report as adding them first with `controls`.
#[test]
fn evaluate_adds_the_scored_control_cases_itself() {
    let report = tmp("auto_controls.json");
    ok(&[
        "evaluate",
        "--bundle",
        "examples/bundle.jsonl",
        "--corpus",
        "examples/corpus.jsonl",
        "--seed",
        "7",
        "--predictions",
        "paper=examples/predictions.csv",
        "--predictions",
        "again=examples/predictions.csv",
        "--json",
        s(&report),
        "--quiet",
    ]);
    let r = json(&report);
    assert_eq!(r["controls_added"]["added"].as_array().unwrap().len(), 4);
    let evaluators = r["evaluators"].as_array().unwrap();
    assert_eq!(evaluators[0]["evaluator"], "paper");
    assert_eq!(evaluators[0]["report"]["tasks"], evaluators[1]["report"]["tasks"]);

    // Without a corpus, ir_passages cannot be added: refused with a reason, no report.
    let refused = tmp("refused.json");
    let out = medrank(&[
        "evaluate",
        "--bundle",
        "examples/bundle.jsonl",
        "--predictions",
        "examples/predictions.csv",
        "--json",
        s(&refused),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("corpus"), "{err}");
    assert!(!refused.exists(), "no report may be written on failure");
}

#[test]
fn a_bad_bundle_line_is_named_with_file_line_and_field() {
    let bad = tmp("bad_bundle.jsonl");
    let good = std::fs::read_to_string(root().join("examples/bundle.jsonl")).unwrap();
    let mut lines: Vec<String> = good.lines().map(str::to_owned).collect();
    lines[2] = lines[2].replacen("\"task\": \"mcqa\"", "\"task\": \"mcq\"", 1).replacen(
        "\"task\":\"mcqa\"",
        "\"task\":\"mcq\"",
        1,
    );
    assert_ne!(lines[2], good.lines().nth(2).unwrap(), "the example's third line must be an MCQA instance");
    std::fs::write(&bad, lines.join("\n")).unwrap();
    let out_file = tmp("never.jsonl");
    let out = medrank(&["controls", "--bundle", s(&bad), "--out", s(&out_file)]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("{}:3: field `task`", s(&bad))), "{err}");
    assert!(!out_file.exists());
}

#[test]
fn import_ranking_over_scoring_then_nrp_and_usage_errors() {
    let bundle = tmp("ros_bundle.jsonl");
    ok(&[
        "import",
        "ranking-over-scoring",
        "--no-argument",
        "examples/ros/no_argument.jsonl",
        "--source",
        "gpt-4o=examples/ros/gpt-4o.jsonl",
        "--source",
        "llama-3-70b=examples/ros/llama-3-70b.jsonl",
        "--source",
        "label_only=examples/ros/label_only.jsonl",
        "--out",
        s(&bundle),
        "--quiet",
    ]);
    let text = std::fs::read_to_string(&bundle).unwrap();
    assert_eq!(text.lines().count(), 6);

    // Swapping the roles of two sources must be refused, not silently imported.
    let refused = tmp("refused_ros.jsonl");
    let out = medrank(&[
        "import",
        "ranking-over-scoring",
        "--no-argument",
        "examples/ros/gpt-4o.jsonl",
        "--source",
        "x=examples/ros/llama-3-70b.jsonl",
        "--out",
        s(&refused),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("import refused"));
    assert!(!refused.exists());

    // clap's usage errors exit 2.
    assert_eq!(medrank(&["nrp"]).status.code(), Some(2));
}

#[test]
fn nrp_on_the_examples_with_bm25_and_a_precomputed_ranker() {
    let report = tmp("nrp.json");
    ok(&nrp_example(&[&PUBLISHED_RANKER[..], &["--json", s(&report), "--quiet"]].concat()));
    let r = json(&report);
    assert_eq!(r["dimensions"].as_array().unwrap().len(), 3);
    assert_eq!(r["ties"], "pessimistic");
    let groups = r["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 4, "2 systems x 2 prompts");
    for g in groups {
        let m = g["mean"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&m));
    }
    // The CSV answer files give the same answers as the JSONL file: same report numbers.
    let report_csv = tmp("nrp_csv.json");
    let mut args = vec!["nrp", "--topics", "examples/nrp/topics.jsonl"];
    args.extend(NRP_JUDGED.iter().chain(&PUBLISHED_RANKER));
    args.extend(["--json", s(&report_csv), "--quiet"]);
    let answer_files: Vec<String> = std::fs::read_dir(root().join("examples/nrp/answers"))
        .unwrap()
        .map(|e| format!("examples/nrp/answers/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    assert_eq!(answer_files.len(), 4);
    for f in &answer_files {
        args.push("--answers");
        args.push(f);
    }
    ok(&args);
    let r2 = json(&report_csv);
    let by_group = |r: &Value| {
        let mut v: Vec<(String, String, f64)> = r["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| {
                (
                    g["system"].as_str().unwrap().to_owned(),
                    g["prompt"].as_str().unwrap().to_owned(),
                    g["mean"].as_f64().unwrap(),
                )
            })
            .collect();
        v.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        v
    };
    assert_eq!(by_group(&r), by_group(&r2));
}

/// `--fuse rrf:bm25,published` compared with the expert in both scopes. Each query's expert
/// ranking holds four answers (sample 0) and one document. The published ranker is BM25 with
/// its scores rounded to 4 decimals (examples/nrp/run.bm25.txt, answer_scores.csv), so both
/// components give every item the same rank in either scope (here and below, items in the
/// expert's order 1..5; BM25 scores from the files):
/// - items: ranks among the five items, 101 (2,4,3,5,1), 102 (3,2,4,5,1), 103 (2,3,4,1,5),
///   104 (3,4,2,5,1), 105 (3,5,2,4,1). The fused 2/(60 + rank) falls with the rank, so tau-b
///   is BM25's own: (concordant - discordant)/10 = (5-5), (5-5), (7-3), (4-6), (3-7) over 10
///   = 0, 0, 0.4, -0.2, -0.4; mean -0.04.
/// - pool: ranks among the query's 8 documents, an answer alone among them: 101 (1,2,1,3,1),
///   102 (1,1,1,7,1) (gpt-3.5-turbo/no_prompt/0 scores 0), 103 (2,2,3,1,4), 104 (1,1,1,2,1),
///   105 (1,3,1,2,1). Tied fused scores: tau-b = (C - D)/sqrt((C + D + ties in x)(C + D)):
///   101 C 4, D 3, 3 ties: 1/sqrt(70); 102 C 3, D 1, 6 ties: 2/sqrt(40); 103 C 6, D 3, 1 tie:
///   3/sqrt(90); 104 as 102; 105 C 3, D 4, 3 ties: -1/sqrt(70). Mean 3/(5 sqrt(10)).
///
/// (Checked by an independent Python BM25 and tau-b.)
#[test]
fn nrp_fusion_scopes_for_the_expert_agreement() {
    let run = |scope: Option<&str>, name: &str| {
        let report = tmp(name);
        let mut extra = vec!["--fuse", "rrf:bm25,published", "--json", s(&report), "--quiet"];
        if let Some(scope) = scope {
            extra.extend(["--fuse-scope", scope]);
        }
        ok(&nrp_example(&[&PUBLISHED_RANKER[..], &extra].concat()));
        json(&report)
    };
    let agreement = |r: &Value, ranker: &str| {
        r["expert_agreement"].as_array().unwrap().iter().find(|a| a["ranker"] == ranker).unwrap().clone()
    };
    let taus = |a: &Value| -> Vec<f64> {
        a["per_query"].as_array().unwrap().iter().map(|q| q["kendall_tau_b"]["tau"].as_f64().unwrap()).collect()
    };
    let close = |got: &[f64], want: &[f64]| {
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-12, "{got:?} vs {want:?}");
        }
    };
    let fused = "rrf(bm25+published)";
    let items = run(Some("items"), "nrp_scope_items.json");
    let pool = run(Some("pool"), "nrp_scope_pool.json");
    for (r, scope) in [(&items, "items"), (&pool, "pool")] {
        let a = agreement(r, fused);
        assert_eq!(a["fusion_scope"], scope);
        assert!(agreement(r, "bm25").get("fusion_scope").is_none(), "only fusion rankers carry a scope");
        let conventions = r["provenance"]["conventions"].as_array().unwrap();
        let convention = conventions.iter().find(|c| c[0] == "fusion_scope").expect("the scope is recorded");
        let text = convention[1].as_str().unwrap();
        assert!(text.starts_with("NRP and ranker validation: pool"), "{text}");
        assert!(text.contains(&format!("expert agreement: {scope}:")), "{text}");
    }
    close(&taus(&agreement(&items, fused)), &[0.0, 0.0, 0.4, -0.2, -0.4]);
    assert!((agreement(&items, fused)["mean_tau"].as_f64().unwrap() + 0.04).abs() < 1e-12);
    // Items: the fused ranker agrees with the expert exactly as BM25 does.
    close(&taus(&agreement(&items, fused)), &taus(&agreement(&items, "bm25")));
    let r70 = 1.0 / 70f64.sqrt();
    let r10 = 1.0 / 10f64.sqrt();
    close(&taus(&agreement(&pool, fused)), &[r70, r10, r10, r10, -r70]);
    assert!((agreement(&pool, fused)["mean_tau"].as_f64().unwrap() - 3.0 / (5.0 * 10f64.sqrt())).abs() < 1e-12);
    // The scope touches the fusion's expert agreement only: its NRP, its validation and the
    // other rankers' agreement are the same in both reports.
    for key in ["answers", "groups", "dimensions"] {
        assert_eq!(items[key], pool[key], "{key}");
    }
    assert_eq!(agreement(&items, "bm25"), agreement(&pool, "bm25"));
    // Without --fuse-scope the expert agreement fuses among the items.
    let default = run(None, "nrp_scope_default.json");
    assert_eq!(agreement(&default, fused), agreement(&items, fused));
    // An unknown scope is a usage error naming the option and its values.
    let out = medrank(&nrp_example(
        &[&PUBLISHED_RANKER[..], &["--fuse", "rrf:bm25,published", "--fuse-scope", "docs"]].concat(),
    ));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--fuse-scope") && err.contains("items") && err.contains("pool"), "{err}");
}

#[test]
fn metrics_and_rubric_on_the_examples() {
    let report = tmp("metrics.json");
    ok(&[
        "metrics",
        "--input",
        "examples/metrics/summaries.jsonl",
        "--tokenizer",
        "unicode",
        "--kappa-bins",
        "rougeL=1..5:0.2,0.4,0.6,0.8",
        "--json",
        s(&report),
        "--quiet",
    ]);
    let r = json(&report);
    assert!(!r["candidates"].as_array().unwrap().is_empty());

    let report = tmp("rubric.json");
    let csv_dir = tmp("rubric_csv");
    ok(&["rubric", "--input", "examples/rubric/graded.jsonl", "--json", s(&report), "--csv", s(&csv_dir), "--quiet"]);
    assert!(json(&report)["provenance"]["inputs"][0]["sha256"].as_str().unwrap().len() == 64);
    assert!(std::fs::read_dir(&csv_dir).unwrap().count() >= 1);

    // A malformed --kappa-bins is a usage error with the expected form in the message.
    let out = medrank(&["metrics", "--input", "examples/metrics/summaries.jsonl", "--kappa-bins", "rougeL=1-5"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("MIN..MAX:CUT"));
}

/// `--combine` on the vendored SQuALITY answers: named scorers, weights fitted on the dev
/// split, the combinations in the agreement table and against the best token metric. The
/// numbers themselves are worked by hand and checked against scipy in `jobs::metrics`.
#[test]
fn metrics_combine_fits_on_the_dev_split() {
    let report = tmp("combine.json");
    ok(&[
        "metrics",
        "--input",
        "data/squality-scores/test.jsonl",
        "--combine",
        "rouge1,repscore",
        "--combine-fit",
        "data/squality-scores/dev.jsonl",
        "--resamples",
        "100",
        "--json",
        s(&report),
        "--quiet",
    ]);
    let r = json(&report);
    assert_eq!(r["combination"]["scorers"], serde_json::json!(["rouge1", "repscore"]));
    assert_eq!(r["combination"]["fit_file"], "data/squality-scores/dev.jsonl");
    let fitted: Vec<&str> =
        r["combination"]["fitted"].as_array().unwrap().iter().map(|f| f["dimension"].as_str().unwrap()).collect();
    assert_eq!(fitted, ["correctness", "selection", "overall"]);
    // 3 raters' scores averaged: the first answer's correctness (0 + 60 + 8) / 3.
    assert_eq!(r["candidates"][0]["human"]["correctness"], 68.0 / 3.0);
    let compared: Vec<(&str, &str)> = r["comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["score"].as_str().unwrap(), c["dimension"].as_str().unwrap()))
        .collect();
    assert!(
        compared.contains(&("fitted:overall", "overall")) && compared.contains(&("combined:mean-rank", "selection"))
    );
    assert!(!compared.contains(&("fitted:overall", "correctness")), "a fitted score meets its own dimension only");
    // The dev file's inputs are recorded beside the scored file's.
    let inputs: Vec<&str> =
        r["provenance"]["inputs"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert_eq!(inputs, ["data/squality-scores/test.jsonl", "data/squality-scores/dev.jsonl"]);

    // --combine-fit alone is a usage error; the scored file as its own fit file is refused.
    let out = medrank(&[
        "metrics",
        "--input",
        "data/squality-scores/test.jsonl",
        "--combine-fit",
        "data/squality-scores/dev.jsonl",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = medrank(&[
        "metrics",
        "--input",
        "data/squality-scores/test.jsonl",
        "--combine",
        "--combine-fit",
        "data/squality-scores/test.jsonl",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the weights must be fitted on other rows"));
}

/// `metrics --learned`: a score model trained here (one epoch, head only, on the dev split)
/// adds one score per dimension, compared with that dimension only, with the cut inputs
/// counted and the model's files in the provenance. Its predictions themselves equal the
/// trainer's (tests of `train::scores`).
#[test]
fn metrics_with_a_learned_metric() {
    let model = tmp("score-model");
    ok(&[
        "train",
        "--model",
        "models/all-MiniLM-L6-v2",
        "--task",
        "score",
        "--train",
        "data/squality-scores/dev.jsonl",
        "--dev",
        "data/squality-scores/dev.jsonl",
        "--freeze",
        "head",
        "--epochs",
        "1",
        "--out",
        s(&model),
    ]);
    let report = tmp("learned.json");
    ok(&[
        "metrics",
        "--input",
        "data/squality-scores/test.jsonl",
        "--learned",
        s(&model),
        "--resamples",
        "50",
        "--json",
        s(&report),
        "--quiet",
    ]);
    let r = json(&report);
    let extra: Vec<(&str, &str)> = r["extra_scores"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), e["dimension"].as_str().unwrap()))
        .collect();
    assert_eq!(
        extra,
        [("learned:correctness", "correctness"), ("learned:selection", "selection"), ("learned:overall", "overall")]
    );
    for e in r["extra_scores"].as_array().unwrap() {
        assert_eq!(e["values"].as_array().unwrap().len(), 90);
    }
    // Agreement of a learned score with its own dimension only: 6 batches x 3 dimensions.
    let rows =
        r["agreement"].as_array().unwrap().iter().filter(|a| a["metric"].as_str().unwrap().starts_with("learned:"));
    assert!(rows
        .clone()
        .all(|a| a["metric"].as_str().unwrap() == format!("learned:{}", a["dimension"].as_str().unwrap())));
    assert_eq!(rows.count(), 6 * 3);
    // Three raters' means are not whole numbers: kappa is undefined and says why.
    let kappa = &r["agreement_means"].as_array().unwrap().iter().find(|m| m["metric"] == "learned:overall").unwrap()
        ["quadratic_kappa"]["mean"];
    assert!(kappa.to_string().contains("undefined"), "{kappa}");
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("were cut to") && warnings.contains("for the learned metric"), "{warnings}");
    let inputs = r["provenance"]["inputs"].to_string();
    assert!(inputs.contains("model.safetensors") && inputs.contains("test.jsonl"), "{inputs}");
    // The learned metric's measured quality, as the page's Metrics job reports it: its
    // train_log.json's dev Spearman (60 dev examples, the dev file trained on too).
    let log = json(&model.join("train_log.json"));
    let dev = format!("dev Spearman {:.3} on 60 dev examples, trained on 60", log["best_dev_metric"].as_f64().unwrap());
    assert_eq!(r["model_quality"]["text"], dev.as_str());
    let conventions = r["provenance"]["conventions"].as_array().unwrap();
    assert_eq!(conventions.last().unwrap(), &serde_json::json!(["model quality", dev]));
    // Not a score model: refused with a sentence.
    let out =
        medrank(&["metrics", "--input", "data/squality-scores/test.jsonl", "--learned", "models/all-MiniLM-L6-v2"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a score model"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn agreement_among_annotators_per_task() {
    let report = tmp("agreement.json");
    ok(&[
        "agreement",
        "--rankings",
        "examples/rankings.csv",
        "--bundle",
        "examples/bundle.jsonl",
        "--json",
        s(&report),
        "--quiet",
    ]);
    let r = json(&report);
    let mcqa = r["scopes"].as_array().unwrap().iter().find(|s| s["scope"] == "mcqa").unwrap();
    let a = &mcqa["agreement"];
    // No evaluator here: Kendall is undefined with a reason, never a number.
    assert_eq!(a["kendall_tau_b"]["undefined"], "no evaluator scores to compare with");
    // Same Friedman statistic as `evaluate` on the same rankings (18 complete blocks).
    assert_eq!(a["friedman_blocks"], 18);
    assert!(a["friedman"]["statistic"].as_f64().unwrap() > 0.0);
}

/// The default model end to end (fetched by scripts/setup.sh): the zero-training evaluator
/// scores the MCQA instances with control cases; its saved predictions rank the same way
/// when fed back without the model.
#[test]
fn evaluate_with_the_default_model_and_replay_its_predictions() {
    let model = root().join("models/all-MiniLM-L6-v2");
    assert!(model.join("model.safetensors").exists(), "run scripts/setup.sh model first");
    let report = tmp("model.json");
    let saved = tmp("model_predictions.csv");
    ok(&[
        "evaluate",
        "--bundle",
        "examples/bundle.jsonl",
        "--corpus",
        "examples/corpus.jsonl",
        "--seed",
        "3",
        "--model",
        s(&model),
        "--controls",
        "--save-predictions",
        s(&saved),
        "--json",
        s(&report),
        "--quiet",
    ]);
    let r = json(&report);
    let tasks = r["evaluators"][0]["report"]["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "without a head only MCQA is evaluated");
    assert_eq!(tasks[0]["systems"].as_array().unwrap().len(), 8, "4 systems + 4 controls");
    let inputs: Vec<&str> =
        r["provenance"]["inputs"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert!(inputs.iter().any(|n| n.ends_with("model.safetensors")), "{inputs:?}");
    let predictions = std::fs::read_to_string(&saved).unwrap();
    assert_eq!(predictions.lines().count(), 1 + 12 * 8);

    // Replaying the saved predictions gives the same ranking (same seed, same bundle rows).
    let replay = tmp("replay.json");
    let mcqa_only = tmp("mcqa_only.jsonl");
    let bundle = std::fs::read_to_string(root().join("examples/bundle.jsonl")).unwrap();
    let mcqa: Vec<&str> =
        bundle.lines().filter(|l| l.contains("\"task\": \"mcqa\"") || l.contains("\"task\":\"mcqa\"")).collect();
    assert_eq!(mcqa.len(), 12);
    std::fs::write(&mcqa_only, mcqa.join("\n")).unwrap();
    ok(&[
        "evaluate",
        "--bundle",
        s(&mcqa_only),
        "--corpus",
        "examples/corpus.jsonl",
        "--seed",
        "3",
        "--predictions",
        s(&saved),
        "--json",
        s(&replay),
        "--quiet",
    ]);
    let a = &r["evaluators"][0]["report"]["tasks"][0]["systems"];
    let b = &json(&replay)["evaluators"][0]["report"]["tasks"][0]["systems"];
    let scores = |v: &Value| {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (s["system"].as_str().unwrap().to_owned(), s["score"].as_f64().unwrap(), s["rank"].as_f64().unwrap())
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(scores(a), scores(b));
}

/// `train` on a bundle (expert-trained MCQA evaluator, frozen encoder) writes a folder that
/// `evaluate --model` loads; the other tasks of the bundle are left out with a warning.
#[test]
fn train_an_evaluator_then_evaluate_with_it() {
    let model = root().join("models/all-MiniLM-L6-v2");
    let out = tmp("trained");
    let text = ok(&[
        "train",
        "--model",
        s(&model),
        "--train",
        "examples/bundle.jsonl",
        "--dev",
        "examples/bundle.jsonl",
        "--task",
        "mcqa",
        "--arguments",
        "system:expert",
        "--epochs",
        "2",
        "--out",
        s(&out),
    ]);
    assert!(text.contains("best epoch"), "{text}");
    for f in ["config.json", "model.safetensors", "tokenizer.json", "train_log.json"] {
        assert!(out.join(f).exists(), "{f}");
    }
    let log = json(&out.join("train_log.json"));
    assert_eq!(log["curve"].as_array().unwrap().len(), 2);

    let report = tmp("trained_eval.json");
    let run = medrank(&["evaluate", "--model", s(&out), "--bundle", "examples/bundle.jsonl", "--json", s(&report)]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(String::from_utf8_lossy(&run.stderr).contains("8 instances of other tasks are not evaluated"));
    let r = json(&report);
    assert_eq!(r["evaluators"][0]["report"]["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(r["evaluators"][0]["report"]["tasks"][0]["task"], "mcqa");

    // A bad --arguments value is refused with the expected forms, by the flag's parser
    // (exit 2) before the model loads (issue 39; it was exit 1 after loading it).
    let bad = medrank(&[
        "train",
        "--model",
        s(&model),
        "--train",
        "examples/bundle.jsonl",
        "--dev",
        "examples/bundle.jsonl",
        "--arguments",
        "gpt-4o",
        "--out",
        s(&tmp("never")),
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("system:NAME"));
}

/// A neural ranker (the default model as a dense bi-encoder, windows of 40 words) is
/// validated next to BM25 on every dimension, and its model files are fingerprinted.
#[test]
fn nrp_with_a_dense_ranker() {
    let model = root().join("models/all-MiniLM-L6-v2");
    let report = tmp("nrp_dense.json");
    let dense = format!("minilm={}", s(&model));
    ok(&nrp_example(&["--dense-ranker", &dense, "--window", "40,20", "--json", s(&report), "--quiet"]));
    let r = json(&report);
    for d in r["dimensions"].as_array().unwrap() {
        let names: Vec<&str> =
            d["validation"].as_array().unwrap().iter().map(|v| v["ranker"].as_str().unwrap()).collect();
        assert_eq!(names, ["bm25", "minilm"]);
    }
    let inputs: Vec<&str> =
        r["provenance"]["inputs"].as_array().unwrap().iter().map(|i| i["name"].as_str().unwrap()).collect();
    assert!(inputs.iter().any(|n| n.ends_with("all-MiniLM-L6-v2/model.safetensors")), "{inputs:?}");
    let bad = medrank(&[
        "nrp",
        "--topics",
        "examples/nrp/topics.xml",
        "--qrels",
        "relevance=examples/nrp/qrels.relevance.txt",
        "--answers",
        "examples/nrp/answers.jsonl",
        "--no-bm25",
        "--dense-ranker",
        &dense,
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("needs the documents"));
}

/// BERTScore through `metrics --bertscore`: a candidate equal to its reference matches
/// every token with cosine 1, so P = R = F = 1 (also after the baseline rescale
/// (1 - b) / (1 - b)); an unrelated candidate scores lower.
#[test]
fn metrics_with_bertscore_on_the_default_model() {
    let model = root().join("models/all-MiniLM-L6-v2");
    let input = tmp("bertscore.jsonl");
    std::fs::write(
        &input,
        concat!(
            r#"{"id": "q1", "system": "same", "candidate": "Metformin is the first-line drug for type 2 diabetes.", "references": ["Metformin is the first-line drug for type 2 diabetes."]}"#, "\n",
            r#"{"id": "q1", "system": "other", "candidate": "The weather in Bilbao is rainy in November.", "references": ["Metformin is the first-line drug for type 2 diabetes."]}"#, "\n",
        ),
    )
    .unwrap();
    let report = tmp("bertscore.json");
    ok(&[
        "metrics",
        "--input",
        s(&input),
        "--bertscore",
        s(&model),
        "--bertscore-baseline",
        "0.5,0.5,0.5",
        "--json",
        s(&report),
        "--quiet",
    ]);
    let r = json(&report);
    let c = r["bertscore"]["candidates"].as_array().unwrap();
    for k in ["precision", "recall", "f1"] {
        assert!((c[0][k].as_f64().unwrap() - 1.0).abs() < 1e-5, "{k}: {}", c[0][k]);
    }
    assert!(c[1]["f1"].as_f64().unwrap() < 0.9);
    assert_eq!(r["bertscore"]["layer"], 6);
}

/// HealthBench's meta-evaluation file imported, then a grader's agreement with the
/// physicians: the figures of tests/reference/rubric_agreement_reference.py (scikit-learn
/// 1.9.1) on the raw file, `--meta-eval examples/rubric/healthbench/meta_eval.jsonl
/// examples/rubric/healthbench/meta_eval_grader.jsonl`; a broken input leaves nothing.
#[test]
fn import_healthbench_then_rubric_agreement() {
    let imported = tmp("hb_meta.jsonl");
    let _ = std::fs::remove_file(&imported);
    let import_report = tmp("hb_import.json");
    ok(&[
        "import",
        "healthbench",
        "--input",
        "examples/rubric/healthbench/meta_eval.jsonl",
        "--out",
        s(&imported),
        "--json",
        s(&import_report),
        "--quiet",
    ]);
    // 14 labelled lines of 6 completions, 32 physician labels (2 or 3 per line).
    let r = json(&import_report);
    assert_eq!(
        (&r["kind"], &r["records"], &r["responses"], &r["criteria"], &r["human_judgements"]),
        (&Value::from("meta_eval"), &Value::from(14), &Value::from(6), &Value::from(14), &Value::from(32))
    );
    let report = tmp("hb_agreement.json");
    let csv_dir = tmp("hb_agreement_csv");
    let _ = std::fs::remove_dir_all(&csv_dir);
    ok(&[
        "rubric-agreement",
        "--input",
        s(&imported),
        "--grader-file",
        "examples/rubric/healthbench/meta_eval_grader.jsonl",
        "--json",
        s(&report),
        "--csv",
        s(&csv_dir),
        "--quiet",
    ]);
    let r = json(&report);
    let all = &r["groups"][0];
    assert_eq!(all["group"], "all");
    assert_eq!(all["items"], 14);
    let grader = &all["grader"];
    assert_eq!(grader["pairs"], 32);
    assert_eq!(grader["macro_f1"].as_f64().unwrap(), 0.716256157635468);
    assert_eq!(grader["f1_met"].as_f64().unwrap(), 0.6896551724137931);
    assert_eq!(grader["f1_not_met"].as_f64().unwrap(), 0.7428571428571429);
    assert_eq!(grader["kappa"].as_f64().unwrap(), 0.4586466165413534);
    let people: Vec<(String, f64, f64)> = all["humans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let a = &h["agreement"];
            (h["grader"].as_str().unwrap().to_owned(), a["macro_f1"].as_f64().unwrap(), a["kappa"].as_f64().unwrap())
        })
        .collect();
    let expected = [
        ("phys-17", 0.6388888888888888, 0.35),
        ("phys-29", 0.5833333333333333, 0.19999999999999996),
        ("phys-11", 0.325, -0.34999999999999987),
        ("phys-03", 0.5555555555555556, 0.1428571428571429),
    ];
    assert_eq!(people, expected.map(|(g, f, k)| (g.to_owned(), f, k)));
    assert_eq!(r["provenance"]["inputs"].as_array().unwrap().len(), 2);
    let table = std::fs::read_to_string(csv_dir.join("rubric_agreement.csv")).unwrap();
    assert!(table.lines().nth(1).unwrap().starts_with("all,14,32,0.7163,0.4586,4,"), "{table}");
    assert!(csv_dir.join("rubric_agreement_humans.csv").exists());

    // The eval file with completions: ungraded responses, which `rubric` refuses to score.
    let ungraded = tmp("hb_eval.jsonl");
    let _ = std::fs::remove_file(&ungraded);
    ok(&[
        "import",
        "healthbench",
        "--input",
        "examples/rubric/healthbench/eval.jsonl",
        "--completions",
        "examples/rubric/healthbench/completions.jsonl",
        "--out",
        s(&ungraded),
        "--quiet",
    ]);
    assert_eq!(std::fs::read_to_string(&ungraded).unwrap().lines().count(), 5);
    fails_with(&["rubric", "--input", s(&ungraded)], "field `criteria[0].met`: missing field `met`");

    // A broken line: located, and no output left.
    let out = tmp("hb_broken.jsonl");
    let _ = std::fs::remove_file(&out);
    fails_with(
        &[
            "import",
            "healthbench",
            "--input",
            "tests/fixtures/healthbench/eval_broken.jsonl",
            "--completions",
            "examples/rubric/healthbench/completions.jsonl",
            "--out",
            s(&out),
        ],
        "tests/fixtures/healthbench/eval_broken.jsonl:2: invalid JSON at column 201",
    );
    assert!(!out.exists());
    assert!(leftovers(out.parent().unwrap()).iter().all(|n| !n.contains("hb_broken")));
}

/// Whatever a run leaves in `dir` that a staged output would be named like.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("medrank-tmp") || n.ends_with(".tmp"))
                .collect()
        })
        .unwrap_or_default()
}

fn fails_with(args: &[&str], message: &str) {
    let out = medrank(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(message), "medrank {args:?}: {err}");
}

/// Every output of a run (`--json`, the `--csv` folder, `--out`) is checked before any
/// work and renamed into place only when the whole run succeeded.
#[test]
fn outputs_are_refused_before_any_work_and_written_all_or_nothing() {
    let base = tmp("outputs");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("existing-folder")).unwrap();
    let (folder, csv) = (base.join("existing-folder"), base.join("tables"));

    // --json onto an existing folder used to fail late, leaving `DIR.tmp` with the whole
    // report and the 14 CSV files of --csv behind; now nothing is written at all.
    fails_with(
        &[
            "evaluate",
            "--bundle",
            "examples/bundle.jsonl",
            "--predictions",
            "examples/predictions.csv",
            "--corpus",
            "examples/corpus.jsonl",
            "--rankings",
            "examples/rankings.csv",
            "--json",
            s(&folder),
            "--csv",
            s(&csv),
        ],
        "refused as an output: it exists and is a folder",
    );
    assert!(!csv.exists());
    assert_eq!(std::fs::read_dir(&base).unwrap().count(), 1, "only the folder that was there");

    // controls / import: --out is not written when the run fails on its --json path.
    let bundle_out = base.join("with_controls.jsonl");
    fails_with(
        &[
            "controls",
            "--bundle",
            "examples/bundle.jsonl",
            "--corpus",
            "examples/corpus.jsonl",
            "--out",
            s(&bundle_out),
            "--json",
            s(&folder),
        ],
        "is a folder",
    );
    assert!(!bundle_out.exists());
    fails_with(
        &[
            "import",
            "ranking-over-scoring",
            "--no-argument",
            "examples/ros/no_argument.jsonl",
            "--source",
            "gpt-4o=examples/ros/gpt-4o.jsonl",
            "--out",
            s(&bundle_out),
            "--json",
            s(&folder),
        ],
        "is a folder",
    );
    assert!(!bundle_out.exists());

    // An output that is an input of the same run is refused and the input kept.
    let bundle = base.join("bundle.jsonl");
    std::fs::copy(root().join("examples/bundle.jsonl"), &bundle).unwrap();
    let original = std::fs::read(&bundle).unwrap();
    fails_with(
        &["controls", "--bundle", s(&bundle), "--corpus", "examples/corpus.jsonl", "--out", s(&bundle)],
        "is an input of this run",
    );
    fails_with(
        &["agreement", "--rankings", "examples/rankings.csv", "--bundle", s(&bundle), "--json", s(&bundle)],
        "is an input of this run",
    );
    assert_eq!(std::fs::read(&bundle).unwrap(), original);

    // A link is refused, not replaced by a regular file.
    #[cfg(unix)]
    {
        let link = base.join("report-link.json");
        std::os::unix::fs::symlink(&bundle, &link).unwrap();
        fails_with(
            &["agreement", "--rankings", "examples/rankings.csv", "--json", s(&link)],
            "it exists and is a link",
        );
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
        fails_with(
            &["agreement", "--rankings", "examples/rankings.csv", "--json", "/dev/null"],
            "/dev/null: refused as an output",
        );
    }

    // A run that fails in its computation leaves no new --csv folder (and no report).
    let report = base.join("never.json");
    fails_with(
        &[
            "evaluate",
            "--bundle",
            "examples/bundle.jsonl",
            "--predictions",
            "examples/predictions.csv",
            "--json",
            s(&report),
            "--csv",
            s(&csv),
        ],
        "corpus",
    );
    assert!(!csv.exists() && !report.exists());

    // A run that succeeds writes everything, into new nested folders too, with no temporaries left.
    let nested = base.join("a/b/tables");
    ok(&[
        "agreement",
        "--rankings",
        "examples/rankings.csv",
        "--json",
        s(&base.join("a/report.json")),
        "--csv",
        s(&nested),
        "--quiet",
    ]);
    assert!(base.join("a/report.json").is_file());
    assert!(std::fs::read_dir(&nested).unwrap().count() > 0);
    assert!(leftovers(&base).is_empty() && leftovers(&base.join("a")).is_empty() && leftovers(&nested).is_empty());
}

/// The NRP run of the examples with the given answers and qrels arguments; the report.
fn nrp_with(answers: &Path, qrels: &[&str], report: &Path) -> Output {
    let mut args = vec![
        "nrp",
        "--topics",
        "examples/nrp/topics.xml",
        "--docs",
        "examples/nrp/docs.tsv",
        "--answers",
        s(answers),
        "--json",
        s(report),
        "--quiet",
    ];
    args.extend_from_slice(qrels);
    medrank(&args)
}

/// Hostile inputs the issue listed: each is refused with the right, located message, or
/// read as what it is.
#[test]
fn hostile_inputs_get_the_right_message() {
    let base = tmp("hostile");
    std::fs::create_dir_all(&base).unwrap();
    let answers = std::fs::read_to_string(root().join("examples/nrp/answers.jsonl")).unwrap();
    let combined = ["--qrels-combined", "examples/nrp/qrels.combined.txt"];

    // answers.jsonl with a byte-order mark is JSONL (it was taken for a CSV "without its
    // system and prompt"), and gives the same groups as without it.
    let (plain, bom) = (base.join("answers.jsonl"), base.join("bom.jsonl"));
    std::fs::write(&plain, &answers).unwrap();
    std::fs::write(&bom, format!("\u{feff}{answers}")).unwrap();
    let (r1, r2) = (base.join("plain.json"), base.join("bom.json"));
    assert!(nrp_with(&plain, &combined, &r1).status.success());
    let out = nrp_with(&bom, &combined, &r2);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&r1)["groups"], json(&r2)["groups"]);
    // An empty answers file is called empty.
    let empty = base.join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let out = nrp_with(&empty, &combined, &base.join("never.json"));
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), format!("error: {}: the answers file is empty", s(&empty)));

    // A per-dimension qrels file whose first line is `qid iter docno grade` keeps its
    // dimension (it was read as combined qrels of a dimension called `grade`).
    let relevance = std::fs::read_to_string(root().join("examples/nrp/qrels.relevance.txt")).unwrap();
    let with_header = base.join("relevance_header.txt");
    std::fs::write(&with_header, format!("qid iter docno grade\n{relevance}")).unwrap();
    let arg = format!("relevance={}", s(&with_header));
    let report = base.join("header.json");
    let out = nrp_with(&plain, &["--qrels", &arg], &report);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = json(&report);
    let dims: Vec<&str> =
        r["dimensions"].as_array().unwrap().iter().map(|d| d["dimension"].as_str().unwrap()).collect();
    assert_eq!(dims, ["relevance"]);

    // An answer for a query that is not a topic: an error at its line in the answers file
    // (FORMATS.md called it a warning; it stopped the run without file or line).
    let stray = base.join("stray.jsonl");
    let first = answers.lines().next().unwrap().replacen("\"qid\": \"101\"", "\"qid\": \"999\"", 1);
    assert!(first.contains("999"), "the example's first answer is for query 101: {first}");
    std::fs::write(&stray, format!("{answers}{first}\n")).unwrap();
    let out = nrp_with(&stray, &combined, &base.join("never.json"));
    let line = answers.lines().count() + 1;
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with(&format!("error: {}:{line}: field `qid`: answer ", s(&stray))), "{err}");
    assert!(err.trim_end().ends_with("is for query `999`, which is not a topic"), "{err}");

    // An answer without a score from a precomputed ranker: an error naming the scores file.
    let scores = std::fs::read_to_string(root().join("examples/nrp/answer_scores.csv")).unwrap();
    let fewer = base.join("fewer_scores.csv");
    let mut lines: Vec<&str> = scores.lines().collect();
    let dropped = lines.remove(1); // the first score row: 101,gpt-3.5-turbo,no_prompt,0,...
    assert!(dropped.starts_with("101,gpt-3.5-turbo,no_prompt,0,"), "{dropped}");
    std::fs::write(&fewer, lines.join("\n")).unwrap();
    let ranker = format!("published=examples/nrp/run.bm25.txt,{}", s(&fewer));
    let out = medrank(&[
        "nrp",
        "--topics",
        "examples/nrp/topics.xml",
        "--qrels-combined",
        "examples/nrp/qrels.combined.txt",
        "--answers",
        "examples/nrp/answers.jsonl",
        "--ranker",
        &ranker,
        "--no-bm25",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!("error: {}: no score for answer `gpt-3.5-turbo/no_prompt/0` of query `101`; a ranker must score every answer", s(&fewer))
    );

    // A prediction missing for a ranked pair: an error at the instance's bundle line.
    let predictions = std::fs::read_to_string(root().join("examples/predictions.csv")).unwrap();
    let mut lines: Vec<&str> = predictions.lines().collect();
    let dropped = lines.remove(1);
    assert!(dropped.starts_with("mcqa-01,expert,"), "{dropped}");
    let missing = base.join("missing.csv");
    std::fs::write(&missing, lines.join("\n")).unwrap();
    let out = medrank(&[
        "evaluate",
        "--bundle",
        "examples/bundle.jsonl",
        "--corpus",
        "examples/corpus.jsonl",
        "--predictions",
        s(&missing),
        "--quiet",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "error: examples/bundle.jsonl:1: field `arguments.expert`: instance `mcqa-01` has no prediction for system `expert` (evaluator `missing`)"
    );

    // A human-ranking row for a control system is refused by evaluate as by agreement
    // (evaluate used to accept it and leave 17 of 18 Friedman blocks incomplete).
    let rankings = base.join("rankings_noise.csv");
    let text = std::fs::read_to_string(root().join("examples/rankings.csv")).unwrap();
    std::fs::write(&rankings, format!("{text}mcqa-01,clin_a,noise,4\n")).unwrap();
    let expected = format!("error: {}:98: field `system`: system `noise` is a control case; human rankings rank the systems, not the control cases (control systems: no_argument, label_only, noise, ir_passages)", s(&rankings));
    let out = medrank(&[
        "evaluate",
        "--bundle",
        "examples/bundle.jsonl",
        "--corpus",
        "examples/corpus.jsonl",
        "--predictions",
        "examples/predictions.csv",
        "--rankings",
        s(&rankings),
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), expected);
    let out = medrank(&["agreement", "--rankings", s(&rankings), "--bundle", "examples/bundle.jsonl"]);
    assert_eq!(String::from_utf8_lossy(&out.stderr).trim(), expected);

    // Not UTF-8: the line is named, not only a byte offset.
    let latin1 = base.join("latin1.csv");
    let mut bytes = text.as_bytes().to_vec();
    let third_line = bytes.iter().enumerate().filter(|(_, b)| **b == b'\n').nth(1).unwrap().0 + 1;
    bytes.insert(third_line, 0xe9); // é in Latin-1, at column 1 of line 3
    std::fs::write(&latin1, bytes).unwrap();
    let out = medrank(&["agreement", "--rankings", s(&latin1)]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!(
            "error: {}:3: not valid UTF-8 at column 1 (byte {} of the file); save it as UTF-8",
            s(&latin1),
            third_line + 1
        )
    );
}

/// Friedman's mean ranks in the JSON name their systems.
#[test]
fn friedman_mean_ranks_carry_system_names() {
    let report = tmp("agreement_names.json");
    ok(&[
        "agreement",
        "--rankings",
        "examples/rankings.csv",
        "--bundle",
        "examples/bundle.jsonl",
        "--json",
        s(&report),
        "--quiet",
    ]);
    let r = json(&report);
    let mcqa = r["scopes"].as_array().unwrap().iter().find(|s| s["scope"] == "mcqa").unwrap();
    let ranks = mcqa["agreement"]["friedman"]["mean_ranks"].as_array().unwrap();
    // By hand from examples/rankings.csv: the 18 complete MCQA blocks (6 instances x 3
    // annotators), each block's ranks re-ranked (ties averaged), summed per system:
    // expert 20.5, gpt-4o 38, llama-3-70b 66, openbiollm-70b 55.5 (total 18 x 10 = 180).
    let expected = [("expert", 20.5), ("gpt-4o", 38.0), ("llama-3-70b", 66.0), ("openbiollm-70b", 55.5)];
    assert_eq!(ranks.len(), 4);
    for (got, (system, sum)) in ranks.iter().zip(expected) {
        assert_eq!(got["system"], system);
        assert!((got["mean_rank"].as_f64().unwrap() - sum / 18.0).abs() < 1e-12, "{got}");
    }
}

/// A resample count out of the bootstrap's range is refused by every command that
/// bootstraps, before any work: 0 used to index out of bounds (evaluate, nrp), and
/// u64::MAX overflowed a capacity (all four) or tried to allocate hundreds of GB.
#[test]
fn every_bootstrap_refuses_resamples_out_of_range() {
    let out = tmp("resamples.json");
    let commands: [Vec<&str>; 4] = [
        vec!["evaluate", "--bundle", "examples/bundle.jsonl", "--predictions", "examples/predictions.csv"],
        vec!["metrics", "--input", "examples/metrics/summaries.jsonl"],
        vec!["rubric", "--input", "examples/rubric/graded.jsonl"],
        nrp_example(&[]),
    ];
    for command in &commands {
        for bad in ["0", "18446744073709551615", "10000000000", "-1", "NaN"] {
            // `--resamples=-1`: as a separate word, `-1` would read as a flag.
            let flag = format!("--resamples={bad}");
            let mut args = command.clone();
            args.extend([flag.as_str(), "--json", s(&out)]);
            let run = medrank(&args);
            let stderr = String::from_utf8_lossy(&run.stderr);
            assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains("--resamples"), "{args:?}: {stderr}");
            let want = if bad.parse::<u64>().is_ok() { "from 1 to 1000000" } else { "expected a whole number" };
            assert!(stderr.contains(want), "{args:?}: {stderr}");
            assert!(!out.exists(), "a refused run writes nothing");
        }
    }
}

/// An input that is a device, a pipe without end or a folder is refused before any work,
/// naming it (`--predictions /dev/zero` was read until the kernel killed the process).
#[test]
fn inputs_that_are_not_regular_files_are_refused() {
    let fifo = tmp("endless.fifo");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().is_ok_and(|s| s.success());
    let mut cases = vec![("/dev/zero", "a device, pipe or socket"), ("examples", "a folder")];
    if made {
        cases.push((s(&fifo), "a device, pipe or socket"));
    }
    for (input, what) in cases {
        let run = medrank(&["evaluate", "--bundle", "examples/bundle.jsonl", "--predictions", input]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{input}: {stderr}");
        assert!(stderr.contains(&format!("{input}: not a regular file ({what})")), "{stderr}");
    }
}

/// Combined qrels whose header names a dimension twice, or whose lines end in CR alone:
/// each used to end in "dimension judged by two qrels files"; now its own message at its
/// line and column.
#[test]
fn combined_qrels_with_a_dimension_twice_or_cr_line_ends_get_their_own_message() {
    let base = tmp("qrels-messages");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    let combined = std::fs::read_to_string(root().join("examples/nrp/qrels.combined.txt")).unwrap();
    let nrp = |qrels: &Path| {
        medrank(&[
            "nrp",
            "--topics",
            "examples/nrp/topics.xml",
            "--answers",
            "examples/nrp/answers.jsonl",
            "--docs",
            "examples/nrp/docs.tsv",
            "--qrels-combined",
            s(qrels),
            "--quiet",
        ])
    };

    // Combined qrels whose header names a dimension twice: each column was read as
    // relevance, and the run said "dimension `relevance` is judged by two qrels files".
    let twice = base.join("rel_rel.txt");
    std::fs::write(&twice, combined.replacen("qid docno rel cred read", "qid docno rel rel read", 1)).unwrap();
    let out = nrp(&twice);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr_of(&out),
        format!("error: {}:1: field `rel`: column 4 (`rel`) names dimension relevance, and column 3 is `rel` too: a dimension has one column", s(&twice))
    );
    // The same file with CR line ends (classic Mac OS): read as one line, the header had
    // every row's cells as columns (`2` among them, twice).
    let cr = base.join("cr_only.txt");
    std::fs::write(&cr, combined.replace('\n', "\r")).unwrap();
    let out = nrp(&cr);
    assert_eq!(out.status.code(), Some(1));
    // The header `qid docno rel cred read` is 23 characters: the CR is in column 24.
    assert_eq!(
        stderr_of(&out),
        format!("error: {}:1: a carriage return (CR) at column 24 ends a line without a line feed: medrank reads lines that end in LF or CRLF; save the file with those line ends (CR alone is how classic Mac OS saved text)", s(&cr))
    );
}

/// An answers CSV cut inside a quoted cell: the cut text was scored as a whole answer.
#[test]
fn an_answers_csv_cut_inside_a_quoted_cell_is_refused() {
    let base = tmp("cut-answers");
    let answers = std::fs::read_to_string(root().join("examples/nrp/answers/gpt-3.5-turbo__multimedqa.csv")).unwrap();
    let cut_at = answers.find("\"Ibuprofen can raise").unwrap() + 20;
    let dir = base.join("answers");
    std::fs::create_dir_all(&dir).unwrap();
    let cut = dir.join("gpt-3.5-turbo__multimedqa.csv");
    std::fs::write(&cut, &answers[..cut_at]).unwrap();
    let out = medrank(&[
        "nrp",
        "--topics",
        "examples/nrp/topics.xml",
        "--answers",
        s(&cut),
        "--docs",
        "examples/nrp/docs.tsv",
        "--qrels-combined",
        "examples/nrp/qrels.combined.txt",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr_of(&out),
        format!("error: {}:2: field `answer1`: the file ends inside this quoted cell: it was cut short, or a quote (\") that opens the cell is never closed", s(&cut))
    );
}

/// `--not-judgeable` for a dimension no qrels file judges changed nothing, silently:
/// refused when it is no dimension at all (a typo), a warning for a standard one these
/// qrels lack (the page's default credibility=3 beside relevance qrels).
#[test]
fn not_judgeable_grades_of_a_dimension_nobody_judges_are_not_ignored() {
    let out = medrank(&nrp_example(&["--not-judgeable", "credibilty=3", "--quiet"]));
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stderr_of(&out), "error: --not-judgeable credibilty=3: no qrels file judges dimension `credibilty` (judged: relevance, credibility, readability)");
    let out = medrank(&[
        "nrp",
        "--topics",
        "examples/nrp/topics.xml",
        "--answers",
        "examples/nrp/answers.jsonl",
        "--docs",
        "examples/nrp/docs.tsv",
        "--qrels",
        "relevance=examples/nrp/qrels.relevance.txt",
        "--not-judgeable",
        "credibility=3",
    ]);
    assert!(out.status.success(), "{}", stderr_of(&out));
    assert!(stderr_of(&out).contains("warning: --not-judgeable credibility=3: no qrels file judges dimension `credibility` (judged: relevance); these grades change nothing"), "{}", stderr_of(&out));
}

/// `--json` onto a table of `--csv`: a raw "File exists (os error 17)" after all the work;
/// now refused before it, naming both flags.
#[test]
fn json_onto_a_csv_table_is_refused_before_any_work() {
    let base = tmp("json-on-csv");
    let _ = std::fs::remove_dir_all(&base);
    let tables = base.join("tables");
    ok(&["agreement", "--rankings", "examples/rankings.csv", "--csv", s(&tables), "--quiet"]);
    let table = std::fs::read_dir(&tables).unwrap().next().unwrap().unwrap().path();
    std::fs::remove_dir_all(&tables).unwrap();
    let out = medrank(&["agreement", "--rankings", "examples/rankings.csv", "--csv", s(&tables), "--json", s(&table)]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr_of(&out),
        format!(
            "error: --json {} is a .csv file in the --csv folder {}, where every table is written as NAME.csv: one of them could take its place; name it otherwise or put it elsewhere (e.g. {})",
            s(&table),
            s(&tables),
            s(&tables.join("report.json"))
        )
    );
    assert!(!tables.exists(), "refused before any work");
    // A JSON report in the tables' folder is fine.
    ok(&[
        "agreement",
        "--rankings",
        "examples/rankings.csv",
        "--csv",
        s(&tables),
        "--json",
        s(&tables.join("report.json")),
        "--quiet",
    ]);
}

/// `--window`: 0,0 was ignored while a warning asked for a window; a stride beyond the
/// window skipped words. Both are refused before the model loads, naming the flag, and the
/// window a run used is in its provenance.
#[test]
fn the_window_is_bounded_and_recorded() {
    for (window, message) in [
        ("0,0", "WORDS must be from 1 to 10000"),
        ("200,300", "STRIDE must be from 1 to WORDS (200); a longer stride skips the words between windows"),
        ("200,0", "STRIDE must be from 1 to WORDS (200)"),
        ("10001,1", "WORDS must be from 1 to 10000"),
    ] {
        let out = medrank(&nrp_example(&["--dense-ranker", "minilm=models/all-MiniLM-L6-v2", "--window", window]));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{window}: {err}");
        assert!(err.contains(&format!("invalid value '{window}' for '--window <WORDS,STRIDE>': {message}")), "{err}");
    }
    // Without a neural ranker a window changes nothing: refused rather than ignored.
    let out = medrank(&nrp_example(&["--window", "200,100"]));
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--window: only the neural rankers"));
    // Recorded: the window, or that there was none.
    let report = tmp("window.json");
    let dense = "minilm=models/all-MiniLM-L6-v2";
    ok(&nrp_example(&["--dense-ranker", dense, "--window", "40,20", "--json", s(&report), "--quiet"]));
    let conventions = &json(&report)["provenance"]["conventions"];
    let window = conventions.as_array().unwrap().iter().find(|c| c[0] == "window").expect("a window convention");
    assert_eq!(window[1], "40 words every 20 words; a text's score is its best window's (MaxP)");
    ok(&nrp_example(&["--dense-ranker", dense, "--json", s(&report), "--quiet"]));
    let conventions = &json(&report)["provenance"]["conventions"];
    let window = conventions.as_array().unwrap().iter().find(|c| c[0] == "window").expect("a window convention");
    assert!(window[1].as_str().unwrap().starts_with("none: each text in one pass"), "{window}");
}

/// Weights with a NaN, or f32 bytes labelled I32, in the real default model: refused
/// naming the tensor (predictions used to change without a word); the page loads through
/// the same function.
#[test]
fn damaged_weights_are_refused_naming_the_tensor() {
    let model = root().join("models/all-MiniLM-L6-v2");
    let bytes = std::fs::read(model.join("model.safetensors")).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + header_len]).unwrap();
    let name = "encoder.layer.0.attention.self.query.weight";
    let start = 8 + header_len + header[name]["data_offsets"][0].as_u64().unwrap() as usize;
    let folder = |tag: &str, weights: &[u8]| {
        let dir = tmp(tag);
        std::fs::create_dir_all(&dir).unwrap();
        for f in ["config.json", "tokenizer.json"] {
            std::fs::copy(model.join(f), dir.join(f)).unwrap();
        }
        std::fs::write(dir.join("model.safetensors"), weights).unwrap();
        dir
    };
    let embed = |dir: &Path| {
        let out = tmp("damaged.jsonl");
        let run = medrank(&["embed", "--model", s(dir), "--input", "examples/sentences.txt", "--out", s(&out)]);
        assert!(!out.exists(), "a refused model writes nothing");
        (run.status.code(), String::from_utf8_lossy(&run.stderr).trim().to_owned())
    };
    // A NaN as element 5 of the first query weight.
    let mut nan = bytes.clone();
    nan[start + 20..start + 24].copy_from_slice(&f32::NAN.to_le_bytes());
    let dir = folder("nan-model", &nan);
    assert_eq!(
        embed(&dir),
        (Some(1), format!("error: {}/model.safetensors: tensor `{name}` holds a NaN or infinite value (element 5 of 147456): the weights are damaged; medrank does not run a model with them", s(&dir)))
    );
    // The same tensor's f32 bytes labelled I32 (the header's dtype rewritten in place).
    let mut relabelled = bytes.clone();
    let head = std::str::from_utf8(&bytes[8..8 + header_len]).unwrap();
    let at = head.find(&format!("\"{name}\"")).unwrap();
    let dtype = at + head[at..].find("\"F32\"").unwrap();
    relabelled[8 + dtype + 1] = b'I';
    let dir = folder("i32-model", &relabelled);
    let (code, err) = embed(&dir);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.ends_with(&format!("tensor `{name}` is stored as I32, but the weights of a BERT-family or T5 model are floats (F32, F16, BF16 or F64); only the position_ids and token_type_ids buffers may be integers")), "{err}");
}
