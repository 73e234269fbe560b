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
use serde::Serialize;
use std::collections::{BTreeSet, HashMap, HashSet};

/// Options of [`rank_systems`].
#[derive(Debug, Clone, PartialEq)]
pub struct ProxyOptions {
    pub seed: u64,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Confidence level of the bootstrap intervals.
    pub confidence: f64,
    /// System names treated as control cases in the robustness verdict.
    pub controls: Vec<String>,
    /// Drop misinformation instances whose gold label is `not_enough_evidence`.
    pub drop_not_enough_evidence: bool,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        ProxyOptions {
            seed: 0,
            resamples: 1000,
            confidence: 0.95,
            controls: Control::ALL
                .iter()
                .map(|c| c.system_name().to_string())
                .collect(),
            drop_not_enough_evidence: true,
        }
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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HumanSystemRank {
    pub system: String,
    /// Mean rank over instances and annotators (1 = best).
    pub average_rank: f64,
    /// Number of (instance, annotator) ranks averaged.
    pub n: usize,
}

/// Agreement of the evaluator with human rankings, and among the humans.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HumanAgreement {
    /// Systems the humans ranked, best average rank first.
    pub systems: Vec<HumanSystemRank>,
    /// Kendall tau-b between evaluator scores and negated average human ranks, over the
    /// systems both ranked (positive = agreement).
    pub kendall_tau_b: Stat<Kendall>,
    /// Friedman test over the human ranks; blocks = (instance, annotator) that ranked every
    /// system in `systems`.
    pub friedman: Stat<Friedman>,
    pub friedman_blocks: usize,
    /// (instance, annotator) blocks left out because they missed a system.
    pub friedman_incomplete_blocks: usize,
    /// Krippendorff's alpha (ordinal) between annotators; units = (instance, system).
    pub krippendorff_alpha_ordinal: Stat<f64>,
    /// Human ranking rows for instances this task does not evaluate (e.g. dropped
    /// not_enough_evidence or incomplete instances).
    pub rows_excluded: usize,
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
    crate::stats::bootstrap::check_confidence(options.confidence).map_err(Error::invalid)?;
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
        let others: Vec<String> = missing[1..]
            .iter()
            .take(NAMED_IN_ERRORS)
            .map(|(i, s)| format!("({}, {s})", i.id))
            .collect();
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
            format!(
                "instance `{}` has no prediction for system `{system}`{more}",
                inst.id
            ),
        ));
    }
    if let Some(rankings) = human {
        check_rankings(bundle, rankings)?;
    }

    let reports = task_inputs
        .iter()
        .map(|input| task_report(input, &by_key, options, human))
        .collect();

    let provenance = Provenance::new(options.seed)
        .convention("mcqa_score", "accuracy")
        .convention(
            "misinformation_score",
            "macro-F1 over the labels present in gold or predictions (scikit-learn default)",
        )
        .convention(
            "nli_score",
            "micro-F1 (= accuracy); extra column: binary F1 with entailment positive (NLI4CT)",
        )
        .convention(
            "not_enough_evidence",
            if options.drop_not_enough_evidence {
                "dropped before scoring"
            } else {
                "kept"
            },
        )
        .convention("ties", "equal scores share the average rank; 1 = best")
        .convention(
            "bootstrap",
            format!(
                "percentile, {} resamples of instances, paired across systems, confidence {}, \
                 seed {}",
                options.resamples, options.confidence, options.seed
            ),
        )
        .convention(
            "kendall_sign",
            "tau-b(evaluator score, -average human rank): positive = agreement",
        )
        .convention("controls", options.controls.join(", "));
    Ok(ProxyReport {
        provenance,
        resamples: options.resamples,
        confidence: options.confidence,
        tasks: reports,
        warnings,
    })
}

