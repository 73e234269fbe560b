use super::*;
use crate::data::{Answer, HumanRank};
use approx::assert_relative_eq;

/// D_q scores [0.1, 0.5, 0.5, 0.9, 2.0], answer 0.5: 2 documents above, 2 tied.
/// pessimistic r = 4: 1 - 4/5 = 0.2, or 1 - 4/6 = 1/3 with |D_q| + 1;
/// optimistic  r = 2: 1 - 2/5 = 0.6, or 1 - 2/6 = 2/3;
/// average     r = 3: 1 - 3/5 = 0.4, or 1 - 3/6 = 0.5.
#[test]
fn nrp_by_hand_for_each_tie_policy_and_denominator() {
    let sorted = [0.1, 0.5, 0.5, 0.9, 2.0];
    let place = Placement::of(0.5, &sorted);
    assert_eq!(place, Placement { above: 2, tied: 2, judged: 5 });
    let cases = [
        (TiePolicy::Pessimistic, 0.2, 1.0 / 3.0),
        (TiePolicy::Optimistic, 0.6, 2.0 / 3.0),
        (TiePolicy::Average, 0.4, 0.5),
    ];
    for (ties, paper, public_code) in cases {
        assert_relative_eq!(place.nrp(ties, Denominator::JudgedDocuments).unwrap(), paper, epsilon = 1e-12);
        let plus = place.nrp(ties, Denominator::JudgedDocumentsPlusAnswer).unwrap();
        assert_relative_eq!(plus, public_code, epsilon = 1e-12);
    }
    // Above everything: 1 either way. Below everything: 0, or 1/6 with |D_q| + 1.
    let top = Placement::of(3.0, &sorted);
    assert_eq!(top.nrp(TiePolicy::Pessimistic, Denominator::JudgedDocuments), Stat::Defined(1.0));
    let bottom = Placement::of(0.0, &sorted);
    assert_eq!(bottom.nrp(TiePolicy::Optimistic, Denominator::JudgedDocuments), Stat::Defined(0.0));
    assert_relative_eq!(
        bottom.nrp(TiePolicy::Pessimistic, Denominator::JudgedDocumentsPlusAnswer).unwrap(),
        1.0 / 6.0,
        epsilon = 1e-12
    );
    // Unscored documents (-inf) are below any answer.
    assert_eq!(Placement::of(-5.0, &[f64::NEG_INFINITY, 1.0]).above, 1);
    assert!(!Placement::of(1.0, &[]).nrp(TiePolicy::Average, Denominator::JudgedDocuments).is_defined());
}

fn judgments(dimension: &str, grades: &[(&str, &str, i64)], missing: &[(&str, &str)]) -> Judgments {
    let mut map: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for (q, d, g) in grades {
        map.entry(q.to_string()).or_default().insert(d.to_string(), *g);
    }
    Judgments {
        dimension: dimension.into(),
        grades: map,
        missing: missing.iter().map(|(q, d)| (q.to_string(), d.to_string())).collect(),
    }
}

fn ranker(name: &str, docs: &[(&str, &str, f64)], answers: &[(&AnswerKey, f64)]) -> RankerScores {
    let run: Vec<RunEntry> = docs
        .iter()
        .map(|(q, d, s)| RunEntry { qid: q.to_string(), docno: d.to_string(), rank: 0, score: *s, tag: name.into() })
        .collect();
    let scores: Vec<AnswerScore> = answers
        .iter()
        .map(|(k, s)| AnswerScore {
            qid: k.qid.clone(),
            system: k.system.clone(),
            prompt: k.prompt.clone(),
            sample: k.sample,
            score: *s,
        })
        .collect();
    RankerScores::from_run(name, &run, &scores).unwrap()
}

fn keys() -> Vec<AnswerKey> {
    vec![
        AnswerKey::new("q1", "sysA", "p1", 0),
        AnswerKey::new("q1", "sysA", "p1", 1),
        AnswerKey::new("q1", "sysB", "p1", 0),
        AnswerKey::new("q2", "sysA", "p1", 0),
        AnswerKey::new("q2", "sysB", "p1", 0),
    ]
}

