//! The page's view models: what each result tab draws, computed here from the job's report
//! so that `www/results.js` only draws (tables, SVG charts) and formats numbers for display.
//! Nothing is computed twice: the heatmap comes from the same rank matrix as the CLI's
//! heatmap table (`EvaluateReport::rank_matrix`), p-values are written by the tables'
//! rule (`report::fmt_p_value`).
//!
//! A view copies or joins what the report holds; it never changes a number. Field names
//! are the page's (snake case, as JSON).

use serde::Serialize;
use std::collections::BTreeMap;

use crate::eval::nrp::NrpReport;
use crate::eval::proxy::TaskReport;
use crate::eval::rubric::SystemScore;
use crate::eval::rubric_agreement::{PairAgreement, RubricAgreementReport};
use crate::jobs::{CriterionGrade, CutPair, EvaluateReport, GradeReport, GraderSummary};
use crate::report::{fmt_p_value, PValueDigits};
use crate::stats::{Interval, Stat};

// ------------------------------------------------------------------ ranking over scoring ---

/// One evaluator's ranking of one task: the Ranking tab's table and interval chart.
#[derive(Debug, Serialize)]
pub struct RankingView<'a> {
    pub evaluator: &'a str,
    pub task: &'a str,
    /// The task's metric in words ("accuracy", "macro f1", ...).
    pub metric: String,
    pub confidence: f64,
    pub systems: Vec<SystemRow<'a>>,
}

#[derive(Debug, Serialize)]
pub struct SystemRow<'a> {
    pub system: &'a str,
    pub control: bool,
    pub n: usize,
    pub rank: f64,
    pub score: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
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
    pub cells: Vec<Vec<Option<crate::jobs::RankCell>>>,
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

fn value(s: &Stat<f64>) -> Option<f64> {
    s.value().copied()
}

fn bounds(s: &Stat<Interval>) -> (Option<f64>, Option<f64>) {
    s.value().map_or((None, None), |i| (Some(i.lo), Some(i.hi)))
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
                systems: t
                    .systems
                    .iter()
                    .map(|s| {
                        let (lo, hi) = bounds(&s.interval);
                        SystemRow {
                            system: &s.system,
                            control: is_control(&s.system, s.is_control),
                            n: s.n,
                            rank: s.rank,
                            score: value(&s.score),
                            lo,
                            hi,
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

// ------------------------------------------------------------------ NRP --------------------

/// The NRP tab: the weights' sliders, the per-model bars and table, the rankers'
/// validation, the expert agreement with its pairwise comparisons, the unscored documents.
#[derive(Debug, Serialize)]
pub struct NrpView<'a> {
    pub dimensions: Vec<&'a str>,
    pub weights: BTreeMap<&'a str, f64>,
    pub groups: Vec<NrpGroupRow<'a>>,
    pub rankers: Vec<NrpRankerRow<'a>>,
    pub agreement: Vec<NrpAgreementRow<'a>>,
    /// `better[row][column]`: the probability that the row's ranker agrees better with the
    /// expert than the column's (the report's pairs and their complements).
    pub better: BTreeMap<&'a str, BTreeMap<&'a str, Option<f64>>>,
    pub unscored: &'a crate::eval::nrp::Unscored,
    pub unscored_per_dimension: Vec<NrpUnscoredRow<'a>>,
    pub ranker_names: Vec<&'a str>,
    pub ties: &'a crate::eval::nrp::TiePolicy,
    pub denominator: &'a crate::eval::nrp::Denominator,
}

#[derive(Debug, Serialize)]
pub struct NrpGroupRow<'a> {
    pub system: &'a str,
    pub prompt: &'a str,
    pub mean: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub n: usize,
    pub per_dimension: BTreeMap<&'a str, Option<f64>>,
}

#[derive(Debug, Serialize)]
pub struct NrpRankerRow<'a> {
    pub dimension: &'a str,
    pub ranker: &'a str,
    pub ndcg: Option<f64>,
    pub chosen: bool,
}

#[derive(Debug, Serialize)]
pub struct NrpAgreementRow<'a> {
    pub ranker: &'a str,
    pub mean: &'a Stat<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub queries: usize,
    pub chosen_for: &'a [String],
    pub fusion_scope: Option<&'a crate::eval::nrp::fusion::Scope>,
}

#[derive(Debug, Serialize)]
pub struct NrpUnscoredRow<'a> {
    pub dimension: &'a str,
    pub ranker: &'a str,
    pub documents: usize,
    pub queries: usize,
}

