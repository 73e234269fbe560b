use super::*;
use crate::data::HumanRank;
use approx::assert_relative_eq;

fn instance(id: &str, problem: Problem, systems: &[&str]) -> Instance {
    Instance {
        id: id.into(),
        problem,
        arguments: systems.iter().map(|s| (s.to_string(), format!("{s} on {id}"))).collect(),
        line: 0,
    }
}

fn mcqa(answer: &str) -> Problem {
    Problem::Mcqa {
        question: "case".into(),
        options: (1..=5).map(|k| (k.to_string(), format!("option {k}"))).collect(),
        answer: answer.into(),
    }
}

fn bundle(instances: Vec<Instance>) -> Bundle {
    let mut systems: Vec<String> = Vec::new();
    for inst in &instances {
        for (s, _) in &inst.arguments {
            if !systems.contains(s) {
                systems.push(s.clone());
            }
        }
    }
    Bundle { name: "bundle.jsonl".into(), instances, systems, controls: Vec::new() }
}

fn prediction(instance: &str, system: &str, predicted: &str, p_correct: f64) -> Prediction {
    Prediction {
        instance: instance.into(),
        system: system.into(),
        predicted: predicted.into(),
        p_correct,
        probs: vec![],
    }
}

const SYSTEMS: [&str; 5] = ["expert", "gpt-4o", "llama", "openbio", "no_argument"];

/// Five MCQA instances (gold "1"); system s is right on the first `correct[s]`.
/// Accuracies: expert 0.8, gpt-4o 1.0, llama 0.4, openbio 0.6, no_argument 0.2.
fn mcqa_case() -> (Bundle, Vec<Prediction>) {
    let b = bundle((1..=5).map(|i| instance(&format!("q{i}"), mcqa("1"), &SYSTEMS)).collect());
    let correct = [4, 5, 2, 3, 1];
    let mut preds = Vec::new();
    for (s, system) in SYSTEMS.iter().enumerate() {
        for i in 0..5 {
            let right = i < correct[s];
            preds.push(prediction(
                &format!("q{}", i + 1),
                system,
                if right { "1" } else { "2" },
                if right { 0.9 } else { 0.1 },
            ));
        }
    }
    (b, preds)
}

fn options() -> ProxyOptions {
    ProxyOptions { bootstrap: Bootstrap { seed: 5, resamples: 200, ..Bootstrap::default() }, ..ProxyOptions::default() }
}

#[test]
fn mcqa_systems_are_ranked_by_accuracy_with_intervals() {
    let (b, preds) = mcqa_case();
    let report = rank_systems(&b, &preds, &options(), None).unwrap();
    assert_eq!(report.tasks.len(), 1);
    let t = &report.tasks[0];
    assert_eq!((t.task, t.metric, t.n_instances), (Task::Mcqa, Metric::Accuracy, 5));
    let order: Vec<&str> = t.systems.iter().map(|s| s.system.as_str()).collect();
    assert_eq!(order, ["gpt-4o", "expert", "openbio", "llama", "no_argument"]);
    let scores: Vec<f64> = t.systems.iter().map(|s| *s.score.value().unwrap()).collect();
    assert_eq!(scores, [1.0, 0.8, 0.6, 0.4, 0.2]);
    assert_eq!(t.systems.iter().map(|s| s.rank).collect::<Vec<_>>(), [1.0, 2.0, 3.0, 4.0, 5.0]);
    // Mean p_correct of expert: (4·0.9 + 0.1)/5 = 0.74.
    assert_relative_eq!(*t.systems[1].mean_p_correct.value().unwrap(), 0.74, epsilon = 1e-12);
    for s in &t.systems {
        let ci = s.interval.value().unwrap();
        assert!(ci.contains(*s.score.value().unwrap()), "{}: {ci:?}", s.system);
        assert!(s.binary_f1_entailment.is_none());
    }
    // gpt-4o is right everywhere: its interval is the point 1.
    assert_eq!(*t.systems[0].interval.value().unwrap(), Interval { lo: 1.0, hi: 1.0 });
    // gpt-4o (right on all) vs expert (right on a subset): never below, so P >= 1/2.
    let p = *t.adjacent[0].p_upper_beats_lower.value().unwrap();
    assert!((0.5..=1.0).contains(&p));
    assert!(t.robustness.robust.value().copied().unwrap());
    assert!(t.robustness.violations.is_empty());
    // Deterministic for a seed.
    assert_eq!(rank_systems(&b, &preds, &options(), None).unwrap(), report);
}

