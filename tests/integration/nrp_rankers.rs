//! NRP's rankers side by side: every ranker's agreement with the expert, the paired
//! bootstrap probability that one agrees better than another, and fusion rankers (RRF,
//! z-sum) that are validated, chosen and compared like the others. Numbers by hand, or by
//! scipy 1.17.1 / numpy where cited.
use crate::common;
use common::cli::{nrp_report, scratch_with};
use medrank::data::{AnswerScore, RunEntry};
use medrank::eval::nrp::fusion::{fuse, FusionSpec, Method};
use medrank::eval::nrp::{AnswerKey, RankerScores};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Two queries with the same shape: q1 judges d1 (2), d2 (1), d3 (0); q2 e1, e2, e3 alike.
/// Ranker A orders them as the judgements (3, 2, 1), B as (1, 9, 5), A2 is a copy of A.
/// The answer of each query scores 2.5 with A and A2, 9.5 with B.
const TOPICS: &str = "{\"qid\": \"q1\", \"query\": \"first\"}\n{\"qid\": \"q2\", \"query\": \"second\"}\n";
const QRELS: &str = "q1 0 d1 2\nq1 0 d2 1\nq1 0 d3 0\nq2 0 e1 2\nq2 0 e2 1\nq2 0 e3 0\n";
const ANSWERS: &str = "{\"qid\": \"q1\", \"system\": \"gpt\", \"prompt\": \"p\", \"sample\": 0, \"text\": \"a\"}\n\
                       {\"qid\": \"q2\", \"system\": \"gpt\", \"prompt\": \"p\", \"sample\": 0, \"text\": \"b\"}\n";
/// The expert ranks the documents as the judgements do.
const EXPERT: &str =
    "instance,annotator,system,rank\nq1,md,d1,1\nq1,md,d2,2\nq1,md,d3,3\nq2,md,e1,1\nq2,md,e2,2\nq2,md,e3,3\n";

fn run_text(s: [f64; 3]) -> String {
    let mut t = String::new();
    for q in ["q1", "q2"] {
        let prefix = if q == "q1" { "d" } else { "e" };
        for (i, score) in s.iter().enumerate() {
            t.push_str(&format!("{q} Q0 {prefix}{} {} {score} r\n", i + 1, i + 1));
        }
    }
    t
}

fn scores_text(answer: f64) -> String {
    format!("qid,system,prompt,sample,score\nq1,gpt,p,0,{answer}\nq2,gpt,p,0,{answer}\n")
}

fn fixture() -> PathBuf {
    let (a_run, b_run, a_csv, b_csv) =
        (run_text([3.0, 2.0, 1.0]), run_text([1.0, 9.0, 5.0]), scores_text(2.5), scores_text(9.5));
    scratch_with(&[
        ("topics.jsonl", TOPICS),
        ("qrels.txt", QRELS),
        ("answers.jsonl", ANSWERS),
        ("expert.csv", EXPERT),
        ("a.run", &a_run),
        ("a.csv", &a_csv),
        ("b.run", &b_run),
        ("b.csv", &b_csv),
    ])
}

/// Rankers A, A2 (a copy of A) and B, with the expert's rankings, then `extra`.
fn nrp(dir: &Path, extra: &[&str], report: &str) -> Value {
    let rankers = [
        "--ranker",
        "A=a.run,a.csv",
        "--ranker",
        "A2=a.run,a.csv",
        "--ranker",
        "B=b.run,b.csv",
        "--expert-rankings",
        "expert.csv",
    ];
    nrp_report(dir, &[&rankers[..], extra].concat(), report)
}

fn ranker(name: &str, docs: [f64; 3], answer: f64) -> RankerScores {
    let run: Vec<RunEntry> = docs
        .iter()
        .enumerate()
        .map(|(i, &score)| RunEntry {
            qid: "q1".into(),
            docno: format!("d{}", i + 1),
            rank: i as u32 + 1,
            score,
            tag: name.into(),
        })
        .collect();
    let answers =
        [AnswerScore { qid: "q1".into(), system: "gpt".into(), prompt: "p".into(), sample: 0, score: answer }];
    RankerScores::from_run(name, &run, &answers).unwrap()
}