/// Relevance: q1 {d1: 2, d2: 1, d3: 0, d4: 0}, q2 {d5: 1, d6: 0}.
/// Credibility: q1 {d1: 1, d2: 0, d3: 1}, d4 "not able to judge"; nothing for q2.
/// Ranker `bad` (listed first) orders documents backwards, `good` forwards.
fn setup() -> (Vec<Judgments>, Vec<RankerScores>, Vec<AnswerKey>) {
    let j = vec![
        judgments(
            "relevance",
            &[("q1", "d1", 2), ("q1", "d2", 1), ("q1", "d3", 0), ("q1", "d4", 0), ("q2", "d5", 1), ("q2", "d6", 0)],
            &[],
        ),
        judgments("credibility", &[("q1", "d1", 1), ("q1", "d2", 0), ("q1", "d3", 1)], &[("q1", "d4")]),
    ];
    let k = keys();
    let good = ranker(
        "good",
        &[
            ("q1", "d1", 4.0),
            ("q1", "d2", 3.0),
            ("q1", "d3", 2.0),
            ("q1", "d4", 1.0),
            ("q2", "d5", 2.0),
            ("q2", "d6", 1.0),
        ],
        &[(&k[0], 3.0), (&k[1], 5.0), (&k[2], 0.5), (&k[3], 1.5), (&k[4], 2.0)],
    );
    let bad = ranker(
        "bad",
        &[
            ("q1", "d1", 1.0),
            ("q1", "d2", 2.0),
            ("q1", "d3", 3.0),
            ("q1", "d4", 4.0),
            ("q2", "d5", 1.0),
            ("q2", "d6", 2.0),
        ],
        &[(&k[0], 2.0), (&k[1], 0.5), (&k[2], 3.5), (&k[3], 9.0), (&k[4], 9.0)],
    );
    (j, vec![bad, good], k)
}

fn options() -> NrpOptions {
    NrpOptions { bootstrap: Bootstrap { resamples: 200, seed: 3, ..Bootstrap::default() }, ..NrpOptions::default() }
}

#[test]
fn rankers_are_validated_by_ndcg_and_chosen_per_dimension() {
    let (j, rankers, k) = setup();
    let report = nrp(&j, &rankers, &k, &options(), None).unwrap();
    let rel = &report.dimensions[0];
    // good: perfect order, nDCG 1 on both queries. bad on relevance, by hand:
    // q1 ranks d4, d3, d2, d1 (gains 0, 0, 1, 2): (1/log2 4 + 2/log2 5)/(2 + 1/log2 3)
    //    = 0.5174418337467067; q2 ranks d6, d5: (1/log2 3)/1 = 0.6309297535714575;
    // mean 0.5741857936590822.
    assert_relative_eq!(*rel.validation[0].mean_ndcg_at_10.value().unwrap(), 0.5741857936590822, epsilon = 1e-12);
    assert_eq!(*rel.validation[1].mean_ndcg_at_10.value().unwrap(), 1.0);
    assert_eq!((rel.ranker.as_str(), rel.forced), ("good", false));
    // Credibility: with d4 (not able to judge) removed, both rankers score
    // (1 + 1/log2 4)/(1 + 1/log2 3) = 0.9197207891481876 on q1; the tie goes to the
    // ranker listed first, `bad`.
    let cred = &report.dimensions[1];
    for v in &cred.validation {
        assert_relative_eq!(*v.mean_ndcg_at_10.value().unwrap(), 0.9197207891481876, epsilon = 1e-12);
        assert_eq!(v.queries, 1);
    }
    assert_eq!(cred.ranker, "bad");
    // Forcing a ranker overrides the choice.
    let forced = NrpOptions { forced_rankers: vec![("relevance".into(), "bad".into())], ..options() };
    let report = nrp(&j, &rankers, &k, &forced, None).unwrap();
    assert_eq!((report.dimensions[0].ranker.as_str(), report.dimensions[0].forced), ("bad", true));
    let unknown = NrpOptions { forced_rankers: vec![("relevance".into(), "monoT5".into())], ..options() };
    assert!(nrp(&j, &rankers, &k, &unknown, None).is_err());
}