#[test]
fn ties_share_the_average_rank_and_a_tied_control_is_a_violation() {
    let (b, mut preds) = mcqa_case();
    // no_argument now right on 3 of 5, like openbio (0.6): ranks 3 and 4 -> 3.5 each.
    for p in preds.iter_mut().filter(|p| p.system == "no_argument") {
        if ["q2", "q3"].contains(&p.instance.as_str()) {
            p.predicted = "1".into();
        }
    }
    let report = rank_systems(&b, &preds, &options(), None).unwrap();
    let t = &report.tasks[0];
    let rank_of = |name: &str| t.systems.iter().find(|s| s.system == name).unwrap().rank;
    assert_eq!((rank_of("openbio"), rank_of("no_argument")), (3.5, 3.5));
    assert_eq!(rank_of("llama"), 5.0);
    assert_eq!(t.robustness.robust, Stat::Defined(false));
    let v: Vec<(&str, &str)> =
        t.robustness.violations.iter().map(|v| (v.control.as_str(), v.primary.as_str())).collect();
    assert_eq!(v, [("no_argument", "llama"), ("no_argument", "openbio")]);
    // Same predictions for openbio and no_argument on every instance? No: so the adjacent
    // win rate is still a probability, and identical systems would give exactly 1/2.
    let mut same = preds.clone();
    for p in same.iter_mut().filter(|p| p.system == "no_argument") {
        let i: usize = p.instance[1..].parse().unwrap();
        p.predicted = if i <= 3 { "1" } else { "2" }.into();
    }
    let report = rank_systems(&b, &same, &options(), None).unwrap();
    let adj = report.tasks[0].adjacent.iter().find(|a| a.upper == "openbio").unwrap();
    assert_eq!(adj.lower, "no_argument");
    assert_eq!(adj.p_upper_beats_lower, Stat::Defined(0.5));
}

#[test]
fn misinformation_uses_macro_f1_and_drops_not_enough_evidence() {
    // scikit-learn 1.x: f1_score(["supported","refuted","supported","refuted","supported",
    // "refuted"], ["supported","supported","not_enough_evidence","refuted","supported",
    // "refuted"], average="macro") -> 0.48888888888888893 (labels: the union, 3).
    let gold = ["supported", "refuted", "supported", "refuted", "supported", "refuted"];
    let pred = ["supported", "supported", "not_enough_evidence", "refuted", "supported", "refuted"];
    let mut instances: Vec<Instance> = gold
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let p = Problem::Misinformation { claim: "c".into(), label: g.to_string() };
            instance(&format!("c{i}"), p, &["expert"])
        })
        .collect();
    let nee = Problem::Misinformation { claim: "c".into(), label: "not_enough_evidence".into() };
    instances.push(instance("c-nee", nee, &["expert"]));
    let b = bundle(instances);
    let mut preds: Vec<Prediction> =
        pred.iter().enumerate().map(|(i, p)| prediction(&format!("c{i}"), "expert", p, 0.5)).collect();
    preds.push(prediction("c-nee", "expert", "refuted", 0.2));
    let report = rank_systems(&b, &preds, &options(), None).unwrap();
    let t = &report.tasks[0];
    assert_eq!((t.metric, t.n_instances, t.dropped_not_enough_evidence), (Metric::MacroF1, 6, 1));
    assert_relative_eq!(*t.systems[0].score.value().unwrap(), 0.48888888888888893, epsilon = 1e-12);
    // Human rankings without a row for this task: no agreement section at all.
    let none = HumanRankings {
        name: "rankings.csv".into(),
        rows: vec![],
        instances: vec![],
        annotators: vec![],
        systems: vec![],
    };
    let with_rankings = rank_systems(&b, &preds, &options(), Some(&none)).unwrap();
    assert!(with_rankings.tasks[0].human.is_none());
    // Kept when asked: the NEE instance then needs and uses its prediction.
    let keep = ProxyOptions { drop_not_enough_evidence: false, ..options() };
    let t = &rank_systems(&b, &preds, &keep, None).unwrap().tasks[0];
    assert_eq!((t.n_instances, t.dropped_not_enough_evidence), (7, 0));
}