/// RRF, k = 60. A ranks d1, d2, d3 first to third and places the answer (2.5) second;
/// B ranks d2 (9), d3 (5), d1 (1) and places the answer (9.5) first. So
/// d1 = 1/61 + 1/63, d2 = 1/62 + 1/61, d3 = 1/63 + 1/62 and the answer = 1/62 + 1/61: it ties
/// d2 exactly (the same terms added in the same order).
/// z-sum: scipy.stats.zscore([3, 2, 1]) = [1.22474487, 0, -1.22474487], zscore([1, 9, 5]) =
/// [-1.22474487, 1.22474487, 0]; the answer, placed alone, is (2.5 - 2)/sd = 0.6123724356957945
/// and (9.5 - 5)/sd = 1.3778379803155376, sum 1.990210416011332 (numpy, ddof = 0).
#[test]
fn fusion_scores_by_hand() {
    let a = ranker("A", [3.0, 2.0, 1.0], 2.5);
    let b = ranker("B", [1.0, 9.0, 5.0], 9.5);
    let key = AnswerKey::new("q1", "gpt", "p", 0);
    let rrf = fuse("rrf", Method::Rrf, &[&a, &b]);
    let q1 = &rrf.documents["q1"];
    assert_eq!(q1["d1"], 1.0 / 61.0 + 1.0 / 63.0);
    assert_eq!(q1["d2"], 1.0 / 62.0 + 1.0 / 61.0);
    assert_eq!(q1["d3"], 1.0 / 63.0 + 1.0 / 62.0);
    assert_eq!(rrf.answers[&key], q1["d2"]);

    let z = fuse("z", Method::ZSum, &[&a, &b]);
    let q1 = &z.documents["q1"];
    let near = |x: f64, y: f64| assert!((x - y).abs() < 1e-12, "{x} vs {y}");
    near(q1["d1"], 0.0);
    near(q1["d2"], 1.224744871391589);
    near(q1["d3"], -1.224744871391589);
    near(z.answers[&key], 1.990210416011332);

    // The user's spelling, with and without a name.
    let spec = FusionSpec::parse("rrf:bm25,monot5").unwrap();
    assert_eq!((spec.name.as_str(), spec.method, spec.rankers.len()), ("rrf(bm25+monot5)", Method::Rrf, 2));
    let spec = FusionSpec::parse("both=zsum:A,B").unwrap();
    assert_eq!((spec.name.as_str(), spec.method), ("both", Method::ZSum));
    for bad in ["rrf:A", "max:A,B", "rrf:A,A", "A,B", "=rrf:A,B"] {
        assert!(FusionSpec::parse(bad).is_err(), "{bad}");
    }
    let err = FusionSpec::parse("rrf:A,C").unwrap().fuse(&[a, b]).unwrap_err().to_string();
    assert!(err.contains("no ranker named `C` (rankers: A, B)"), "{err}");
}

