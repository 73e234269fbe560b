//! The second step: per task, the metric of each system with its bootstrap interval, the
//! ranks, adjacent comparisons, the robustness verdict and human agreement.

use super::inputs::TaskInput;
use super::robustness::robustness;
use super::*;

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
            let correct = indices.iter().filter(|&&i| cells[i].gold == cells[i].predicted).count();
            correct as f64 / indices.len() as f64
        }
        Metric::MacroF1 => {
            let n = indices.iter().map(|&i| cells[i].gold.max(cells[i].predicted) as usize + 1).max().unwrap_or(0);
            let pairs = indices.iter().map(|&i| (cells[i].gold as usize, cells[i].predicted as usize));
            crate::stats::classes::Confusion::of(n, pairs).macro_f1()
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
    problem.label_set().iter().position(|l| l == label).expect("label checked") as u16
}

pub(super) fn task_report(
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
    let scores: Vec<f64> = cells.iter().map(|c| metric_value(metric, c, &all)).collect();
    let boot = options.bootstrap.run(n, |idx| cells.iter().map(|c| metric_value(metric, c, idx)).collect());
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
            binary_f1_entailment: (input.task == Task::Nli).then(|| binary_f1_entailment(&cells[s])),
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
    let human = human
        .and_then(|rankings| human_agreement(rankings, &input.all_ids, &evaluated, Some((&input.systems, &scores))));
    let options_per_question: Vec<usize> = input
        .instances
        .iter()
        .filter_map(|i| match &i.problem {
            crate::data::Problem::Mcqa { options, .. } => Some(options.len()),
            _ => None,
        })
        .collect();
    let chance = (input.task == Task::Mcqa && n > 0 && !options_per_question.contains(&0))
        .then(|| options_per_question.iter().map(|&k| 1.0 / k as f64).sum::<f64>() / n as f64);
    TaskReport {
        task: input.task,
        metric,
        n_instances: n,
        dropped_not_enough_evidence: input.dropped_not_enough_evidence,
        incomplete_instances: input.incomplete.clone(),
        chance,
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
