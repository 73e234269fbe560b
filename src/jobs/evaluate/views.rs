//! The ranking-over-scoring tabs' view models (Ranking, Heatmap, Robustness, Human
//! agreement), computed from the job's report so that `www/results.js` only draws. The
//! heatmap comes from the same rank matrix as the CLI's heatmap table
//! (`EvaluateReport::rank_matrix`); p-values are written by the tables' rule.

use serde::Serialize;

use super::EvaluateReport;
use crate::eval::proxy::TaskReport;
use crate::jobs::quality::PeopleAgreement;
use crate::jobs::views::{bounds, value, Bounds};
use crate::report::{fmt_p_value, PValueDigits};
use crate::stats::Stat;

/// One evaluator's ranking of one task: the Ranking tab's table and interval chart.
#[derive(Debug, Serialize)]
pub struct RankingView<'a> {
    pub evaluator: &'a str,
    pub task: &'a str,
    /// The task's metric in words ("accuracy", "macro f1", ...).
    pub metric: String,
    pub confidence: f64,
    /// What a uniform guess scores, where the task has a plain one (MCQA).
    pub chance: Option<f64>,
    /// Its ranking against people's rankings of the same systems, when given: in words,
    /// marked when no better than chance.
    pub people: Option<PeopleAgreement>,
    pub systems: Vec<SystemRow<'a>>,
}

#[derive(Debug, Serialize)]
pub struct SystemRow<'a> {
    pub system: &'a str,
    pub control: bool,
    pub n: usize,
    pub rank: f64,
    pub score: Option<f64>,
    /// Its score is below what a uniform guess scores.
    pub below_chance: bool,
    #[serde(flatten)]
    pub interval: Bounds,
    pub mean_p_correct: Option<f64>,
}

/// One evaluator's robustness verdict on one task (every control below every real system).
#[derive(Debug, Serialize)]
pub struct RobustnessView<'a> {
    pub evaluator: &'a str,
    pub task: &'a str,
    /// `None` when it could not be assessed (`reason` says why).
    pub robust: Option<bool>,
    pub reason: Option<&'a str>,
    /// "label_only (0.400) scores at least as high as gpt-4 (0.350)", one per pair.
    pub violations: Vec<String>,
    /// How many distinct control cases take part in a violation.
    pub violating_controls: usize,
}

/// An evaluator's agreement with the human rankings on one task: the cards and the table.
#[derive(Debug, Serialize)]
pub struct AgreementView<'a> {
    pub evaluator: &'a str,
    pub task: &'a str,
    pub kendall_tau: Stat<f64>,
    /// "p = 0.0123 (n = 6); positive = agreement", or the plain note when undefined.
    pub kendall_detail: String,
    /// "p = 0.0123", or "undefined (reason)".
    pub friedman: String,
    pub friedman_detail: String,
    pub alpha: &'a Stat<f64>,
    pub alpha_detail: &'static str,
    pub human_ranks: Vec<HumanRankRow<'a>>,
}

#[derive(Debug, Serialize)]
pub struct HumanRankRow<'a> {
    pub system: &'a str,
    pub mean_rank: f64,
    /// The evaluator's score of the system on this task.
    pub score: Option<f64>,
}

/// The rank heatmap: one row per (evaluator, task), one column per system, controls marked
/// (the chart draws them apart, last).
#[derive(Debug, Serialize)]
pub struct HeatmapView {
    pub rows: Vec<String>,
    pub columns: Vec<HeatmapColumn>,
    /// `cells[row][column]`: the rank and score, `None` where the evaluator did not score it.
    pub cells: Vec<Vec<Option<super::RankCell>>>,
}

#[derive(Debug, Serialize)]
pub struct HeatmapColumn {
    pub system: String,
    pub control: bool,
}

/// Everything the ranking-over-scoring tabs draw, from one report.
#[derive(Debug, Serialize)]
pub struct ProxyViews<'a> {
    pub ranking: Vec<RankingView<'a>>,
    pub heatmap: HeatmapView,
    pub robustness: Vec<RobustnessView<'a>>,
    pub agreement: Vec<AgreementView<'a>>,
    /// The confidence level of the intervals (the first evaluator's).
    pub confidence: Option<f64>,
}