pub fn nrp_view(report: &NrpReport) -> NrpView<'_> {
    let dimensions: Vec<&str> = report.dimensions.iter().map(|d| d.dimension.as_str()).collect();
    let mut better: BTreeMap<&str, BTreeMap<&str, Option<f64>>> = BTreeMap::new();
    for c in &report.agreement_comparisons {
        let p = value(&c.probability_better);
        better.entry(&c.ranker).or_default().insert(&c.other, p);
        better.entry(&c.other).or_default().insert(&c.ranker, p.map(|p| 1.0 - p));
    }
    NrpView {
        weights: report.dimensions.iter().map(|d| (d.dimension.as_str(), d.weight)).collect(),
        groups: report
            .groups
            .iter()
            .map(|g| {
                let (lo, hi) = bounds(&g.interval);
                NrpGroupRow {
                    system: &g.system,
                    prompt: &g.prompt,
                    mean: value(&g.mean),
                    lo,
                    hi,
                    n: g.answers,
                    per_dimension: dimensions.iter().copied().zip(g.per_dimension_mean.iter().map(value)).collect(),
                }
            })
            .collect(),
        rankers: report
            .dimensions
            .iter()
            .flat_map(|d| {
                d.validation.iter().map(move |v| NrpRankerRow {
                    dimension: &d.dimension,
                    ranker: &v.ranker,
                    ndcg: value(&v.mean_ndcg_at_10),
                    chosen: v.ranker == d.ranker,
                })
            })
            .collect(),
        agreement: report
            .expert_agreement
            .iter()
            .map(|a| {
                let (lo, hi) = bounds(&a.interval);
                NrpAgreementRow {
                    ranker: &a.ranker,
                    mean: &a.mean_tau,
                    lo,
                    hi,
                    queries: a.per_query.len(),
                    chosen_for: &a.chosen_for,
                    fusion_scope: a.fusion_scope.as_ref(),
                }
            })
            .collect(),
        better,
        unscored: &report.unscored,
        unscored_per_dimension: report
            .dimensions
            .iter()
            .map(|d| NrpUnscoredRow {
                dimension: &d.dimension,
                ranker: &d.ranker,
                documents: d.unscored_documents,
                queries: d.unscored_queries,
            })
            .collect(),
        ranker_names: report
            .dimensions
            .first()
            .map(|d| d.validation.iter().map(|v| v.ranker.as_str()).collect())
            .unwrap_or_default(),
        ties: &report.ties,
        denominator: &report.denominator,
        dimensions,
    }
}

// ------------------------------------------------------------------ rubric -----------------

/// The rubric's Scores tab (`medrank rubric`, and `medrank grade` with the grader's expected
/// means): for each score (overall, then each tag as the report lists them) every system's
/// mean, interval and count; the chart draws the overall row.
#[derive(Debug, Serialize)]
pub struct RubricView<'a> {
    pub confidence: f64,
    /// A model graded: the expected means (met drawn from P(met)) are there.
    pub graded_by_model: bool,
    pub scores: Vec<RubricScoreView<'a>>,
}

/// One score ("overall" or a tag) over the systems.
#[derive(Debug, Serialize)]
pub struct RubricScoreView<'a> {
    pub score: &'a str,
    pub systems: Vec<RubricSystemRow<'a>>,
}

#[derive(Debug, Serialize)]
pub struct RubricSystemRow<'a> {
    pub system: &'a str,
    /// Responses contributing a value to this score.
    pub n: usize,
    /// Clipped to [0, 1], as HealthBench reports it.
    pub mean: Option<f64>,
    pub unclipped_mean: Option<f64>,
    /// With a model grader only.
    pub expected_mean: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// Why the mean or the interval is undefined, when one is.
    pub undefined: Option<&'a str>,
}

fn reason<T>(s: &Stat<T>) -> Option<&str> {
    match s {
        Stat::Defined(_) => None,
        Stat::Undefined(r) => Some(r),
    }
}

/// The Scores tab of a rubric's system scores; `confidence` is the bootstrap's.
pub fn rubric_view(system_scores: &[SystemScore], confidence: f64) -> RubricView<'_> {
    // The score names in the order the systems list them (overall first), each once.
    let mut names: Vec<&str> = Vec::new();
    for m in system_scores.iter().flat_map(|s| &s.scores) {
        if !names.contains(&m.score.as_str()) {
            names.push(&m.score);
        }
    }
    let scores = names
        .into_iter()
        .map(|score| RubricScoreView {
            score,
            systems: system_scores
                .iter()
                .filter_map(|s| s.scores.iter().find(|m| m.score == score).map(|m| (s, m)))
                .map(|(s, m)| {
                    let (lo, hi) = bounds(&m.interval);
                    RubricSystemRow {
                        system: &s.system,
                        n: m.n,
                        mean: value(&m.mean),
                        unclipped_mean: value(&m.unclipped_mean),
                        expected_mean: m.expected_mean.as_ref().and_then(value),
                        lo,
                        hi,
                        undefined: reason(&m.mean).or_else(|| reason(&m.interval)),
                    }
                })
                .collect(),
        })
        .collect();
    let graded_by_model = system_scores.iter().flat_map(|s| &s.scores).any(|m| m.expected_mean.is_some());
    RubricView { confidence, graded_by_model, scores }
}

