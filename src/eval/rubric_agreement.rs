//! Agreement of a rubric grader with people (HealthBench's meta-evaluation): how often a
//! grader's `met` on a (response, criterion) agrees with the human judgements of it, and
//! how often each person agrees with the others, the same way.
//!
//! The figures follow simple-evals' `healthbench_meta_eval.py`
//! (`compute_metrics_for_rater_by_class`): every (rater label, other label) pair on an item
//! counts, pooled over items; the rater is the grader against each person who judged the
//! item, or one person against each of the others. Over the pairs (other = gold, rater =
//! prediction):
//!
//! - F1 of `met` and F1 of `not met`, each 2TP / (2TP + FP + FN) (its precision TP / (TP +
//!   FP) over the pairs where the rater said the class, recall over the pairs where the
//!   other did), and **macro-F1** = their mean (simple-evals' `pairwise_*_f1_balanced`,
//!   the number HealthBench reports). Undefined, as there, when a class has no pair on the
//!   rater's side or on the other's (its precision or recall has no denominator).
//!   Otherwise it equals scikit-learn's `f1_score(average="macro")` over the pairs.
//! - **Cohen's kappa** over the same pairs (`stats::kappa::cohen`, scikit-learn's
//!   `cohen_kappa_score`); not part of simple-evals, beside it as the usual chance-corrected
//!   figure.
//!
//! People are compared one at a time with the others (simple-evals'
//! `physician_agreement_metric_lists`, one value per physician); the report gives each
//! person's figures and their unweighted mean over people with a defined value, so a grader
//! can be set beside a typical colleague. Everything is computed over all items and again
//! per group: response tags `theme:...`, criterion tags `axis:...` and `cluster:...`.
//!
//! Inputs: a §7 file whose criteria carry human judgements (`met_by`, or a lone `met`), and
//! optionally a graded §7 file of the grader with the same (system, id) responses and the
//! same criteria in the same order (FORMATS.md §7).

use crate::data::graded::{parse_rubric, RubricResponse};
use crate::error::{Error, Result, Warning};
use crate::report::{Provenance, SingleInputReport};
use crate::stats::classes::Confusion;
use crate::stats::kappa::{cohen, Weights};
use crate::stats::Stat;
use serde::Serialize;
use std::collections::HashMap;

/// The grader name a criterion's `met` takes in the human file when it has no `met_by`.
pub const LONE_MET: &str = "(met)";

/// The group of every item.
pub const ALL: &str = "all";

/// Agreement of one rater with others over their pairs of labels.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairAgreement {
    /// (rater label, other label) pairs.
    pub pairs: usize,
    pub f1_met: Stat<f64>,
    pub f1_not_met: Stat<f64>,
    /// Mean of the two F1s (HealthBench's macro-F1).
    pub macro_f1: Stat<f64>,
    pub kappa: Stat<f64>,
    /// Pairs as [[other not met & rater not met, other not met & rater met], [other met &
    /// rater not met, other met & rater met]].
    pub confusion: Vec<Vec<u64>>,
}

/// One person against the others.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HumanAgreement {
    pub grader: String,
    pub agreement: PairAgreement,
}

/// The figures of one group of items.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupAgreement {
    /// `all`, or a tag.
    pub group: String,
    /// (response, criterion) items with at least one human judgement.
    pub items: usize,
    /// The grader against every human judgement (with a grader file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grader: Option<PairAgreement>,
    /// Each person against the others, on the items where someone else judged too.
    pub humans: Vec<HumanAgreement>,
    /// Mean over `humans` with a defined value.
    pub human_mean_macro_f1: Stat<f64>,
    pub human_mean_kappa: Stat<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RubricAgreementReport {
    pub provenance: Provenance,
    /// The people who judged, in order of first appearance.
    pub human_graders: Vec<String>,
    /// Items with at least one human judgement.
    pub items: usize,
    /// Criteria without a human judgement (left out, counted).
    pub unjudged_criteria: usize,
    /// `all` first, then every tag group, sorted.
    pub groups: Vec<GroupAgreement>,
    pub warnings: Vec<Warning>,
}

impl SingleInputReport for RubricAgreementReport {
    fn provenance_mut(&mut self) -> &mut Provenance {
        &mut self.provenance
    }
    fn warnings_mut(&mut self) -> &mut Vec<Warning> {
        &mut self.warnings
    }
}

/// One judged (response, criterion).
struct Item {
    humans: Vec<(String, bool)>,
    grader: Option<bool>,
    groups: Vec<String>,
}

