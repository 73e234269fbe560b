//! Every task an evaluator is trained or run for, one row each ([`TASKS`]): its name and its
//! name in words, the head it trains (multiple choice, or classification over its labels),
//! the labels in the head's order (the names a model's `id2label` must give), the metric
//! that scores it and picks a training's best epoch, what the model reads, and what a too
//! long input loses first. The readers (`bundle`), the trainer (`jobs::train`,
//! `train::examples`), the evaluator (`model::evaluate`, `jobs::evaluate`), the page's
//! training form (`page::training`) and the docs (FORMATS.md's table of bundle tasks, held
//! to this one by a test) read it: adding a task is adding a row here and its scoring code.

use serde::Serialize;

use super::Task;

/// The head a task trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Head {
    /// One input per option, one logit each: a softmax over the options.
    MultipleChoice,
    /// One input, one logit per label.
    Classification,
    /// One input, one output per human score dimension (the dimensions come from the
    /// training file: `train::scores`).
    Regression,
}

/// The metric that scores a task (ranking over scoring's, and the training's choice of epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    Accuracy,
    MacroF1,
    /// Spearman's rho with the human scores per batch, averaged over the batches and the
    /// dimensions (the BioASQ study's).
    Spearman,
}

/// One task.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct TaskFacts {
    /// As `--task`, the bundle's `task` field and the reports name it.
    pub name: &'static str,
    /// In words, as the page's form shows it.
    pub label: &'static str,
    /// The bundle task whose instances it reads; `None` for the rubric criterion grader,
    /// which reads a rubric file, and the score task, which reads a metrics JSONL file.
    #[serde(skip)]
    pub task: Option<Task>,
    pub head: Head,
    /// The head's labels in its order (none for multiple choice; a score head's are the
    /// training file's dimensions).
    pub labels: &'static [&'static str],
    pub metric: Metric,
    /// What the model reads: the first segment | the second.
    pub input: &'static str,
    /// What a too long input loses first (the rest is never cut).
    pub truncation: &'static str,
}

/// Every task, in the page's order.
pub const TASKS: [TaskFacts; 5] = [
    TaskFacts {
        name: "mcqa",
        label: "MCQA",
        task: Some(Task::Mcqa),
        head: Head::MultipleChoice,
        labels: &[],
        metric: Metric::Accuracy,
        input: "case and question, then the argument | one option (one input per option)",
        truncation: "the case or argument, never the option",
    },
    TaskFacts {
        name: "misinformation",
        label: "misinformation",
        task: Some(Task::Misinformation),
        head: Head::Classification,
        labels: &["supported", "refuted", "not_enough_evidence"],
        metric: Metric::MacroF1,
        input: "claim | argument",
        truncation: "the longer of claim and argument first",
    },
    TaskFacts {
        name: "nli",
        label: "NLI",
        task: Some(Task::Nli),
        head: Head::Classification,
        labels: &["entailment", "contradiction"],
        metric: Metric::MacroF1,
        input: "statement, evidence | argument",
        truncation: "the longest of statement, evidence and argument first",
    },
    TaskFacts {
        name: "criterion",
        label: "rubric criterion grader",
        task: None,
        head: Head::Classification,
        labels: &["met", "not_met"],
        metric: Metric::MacroF1,
        input: "the conversation and the response | the criterion",
        truncation: "the conversation's earliest turns first, then the response's end; never the criterion",
    },
    TaskFacts {
        name: "score",
        label: "a metric learned from human scores",
        task: None,
        head: Head::Regression,
        labels: &[],
        metric: Metric::Spearman,
        input: "the candidate | what --score-input adds: the question (the default), or the question then the first reference",
        truncation: "the longer segment first (the candidate, or what is read beside it), each from its end (the reference before the question)",
    },
];

/// The rubric criterion grader's row (`medrank train --task criterion`, `medrank grade`).
pub const CRITERION: TaskFacts = TASKS[3];

/// The score task's row (`medrank train --task score`, a metric learned from human scores,
/// read from a metrics JSONL file: FORMATS.md section 6).
pub const SCORE: TaskFacts = TASKS[4];

/// The task called `name`.
pub fn facts(name: &str) -> Option<&'static TaskFacts> {
    TASKS.iter().find(|t| t.name == name)
}

impl Task {
    /// This task's row of [`TASKS`].
    pub fn facts(self) -> &'static TaskFacts {
        TASKS.iter().find(|t| t.task == Some(self)).expect("every bundle task has a row")
    }

    /// The labels of a classification task (none for MCQA, whose label is an option key).
    pub fn labels(self) -> &'static [&'static str] {
        self.facts().labels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundle_task_has_one_row_and_formats_md_lists_its_labels() {
        for task in [Task::Mcqa, Task::Misinformation, Task::Nli] {
            assert_eq!(task.facts().name, task.name());
            assert_eq!(Task::parse(task.name()), Some(task));
            assert_eq!(TASKS.iter().filter(|t| t.task == Some(task)).count(), 1);
        }
        // The docs' table of a bundle's tasks says each task's labels.
        let formats = include_str!("FORMATS.md");
        for t in TASKS.iter().filter(|t| t.task.is_some()) {
            let row = formats.lines().find(|l| l.starts_with(&format!("| `{}` |", t.name))).expect(t.name);
            for label in t.labels {
                assert!(row.contains(&format!("`{label}`")), "FORMATS.md's {} row lacks `{label}`: {row}", t.name);
            }
        }
        // A classification head has labels; a multiple-choice head has none, and a score
        // head's come from its training file.
        for t in &TASKS {
            assert_eq!(t.labels.is_empty(), t.head != Head::Classification, "{}", t.name);
        }
    }
}