/// Predictions by (instance, system), after checking each against the bundle.
fn index_predictions<'a>(
    bundle: &Bundle,
    predictions: &'a [Prediction],
) -> Result<HashMap<(&'a str, &'a str), &'a Prediction>> {
    let instances: HashMap<&str, &Instance> = bundle
        .instances
        .iter()
        .map(|i| (i.id.as_str(), i))
        .collect();
    let mut by_key = HashMap::with_capacity(predictions.len());
    let mut problems = Vec::new();
    for p in predictions {
        let key = (p.instance.as_str(), p.system.as_str());
        match instances.get(key.0) {
            None => problems.push(format!(
                "unknown instance `{}` (system `{}`)",
                p.instance, p.system
            )),
            Some(inst) if inst.argument(&p.system).is_none() => problems.push(format!(
                "instance `{}` has no argument from system `{}`",
                p.instance, p.system
            )),
            Some(inst) => {
                if !inst.problem.label_set().contains(&p.predicted) {
                    problems.push(format!(
                        "({}, {}): predicted label `{}` is not one of {:?}",
                        p.instance,
                        p.system,
                        p.predicted,
                        inst.problem.label_set()
                    ));
                } else if !(0.0..=1.0).contains(&p.p_correct) {
                    problems.push(format!(
                        "({}, {}): p_correct {} is not a probability",
                        p.instance, p.system, p.p_correct
                    ));
                } else if by_key.insert(key, p).is_some() {
                    problems.push(format!("({}, {}) is predicted twice", p.instance, p.system));
                }
            }
        }
    }
    if problems.is_empty() {
        Ok(by_key)
    } else {
        Err(Error::invalid(format!(
            "{} predictions do not fit {}: {}{}",
            problems.len(),
            bundle.name,
            problems
                .iter()
                .take(NAMED_IN_ERRORS)
                .cloned()
                .collect::<Vec<_>>()
                .join("; "),
            if problems.len() > NAMED_IN_ERRORS {
                "; ..."
            } else {
                ""
            }
        )))
    }
}

/// Human rankings must refer to instances and systems of the bundle.
fn check_rankings(bundle: &Bundle, rankings: &HumanRankings) -> Result<()> {
    let instances: HashMap<&str, &Instance> = bundle
        .instances
        .iter()
        .map(|i| (i.id.as_str(), i))
        .collect();
    for row in &rankings.rows {
        let Some(inst) = instances.get(row.instance.as_str()) else {
            return Err(Error::input(
                &rankings.name,
                row.line,
                "instance",
                format!("instance `{}` is not in {}", row.instance, bundle.name),
            ));
        };
        if inst.argument(&row.system).is_none() {
            return Err(Error::input(
                &rankings.name,
                row.line,
                "system",
                format!(
                    "instance `{}` has no argument from system `{}`",
                    row.instance, row.system
                ),
            ));
        }
    }
    Ok(())
}

/// The instances and systems one task evaluates.
struct TaskInput<'a> {
    task: Task,
    instances: Vec<&'a Instance>,
    systems: Vec<String>,
    dropped_not_enough_evidence: usize,
    incomplete: Vec<String>,
    /// Every instance id of this task in the bundle (for human rows' bookkeeping).
    all_ids: HashSet<&'a str>,
}

