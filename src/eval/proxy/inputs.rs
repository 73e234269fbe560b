//! The first step: predictions indexed and checked against the bundle, human rankings
//! checked, and per task the instances and systems to score.

use super::*;

/// Predictions by (instance, system), after checking each against the bundle.
pub(super) fn index_predictions<'a>(
    bundle: &Bundle,
    predictions: &'a [Prediction],
) -> Result<HashMap<(&'a str, &'a str), &'a Prediction>> {
    let instances: HashMap<&str, &Instance> = bundle.instances.iter().map(|i| (i.id.as_str(), i)).collect();
    let mut by_key = HashMap::with_capacity(predictions.len());
    let mut problems = Vec::new();
    for p in predictions {
        let key = (p.instance.as_str(), p.system.as_str());
        match instances.get(key.0) {
            None => problems.push(format!("unknown instance `{}` (system `{}`)", p.instance, p.system)),
            Some(inst) if inst.argument(&p.system).is_none() => {
                problems.push(format!("instance `{}` has no argument from system `{}`", p.instance, p.system))
            }
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
            problems.iter().take(NAMED_IN_ERRORS).cloned().collect::<Vec<_>>().join("; "),
            if problems.len() > NAMED_IN_ERRORS { "; ..." } else { "" }
        )))
    }
}

/// Human rankings must refer to instances and systems of the bundle.
pub(super) fn check_rankings(bundle: &Bundle, rankings: &HumanRankings) -> Result<()> {
    let instances: HashMap<&str, &Instance> = bundle.instances.iter().map(|i| (i.id.as_str(), i)).collect();
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
                format!("instance `{}` has no argument from system `{}`", row.instance, row.system),
            ));
        }
    }
    Ok(())
}

/// The instances and systems one task evaluates.
pub(super) struct TaskInput<'a> {
    pub(super) task: Task,
    pub(super) instances: Vec<&'a Instance>,
    pub(super) systems: Vec<String>,
    pub(super) dropped_not_enough_evidence: usize,
    pub(super) incomplete: Vec<String>,
    /// Every instance id of this task in the bundle (for human rows' bookkeeping).
    pub(super) all_ids: HashSet<&'a str>,
}

pub(super) fn select_task<'a>(
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
    let present: HashSet<&str> = kept.iter().flat_map(|i| i.arguments.iter().map(|(s, _)| s.as_str())).collect();
    let systems: Vec<String> = bundle.systems.iter().filter(|s| present.contains(s.as_str())).cloned().collect();
    let (complete, incomplete): (Vec<&Instance>, Vec<&Instance>) =
        kept.into_iter().partition(|inst| systems.iter().all(|s| inst.argument(s).is_some()));
    let incomplete: Vec<String> = incomplete.iter().map(|i| i.id.clone()).collect();
    if !incomplete.is_empty() {
        warnings.push(Warning::new(format!(
            "{}: {} instances lack the argument of at least one system and are left out of the \
             ranking (systems are compared on the same instances): {}",
            task.name(),
            incomplete.len(),
            incomplete.iter().take(NAMED_IN_ERRORS).cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    TaskInput { task, instances: complete, systems, dropped_not_enough_evidence: dropped, incomplete, all_ids }
}