/// The Grade job's Criteria tab: which model graded and how, each response's criteria
/// with P(met), the pairs cut to the model's limit, and the graded file to download.
#[derive(Debug, Serialize)]
pub struct GradeView<'a> {
    pub grader: &'a GraderSummary,
    pub responses: Vec<GradedResponseView<'a>>,
    /// "3 of 46 (response, criterion) pairs ... were cut": only when some were.
    pub truncation: Option<String>,
    pub truncated: &'a [CutPair],
    /// The graded file: the rubric with `met` and `p_met` per criterion (the CLI's `--out`).
    pub graded_name: String,
    pub graded_jsonl: &'a str,
}

#[derive(Debug, Serialize)]
pub struct GradedResponseView<'a> {
    pub id: &'a str,
    pub system: &'a str,
    pub line: usize,
    /// The response's score with met = P(met) >= 0.5 (unclipped).
    pub score: Option<f64>,
    pub achieved: f64,
    pub possible: f64,
    pub criteria: Vec<&'a CriterionGrade>,
}

/// The Criteria tab of a grade outcome; `rubric_name` is the graded rubric file's name and
/// `max_tokens` the grader's token limit.
pub fn grade_view<'a>(
    report: &'a GradeReport,
    graded_jsonl: &'a str,
    rubric_name: &str,
    max_tokens: usize,
) -> GradeView<'a> {
    // The criteria of each response (its line in the file identifies it).
    let mut by_line: BTreeMap<usize, Vec<&CriterionGrade>> = BTreeMap::new();
    for c in &report.criteria {
        by_line.entry(c.line).or_default().push(c);
    }
    let responses = report
        .responses
        .iter()
        .map(|r| GradedResponseView {
            id: &r.id,
            system: &r.system,
            line: r.line,
            score: value(&r.overall.score),
            achieved: r.overall.achieved,
            possible: r.overall.possible,
            criteria: by_line.remove(&r.line).unwrap_or_default(),
        })
        .collect();
    let truncation = (!report.truncated.is_empty()).then(|| {
        format!(
            "{} of {} (response, criterion) pairs were longer than the grader\u{2019}s {max_tokens}-token limit and were cut \
             (the conversation\u{2019}s earliest turns first, the response\u{2019}s end only when it alone did not fit, \
             the criterion never): P(met) of those pairs was judged on what was left. The table grade_truncated \
             lists every cut pair.",
            report.truncated.len(),
            report.criteria.len()
        )
    });
    GradeView {
        grader: &report.grader,
        responses,
        truncation,
        truncated: &report.truncated,
        graded_name: format!("{}.graded.jsonl", crate::jobs::file_stem(rubric_name)),
        graded_jsonl,
    }
}

// ------------------------------------------------------------------ rubric agreement -------

/// The Agreement tab (`medrank rubric-agreement`): per group (all first, then the tags, as
/// the report lists them) the grader against the people and each person against the
/// others, with the people's mean. The figures are the report's own `Stat`s: a value, or
/// `{"undefined": reason}`, drawn as such.
#[derive(Debug, Serialize)]
pub struct RubricAgreementView<'a> {
    /// A grader's file was given: the grader's columns are there.
    pub has_grader: bool,
    /// The people who judged, in order of first appearance.
    pub people: &'a [String],
    pub items: usize,
    /// Criteria nobody judged (left out).
    pub unjudged_criteria: usize,
    pub groups: Vec<RubricAgreementGroupView<'a>>,
}

#[derive(Debug, Serialize)]
pub struct RubricAgreementGroupView<'a> {
    /// `all`, or a tag (`theme:...`, `axis:...`, `cluster:...`).
    pub group: &'a str,
    pub items: usize,
    pub grader: Option<RaterView<'a>>,
    /// Each person against the others.
    pub people: Vec<RaterView<'a>>,
    pub human_mean_macro_f1: &'a Stat<f64>,
    pub human_mean_kappa: &'a Stat<f64>,
    /// The grader's macro-F1 beside the people's mean, when both are defined: `at_or_above`
    /// (agrees with them as well as a typical colleague does, or better) or `below`.
    pub grader_against_people: Option<&'static str>,
}