/// The views of an evaluate report. `controls` are the systems the page treats as control
/// cases (the options' names and the control files the bundle marks); a system the report
/// marks as a control is one too.
pub fn proxy_views<'a>(report: &'a EvaluateReport, controls: &[String]) -> ProxyViews<'a> {
    let is_control = |system: &str, marked: bool| marked || controls.iter().any(|c| c == system);
    let mut views = ProxyViews {
        ranking: Vec::new(),
        heatmap: heatmap(report, controls),
        robustness: Vec::new(),
        agreement: Vec::new(),
        confidence: report.evaluators.first().map(|e| e.report.confidence),
    };
    for e in &report.evaluators {
        for t in &e.report.tasks {
            let evaluator = e.evaluator.as_str();
            views.ranking.push(RankingView {
                evaluator,
                task: t.task.name(),
                metric: metric_words(t),
                confidence: e.report.confidence,
                chance: t.chance,
                people: PeopleAgreement::of_ranking(t.human.as_ref()),
                systems: t
                    .systems
                    .iter()
                    .map(|s| {
                        let interval = bounds(&s.interval);
                        let score = value(&s.score);
                        SystemRow {
                            below_chance: matches!((score, t.chance), (Some(v), Some(c)) if v < c - 1e-9),
                            system: &s.system,
                            control: is_control(&s.system, s.is_control),
                            n: s.n,
                            rank: s.rank,
                            score,
                            interval,
                            mean_p_correct: value(&s.mean_p_correct),
                        }
                    })
                    .collect(),
            });
            views.robustness.push(robustness(evaluator, t));
            if let Some(a) = agreement(evaluator, t) {
                views.agreement.push(a);
            }
        }
    }
    views
}

/// "macro_f1" -> "macro f1": the metric's report name in words.
fn metric_words(t: &TaskReport) -> String {
    t.metric.name().replace('_', " ")
}

