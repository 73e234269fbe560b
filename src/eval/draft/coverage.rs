//! How much of what experts wrote a drafted rubric reaches, and how much of the draft is
//! what experts wrote: given, per prompt, whether each drafted criterion entails each
//! expert statement (an NLI model's judgement, with the criterion as premise and the
//! statement as hypothesis),
//!
//! - **recall** = expert statements that some criterion entails / expert statements
//!   (also over the must-have statements alone);
//! - **precision** = criteria that entail some expert statement / criteria.
//!
//! Per prompt, and pooled over the prompts that have expert statements (the shares of all
//! their statements and all their criteria); the unweighted means over prompts beside.

use crate::stats::Stat;
use serde::Serialize;

/// The figures of one prompt, or of all prompts pooled (`prompt` = `all`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptCoverage {
    pub prompt: String,
    pub criteria: usize,
    pub statements: usize,
    pub must_have: usize,
    /// Statements some criterion entails.
    pub statements_entailed: usize,
    pub must_have_entailed: usize,
    /// Criteria that entail some statement.
    pub criteria_entailing: usize,
    pub recall: Stat,
    pub must_have_recall: Stat,
    pub precision: Stat,
}

/// Every prompt's figures, the pooled ones and the means over prompts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Coverage {
    pub prompts: Vec<PromptCoverage>,
    pub pooled: PromptCoverage,
    /// Unweighted means over the prompts where the figure is defined.
    pub mean_recall: Stat,
    pub mean_must_have_recall: Stat,
    pub mean_precision: Stat,
}

fn share(part: usize, whole: usize, what: &str) -> Stat {
    if whole == 0 {
        Stat::undefined(format!("no {what}"))
    } else {
        Stat::Defined(part as f64 / whole as f64)
    }
}

/// The figures of one prompt: `must_have[s]` says whether statement s is a must-have,
/// `entails[c][s]` whether criterion c entails statement s.
pub fn prompt_coverage(prompt: &str, must_have: &[bool], entails: &[Vec<bool>]) -> PromptCoverage {
    let statements = must_have.len();
    let entailed: Vec<bool> = (0..statements).map(|s| entails.iter().any(|row| row[s])).collect();
    let statements_entailed = entailed.iter().filter(|&&e| e).count();
    let must = must_have.iter().filter(|&&m| m).count();
    let must_have_entailed = entailed.iter().zip(must_have).filter(|(&e, &m)| e && m).count();
    let criteria_entailing = entails.iter().filter(|row| row.iter().any(|&e| e)).count();
    counts(prompt, entails.len(), statements, must, statements_entailed, must_have_entailed, criteria_entailing)
}

fn counts(
    prompt: &str,
    criteria: usize,
    statements: usize,
    must_have: usize,
    statements_entailed: usize,
    must_have_entailed: usize,
    criteria_entailing: usize,
) -> PromptCoverage {
    PromptCoverage {
        prompt: prompt.to_owned(),
        criteria,
        statements,
        must_have,
        statements_entailed,
        must_have_entailed,
        criteria_entailing,
        recall: share(statements_entailed, statements, "expert statements"),
        must_have_recall: share(must_have_entailed, must_have, "must-have statements"),
        precision: share(criteria_entailing, criteria, "drafted criteria"),
    }
}

fn mean(values: impl Iterator<Item = Option<f64>>, what: &str) -> Stat {
    let defined: Vec<f64> = values.flatten().collect();
    if defined.is_empty() {
        Stat::undefined(format!("no prompt with {what}"))
    } else {
        Stat::Defined(defined.iter().sum::<f64>() / defined.len() as f64)
    }
}

/// The pooled figures and the means over `prompts`.
pub fn coverage(prompts: Vec<PromptCoverage>) -> Coverage {
    let sum = |f: fn(&PromptCoverage) -> usize| prompts.iter().map(f).sum::<usize>();
    let pooled = counts(
        "all",
        sum(|p| p.criteria),
        sum(|p| p.statements),
        sum(|p| p.must_have),
        sum(|p| p.statements_entailed),
        sum(|p| p.must_have_entailed),
        sum(|p| p.criteria_entailing),
    );
    Coverage {
        mean_recall: mean(prompts.iter().map(|p| p.recall.value().copied()), "expert statements"),
        mean_must_have_recall: mean(
            prompts.iter().map(|p| p.must_have_recall.value().copied()),
            "must-have statements",
        ),
        mean_precision: mean(prompts.iter().map(|p| p.precision.value().copied()), "drafted criteria"),
        pooled,
        prompts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &Stat) -> f64 {
        *s.value().expect("defined")
    }

    #[test]
    fn recall_and_precision_by_hand() {
        // Prompt a: 3 criteria, 4 statements (the first two must-have).
        //   c0 entails s0 and s2; c1 entails s0; c2 entails nothing.
        //   Statements entailed: s0, s2 -> recall 2/4; must-have entailed: s0 -> 1/2;
        //   criteria entailing: c0, c1 -> precision 2/3.
        let a = prompt_coverage(
            "a",
            &[true, true, false, false],
            &[vec![true, false, true, false], vec![true, false, false, false], vec![false; 4]],
        );
        assert_eq!((a.statements_entailed, a.must_have_entailed, a.criteria_entailing), (2, 1, 2));
        assert_eq!((v(&a.recall), v(&a.must_have_recall), v(&a.precision)), (0.5, 0.5, 2.0 / 3.0));
        // Prompt b: no criterion drafted, 1 nice-to-have statement: recall 0/1, no must-have,
        // precision undefined.
        let b = prompt_coverage("b", &[false], &[]);
        assert_eq!(v(&b.recall), 0.0);
        assert_eq!(b.must_have_recall, Stat::undefined("no must-have statements"));
        assert_eq!(b.precision, Stat::undefined("no drafted criteria"));
        let all = coverage(vec![a, b]);
        // Pooled: statements 2 of 5, must-have 1 of 2, criteria 2 of 3.
        assert_eq!(v(&all.pooled.recall), 0.4);
        assert_eq!(v(&all.pooled.must_have_recall), 0.5);
        assert_eq!(v(&all.pooled.precision), 2.0 / 3.0);
        // Means over prompts: recall (0.5 + 0) / 2; must-have and precision from a alone.
        assert_eq!(v(&all.mean_recall), 0.25);
        assert_eq!(v(&all.mean_must_have_recall), 0.5);
        assert_eq!(v(&all.mean_precision), 2.0 / 3.0);
    }
}