/// Relevance with `good` (D_q1 scores 1, 2, 3, 4; D_q2 scores 1, 2), pessimistic:
///   q1/sysA/0 = 3.0: 1 above + 1 tie -> r = 2 -> 1 - 2/4 = 0.5
///   q1/sysA/1 = 5.0: r = 0 -> 1;  q1/sysB/0 = 0.5: r = 4 -> 0
///   q2/sysA/0 = 1.5: r = 1 -> 0.5; q2/sysB/0 = 2.0: tie -> r = 1 -> 0.5
/// Credibility with `bad` (D_q1 = d1, d2, d3 scored 1, 2, 3):
///   q1/sysA/0 = 2.0: 1 above + 1 tie -> 1 - 2/3 = 1/3; q1/sysA/1 = 0.5 -> 0;
///   q1/sysB/0 = 3.5 -> 1; q2: no judged document -> undefined.
/// Equal weights 1/2: q1/sysA/0 = 0.25 + 1/6 = 0.4166..., q1/sysA/1 = 0.5,
/// q1/sysB/0 = 0.5; sysA mean over its one defined query = (0.41667 + 0.5)/2.
#[test]
fn answers_get_nrp_per_dimension_combined_with_weights() {
    let (j, rankers, k) = setup();
    let report = nrp(&j, &rankers, &k, &options(), None).unwrap();
    let rel: Vec<f64> = report.answers.iter().map(|a| *a.per_dimension[0].value().unwrap()).collect();
    assert_eq!(rel, [0.5, 1.0, 0.0, 0.5, 0.5]);
    assert_eq!((report.dimensions[0].answers_with_ties, report.dimensions[0].tied_pairs), (2, 2));
    let cred = &report.answers[0].per_dimension[1];
    assert_relative_eq!(*cred.value().unwrap(), 1.0 / 3.0, epsilon = 1e-12);
    // Queries with no judged document: undefined with a reason, and counted.
    match &report.answers[3].per_dimension[1] {
        Stat::Undefined(reason) => {
            assert!(reason.contains("q2") && reason.contains("credibility"))
        }
        other => panic!("expected undefined, got {other:?}"),
    }
    assert_eq!(report.dimensions[1].undefined_answers, 2);
    assert_eq!(report.undefined_answers, 2);
    assert!(!report.answers[4].combined.is_defined());
    assert_relative_eq!(*report.answers[0].combined.value().unwrap(), 0.25 + 1.0 / 6.0, epsilon = 1e-12);
    assert_eq!(report.answers[1].combined, Stat::Defined(0.5));
    let groups: Vec<(&str, f64, usize)> =
        report.groups.iter().map(|g| (g.system.as_str(), *g.mean.value().unwrap(), g.queries)).collect();
    assert_eq!(groups[0], ("sysB", 0.5, 1));
    assert_eq!(groups[1].0, "sysA");
    assert_relative_eq!(groups[1].1, (0.25 + 1.0 / 6.0 + 0.5) / 2.0, epsilon = 1e-12);

    // Weights relevance 3, credibility 0 -> normalised (1, 0): combined = relevance NRP,
    // defined for q2 too. sysA: q1 (0.5 + 1)/2 = 0.75, q2 0.5 -> 0.625; sysB: (0 + 0.5)/2.
    let weighted = NrpOptions { weights: vec![("relevance".into(), 3.0)], ..options() };
    let report = nrp(&j, &rankers, &k, &weighted, None).unwrap();
    assert_eq!((report.dimensions[0].weight, report.dimensions[1].weight), (1.0, 0.0));
    assert_eq!(report.undefined_answers, 0);
    let means: Vec<(&str, f64)> = report.groups.iter().map(|g| (g.system.as_str(), *g.mean.value().unwrap())).collect();
    assert_eq!(means, [("sysA", 0.625), ("sysB", 0.25)]);
    for g in &report.groups {
        let ci = g.interval.value().unwrap();
        assert!(ci.contains(*g.mean.value().unwrap()));
    }
    let bad_weights = NrpOptions { weights: vec![("relevance".into(), -1.0)], ..options() };
    assert!(nrp(&j, &rankers, &k, &bad_weights, None).is_err());
}

#[test]
fn tie_policy_and_denominator_options_reach_the_answers() {
    let (j, rankers, k) = setup();
    // q1/sysA/0 on relevance: 1 above, 1 tied among 4.
    for (ties, denominator, want) in [
        (TiePolicy::Optimistic, Denominator::JudgedDocuments, 0.75),
        (TiePolicy::Average, Denominator::JudgedDocuments, 0.625),
        (TiePolicy::Pessimistic, Denominator::JudgedDocumentsPlusAnswer, 0.6),
    ] {
        let o = NrpOptions { ties, denominator, ..options() };
        let report = nrp(&j, &rankers, &k, &o, None).unwrap();
        assert_relative_eq!(*report.answers[0].per_dimension[0].value().unwrap(), want, epsilon = 1e-12);
        assert_eq!(report.ties, ties);
    }
}

#[test]
fn a_missing_answer_score_is_an_error_naming_it() {
    let (j, mut rankers, k) = setup();
    rankers[1].answers.remove(&k[2]);
    let err = nrp(&j, &rankers, &k, &options(), None).unwrap_err().to_string();
    assert!(err.contains("sysB/p1/0 (query q1)"), "{err}");
    let mut twice = k.clone();
    twice.push(k[0].clone());
    assert!(nrp(&j, &rankers, &twice, &options(), None).is_err());
}