/// Reads the human file (name, text) and the grader's graded file, if any, and computes
/// the figures. The provenance lists no input (the job adds them).
pub fn agreement(human: (&str, &str), grader: Option<(&str, &str)>) -> Result<RubricAgreementReport> {
    let (responses, mut warnings) = parse_rubric(human.0, human.1)?;
    let graded = match grader {
        Some((name, text)) => {
            let (g, w) = parse_rubric(name, text)?;
            warnings.extend(w);
            Some((name, g))
        }
        None => None,
    };
    let (items, unjudged, w) = items(human.0, &responses, graded.as_ref().map(|(n, g)| (*n, g.as_slice())))?;
    warnings.extend(w);
    if items.is_empty() {
        return Err(Error::in_file(
            human.0,
            "no criterion carries a human judgement (`met_by`, or `met`): nothing to compare",
        ));
    }
    let human_graders =
        crate::data::common::first_appearance(items.iter().flat_map(|i| i.humans.iter().map(|(g, _)| g.clone())));
    let mut names: Vec<String> = items.iter().flat_map(|i| i.groups.iter().cloned()).collect();
    names.sort();
    names.dedup();
    names.retain(|n| n != ALL);
    names.insert(0, ALL.to_string());
    let has_grader = graded.is_some();
    let groups = names
        .into_iter()
        .map(|group| {
            let mine: Vec<&Item> = items.iter().filter(|i| i.groups.contains(&group)).collect();
            group_agreement(group, &mine, &human_graders, has_grader)
        })
        .collect();
    let provenance = Provenance::new(0)
        .convention(
            "pairs",
            "every (rater label, other label) pair on an item, pooled over items (simple-evals healthbench_meta_eval.py): the grader against each person who judged the item; each person against each other person who judged it",
        )
        .convention(
            "macro-F1",
            "mean of the F1 of met and of not met over the pairs, the others' labels as gold (HealthBench's pairwise f1_balanced); undefined when a class has no pair on either side",
        )
        .convention("kappa", "Cohen's kappa over the same pairs")
        .convention("human figures", "each person against the others; the mean is unweighted over people with a defined value")
        .convention(
            "human judgements",
            format!("a criterion's `met_by`; without it, its `met` as one person named `{LONE_MET}`"),
        )
        .convention("groups", "all items, then each response tag theme:..., criterion tag axis:... and cluster:...");
    Ok(RubricAgreementReport {
        provenance,
        human_graders,
        items: items.len(),
        unjudged_criteria: unjudged,
        groups,
        warnings,
    })
}

/// The judged items, with the grader's label from its file; (items, criteria without a
/// human judgement, warnings).
fn items(
    human_file: &str,
    responses: &[RubricResponse],
    grader: Option<(&str, &[RubricResponse])>,
) -> Result<(Vec<Item>, usize, Vec<Warning>)> {
    let mut warnings = Vec::new();
    let index: Option<HashMap<(&str, &str), &RubricResponse>> =
        grader.map(|(_, g)| g.iter().map(|r| ((r.system.as_str(), r.id.as_str()), r)).collect());
    if let Some((name, g)) = grader {
        if let Some(c) = g.iter().flat_map(|r| &r.criteria).next() {
            if c.met.is_none() {
                return Err(Error::input(
                    name,
                    g[0].line,
                    "criteria[0].met",
                    "the grader's file is ungraded: its criteria need `met`",
                ));
            }
        }
        let known: std::collections::HashSet<(&str, &str)> =
            responses.iter().map(|r| (r.system.as_str(), r.id.as_str())).collect();
        let extra: Vec<String> = g
            .iter()
            .filter(|r| !known.contains(&(r.system.as_str(), r.id.as_str())))
            .map(|r| format!("{}/{}", r.system, r.id))
            .collect();
        if !extra.is_empty() {
            warnings.push(Warning::at(
                crate::Location::file(name),
                format!(
                    "responses of the grader's file that {human_file} does not have (left out): {}",
                    crate::data::common::list_ids(&extra)
                ),
            ));
        }
    }
    let mut items = Vec::new();
    let mut unjudged = 0;
    for r in responses {
        let theirs = match (&index, grader) {
            (Some(index), Some((name, _))) => {
                let judged = r.criteria.iter().any(|c| c.met.is_some() || !c.met_by.is_empty());
                match index.get(&(r.system.as_str(), r.id.as_str())) {
                    Some(g) => Some(*g),
                    None if judged => {
                        return Err(Error::input(
                            human_file,
                            r.line,
                            "id",
                            format!("response `{}` of system `{}` is not in the grader's file {name}", r.id, r.system),
                        ))
                    }
                    None => None,
                }
            }
            _ => None,
        };
        if let (Some(g), Some((name, _))) = (theirs, grader) {
            if g.criteria.len() != r.criteria.len() {
                return Err(Error::input(
                    name,
                    g.line,
                    "criteria",
                    format!(
                        "{} criteria, where {human_file} line {} has {}: the grader's file must list the same criteria in the same order",
                        g.criteria.len(),
                        r.line,
                        r.criteria.len()
                    ),
                ));
            }
            if let Some(i) = (0..g.criteria.len()).find(|&i| g.criteria[i].criterion != r.criteria[i].criterion) {
                return Err(Error::input(
                    name,
                    g.line,
                    &format!("criteria[{i}].criterion"),
                    format!(
                        "`{}` differs from {human_file} line {}: `{}`",
                        crate::data::common::excerpt(&g.criteria[i].criterion, 60),
                        r.line,
                        crate::data::common::excerpt(&r.criteria[i].criterion, 60)
                    ),
                ));
            }
        }
        for (i, c) in r.criteria.iter().enumerate() {
            let humans: Vec<(String, bool)> = match (&c.met_by[..], c.met) {
                ([], Some(met)) => vec![(LONE_MET.to_string(), met)],
                ([], None) => {
                    unjudged += 1;
                    continue;
                }
                (by, _) => by.to_vec(),
            };
            let mut groups = vec![ALL.to_string()];
            groups.extend(r.tags.iter().filter(|t| t.starts_with("theme:")).cloned());
            groups.extend(c.tags.iter().filter(|t| t.starts_with("axis:") || t.starts_with("cluster:")).cloned());
            items.push(Item { humans, grader: theirs.and_then(|g| g.criteria[i].met), groups });
        }
    }
    if unjudged > 0 {
        warnings.push(Warning::at(
            crate::Location::file(human_file),
            format!("criteria without a human judgement (no `met_by`, no `met`), left out: {unjudged}"),
        ));
    }
    Ok((items, unjudged, warnings))
}

