//! Ranking over scoring (ranking-over-scoring.md §3.3, methods.md §1): an evaluator's
//! predictions with each system's argument in the input give each system a proxy-task
//! score; systems are *ranked* by that score, with bootstrap intervals, a robustness check
//! against the control cases, and agreement with human rankings.
//!
//! Conventions (also written into the report's provenance):
//! - Task scores: MCQA accuracy; misinformation macro-F1 over the labels that occur in the
//!   gold labels or the predictions of the evaluated instances (scikit-learn's default label
//!   set), per-label F1 = 2TP / (2TP + FP + FN); NLI micro-F1 (equal to accuracy for
//!   single-label predictions) plus NLI4CT's binary F1 with `entailment` as positive class.
//! - Misinformation instances labelled `not_enough_evidence` are dropped before scoring by
//!   default, as in the paper (counted in the report).
//! - Systems compared within a task must share instances: an instance that lacks the
//!   argument of one of the task's systems is left out of that task (named in a warning).
//! - Ranks: 1 = best score; equal scores share the average of their ranks.
//! - Intervals: seeded percentile bootstrap over instances, paired across systems (every
//!   system is scored on the same resampled instances); adjacent systems in the ranking get
//!   the fraction of resamples in which the upper one scores higher (ties count one half).
//! - Human agreement: a system's human rank is the mean of its ranks over instances and
//!   annotators (1 = best). Kendall's tau-b is computed between the evaluator's scores and the
//!   *negated* average human ranks, so that agreement is positive.

use crate::data::{Bundle, HumanRankings, Instance, Prediction, Problem, Task};
use crate::eval::controls::Control;
use crate::report::Provenance;
use crate::stats::bootstrap::Bootstrap;
use crate::stats::friedman::{friedman_named, Friedman};
use crate::stats::kendall::{tau_b, Kendall};
use crate::stats::krippendorff::{alpha, Level};
use crate::stats::ranks::{average_ranks, Order};
use crate::stats::{describe, Interval, Stat};
use crate::{Error, Result, Warning};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap, HashSet};

mod agreement;
mod inputs;
mod robustness;
mod score;

pub use agreement::{human_agreement, HumanAgreement, HumanSystemRank};
pub use inputs::not_enough_evidence_left_out;
use inputs::{check_rankings, index_predictions, select_task};
use score::task_report;

/// Options of [`rank_systems`], as both front ends send them (all optional).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProxyOptions {
    /// Seed, resamples and confidence of the paired bootstrap.
    #[serde(flatten)]
    pub bootstrap: Bootstrap,
    /// System names treated as control cases in the robustness verdict.
    pub controls: Vec<String>,
    /// Drop misinformation instances whose gold label is `not_enough_evidence`.
    pub drop_not_enough_evidence: bool,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        ProxyOptions { bootstrap: Bootstrap::default(), controls: Control::all_names(), drop_not_enough_evidence: true }
    }
}

/// The task score used to rank systems.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Accuracy,
    MacroF1,
    MicroF1,
}

impl Metric {
    pub fn for_task(task: Task) -> Metric {
        match task {
            Task::Mcqa => Metric::Accuracy,
            Task::Misinformation => Metric::MacroF1,
            Task::Nli => Metric::MicroF1,
        }
    }

    /// The metric's name as reports write it (`accuracy`, `macro_f1`, `micro_f1`).
    pub fn name(self) -> &'static str {
        match self {
            Metric::Accuracy => "accuracy",
            Metric::MacroF1 => "macro_f1",
            Metric::MicroF1 => "micro_f1",
        }
    }
}

/// One system's result on one task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemScore {
    pub system: String,
    pub is_control: bool,
    /// Instances scored.
    pub n: usize,
    /// The task's metric ([`TaskReport::metric`]).
    pub score: Stat<f64>,
    /// Percentile bootstrap interval of `score`.
    pub interval: Stat<Interval>,
    /// 1 = best; ties share the average rank.
    pub rank: f64,
    /// Mean probability the evaluator gave the gold label.
    pub mean_p_correct: Stat<f64>,
    /// NLI only: NLI4CT's binary F1 with `entailment` as the positive class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary_f1_entailment: Option<Stat<f64>>,
}

/// Two neighbours in the ranking.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AdjacentComparison {
    pub upper: String,
    pub lower: String,
    /// Fraction of bootstrap resamples where `upper` scores higher than `lower` (ties 1/2).
    pub p_upper_beats_lower: Stat<f64>,
}

/// A control case that does not rank below a primary system.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Violation {
    pub control: String,
    pub primary: String,
    pub control_score: f64,
    pub primary_score: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Robustness {
    /// True when every control case scores strictly below every primary system (a tie is a
    /// violation). Undefined when the task has no control or no primary system.
    pub robust: Stat<bool>,
    pub violations: Vec<Violation>,
}