/// Expert ranks vs ranker `good`:
/// q1: items sysA/p1/0, sysA/p1/1, d1, sysB/p1/0 ranked 2, 1, 3, 4, scored 3, 5, 4, 0.5;
///     scipy 1.17.1 kendalltau([3, 5, 4, 0.5], [-2, -1, -3, -4]) -> 0.6666666666666669
/// q2: items sysA/p1/0, d5, d6 ranked 1, 2, 3, scored 1.5, 2, 1;
///     kendalltau([1.5, 2, 1], [-1, -2, -3]) -> 0.33333333333333337
/// mean 0.5000000000000001; scipy.stats.t.interval(0.95, 1, loc=mean, scale=sem)
///     -> (-1.6177007893624498, 2.6177007893624498)
#[test]
fn expert_agreement_matches_scipy() {
    let (j, rankers, k) = setup();
    let rows: Vec<HumanRank> = [
        ("q1", "sysA/p1/0", 2.0),
        ("q1", "sysA/p1/1", 1.0),
        ("q1", "d1", 3.0),
        ("q1", "sysB/p1/0", 4.0),
        ("q1", "not-scored", 5.0),
        ("q2", "sysA/p1/0", 1.0),
        ("q2", "d5", 2.0),
        ("q2", "d6", 3.0),
    ]
    .iter()
    .enumerate()
    .map(|(i, (q, item, rank))| HumanRank {
        instance: q.to_string(),
        annotator: "md".into(),
        system: item.to_string(),
        rank: *rank,
        line: i + 2,
    })
    .collect();
    let expert = HumanRankings {
        name: "expert.csv".into(),
        rows,
        instances: vec!["q1".into(), "q2".into()],
        annotators: vec!["md".into()],
        systems: vec![],
    };
    let report = nrp(&j, &rankers, &k, &options(), Some(&expert)).unwrap();
    // Relevance chose `good`, credibility `bad`: one agreement per distinct ranker.
    assert_eq!(report.expert_agreement.len(), 2);
    let good = report.expert_agreement.iter().find(|a| a.ranker == "good").unwrap();
    assert_eq!(good.unscored_items, 1);
    let taus: Vec<f64> = good.per_query.iter().map(|q| q.kendall_tau_b.value().unwrap().tau).collect();
    assert_relative_eq!(taus[0], 0.6666666666666669, epsilon = 1e-12);
    assert_relative_eq!(taus[1], 0.33333333333333337, epsilon = 1e-12);
    assert_relative_eq!(*good.mean_tau.value().unwrap(), 0.5000000000000001, epsilon = 1e-12);
    let ci = good.interval.value().unwrap();
    assert_relative_eq!(ci.lo, -1.6177007893624498, epsilon = 1e-9);
    assert_relative_eq!(ci.hi, 2.6177007893624498, epsilon = 1e-9);
}

#[test]
fn bm25_ranker_scores_judged_documents_and_answers_with_collection_statistics() {
    let topics = vec![Topic { qid: "q1".into(), query: "insulin glucose".into() }];
    let doc = |d: &str, t: &str| Document { docno: d.into(), text: t.into() };
    let documents = vec![
        doc("d1", "insulin lowers glucose"),
        doc("d2", "glucose meters"),
        doc("d3", "knee surgery"),
        doc("unjudged", "insulin insulin insulin"),
    ];
    let j = vec![judgments("relevance", &[("q1", "d1", 2), ("q1", "d2", 1), ("q1", "d3", 0), ("q1", "lost", 1)], &[])];
    let answer = Answer {
        qid: "q1".into(),
        system: "gpt".into(),
        prompt: "plain".into(),
        sample: 0,
        text: "Insulin lowers glucose.".into(),
    };
    let r = bm25_ranker("bm25", &topics, &documents, &j, std::slice::from_ref(&answer), Bm25Params::default()).unwrap();
    let index = Bm25Index::new(
        &documents.iter().map(|d| (d.docno.as_str(), d.text.as_str())).collect::<Vec<_>>(),
        Bm25Params::default(),
    );
    let dense = index.score("insulin glucose");
    let q1 = &r.documents["q1"];
    assert_eq!(q1.len(), 3, "only judged documents that exist are scored");
    assert_eq!((q1["d1"], q1["d2"], q1["d3"]), (dense[0], dense[1], 0.0));
    // The answer has d1's words and length: the same score.
    assert_eq!(r.answers[&AnswerKey::of(&answer)], dense[0]);
    // Used by NRP: "lost" has no text, so it is unscored (below everything) and counted.
    let report = nrp(&j, &[r], &[AnswerKey::of(&answer)], &options(), None).unwrap();
    assert_eq!(report.dimensions[0].validation[0].unscored_judged_documents, 1);
    // Pessimistic: d1 ties the answer -> r = 1 of 4 -> 0.75.
    assert_eq!(report.answers[0].combined, Stat::Defined(0.75));
    assert_eq!(report.warnings.len(), 1);
}