fn group_agreement(group: String, items: &[&Item], people: &[String], has_grader: bool) -> GroupAgreement {
    let grader = has_grader.then(|| {
        let pairs = items.iter().flat_map(|i| {
            let rater = i.grader.expect("every judged item has the grader's label");
            i.humans.iter().map(move |(_, other)| (rater, *other))
        });
        pair_agreement(pairs)
    });
    let humans: Vec<HumanAgreement> = people
        .iter()
        .filter_map(|person| {
            let pairs: Vec<(bool, bool)> = items
                .iter()
                .filter_map(|i| i.humans.iter().find(|(g, _)| g == person).map(|(_, mine)| (i, *mine)))
                .flat_map(|(i, mine)| {
                    i.humans.iter().filter(|(g, _)| g != person).map(move |(_, other)| (mine, *other))
                })
                .collect();
            (!pairs.is_empty()).then(|| HumanAgreement { grader: person.clone(), agreement: pair_agreement(pairs) })
        })
        .collect();
    let mean = |f: fn(&PairAgreement) -> &Stat<f64>| {
        let values: Vec<f64> = humans.iter().filter_map(|h| f(&h.agreement).value().copied()).collect();
        if values.is_empty() {
            Stat::undefined("no person with a defined value")
        } else {
            crate::stats::describe::mean(&values)
        }
    };
    GroupAgreement {
        group,
        items: items.len(),
        grader,
        human_mean_macro_f1: mean(|a| &a.macro_f1),
        human_mean_kappa: mean(|a| &a.kappa),
        humans,
    }
}

