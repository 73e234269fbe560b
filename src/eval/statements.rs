//! Statement checks (K-QA, Manes et al. 2024, "K-QA: A Real-World Medical Q&A
//! Benchmark"): an answer is the premise, each expert statement the hypothesis of an NLI
//! judgement (`model::grade::NliLabels`: the label with the largest logit).
//!
//! - **Comprehensiveness** of an answer = the share of its *must-have* statements it entails;
//!   undefined without must-have statements (K-QA's `recall`, mean = `Comp_norm`).
//! - **Contradicted** = how many of its statements (must-have and nice-to-have) it
//!   contradicts (K-QA counts them: mean = `Hall_norm`); **hallucination** = that count over
//!   its statements, a share in [0, 1].
//! - Per system: the means over its answers, each with a seeded percentile bootstrap
//!   interval over the prompts (`prompt_id`, else `id`; the answers to one prompt stay
//!   together), resampled on its own as the rubric's scores are.

use crate::data::statements::StatementAnswer;
use crate::model::grade::NliJudgement;
use crate::stats::bootstrap::Bootstrap;
use crate::stats::{describe, Interval, Stat};
use serde::Serialize;
use std::collections::HashMap;

/// The figures of one answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerChecks {
    pub id: String,
    pub system: String,
    pub line: usize,
    pub must_have: usize,
    pub entailed_must_have: usize,
    pub statements: usize,
    pub contradicted: usize,
    pub comprehensiveness: Stat<f64>,
    pub hallucination: f64,
}

/// A system's mean of one figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckMean {
    /// "comprehensiveness", "contradicted" or "hallucination".
    pub figure: &'static str,
    /// Answers with a defined value.
    pub n: usize,
    pub mean: Stat<f64>,
    pub interval: Stat<Interval>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemChecks {
    pub system: String,
    pub answers: usize,
    pub figures: Vec<CheckMean>,
}

/// The three figures' names, in report order.
pub const FIGURES: [&str; 3] = ["comprehensiveness", "contradicted", "hallucination"];

/// Each answer's figures from its judgements (`judged[a][s]` for the statements of answer
/// `a` in [`StatementAnswer::statements`] order).
pub fn answer_checks(answers: &[StatementAnswer], judged: &[Vec<NliJudgement>]) -> Vec<AnswerChecks> {
    answers
        .iter()
        .zip(judged)
        .map(|(a, js)| {
            let must_have = a.must_have.len();
            let entailed_must_have = js[..must_have].iter().filter(|j| j.entailed).count();
            let contradicted = js.iter().filter(|j| j.contradicted).count();
            let statements = js.len();
            AnswerChecks {
                id: a.id.clone(),
                system: a.system.clone(),
                line: a.line,
                must_have,
                entailed_must_have,
                statements,
                contradicted,
                comprehensiveness: if must_have == 0 {
                    Stat::undefined("no must-have statement")
                } else {
                    Stat::Defined(entailed_must_have as f64 / must_have as f64)
                },
                hallucination: contradicted as f64 / statements as f64,
            }
        })
        .collect()
}

fn value(c: &AnswerChecks, figure: &str) -> Option<f64> {
    match figure {
        "comprehensiveness" => c.comprehensiveness.value().copied(),
        "contradicted" => Some(c.contradicted as f64),
        _ => Some(c.hallucination),
    }
}

/// Per system (in first-appearance order), the mean of each figure with its interval.
pub fn system_checks(answers: &[StatementAnswer], checks: &[AnswerChecks], bootstrap: Bootstrap) -> Vec<SystemChecks> {
    let systems = crate::data::common::first_appearance(answers.iter().map(|a| a.system.clone()));
    systems
        .into_iter()
        .map(|system| {
            let figures = FIGURES
                .iter()
                .map(|&figure| {
                    // The values of this figure, grouped by prompt.
                    let mut index: HashMap<&str, usize> = HashMap::new();
                    let mut clusters: Vec<Vec<f64>> = Vec::new();
                    for (a, c) in answers.iter().zip(checks) {
                        let Some(v) = value(c, figure).filter(|_| a.system == system) else { continue };
                        let next = clusters.len();
                        let k = *index.entry(a.unit()).or_insert(next);
                        if k == clusters.len() {
                            clusters.push(Vec::new());
                        }
                        clusters[k].push(v);
                    }
                    let values: Vec<f64> = clusters.concat();
                    let interval = if clusters.is_empty() {
                        Stat::undefined("no answer with a defined value")
                    } else {
                        let result = bootstrap.run(clusters.len(), |drawn| {
                            let (sum, n) =
                                drawn.iter().flat_map(|&k| &clusters[k]).fold((0.0, 0), |(s, n), v| (s + v, n + 1));
                            vec![sum / n as f64]
                        });
                        result.intervals.into_iter().next().expect("one statistic")
                    };
                    CheckMean { figure, n: values.len(), mean: describe::mean(&values), interval }
                })
                .collect();
            let count = answers.iter().filter(|a| a.system == system).count();
            SystemChecks { system, answers: count, figures }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(entailed: bool, contradicted: bool) -> NliJudgement {
        NliJudgement { p_entailment: 0.0, p_contradiction: 0.0, entailed, contradicted }
    }

    fn answer(id: &str, must: usize, nice: usize) -> StatementAnswer {
        StatementAnswer {
            id: id.into(),
            system: "s".into(),
            prompt_id: None,
            prompt: None,
            response: "r".into(),
            must_have: vec!["m".into(); must],
            nice_to_have: vec!["n".into(); nice],
            line: 1,
        }
    }

    #[test]
    fn figures_by_hand() {
        // a1: must-have 3 (entailed, entailed, contradicted), nice 1 (contradicted):
        // comprehensiveness 2/3, contradicted 2, hallucination 2/4.
        // a2: nice 2 (neither, entailed): comprehensiveness undefined, 0 contradicted.
        let answers = [answer("a1", 3, 1), answer("a2", 0, 2)];
        let judged = [
            vec![j(true, false), j(true, false), j(false, true), j(false, true)],
            vec![j(false, false), j(true, false)],
        ];
        let checks = answer_checks(&answers, &judged);
        assert_eq!(checks[0].comprehensiveness, Stat::Defined(2.0 / 3.0));
        assert_eq!((checks[0].contradicted, checks[0].hallucination), (2, 0.5));
        assert!(!checks[1].comprehensiveness.is_defined());
        assert_eq!(checks[1].hallucination, 0.0);
        let systems = system_checks(&answers, &checks, Bootstrap { seed: 1, ..Bootstrap::default() });
        let f = &systems[0].figures;
        // Comprehensiveness over a1 only; contradicted (2 + 0) / 2 = 1; hallucination 0.25.
        assert_eq!((f[0].n, f[0].mean.value().copied()), (1, Some(2.0 / 3.0)));
        assert_eq!((f[1].n, f[1].mean.value().copied()), (2, Some(1.0)));
        assert_eq!(f[2].mean.value().copied(), Some(0.25));
        // One prompt with a value: every resample is that value.
        assert_eq!(f[0].interval, Stat::Defined(Interval { lo: 2.0 / 3.0, hi: 2.0 / 3.0 }));
    }
}