fn select_task<'a>(
    bundle: &'a Bundle,
    task: Task,
    options: &ProxyOptions,
    warnings: &mut Vec<Warning>,
) -> TaskInput<'a> {
    let mut dropped = 0;
    let mut kept: Vec<&Instance> = Vec::new();
    let mut all_ids = HashSet::new();
    for inst in bundle.instances.iter().filter(|i| i.problem.task() == task) {
        all_ids.insert(inst.id.as_str());
        let nee = matches!(&inst.problem, Problem::Misinformation { label, .. } if label == "not_enough_evidence");
        if nee && options.drop_not_enough_evidence {
            dropped += 1;
        } else {
            kept.push(inst);
        }
    }
    // The task's systems, in bundle order: every system with an argument somewhere here.
    let present: HashSet<&str> = kept
        .iter()
        .flat_map(|i| i.arguments.iter().map(|(s, _)| s.as_str()))
        .collect();
    let systems: Vec<String> = bundle
        .systems
        .iter()
        .filter(|s| present.contains(s.as_str()))
        .cloned()
        .collect();
    let (complete, incomplete): (Vec<&Instance>, Vec<&Instance>) = kept
        .into_iter()
        .partition(|inst| systems.iter().all(|s| inst.argument(s).is_some()));
    let incomplete: Vec<String> = incomplete.iter().map(|i| i.id.clone()).collect();
    if !incomplete.is_empty() {
        warnings.push(Warning::new(format!(
            "{}: {} instances lack the argument of at least one system and are left out of the \
             ranking (systems are compared on the same instances): {}",
            task.name(),
            incomplete.len(),
            incomplete
                .iter()
                .take(NAMED_IN_ERRORS)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    TaskInput {
        task,
        instances: complete,
        systems,
        dropped_not_enough_evidence: dropped,
        incomplete,
        all_ids,
    }
}

/// One prediction reduced to label positions in the instance's label set.
#[derive(Clone, Copy)]
struct Cell {
    gold: u16,
    predicted: u16,
}

/// The task metric over the instances at `indices` (with repetition, for the bootstrap).
/// NaN when it is undefined (no instance).
fn metric_value(metric: Metric, cells: &[Cell], indices: &[usize]) -> f64 {
    if indices.is_empty() {
        return f64::NAN;
    }
    match metric {
        // Single-label micro-F1 counts each wrong prediction once as FP and once as FN:
        // 2TP / (2TP + FP + FN) = TP / n, the accuracy.
        Metric::Accuracy | Metric::MicroF1 => {
            let correct = indices
                .iter()
                .filter(|&&i| cells[i].gold == cells[i].predicted)
                .count();
            correct as f64 / indices.len() as f64
        }
        Metric::MacroF1 => {
            // tp, fp, fn per label position.
            let mut counts: Vec<[u64; 3]> = Vec::new();
            for &i in indices {
                let Cell { gold, predicted } = cells[i];
                let needed = gold.max(predicted) as usize + 1;
                if counts.len() < needed {
                    counts.resize(needed, [0; 3]);
                }
                if gold == predicted {
                    counts[gold as usize][0] += 1;
                } else {
                    counts[predicted as usize][1] += 1;
                    counts[gold as usize][2] += 1;
                }
            }
            let used: Vec<f64> = counts
                .iter()
                .filter(|[tp, fp, fn_]| tp + fp + fn_ > 0)
                .map(|[tp, fp, fn_]| 2.0 * *tp as f64 / (2 * tp + fp + fn_) as f64)
                .collect();
            used.iter().sum::<f64>() / used.len() as f64
        }
    }
}

/// NLI4CT's binary F1 with `entailment` (label position 0 of the NLI label set) positive.
fn binary_f1_entailment(cells: &[Cell]) -> Stat<f64> {
    let (mut tp, mut fp, mut fn_) = (0u64, 0u64, 0u64);
    for c in cells {
        match (c.gold == 0, c.predicted == 0) {
            (true, true) => tp += 1,
            (false, true) => fp += 1,
            (true, false) => fn_ += 1,
            (false, false) => {}
        }
    }
    if tp + fp + fn_ == 0 {
        return Stat::undefined("no instance is or is predicted as entailment");
    }
    Stat::Defined(2.0 * tp as f64 / (2 * tp + fp + fn_) as f64)
}

fn label_position(problem: &Problem, label: &str) -> u16 {
    // Labels were checked against the label set in `index_predictions`.
    problem
        .label_set()
        .iter()
        .position(|l| l == label)
        .expect("label checked") as u16
}

fn task_report(
    input: &TaskInput,
    by_key: &HashMap<(&str, &str), &Prediction>,
    options: &ProxyOptions,
    human: Option<&HumanRankings>,
) -> TaskReport {
    let metric = Metric::for_task(input.task);
    let n = input.instances.len();
    // cells[system][instance], p_correct[system][instance]
    let mut cells: Vec<Vec<Cell>> = Vec::with_capacity(input.systems.len());
    let mut p_correct: Vec<Vec<f64>> = Vec::with_capacity(input.systems.len());
    for system in &input.systems {
        let mut row = Vec::with_capacity(n);
        let mut probs = Vec::with_capacity(n);
        for inst in &input.instances {
            let p = by_key[&(inst.id.as_str(), system.as_str())];
            row.push(Cell {
                gold: label_position(&inst.problem, inst.problem.gold()),
                predicted: label_position(&inst.problem, &p.predicted),
            });
            probs.push(p.p_correct);
        }
        cells.push(row);
        p_correct.push(probs);
    }

    let all: Vec<usize> = (0..n).collect();
    let scores: Vec<f64> = cells
        .iter()
        .map(|c| metric_value(metric, c, &all))
        .collect();
    let boot = Bootstrap {
        resamples: options.resamples,
        confidence: options.confidence,
        seed: options.seed,
    }
    .run(n, |idx| {
        cells.iter().map(|c| metric_value(metric, c, idx)).collect()
    });
    let ranks = average_ranks(&scores, Order::HigherIsBetter);

    // Best first; undefined scores (no instance) last; ties keep bundle order.
    let mut order: Vec<usize> = (0..input.systems.len()).collect();
    order.sort_by(|&a, &b| {
        let key = |s: f64| if s.is_nan() { f64::NEG_INFINITY } else { s };
        key(scores[b]).total_cmp(&key(scores[a]))
    });
    let is_control = |s: &str| options.controls.iter().any(|c| c == s);
    let systems: Vec<SystemScore> = order
        .iter()
        .map(|&s| SystemScore {
            system: input.systems[s].clone(),
            is_control: is_control(&input.systems[s]),
            n,
            score: defined(scores[s], "no instance to score"),
            interval: boot.intervals[s].clone(),
            rank: ranks[s],
            mean_p_correct: describe::mean(&p_correct[s]),
            binary_f1_entailment: (input.task == Task::Nli)
                .then(|| binary_f1_entailment(&cells[s])),
        })
        .collect();
    let adjacent = order
        .windows(2)
        .map(|w| AdjacentComparison {
            upper: input.systems[w[0]].clone(),
            lower: input.systems[w[1]].clone(),
            p_upper_beats_lower: boot.win_rate(w[0], w[1]),
        })
        .collect();

    let robustness = robustness(&input.systems, &scores, &is_control);
    let evaluated: HashSet<&str> = input.instances.iter().map(|i| i.id.as_str()).collect();
    let human = human.and_then(|rankings| {
        human_agreement(
            rankings,
            &input.all_ids,
            &evaluated,
            Some((&input.systems, &scores)),
        )
    });
    TaskReport {
        task: input.task,
        metric,
        n_instances: n,
        dropped_not_enough_evidence: input.dropped_not_enough_evidence,
        incomplete_instances: input.incomplete.clone(),
        systems,
        adjacent,
        robustness,
        human,
    }
}

fn defined(value: f64, reason: &str) -> Stat<f64> {
    if value.is_nan() {
        Stat::undefined(reason)
    } else {
        Stat::Defined(value)
    }
}

fn robustness(systems: &[String], scores: &[f64], is_control: &dyn Fn(&str) -> bool) -> Robustness {
    let (controls, primaries): (Vec<usize>, Vec<usize>) =
        (0..systems.len()).partition(|&s| is_control(&systems[s]));
    if controls.is_empty() || primaries.is_empty() {
        let what = if controls.is_empty() {
            "control case"
        } else {
            "primary system"
        };
        return Robustness {
            robust: Stat::undefined(format!("this task has no {what} to compare")),
            violations: Vec::new(),
        };
    }
    if scores.iter().any(|s| s.is_nan()) {
        return Robustness {
            robust: Stat::undefined("scores are undefined (no instance)"),
            violations: Vec::new(),
        };
    }
    let mut violations = Vec::new();
    for &c in &controls {
        for &p in &primaries {
            if scores[c] >= scores[p] {
                violations.push(Violation {
                    control: systems[c].clone(),
                    primary: systems[p].clone(),
                    control_score: scores[c],
                    primary_score: scores[p],
                });
            }
        }
    }
    Robustness {
        robust: Stat::Defined(violations.is_empty()),
        violations,
    }
}

/// Agreement of the annotators among themselves, and with an evaluator's system scores
/// when given (`(systems, scores)`; without them Kendall's tau is undefined). Rows of
/// instances outside `all_ids` are ignored; rows of instances in `all_ids` but not in
/// `evaluated` are counted as excluded. `None` when no row is left.
pub fn human_agreement(
    rankings: &HumanRankings,
    all_ids: &HashSet<&str>,
    evaluated: &HashSet<&str>,
    evaluator: Option<(&[String], &[f64])>,
) -> Option<HumanAgreement> {
    let rows: Vec<_> = rankings
        .rows
        .iter()
        .filter(|r| all_ids.contains(r.instance.as_str()))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let (rows, excluded): (Vec<_>, Vec<_>) = rows
        .into_iter()
        .partition(|r| evaluated.contains(r.instance.as_str()));

    // Systems the humans ranked here, in the rankings file's order.
    let ranked: HashSet<&str> = rows.iter().map(|r| r.system.as_str()).collect();
    let human_systems: Vec<&str> = rankings
        .systems
        .iter()
        .map(String::as_str)
        .filter(|s| ranked.contains(s))
        .collect();
    let position: HashMap<&str, usize> = human_systems
        .iter()
        .enumerate()
        .map(|(i, s)| (*s, i))
        .collect();

    let mut sums = vec![0.0; human_systems.len()];
    let mut counts = vec![0usize; human_systems.len()];
    // (instance, annotator) -> ranks per system; the order of first appearance is kept.
    let mut blocks: Vec<Vec<Option<f64>>> = Vec::new();
    let mut block_of: HashMap<(&str, &str), usize> = HashMap::new();
    for r in &rows {
        let s = position[r.system.as_str()];
        sums[s] += r.rank;
        counts[s] += 1;
        let b = *block_of
            .entry((r.instance.as_str(), r.annotator.as_str()))
            .or_insert_with(|| {
                blocks.push(vec![None; human_systems.len()]);
                blocks.len() - 1
            });
        blocks[b][s] = Some(r.rank);
    }
    let averages: Vec<f64> = sums
        .iter()
        .zip(&counts)
        .map(|(s, &c)| s / c as f64)
        .collect();

    // Kendall over systems that both the evaluator and the humans ranked.
    let kendall_tau_b = match evaluator {
        Some((systems, scores)) => {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            for (s, system) in human_systems.iter().enumerate() {
                if let Some(e) = systems.iter().position(|t| t == system) {
                    x.push(scores[e]);
                    y.push(-averages[s]);
                }
            }
            tau_b(&x, &y)
        }
        None => Stat::undefined("no evaluator scores to compare with"),
    };

    let complete: Vec<Vec<f64>> = blocks
        .iter()
        .filter(|b| b.iter().all(Option::is_some))
        .map(|b| b.iter().map(|v| v.unwrap()).collect())
        .collect();
    let friedman_incomplete_blocks = blocks.len() - complete.len();
    let friedman_blocks = complete.len();
    let friedman = friedman_named(&complete, &human_systems);

    // Krippendorff: coders = annotators, units = (instance, system).
    let annotators: Vec<&str> = {
        let present: HashSet<&str> = rows.iter().map(|r| r.annotator.as_str()).collect();
        rankings
            .annotators
            .iter()
            .map(String::as_str)
            .filter(|a| present.contains(a))
            .collect()
    };
    let coder: HashMap<&str, usize> = annotators
        .iter()
        .enumerate()
        .map(|(i, a)| (*a, i))
        .collect();
    let mut unit_of: HashMap<(&str, &str), usize> = HashMap::new();
    for r in &rows {
        let next = unit_of.len();
        unit_of
            .entry((r.instance.as_str(), r.system.as_str()))
            .or_insert(next);
    }
    let mut reliability = vec![vec![None; unit_of.len()]; annotators.len()];
    for r in &rows {
        let u = unit_of[&(r.instance.as_str(), r.system.as_str())];
        reliability[coder[r.annotator.as_str()]][u] = Some(r.rank);
    }
    let krippendorff_alpha_ordinal = alpha(&reliability, Level::Ordinal);

    let mut systems: Vec<HumanSystemRank> = human_systems
        .iter()
        .enumerate()
        .map(|(s, name)| HumanSystemRank {
            system: name.to_string(),
            average_rank: averages[s],
            n: counts[s],
        })
        .collect();
    systems.sort_by(|a, b| a.average_rank.total_cmp(&b.average_rank));
    Some(HumanAgreement {
        systems,
        kendall_tau_b,
        friedman,
        friedman_blocks,
        friedman_incomplete_blocks,
        krippendorff_alpha_ordinal,
        rows_excluded: excluded.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::HumanRank;
    use approx::assert_relative_eq;

    fn instance(id: &str, problem: Problem, systems: &[&str]) -> Instance {
        Instance {
            id: id.into(),
            problem,
            arguments: systems
                .iter()
                .map(|s| (s.to_string(), format!("{s} on {id}")))
                .collect(),
            line: 0,
        }
    }

    fn mcqa(answer: &str) -> Problem {
        Problem::Mcqa {
            question: "case".into(),
            options: (1..=5)
                .map(|k| (k.to_string(), format!("option {k}")))
                .collect(),
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
        Bundle {
            name: "bundle.jsonl".into(),
            instances,
            systems,
            controls: Vec::new(),
        }
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
        let b = bundle(
            (1..=5)
                .map(|i| instance(&format!("q{i}"), mcqa("1"), &SYSTEMS))
                .collect(),
        );
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
        ProxyOptions {
            seed: 5,
            resamples: 200,
            ..ProxyOptions::default()
        }
    }

    #[test]
    fn mcqa_systems_are_ranked_by_accuracy_with_intervals() {
        let (b, preds) = mcqa_case();
        let report = rank_systems(&b, &preds, &options(), None).unwrap();
        assert_eq!(report.tasks.len(), 1);
        let t = &report.tasks[0];
        assert_eq!(
            (t.task, t.metric, t.n_instances),
            (Task::Mcqa, Metric::Accuracy, 5)
        );
        let order: Vec<&str> = t.systems.iter().map(|s| s.system.as_str()).collect();
        assert_eq!(
            order,
            ["gpt-4o", "expert", "openbio", "llama", "no_argument"]
        );
        let scores: Vec<f64> = t
            .systems
            .iter()
            .map(|s| *s.score.value().unwrap())
            .collect();
        assert_eq!(scores, [1.0, 0.8, 0.6, 0.4, 0.2]);
        assert_eq!(
            t.systems.iter().map(|s| s.rank).collect::<Vec<_>>(),
            [1.0, 2.0, 3.0, 4.0, 5.0]
        );
        // Mean p_correct of expert: (4·0.9 + 0.1)/5 = 0.74.
        assert_relative_eq!(
            *t.systems[1].mean_p_correct.value().unwrap(),
            0.74,
            epsilon = 1e-12
        );
        for s in &t.systems {
            let ci = s.interval.value().unwrap();
            assert!(
                ci.contains(*s.score.value().unwrap()),
                "{}: {ci:?}",
                s.system
            );
            assert!(s.binary_f1_entailment.is_none());
        }
        // gpt-4o is right everywhere: its interval is the point 1.
        assert_eq!(
            *t.systems[0].interval.value().unwrap(),
            Interval { lo: 1.0, hi: 1.0 }
        );
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
        let v: Vec<(&str, &str)> = t
            .robustness
            .violations
            .iter()
            .map(|v| (v.control.as_str(), v.primary.as_str()))
            .collect();
        assert_eq!(v, [("no_argument", "llama"), ("no_argument", "openbio")]);
        // Same predictions for openbio and no_argument on every instance? No: so the adjacent
        // win rate is still a probability, and identical systems would give exactly 1/2.
        let mut same = preds.clone();
        for p in same.iter_mut().filter(|p| p.system == "no_argument") {
            let i: usize = p.instance[1..].parse().unwrap();
            p.predicted = if i <= 3 { "1" } else { "2" }.into();
        }
        let report = rank_systems(&b, &same, &options(), None).unwrap();
        let adj = report.tasks[0]
            .adjacent
            .iter()
            .find(|a| a.upper == "openbio")
            .unwrap();
        assert_eq!(adj.lower, "no_argument");
        assert_eq!(adj.p_upper_beats_lower, Stat::Defined(0.5));
    }

    #[test]
    fn misinformation_uses_macro_f1_and_drops_not_enough_evidence() {
        // scikit-learn 1.x: f1_score(["supported","refuted","supported","refuted","supported",
        // "refuted"], ["supported","supported","not_enough_evidence","refuted","supported",
        // "refuted"], average="macro") -> 0.48888888888888893 (labels: the union, 3).
        let gold = [
            "supported",
            "refuted",
            "supported",
            "refuted",
            "supported",
            "refuted",
        ];
        let pred = [
            "supported",
            "supported",
            "not_enough_evidence",
            "refuted",
            "supported",
            "refuted",
        ];
        let mut instances: Vec<Instance> = gold
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let p = Problem::Misinformation {
                    claim: "c".into(),
                    label: g.to_string(),
                };
                instance(&format!("c{i}"), p, &["expert"])
            })
            .collect();
        let nee = Problem::Misinformation {
            claim: "c".into(),
            label: "not_enough_evidence".into(),
        };
        instances.push(instance("c-nee", nee, &["expert"]));
        let b = bundle(instances);
        let mut preds: Vec<Prediction> = pred
            .iter()
            .enumerate()
            .map(|(i, p)| prediction(&format!("c{i}"), "expert", p, 0.5))
            .collect();
        preds.push(prediction("c-nee", "expert", "refuted", 0.2));
        let report = rank_systems(&b, &preds, &options(), None).unwrap();
        let t = &report.tasks[0];
        assert_eq!(
            (t.metric, t.n_instances, t.dropped_not_enough_evidence),
            (Metric::MacroF1, 6, 1)
        );
        assert_relative_eq!(
            *t.systems[0].score.value().unwrap(),
            0.48888888888888893,
            epsilon = 1e-12
        );
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
        let keep = ProxyOptions {
            drop_not_enough_evidence: false,
            ..options()
        };
        let t = &rank_systems(&b, &preds, &keep, None).unwrap().tasks[0];
        assert_eq!((t.n_instances, t.dropped_not_enough_evidence), (7, 0));
    }

    #[test]
    fn nli_reports_micro_f1_and_binary_f1_with_entailment_positive() {
        // scikit-learn 1.x: y_true = [E, C, E, C, E], y_pred = [E, E, C, C, E]:
        // f1_score(average="micro") -> 0.6; f1_score(pos_label="entailment") -> 0.6666666666666666
        let gold = [
            "entailment",
            "contradiction",
            "entailment",
            "contradiction",
            "entailment",
        ];
        let pred = [
            "entailment",
            "entailment",
            "contradiction",
            "contradiction",
            "entailment",
        ];
        let b = bundle(
            gold.iter()
                .enumerate()
                .map(|(i, g)| {
                    let p = Problem::Nli {
                        statement: "s".into(),
                        evidence: "e".into(),
                        label: g.to_string(),
                    };
                    instance(&format!("n{i}"), p, &["gpt-4o"])
                })
                .collect(),
        );
        let preds: Vec<Prediction> = pred
            .iter()
            .enumerate()
            .map(|(i, p)| prediction(&format!("n{i}"), "gpt-4o", p, 0.5))
            .collect();
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
        let missing: Vec<Prediction> = preds
            .iter()
            .filter(|p| !(p.instance == "q3" && p.system == "llama"))
            .cloned()
            .collect();
        let err = rank_systems(&b, &missing, &options(), None)
            .unwrap_err()
            .to_string();
        // Located at the instance's bundle line (0: this bundle is built in memory).
        assert_eq!(
            err,
            "bundle.jsonl:0: field `arguments.llama`: instance `q3` has no prediction for system `llama`"
        );

        let mut twice = preds.clone();
        twice.push(preds[0].clone());
        let err = rank_systems(&b, &twice, &options(), None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("(q1, expert) is predicted twice"), "{err}");

        let mut unknown = preds.clone();
        unknown.push(prediction("q9", "expert", "1", 0.5));
        unknown.push(prediction("q1", "expert", "7", 0.5));
        let err = rank_systems(&b, &unknown, &options(), None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown instance `q9`") && err.contains("label `7`"),
            "{err}"
        );
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
        let avg: Vec<(&str, f64, usize)> = h
            .systems
            .iter()
            .map(|s| (s.system.as_str(), s.average_rank, s.n))
            .collect();
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
        assert_eq!(
            alone.krippendorff_alpha_ordinal,
            h.krippendorff_alpha_ordinal
        );
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
}

#[cfg(test)]
mod scale {
    use super::*;

    /// The bench size: 100,000 arguments (25,000 MCQA instances × 4 systems), 1,000
    /// resamples. Run with `cargo test --release --lib eval::proxy::scale -- --ignored`.
    #[test]
    #[ignore]
    fn ranks_100000_arguments() {
        let systems = ["a", "b", "c", "d"];
        let mut instances = Vec::new();
        let mut predictions = Vec::new();
        for i in 0..25_000 {
            let id = format!("i{i}");
            instances.push(Instance {
                id: id.clone(),
                problem: Problem::Mcqa {
                    question: "q".into(),
                    options: (1..=5).map(|k| (k.to_string(), String::new())).collect(),
                    answer: "1".into(),
                },
                arguments: systems
                    .iter()
                    .map(|s| (s.to_string(), String::new()))
                    .collect(),
                line: i + 1,
            });
            for (s, system) in systems.iter().enumerate() {
                let right = (i * 7 + s * 3) % (5 + s) != 0;
                predictions.push(Prediction {
                    instance: id.clone(),
                    system: system.to_string(),
                    predicted: if right { "1" } else { "2" }.into(),
                    p_correct: 0.5,
                    probs: vec![],
                });
            }
        }
        let bundle = Bundle {
            name: "big".into(),
            instances,
            systems: systems.iter().map(|s| s.to_string()).collect(),
            controls: Vec::new(),
        };
        let start = std::time::Instant::now();
        let report = rank_systems(&bundle, &predictions, &ProxyOptions::default(), None).unwrap();
        eprintln!("rank_systems on 100,000 arguments: {:?}", start.elapsed());
        assert_eq!(report.tasks[0].n_instances, 25_000);
    }
}