/// One rater (the grader, or a person) against the others, over their pairs of labels: the
/// report's own figures (pairs, F1s, macro-F1, kappa, confusion), named.
#[derive(Debug, Serialize)]
pub struct RaterView<'a> {
    pub rater: &'a str,
    #[serde(flatten)]
    pub agreement: &'a PairAgreement,
}

/// The Agreement tab of a rubric-agreement report.
pub fn rubric_agreement_view(report: &RubricAgreementReport) -> RubricAgreementView<'_> {
    let groups = report
        .groups
        .iter()
        .map(|g| {
            let grader_against_people =
                match (g.grader.as_ref().and_then(|a| a.macro_f1.value()), g.human_mean_macro_f1.value()) {
                    (Some(grader), Some(people)) if grader >= people => Some("at_or_above"),
                    (Some(_), Some(_)) => Some("below"),
                    _ => None,
                };
            RubricAgreementGroupView {
                group: &g.group,
                items: g.items,
                grader: g.grader.as_ref().map(|agreement| RaterView { rater: "grader", agreement }),
                people: g.humans.iter().map(|h| RaterView { rater: &h.grader, agreement: &h.agreement }).collect(),
                human_mean_macro_f1: &g.human_mean_macro_f1,
                human_mean_kappa: &g.human_mean_kappa,
                grader_against_people,
            }
        })
        .collect();
    RubricAgreementView {
        has_grader: report.groups.iter().any(|g| g.grader.is_some()),
        people: &report.human_graders,
        items: report.items,
        unjudged_criteria: report.unjudged_criteria,
        groups,
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

    /// The NRP example as the page sends it (files with their kinds and parameters).
    fn nrp_example() -> crate::jobs::Outcome<NrpReport> {
        use crate::page::request::{InputFile, JobRequest};
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/nrp");
        let file = |path: &str, kind: &str, params: &[(&str, &str)]| InputFile {
            name: path.rsplit('/').next().unwrap().to_string(),
            text: std::fs::read_to_string(dir.join(path)).unwrap(),
            kind: kind.into(),
            params: params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        };
        let mut files = vec![
            file("topics.xml", "topics", &[]),
            file("docs.tsv", "documents", &[]),
            file("run.bm25.txt", "run", &[("ranker", "published")]),
            file("answer_scores.csv", "answer_scores", &[("ranker", "published")]),
            file("expert_rankings.csv", "expert_rankings", &[]),
        ];
        for d in ["relevance", "credibility", "readability"] {
            files.push(file(&format!("qrels.{d}.txt"), "qrels", &[("dimension", d)]));
        }
        for (system, prompt) in
            ["gpt-3.5-turbo", "llama-2-13b"].iter().flat_map(|s| [(*s, "multimedqa"), (*s, "no_prompt")])
        {
            let name = format!("answers/{system}__{prompt}.csv");
            files.push(file(&name, "answers", &[("system", system), ("prompt", prompt)]));
        }
        let request =
            JobRequest { files, options: serde_json::from_value(serde_json::json!({"resamples": 50})).unwrap() };
        crate::jobs::nrp(&request.nrp().unwrap()).unwrap()
    }

    #[test]
    fn the_nrp_view_copies_the_report_and_completes_the_pairwise_probabilities() {
        let outcome = nrp_example();
        let r = &outcome.report;
        let v = nrp_view(r);
        assert_eq!(v.dimensions, ["relevance", "credibility", "readability"]);
        assert_eq!(v.groups.len(), r.groups.len());
        for (row, g) in v.groups.iter().zip(&r.groups) {
            assert_eq!(
                (row.system, row.prompt, row.mean, row.n),
                (g.system.as_str(), g.prompt.as_str(), value(&g.mean), g.answers)
            );
            assert_eq!(row.per_dimension.len(), 3);
        }
        // Two rankers (the published one and BM25 from the documents): one comparison in the
        // report, both directions in the view, adding up to 1.
        assert_eq!(v.ranker_names, ["published", "bm25"]);
        assert_eq!(r.agreement_comparisons.len(), 1);
        let c = &r.agreement_comparisons[0];
        let p = value(&c.probability_better).unwrap();
        assert_eq!(v.better[c.ranker.as_str()][c.other.as_str()], Some(p));
        assert_eq!(v.better[c.other.as_str()][c.ranker.as_str()], Some(1.0 - p));
        assert_eq!(
            v.agreement.iter().map(|a| a.queries).collect::<Vec<_>>(),
            r.expert_agreement.iter().map(|a| a.per_query.len()).collect::<Vec<_>>()
        );
        assert_eq!(v.rankers.iter().filter(|x| x.chosen).count(), 3, "one chosen ranker per dimension");
    }
}