#[test]
fn nli_reports_micro_f1_and_binary_f1_with_entailment_positive() {
    // scikit-learn 1.x: y_true = [E, C, E, C, E], y_pred = [E, E, C, C, E]:
    // f1_score(average="micro") -> 0.6; f1_score(pos_label="entailment") -> 0.6666666666666666
    let gold = ["entailment", "contradiction", "entailment", "contradiction", "entailment"];
    let pred = ["entailment", "entailment", "contradiction", "contradiction", "entailment"];
    let b = bundle(
        gold.iter()
            .enumerate()
            .map(|(i, g)| {
                let p = Problem::Nli { statement: "s".into(), evidence: "e".into(), label: g.to_string() };
                instance(&format!("n{i}"), p, &["gpt-4o"])
            })
            .collect(),
    );
    let preds: Vec<Prediction> =
        pred.iter().enumerate().map(|(i, p)| prediction(&format!("n{i}"), "gpt-4o", p, 0.5)).collect();
    let t = &rank_systems(&b, &preds, &options(), None).unwrap().tasks[0];
    assert_eq!(t.metric, Metric::MicroF1);
    assert_relative_eq!(*t.systems[0].score.value().unwrap(), 0.6, epsilon = 1e-12);
    let binary = t.systems[0].binary_f1_entailment.clone().unwrap().unwrap();
    assert_relative_eq!(binary, 0.6666666666666666, epsilon = 1e-12);
    // No control system in the task: the verdict is undefined, not "robust".
    assert!(!t.robustness.robust.is_defined());
}

#[test]
fn bad_predictions_are_errors_that_name_them() {
    let (b, preds) = mcqa_case();
    let missing: Vec<Prediction> =
        preds.iter().filter(|p| !(p.instance == "q3" && p.system == "llama")).cloned().collect();
    let err = rank_systems(&b, &missing, &options(), None).unwrap_err().to_string();
    // Located at the instance's bundle line (0: this bundle is built in memory).
    assert_eq!(err, "bundle.jsonl:0: field `arguments.llama`: instance `q3` has no prediction for system `llama`");

    let mut twice = preds.clone();
    twice.push(preds[0].clone());
    let err = rank_systems(&b, &twice, &options(), None).unwrap_err().to_string();
    assert!(err.contains("(q1, expert) is predicted twice"), "{err}");

    let mut unknown = preds.clone();
    unknown.push(prediction("q9", "expert", "1", 0.5));
    unknown.push(prediction("q1", "expert", "7", 0.5));
    let err = rank_systems(&b, &unknown, &options(), None).unwrap_err().to_string();
    assert!(err.contains("unknown instance `q9`") && err.contains("label `7`"), "{err}");
}

#[test]
fn an_instance_missing_a_system_is_left_out_and_named() {
    let (mut b, mut preds) = mcqa_case();
    b.instances[4].arguments.retain(|(s, _)| s != "llama");
    preds.retain(|p| !(p.instance == "q5" && p.system == "llama"));
    let report = rank_systems(&b, &preds, &options(), None).unwrap();
    let t = &report.tasks[0];
    assert_eq!(t.n_instances, 4);
    assert_eq!(t.incomplete_instances, ["q5"]);
    assert!(report.warnings[0].message.contains("q5"));
}