/// The figures of (rater, other) pairs; class 1 = met.
pub fn pair_agreement(pairs: impl IntoIterator<Item = (bool, bool)>) -> PairAgreement {
    let pairs: Vec<(bool, bool)> = pairs.into_iter().collect();
    let confusion = Confusion::of(2, pairs.iter().map(|&(rater, other)| (usize::from(other), usize::from(rater))));
    let per = confusion.per_class(&["not met".to_string(), "met".to_string()]);
    // simple-evals: a class's F1 is undefined when its precision or recall has no
    // denominator (the rater never said it, or the others never did).
    let f1 = |k: usize| {
        let c = &per[k];
        if c.predicted == 0 || c.support == 0 {
            // In words a reader of the tab knows: who never judged what.
            let who = if c.predicted == 0 { "the rater" } else { "the others" };
            Stat::undefined(if k == 1 {
                format!("{who} judged no criterion met here")
            } else {
                format!("{who} judged every criterion met here")
            })
        } else {
            Stat::Defined(c.f1)
        }
    };
    let (f1_not_met, f1_met) = (f1(0), f1(1));
    let macro_f1 = match (&f1_met, &f1_not_met) {
        // Both classes occur on both sides: the confusion matrix's macro-F1 is their mean.
        (Stat::Defined(_), Stat::Defined(_)) => Stat::Defined(confusion.macro_f1()),
        (Stat::Undefined(r), _) | (_, Stat::Undefined(r)) => Stat::undefined(r.clone()),
    };
    let rater: Vec<i64> = pairs.iter().map(|&(r, _)| i64::from(r)).collect();
    let other: Vec<i64> = pairs.iter().map(|&(_, o)| i64::from(o)).collect();
    PairAgreement {
        pairs: pairs.len(),
        f1_met,
        f1_not_met,
        macro_f1,
        kappa: cohen(&rater, &other, &[0, 1], Weights::None),
        confusion: confusion.rows(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HUMANS: &str = include_str!("../../examples/rubric/judged.jsonl");
    const GRADER: &str = include_str!("../../examples/rubric/grader.jsonl");

    /// (pairs, macro-F1, F1 not met, F1 met, kappa), None where undefined.
    type Expected = (usize, Option<(f64, f64, f64, f64)>);

    fn check(a: &PairAgreement, (pairs, figures): Expected, what: &str) {
        assert_eq!(a.pairs, pairs, "{what}");
        match figures {
            // Equal to the last bit: counts in, one division per F1 (as scikit-learn's).
            Some((f1, not_met, met, kappa)) => {
                let got = (a.macro_f1.clone().unwrap(), a.f1_not_met.clone().unwrap(), a.f1_met.clone().unwrap());
                assert_eq!(got, (f1, not_met, met), "{what}");
                assert_eq!(a.kappa.clone().unwrap(), kappa, "{what}: kappa");
            }
            None => assert!(!a.macro_f1.is_defined(), "{what}: {:?}", a.macro_f1),
        }
    }

    #[test]
    fn figures_equal_scikit_learn_over_healthbench_pairs() {
        // Expected values: tests/reference/rubric_agreement_reference.py on the two fixture
        // files (scikit-learn 1.9.1: f1_score(average="macro"), f1_score(average=None,
        // labels=[0, 1]), cohen_kappa_score over the pairs built as simple-evals'
        // healthbench_meta_eval.py builds them).
        let r = agreement(("judged.jsonl", HUMANS), Some(("grader.jsonl", GRADER))).unwrap();
        assert_eq!(r.human_graders, ["p1", "p2", "p3"]);
        assert_eq!((r.items, r.unjudged_criteria), (23, 1));
        let group = |name: &str| r.groups.iter().find(|g| g.group == name).unwrap();
        let names: Vec<&str> = r.groups.iter().map(|g| g.group.as_str()).collect();
        assert_eq!(
            names,
            [
                "all",
                "axis:accuracy",
                "axis:communication_quality",
                "axis:context_awareness",
                "cluster:communication_plain",
                "theme:communication",
                "theme:emergency_referrals",
                "theme:hedging"
            ]
        );
        let all = group("all");
        assert_eq!(all.items, 23);
        check(
            all.grader.as_ref().unwrap(),
            (54, Some((0.609907120743034, 0.5882352941176471, 0.631578947368421, 0.2222222222222222))),
            "grader, all",
        );
        let people: [Expected; 3] = [
            (24, Some((0.791304347826087, 0.8, 0.782608695652174, 0.5890410958904109))),
            (31, Some((0.6770833333333333, 0.6666666666666666, 0.6875, 0.36475409836065575))),
            (23, Some((0.6956521739130435, 0.6956521739130435, 0.6956521739130435, 0.39245283018867927))),
        ];
        for (h, want) in all.humans.iter().zip(people) {
            check(&h.agreement, want, &h.grader);
        }
        // The mean of the three people.
        let mean = (0.791304347826087 + 0.6770833333333333 + 0.6956521739130435) / 3.0;
        assert_eq!(all.human_mean_macro_f1.clone().unwrap(), mean);
        check(
            group("axis:accuracy").grader.as_ref().unwrap(),
            (28, Some((0.7496807151979565, 0.7586206896551724, 0.7407407407407407, 0.505050505050505))),
            "grader, axis:accuracy",
        );
        check(
            group("axis:context_awareness").grader.as_ref().unwrap(),
            (14, Some((0.35384615384615387, 0.3076923076923077, 0.4, -0.14545454545454528))),
            "grader, axis:context_awareness",
        );
        let emergency = group("theme:emergency_referrals");
        check(
            emergency.grader.as_ref().unwrap(),
            (19, Some((0.5210084033613445, 0.5714285714285714, 0.47058823529411764, 0.1576354679802957))),
            "grader, theme:emergency_referrals",
        );
        // p1 never said `met` there: undefined as in simple-evals (no precision for it);
        // p2's F1 of met is 0 but defined, as there.
        check(&emergency.humans[0].agreement, (8, None), "p1, theme:emergency_referrals");
        check(
            &emergency.humans[1].agreement,
            (11, Some((0.26666666666666666, 0.5333333333333333, 0.0, -0.3508771929824561))),
            "p2, theme:emergency_referrals",
        );
        let comm = group("theme:communication");
        check(
            comm.grader.as_ref().unwrap(),
            (17, Some((0.5502645502645502, 0.2857142857142857, 0.8148148148148148, 0.14141414141414155))),
            "grader, theme:communication",
        );
        check(&group("theme:hedging").humans[2].agreement, (6, Some((1.0, 1.0, 1.0, 1.0))), "p3, theme:hedging");
        assert_eq!(r.warnings.len(), 1);
        assert_eq!(
            r.warnings[0].to_string(),
            "judged.jsonl: criteria without a human judgement (no `met_by`, no `met`), left out: 1"
        );
    }

    #[test]
    fn people_alone_and_a_lone_met() {
        let r = agreement(("judged.jsonl", HUMANS), None).unwrap();
        assert!(r.groups.iter().all(|g| g.grader.is_none()));
        check(
            &r.groups[0].humans[0].agreement,
            (24, Some((0.791304347826087, 0.8, 0.782608695652174, 0.5890410958904109))),
            "p1 without a grader file",
        );
        // A graded file read as the human side: its `met` is one person, who has nobody to
        // agree with; the grader is compared with it. By hand: pairs (grader, person) =
        // (T,T), (F,T), (F,F), (T,F) -> TP 1, FP 1, FN 1, TN 1: F1 0.5 each, kappa 0.
        let person = r#"{"id": "a", "system": "s", "criteria": [{"criterion": "x", "points": 1, "met": true}, {"criterion": "y", "points": 1, "met": true}]}
{"id": "b", "system": "s", "criteria": [{"criterion": "x", "points": 1, "met": false}, {"criterion": "y", "points": 1, "met": false}]}"#;
        let grader = r#"{"id": "a", "system": "s", "criteria": [{"criterion": "x", "met": true}, {"criterion": "y", "met": false}]}
{"id": "b", "system": "s", "criteria": [{"criterion": "x", "met": false}, {"criterion": "y", "met": true}]}"#;
        let r = agreement(("h.jsonl", person), Some(("g.jsonl", grader))).unwrap();
        assert_eq!(r.human_graders, [LONE_MET]);
        check(r.groups[0].grader.as_ref().unwrap(), (4, Some((0.5, 0.5, 0.5, 0.0))), "lone met");
        assert!(r.groups[0].humans.is_empty());
        assert!(!r.groups[0].human_mean_macro_f1.is_defined());
    }

    #[test]
    fn a_grader_file_that_does_not_match_is_refused() {
        let one = |criteria: &str| format!(r#"{{"id": "r1", "system": "s", "criteria": [{criteria}]}}"#);
        let human = one(r#"{"criterion": "x", "met_by": {"a": true, "b": false}}"#);
        let err = |grader: &str| agreement(("h.jsonl", &human), Some(("g.jsonl", grader))).unwrap_err().to_string();
        assert_eq!(
            err(&one(r#"{"criterion": "z", "met": true}"#)),
            "g.jsonl:1: field `criteria[0].criterion`: `z` differs from h.jsonl line 1: `x`"
        );
        assert_eq!(
            err(&one(r#"{"criterion": "x", "met": true}, {"criterion": "y", "met": true}"#)),
            "g.jsonl:1: field `criteria`: 2 criteria, where h.jsonl line 1 has 1: the grader's file must list the same criteria in the same order"
        );
        assert_eq!(
            err(&one(r#"{"criterion": "x"}"#)),
            "g.jsonl:1: field `criteria[0].met`: the grader's file is ungraded: its criteria need `met`"
        );
        assert_eq!(
            err(r#"{"id": "r2", "system": "s", "criteria": [{"criterion": "x", "met": true}]}"#),
            "h.jsonl:1: field `id`: response `r1` of system `s` is not in the grader's file g.jsonl"
        );
        let nobody = one(r#"{"criterion": "x", "points": 2}"#);
        assert_eq!(
            agreement(("h.jsonl", &nobody), None).unwrap_err().to_string(),
            "h.jsonl: no criterion carries a human judgement (`met_by`, or `met`): nothing to compare"
        );
    }
}