/// The expert ranks each query's documents 1, 2, 3 as the judgements. Kendall tau-b
/// (scipy.stats.kendalltau against the negated ranks): A and A2 = 1 on both queries; B (scores
/// 1, 9, 5) = -1/3; rrf(A+B) (d2 > d1 > d3, see above) = 1/3. Every query gives the same
/// taus, so every bootstrap resample gives the same means: P(A better than B) = 1,
/// P(B better than rrf) = 0, and A against its copy A2 ties on every resample: 0.5.
/// nDCG@10 (linear gain, IDCG = 2 + 1/log2 3): A 1; B ranks gains 1, 0, 2: 2/IDCG =
/// 0.7601875334318685; rrf ranks gains 1, 2, 0: (1 + 2/log2 3)/IDCG = 0.8597186998521972.
/// Forced onto relevance, rrf places the answer tied with d2 (pessimistic): 1 - 1/3.
#[test]
fn every_ranker_including_a_fusion_is_validated_and_compared_with_the_expert() {
    let dir = fixture();
    let r = nrp(&dir, &["--fuse", "rrf:A,B", "--force-ranker", "relevance=rrf(A+B)", "--csv", "tables"], "report.json");
    let validation: Vec<(&str, f64)> = r["dimensions"][0]["validation"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["ranker"].as_str().unwrap(), v["mean_ndcg_at_10"].as_f64().unwrap()))
        .collect();
    let names: Vec<&str> = validation.iter().map(|v| v.0).collect();
    assert_eq!(names, ["A", "A2", "B", "rrf(A+B)"]);
    assert_eq!((validation[0].1, validation[1].1), (1.0, 1.0));
    assert!((validation[2].1 - 0.7601875334318685).abs() < 1e-12);
    assert!((validation[3].1 - 0.8597186998521972).abs() < 1e-12);
    assert_eq!(r["dimensions"][0]["ranker"], "rrf(A+B)");
    for a in r["answers"].as_array().unwrap() {
        assert!((a["combined"].as_f64().unwrap() - 2.0 / 3.0).abs() < 1e-12);
    }

    let agreement: Vec<(&str, f64, Value)> = r["expert_agreement"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["ranker"].as_str().unwrap(), a["mean_tau"].as_f64().unwrap(), a["chosen_for"].clone()))
        .collect();
    assert_eq!(agreement.len(), 4, "every ranker, not only the chosen one");
    let taus: Vec<f64> = agreement.iter().map(|a| a.1).collect();
    for (got, want) in taus.iter().zip([1.0, 1.0, -1.0 / 3.0, 1.0 / 3.0]) {
        assert!((got - want).abs() < 1e-12, "{taus:?}");
    }
    assert_eq!(agreement[3].2, serde_json::json!(["relevance"]));
    assert_eq!(agreement[0].2, serde_json::json!([]));

    let pairs: Vec<(&str, &str, f64)> = r["agreement_comparisons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (c["ranker"].as_str().unwrap(), c["other"].as_str().unwrap(), c["probability_better"].as_f64().unwrap())
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("A", "A2", 0.5),
            ("A", "B", 1.0),
            ("A", "rrf(A+B)", 1.0),
            ("A2", "B", 1.0),
            ("A2", "rrf(A+B)", 1.0),
            ("B", "rrf(A+B)", 0.0),
        ]
    );
    let conventions = r["provenance"]["conventions"].as_array().unwrap();
    assert!(conventions.contains(&serde_json::json!(["ranker rrf(A+B)", "reciprocal rank fusion (k = 60) of A, B"])));

    // The CSV tables carry the same: one agreement row per ranker, one row per pair.
    let csv = |name: &str| std::fs::read_to_string(dir.join("tables").join(name)).unwrap();
    let agree = csv("nrp_expert_agreement.csv");
    assert_eq!(agree.lines().count(), 1 + 4, "{agree}");
    assert!(agree.lines().nth(4).unwrap().starts_with("rrf(A+B),0.3333"), "{agree}");
    let pairs = csv("nrp_agreement_pairs.csv");
    assert_eq!(pairs.lines().next(), Some("ranker,other,P(ranker agrees better)"));
    assert!(pairs.lines().any(|l| l.starts_with("B,rrf(A+B),0")), "{pairs}");
    assert_eq!(pairs.lines().count(), 1 + 6);
}

/// z-sum as a ranker: the answer's fused score (1.990...) is above every document's, so its
/// NRP is 1 on both queries; the same probability rules hold.
#[test]
fn a_zsum_fusion_with_a_name_serves_a_dimension() {
    let dir = fixture();
    let r = nrp(&dir, &["--fuse", "z=zsum:A,B", "--force-ranker", "relevance=z"], "z.json");
    assert_eq!(r["dimensions"][0]["ranker"], "z");
    for a in r["answers"].as_array().unwrap() {
        assert_eq!(a["combined"].as_f64(), Some(1.0));
    }
    assert_eq!(r["expert_agreement"].as_array().unwrap().len(), 4);
}
