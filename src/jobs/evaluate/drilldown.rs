//! What the page shows beyond a report: the per-instance drill-down of ranking over
//! scoring (the texts an evaluator saw and what each evaluator predicted). Copied from the
//! inputs; nothing is computed here. The CLI writes no such view: its predictions file and
//! the bundle hold the same facts.

use serde::Serialize;

use crate::data::controls::Control;
use crate::data::{Bundle, Prediction, Problem};

/// One instance of the bundle with every argument and the evaluators' predictions on it.
#[derive(Debug, Serialize)]
pub struct InstanceView<'a> {
    pub id: &'a str,
    pub task: &'a str,
    pub text: String,
    pub options: Vec<(&'a str, &'a str)>,
    pub gold: &'a str,
    pub arguments: Vec<ArgumentView<'a>>,
}

#[derive(Debug, Serialize)]
pub struct ArgumentView<'a> {
    pub system: &'a str,
    /// `None` for a control case medrank generated (its text is in the controls report);
    /// empty for the no-argument control (the question alone).
    pub text: Option<&'a str>,
    pub predictions: Vec<PredictionView<'a>>,
}

#[derive(Debug, Serialize)]
pub struct PredictionView<'a> {
    pub evaluator: &'a str,
    pub predicted: &'a str,
    pub p_correct: f64,
    pub probs: &'a [(String, f64)],
}

/// The control names of the options plus the control files the bundle marks (as the
/// evaluate job's verdict counts them).
pub fn with_file_controls(controls: &[String], bundle: &Bundle) -> Vec<String> {
    let mut all = controls.to_vec();
    all.extend(bundle.controls.iter().filter(|c| !controls.contains(c)).cloned());
    all
}

/// The drill-down of every instance of `bundle`, with the `(evaluator, prediction)` pairs
/// attached to their (instance, system). Systems an evaluator scored that the bundle does
/// not have (generated control cases) come last, without a text.
pub fn instance_views<'a>(bundle: &'a Bundle, predictions: &[(&'a str, &'a Prediction)]) -> Vec<InstanceView<'a>> {
    let mut by_key: std::collections::BTreeMap<(&str, &str), Vec<PredictionView<'a>>> = Default::default();
    for (evaluator, p) in predictions {
        by_key.entry((p.instance.as_str(), p.system.as_str())).or_default().push(PredictionView {
            evaluator,
            predicted: &p.predicted,
            p_correct: p.p_correct,
            probs: &p.probs,
        });
    }
    bundle
        .instances
        .iter()
        .map(|inst| {
            let (text, options) = match &inst.problem {
                Problem::Mcqa { question, options, .. } => {
                    (question.clone(), options.iter().map(|(k, t)| (k.as_str(), t.as_str())).collect())
                }
                other => (other.query_text(), Vec::new()),
            };
            let mut arguments: Vec<ArgumentView> = inst
                .arguments
                .iter()
                .map(|(system, text)| ArgumentView {
                    system,
                    text: Some(text),
                    predictions: by_key.remove(&(inst.id.as_str(), system.as_str())).unwrap_or_default(),
                })
                .collect();
            // Systems scored by an evaluator but not in the bundle: the control cases.
            let others: Vec<(&str, &str)> = by_key.keys().filter(|(i, _)| *i == inst.id.as_str()).copied().collect();
            for key in others {
                let predictions = by_key.remove(&key).unwrap_or_default();
                // The no-argument control is the question alone (the no-argument file's, in
                // an import): an empty argument, not a text made for this run.
                let no_argument = Control::of_name(key.1) == Some(Control::NoArgument);
                arguments.push(ArgumentView { system: key.1, text: no_argument.then_some(""), predictions });
            }
            InstanceView {
                id: &inst.id,
                task: inst.problem.task().name(),
                text,
                options,
                gold: inst.problem.gold(),
                arguments,
            }
        })
        .collect()
}