fn robustness<'a>(evaluator: &'a str, t: &'a TaskReport) -> RobustnessView<'a> {
    let r = &t.robustness;
    let mut distinct: Vec<&str> = r.violations.iter().map(|v| v.control.as_str()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    RobustnessView {
        evaluator,
        task: t.task.name(),
        robust: r.robust.value().copied(),
        reason: match &r.robust {
            Stat::Undefined(reason) => Some(reason),
            Stat::Defined(_) => None,
        },
        violations: r
            .violations
            .iter()
            .map(|v| {
                format!(
                    "{} ({:.3}) scores at least as high as {} ({:.3})",
                    v.control, v.control_score, v.primary, v.primary_score
                )
            })
            .collect(),
        violating_controls: distinct.len(),
    }
}

fn agreement<'a>(evaluator: &'a str, t: &'a TaskReport) -> Option<AgreementView<'a>> {
    let h = t.human.as_ref()?;
    let short = |p: f64| fmt_p_value(p, PValueDigits::Page);
    let (kendall_tau, kendall_detail) = match &h.kendall_tau_b {
        Stat::Defined(k) => {
            (Stat::Defined(k.tau), format!("p = {} (n = {}); positive = agreement", short(k.p_value), k.n))
        }
        Stat::Undefined(r) => (Stat::Undefined(r.clone()), "positive = agreement".to_string()),
    };
    let (friedman, friedman_detail) = match &h.friedman {
        Stat::Defined(f) => {
            let incomplete = match h.friedman_incomplete_blocks {
                0 => String::new(),
                n => format!(", {n} incomplete excluded"),
            };
            (
                format!("p = {}", short(f.p_value)),
                format!("Q = {:.2}, df = {}; {} complete blocks{incomplete}", f.statistic, f.df, h.friedman_blocks),
            )
        }
        Stat::Undefined(r) => (format!("undefined ({r})"), String::new()),
    };
    let score_of = |system: &str| t.systems.iter().find(|s| s.system == system).and_then(|s| value(&s.score));
    Some(AgreementView {
        evaluator,
        task: t.task.name(),
        kendall_tau,
        kendall_detail,
        friedman,
        friedman_detail,
        alpha: &h.krippendorff_alpha_ordinal,
        alpha_detail: "units = (instance, system); 1 = perfect agreement",
        human_ranks: h
            .systems
            .iter()
            .map(|s| HumanRankRow { system: &s.system, mean_rank: s.average_rank, score: score_of(&s.system) })
            .collect(),
    })
}

/// Every (evaluator, task) against every system, from the rank matrix the heatmap tables
/// are made of.
fn heatmap(report: &EvaluateReport, controls: &[String]) -> HeatmapView {
    let tasks: Vec<crate::data::Task> = crate::data::common::first_appearance(
        report.evaluators.iter().flat_map(|e| e.report.tasks.iter().map(|t| t.task)),
    );
    let m = report.rank_matrix(&tasks);
    HeatmapView {
        rows: m.rows.iter().map(|(evaluator, task)| format!("{evaluator} · {}", task.name())).collect(),
        columns: m
            .systems
            .iter()
            .map(|(system, marked)| HeatmapColumn {
                system: system.clone(),
                control: *marked || controls.contains(system),
            })
            .collect(),
        cells: m.cells,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::{self, EvaluateRequest, EvaluatorPredictions, NamedText};

    /// Two MCQA instances (gold 1 and 2), systems `a` and `b` and the `noise` control, two
    /// evaluators. e1 is right with `a` twice, with `b` once, with `noise` never: accuracy
    /// 1, 0.5, 0 (ranks 1, 2, 3). e2 is right with `b` twice, with `noise` once, with `a`
    /// never: noise (0.5) beats `a` (0.0), one violation by one control.
    fn report() -> jobs::Outcome<EvaluateReport> {
        let bundle = [1, 2]
            .map(|i| {
                format!(
                    r#"{{"id": "q{i}", "task": "mcqa", "question": "Q{i}?", "options": {{"1": "x", "2": "y"}}, "answer": "{i}", "arguments": {{"a": "because {i}", "b": "since {i}"}}}}"#
                )
            })
            .join("\n");
        let predictions = |rows: &[(&str, &str, &str)]| {
            let mut csv = String::from("instance,system,predicted,p_correct\n");
            for (instance, system, predicted) in rows {
                let gold = &instance[1..];
                let p = if predicted == &gold { 0.9 } else { 0.1 };
                csv.push_str(&format!("{instance},{system},{predicted},{p}\n"));
            }
            csv
        };
        let e1 = predictions(&[
            ("q1", "a", "1"),
            ("q2", "a", "2"),
            ("q1", "b", "1"),
            ("q2", "b", "1"),
            ("q1", "noise", "2"),
            ("q2", "noise", "1"),
        ]);
        let e2 = predictions(&[
            ("q1", "a", "2"),
            ("q2", "a", "1"),
            ("q1", "b", "1"),
            ("q2", "b", "2"),
            ("q1", "noise", "1"),
            ("q2", "noise", "1"),
        ]);
        let evaluator = |name: &str, text: String| EvaluatorPredictions {
            evaluator: Some(name.into()),
            file: NamedText::new(format!("{name}.csv"), text),
        };
        jobs::evaluate_predictions(&EvaluateRequest {
            bundle: NamedText::new("b.jsonl", bundle),
            predictions: vec![evaluator("e1", e1), evaluator("e2", e2)],
            rankings: None,
            corpus: None,
            options: jobs::ProxyOptions {
                bootstrap: crate::stats::bootstrap::Bootstrap { resamples: 20, ..Default::default() },
                ..Default::default()
            },
        })
        .unwrap()
    }

    #[test]
    fn the_heatmap_is_the_rank_matrix_of_the_heatmap_table() {
        let outcome = report();
        let v = proxy_views(&outcome.report, &[]);
        assert_eq!(v.heatmap.rows, ["e1 · mcqa", "e2 · mcqa"]);
        let columns: Vec<(&str, bool)> = v.heatmap.columns.iter().map(|c| (c.system.as_str(), c.control)).collect();
        assert_eq!(columns, [("a", false), ("b", false), ("noise", true)]);
        let ranks: Vec<Vec<f64>> =
            v.heatmap.cells.iter().map(|row| row.iter().map(|c| c.as_ref().unwrap().rank).collect()).collect();
        assert_eq!(ranks, [[1.0, 2.0, 3.0], [3.0, 1.0, 2.0]]);
        assert_eq!(v.heatmap.cells[1][2].as_ref().unwrap().score, Some(0.5));
        // The CLI's heatmap table holds the same ranks.
        let table = outcome.tables.iter().find(|t| t.name == "heatmap_mcqa").unwrap();
        assert_eq!(table.headers, ["evaluator", "a", "b", "noise"]);
        assert_eq!(table.rows, [["e1", "1.0", "2.0", "3.0"], ["e2", "3.0", "1.0", "2.0"]]);
    }

    #[test]
    fn ranking_and_robustness_copy_the_report() {
        let outcome = report();
        // A control the page names (here `b`) is drawn as one, besides those the report marks.
        let v = proxy_views(&outcome.report, &["b".to_string()]);
        let e1 = &v.ranking[0];
        assert_eq!((e1.evaluator, e1.task, e1.metric.as_str()), ("e1", "mcqa", "accuracy"));
        let rows: Vec<(&str, bool, f64, Option<f64>)> =
            e1.systems.iter().map(|s| (s.system, s.control, s.rank, s.score)).collect();
        assert_eq!(rows, [("a", false, 1.0, Some(1.0)), ("b", true, 2.0, Some(0.5)), ("noise", true, 3.0, Some(0.0))]);
        // Two options per question: a guess scores 0.5; `b` at it is not below, `noise` is.
        assert_eq!(e1.chance, Some(0.5));
        let below: Vec<bool> = e1.systems.iter().map(|s| s.below_chance).collect();
        assert_eq!(below, [false, false, true]);
        assert!(v.heatmap.columns[1].control, "the page's controls are marked in the heatmap too");
        let r = &v.robustness[1];
        assert_eq!(r.robust, Some(false));
        assert_eq!(r.violations, ["noise (0.500) scores at least as high as a (0.000)"]);
        assert_eq!(r.violating_controls, 1);
        assert!(v.agreement.is_empty(), "no human rankings, no agreement view");
    }

    #[test]
    fn p_values_are_written_by_the_tables_rule_with_fewer_digits() {
        // The page shows what JavaScript's toExponential(1) / toFixed(4) showed before.
        assert_eq!(fmt_p_value(3.2e-5, PValueDigits::Page), "3.2e-5");
        assert_eq!(fmt_p_value(3.2e-5, PValueDigits::Table), "3.200e-5");
        assert_eq!(fmt_p_value(0.04567, PValueDigits::Page), "0.0457");
        assert_eq!(fmt_p_value(0.0, PValueDigits::Page), "0.0000");
    }
}
