//! The robustness verdict: every control case must score strictly below every primary
//! system (a tie is a violation).

use super::*;

pub(super) fn robustness(systems: &[String], scores: &[f64], is_control: &dyn Fn(&str) -> bool) -> Robustness {
    let (controls, primaries): (Vec<usize>, Vec<usize>) = (0..systems.len()).partition(|&s| is_control(&systems[s]));
    if controls.is_empty() || primaries.is_empty() {
        let what = if controls.is_empty() { "control case" } else { "primary system" };
        return Robustness {
            robust: Stat::undefined(format!("this task has no {what} to compare")),
            violations: Vec::new(),
        };
    }
    if scores.iter().any(|s| s.is_nan()) {
        return Robustness { robust: Stat::undefined("scores are undefined (no instance)"), violations: Vec::new() };
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
    Robustness { robust: Stat::Defined(violations.is_empty()), violations }
}