/// Two annotators rank the four primary systems of the five MCQA instances; B did not
/// rank openbio on q3 (one incomplete block). References:
/// - averages: expert 1.85, gpt-4o 1.25, llama 3.1, openbio 3.6666666666666665 (9 ranks)
/// - scipy 1.17.1: kendalltau([0.8, 1.0, 0.4, 0.6], [-1.85, -1.25, -3.1, -3.6667])
///   -> statistic 0.6666666666666669, pvalue 0.3333333333333333
/// - scipy 1.17.1: friedmanchisquare(*columns of the 9 complete blocks)
///   -> statistic 21.409090909090914, pvalue 8.656420713732146e-05
/// - krippendorff 0.9.0: alpha(reliability_data=[A, B] over the 20 (instance, system)
///   units, NaN for the missing one, level_of_measurement="ordinal") -> 0.8002872251735826
#[test]
fn human_agreement_matches_scipy_and_krippendorff() {
    let (b, preds) = mcqa_case();
    let a: [(&str, [f64; 4]); 5] = [
        ("q1", [2.0, 1.0, 3.0, 4.0]),
        ("q2", [1.0, 2.0, 3.0, 3.0]),
        ("q3", [2.0, 1.0, 4.0, 3.0]),
        ("q4", [3.0, 1.0, 2.0, 4.0]),
        ("q5", [2.0, 1.0, 3.0, 4.0]),
    ];
    let bb: [(&str, [f64; 4]); 5] = [
        ("q1", [1.0, 2.0, 3.0, 4.0]),
        ("q2", [2.0, 1.0, 4.0, 3.0]),
        ("q3", [2.0, 1.0, 3.0, f64::NAN]),
        ("q4", [2.0, 1.0, 3.0, 4.0]),
        ("q5", [1.5, 1.5, 3.0, 4.0]),
    ];
    let mut rows = Vec::new();
    for (annotator, table) in [("A", a), ("B", bb)] {
        for (instance, ranks) in table {
            for (s, rank) in ranks.iter().enumerate() {
                if !rank.is_nan() {
                    rows.push(HumanRank {
                        instance: instance.into(),
                        annotator: annotator.into(),
                        system: SYSTEMS[s].into(),
                        rank: *rank,
                        line: rows.len() + 2,
                    });
                }
            }
        }
    }
    let rankings = HumanRankings {
        name: "rankings.csv".into(),
        rows,
        instances: (1..=5).map(|i| format!("q{i}")).collect(),
        annotators: vec!["A".into(), "B".into()],
        systems: SYSTEMS[..4].iter().map(|s| s.to_string()).collect(),
    };
    let report = rank_systems(&b, &preds, &options(), Some(&rankings)).unwrap();
    let h = report.tasks[0].human.as_ref().unwrap();
    let avg: Vec<(&str, f64, usize)> = h.systems.iter().map(|s| (s.system.as_str(), s.average_rank, s.n)).collect();
    assert_eq!(avg[0], ("gpt-4o", 1.25, 10));
    assert_relative_eq!(avg[1].1, 1.85, epsilon = 1e-12);
    assert_relative_eq!(avg[3].1, 3.6666666666666665, epsilon = 1e-12);
    assert_eq!(avg[3].2, 9);
    let k = h.kendall_tau_b.value().unwrap();
    assert_relative_eq!(k.tau, 0.6666666666666669, epsilon = 1e-12);
    assert_relative_eq!(k.p_value, 0.3333333333333333, epsilon = 1e-12);
    assert_eq!((h.friedman_blocks, h.friedman_incomplete_blocks), (9, 1));
    let f = h.friedman.value().unwrap();
    assert_relative_eq!(f.statistic, 21.409090909090914, epsilon = 1e-9);
    assert_relative_eq!(f.p_value, 8.656420713732146e-05, max_relative = 1e-9);
    let alpha = *h.krippendorff_alpha_ordinal.value().unwrap();
    assert_relative_eq!(alpha, 0.8002872251735826, epsilon = 1e-12);
    assert_eq!(h.rows_excluded, 0);

    // Rankings alone (no evaluator): the same human statistics, no Kendall.
    let ids: HashSet<&str> = rankings.instances.iter().map(String::as_str).collect();
    let alone = human_agreement(&rankings, &ids, &ids, None).unwrap();
    assert!(!alone.kendall_tau_b.is_defined());
    assert_eq!(alone.friedman, h.friedman);
    assert_eq!(alone.krippendorff_alpha_ordinal, h.krippendorff_alpha_ordinal);
    // Rows of instances outside the evaluated set are counted, not used.
    let only_q1: HashSet<&str> = ["q1"].into_iter().collect();
    let part = human_agreement(&rankings, &ids, &only_q1, None).unwrap();
    assert_eq!(part.rows_excluded, 39 - 8);

    // A row for an instance the bundle lacks is an error at its line.
    let mut bad = rankings.clone();
    bad.rows[3].instance = "q99".into();
    let err = rank_systems(&b, &preds, &options(), Some(&bad)).unwrap_err();
    assert_eq!(err.location().unwrap().line, Some(5));
}

#[test]
fn a_metrics_name_is_its_name_in_the_report() {
    for m in [Metric::Accuracy, Metric::MacroF1, Metric::MicroF1] {
        assert_eq!(serde_json::to_value(m).unwrap(), m.name());
    }
}