/// The ranking of systems on one task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskReport {
    pub task: Task,
    pub metric: Metric,
    /// Instances scored.
    pub n_instances: usize,
    /// Misinformation instances dropped because their gold label is not_enough_evidence.
    pub dropped_not_enough_evidence: usize,
    /// Instances left out because a system of this task has no argument for them.
    pub incomplete_instances: Vec<String>,
    /// What a uniform guess scores in the task's metric, where it is plain: MCQA accuracy,
    /// the mean of 1 / options over the scored instances (0.20 for five options). A system
    /// below it is flagged on the page (issue 47); the scores themselves are untouched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chance: Option<f64>,
    /// Best first.
    pub systems: Vec<SystemScore>,
    pub adjacent: Vec<AdjacentComparison>,
    pub robustness: Robustness,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub human: Option<HumanAgreement>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProxyReport {
    pub provenance: Provenance,
    pub resamples: usize,
    pub confidence: f64,
    /// One per task present in the bundle, in the order mcqa, misinformation, nli.
    pub tasks: Vec<TaskReport>,
    pub warnings: Vec<Warning>,
}

/// At most this many missing or bad items are named in one error message.
const NAMED_IN_ERRORS: usize = 10;

/// Rank the systems of `bundle` from the evaluator's `predictions` (see the module doc for
/// every convention). Every (instance, system) argument that is evaluated needs exactly one
/// prediction; missing, duplicate or unknown predictions are errors that name them.
pub fn rank_systems(
    bundle: &Bundle,
    predictions: &[Prediction],
    options: &ProxyOptions,
    human: Option<&HumanRankings>,
) -> Result<ProxyReport> {
    crate::stats::bootstrap::check_settings(options.bootstrap.resamples, options.bootstrap.confidence)
        .map_err(Error::invalid)?;
    let by_key = index_predictions(bundle, predictions)?;
    let tasks: BTreeSet<Task> = bundle.instances.iter().map(|i| i.problem.task()).collect();

    let mut warnings = Vec::new();
    let mut task_inputs = Vec::new();
    let mut missing: Vec<(&Instance, String)> = Vec::new();
    for &task in &tasks {
        let input = select_task(bundle, task, options, &mut warnings);
        for inst in &input.instances {
            for system in &input.systems {
                if !by_key.contains_key(&(inst.id.as_str(), system.as_str())) {
                    missing.push((inst, system.to_string()));
                }
            }
        }
        task_inputs.push(input);
    }
    // A ranked pair without a prediction stops the run, located at the instance's line.
    if let Some((inst, system)) = missing.first() {
        let others: Vec<String> =
            missing[1..].iter().take(NAMED_IN_ERRORS).map(|(i, s)| format!("({}, {s})", i.id)).collect();
        let more = match missing.len() - 1 {
            0 => String::new(),
            n => format!(
                "; {n} more pairs have none: {}{}",
                others.join(", "),
                if n > NAMED_IN_ERRORS { ", ..." } else { "" }
            ),
        };
        return Err(Error::input(
            &bundle.name,
            inst.line,
            &format!("arguments.{system}"),
            format!("instance `{}` has no prediction for system `{system}`{more}", inst.id),
        ));
    }
    if let Some(rankings) = human {
        check_rankings(bundle, rankings)?;
    }

    let reports = task_inputs.iter().map(|input| task_report(input, &by_key, options, human)).collect();

    let provenance = Provenance::new(options.bootstrap.seed)
        .convention("mcqa_score", "accuracy")
        .convention(
            "misinformation_score",
            "macro-F1 over the labels present in gold or predictions (scikit-learn default)",
        )
        .convention("nli_score", "micro-F1 (= accuracy); extra column: binary F1 with entailment positive (NLI4CT)")
        .convention(
            "not_enough_evidence",
            if options.drop_not_enough_evidence { "dropped before scoring" } else { "kept" },
        )
        .convention("ties", "equal scores share the average rank; 1 = best")
        .convention(
            "bootstrap",
            format!(
                "percentile, {} resamples of instances, paired across systems, confidence {}, \
                 seed {}",
                options.bootstrap.resamples, options.bootstrap.confidence, options.bootstrap.seed
            ),
        )
        .convention("kendall_sign", "tau-b(evaluator score, -average human rank): positive = agreement")
        .convention("controls", options.controls.join(", "));
    Ok(ProxyReport {
        provenance,
        resamples: options.bootstrap.resamples,
        confidence: options.bootstrap.confidence,
        tasks: reports,
        warnings,
    })
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod scale;
