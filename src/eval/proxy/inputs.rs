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

/// The warning of a ranking that leaves out the misinformation instances labelled
/// not_enough_evidence (`ids`), as the Ranking-Over-Scoring paper does: counted, with the way
/// to keep them (issue 47: 75 of 150 items went unsaid).
pub fn not_enough_evidence_left_out(ids: &[&str]) -> Warning {
    let (count, verb) = match ids.len() {
        1 => ("1 instance".to_string(), "is"),
        n => (format!("{n} instances"), "are"),
    };
    Warning::new(format!(
        "misinformation: {count} labelled not_enough_evidence {verb} left out of the ranking, as the \
         Ranking-Over-Scoring paper leaves them out (`--keep-not-enough-evidence`, on the page Options → \
         \"keep not_enough_evidence\", keeps them): {}{}",
        ids.iter().take(NAMED_IN_ERRORS).cloned().collect::<Vec<_>>().join(", "),
        if ids.len() > NAMED_IN_ERRORS { ", ..." } else { "" }
    ))
}

pub(super) fn select_task<'a>(
    bundle: &'a Bundle,
    task: Task,
    options: &ProxyOptions,
    warnings: &mut Vec<Warning>,
) -> TaskInput<'a> {
    let mut dropped = Vec::new();
    let mut kept: Vec<&Instance> = Vec::new();
    let mut all_ids = HashSet::new();
    for inst in bundle.instances.iter().filter(|i| i.problem.task() == task) {
        all_ids.insert(inst.id.as_str());
        let nee = matches!(&inst.problem, Problem::Misinformation { label, .. } if label == "not_enough_evidence");
        if nee && options.drop_not_enough_evidence {
            dropped.push(inst.id.as_str());
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
    if !dropped.is_empty() {
        warnings.push(not_enough_evidence_left_out(&dropped));
    }
    TaskInput { task, instances: complete, systems, dropped_not_enough_evidence: dropped.len(), incomplete, all_ids }
}
