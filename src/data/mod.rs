//! Input formats: parsing and validation. Every reader takes the file's *name* and its
//! *text* (the browser has no file system), and every error names file, line and field.
//! Nothing is dropped silently: what a reader skips on purpose becomes a `Warning`.
//!
//! The types below are the contract between the readers and the methods in `eval`.
//! `FORMATS.md` in this folder documents every file format precisely.

pub(crate) mod common;
pub(crate) mod json;

pub mod answers;
pub mod bundle;
pub mod candidates;
pub mod controls;
pub mod draft_prompts;
pub mod evidence;
pub mod graded;
pub mod healthbench;
pub mod predictions;
pub mod rankings;
pub mod ros_import;
pub mod statements;
pub mod tasks;
pub mod trec;

pub use answers::{
    check_answer_queries, check_answers_have_topics, check_answers_scored, check_nrp_inputs, parse_answer_scores,
    parse_answers_csv, parse_answers_jsonl, parse_documents, system_prompt_from_file_name, NrpInputs,
};
pub use bundle::{bundle_warnings, parse_bundle, write_bundle_jsonl};
pub use predictions::{
    check_prediction_file_against, check_predictions_against, parse_predictions, write_predictions_csv, PredictionFile,
};
pub use rankings::{check_no_control_rows, check_rankings_against, check_rankings_against_except, parse_rankings};
pub use ros_import::{import_ranking_over_scoring, parse_hitz, HitzItem};
pub use trec::{
    dimension_name, is_combined_qrels, parse_qrels, parse_qrels_any, parse_qrels_combined, parse_qrels_dimension,
    parse_run, parse_topics, NotJudgeable,
};

use serde::Serialize;

/// Whether an MCQA option text is empty (after trimming). The published Ranking-Over-Scoring
/// files carry an empty fifth option in 320 of their 595 questions. medrank's one convention
/// (FORMATS.md, "Empty options"): an empty option is **not a candidate** of any evaluator
/// (trained head, similarity, training): it is left out of the softmax and gets probability 0,
/// and the report counts how many were left out; `--keep-empty-options` (CLI) / the page's
/// "keep empty options" switch keeps them as ordinary candidates.
pub fn is_empty_option(text: &str) -> bool {
    text.trim().is_empty()
}

/// The proxy task an instance belongs to (ranking-over-scoring.md, Table 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    /// Medical multiple-choice QA (CasiMedicos): the label is an option key.
    Mcqa,
    /// Misinformation detection (HealthFC): supported / refuted / not_enough_evidence.
    Misinformation,
    /// Clinical-trial NLI (NLI4CT): entailment / contradiction.
    Nli,
}

impl Task {
    /// The labels of each classification task: its row of the task table ([`tasks::TASKS`]).
    pub const MISINFORMATION_LABELS: &'static [&'static str] = tasks::TASKS[1].labels;
    pub const NLI_LABELS: &'static [&'static str] = tasks::TASKS[2].labels;

    pub fn name(self) -> &'static str {
        self.facts().name
    }
    pub fn parse(s: &str) -> Option<Task> {
        tasks::facts(s).and_then(|t| t.task)
    }
}

/// The task-specific part of an instance.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "task", rename_all = "snake_case")]
pub enum Problem {
    Mcqa {
        /// Clinical case and question.
        question: String,
        /// Options in file order, as (key, text); keys are usually "1".."5".
        options: Vec<(String, String)>,
        /// The key of the correct option.
        answer: String,
    },
    Misinformation {
        claim: String,
        label: String,
    },
    Nli {
        statement: String,
        evidence: String,
        label: String,
    },
}

impl Problem {
    pub fn task(&self) -> Task {
        match self {
            Problem::Mcqa { .. } => Task::Mcqa,
            Problem::Misinformation { .. } => Task::Misinformation,
            Problem::Nli { .. } => Task::Nli,
        }
    }
    /// The gold label (option key for MCQA).
    pub fn gold(&self) -> &str {
        match self {
            Problem::Mcqa { answer, .. } => answer,
            Problem::Misinformation { label, .. } | Problem::Nli { label, .. } => label,
        }
    }
    /// The labels a prediction may take for this instance, in a fixed order.
    pub fn label_set(&self) -> Vec<String> {
        match self {
            Problem::Mcqa { options, .. } => options.iter().map(|(k, _)| k.clone()).collect(),
            Problem::Misinformation { .. } | Problem::Nli { .. } => {
                self.task().labels().iter().map(|s| s.to_string()).collect()
            }
        }
    }
    /// The instance text without any argument (case+question, claim, statement+evidence):
    /// what IR passages are retrieved for.
    pub fn query_text(&self) -> String {
        match self {
            Problem::Mcqa { question, .. } => question.clone(),
            Problem::Misinformation { claim, .. } => claim.clone(),
            Problem::Nli { statement, evidence, .. } => format!("{statement} {evidence}"),
        }
    }
}

/// One instance of an argument bundle: a proxy-task problem and the argument of each system.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Instance {
    pub id: String,
    pub problem: Problem,
    /// (system, argument text) in file order.
    pub arguments: Vec<(String, String)>,
    /// 1-based line in the bundle file (for messages).
    pub line: usize,
}

impl Instance {
    pub fn argument(&self, system: &str) -> Option<&str> {
        self.arguments.iter().find(|(s, _)| s == system).map(|(_, t)| t.as_str())
    }
}

/// A parsed argument bundle (JSONL, one instance per line).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Bundle {
    /// The file name it was read from.
    pub name: String,
    pub instances: Vec<Instance>,
    /// Every system that appears, in order of first appearance.
    pub systems: Vec<String>,
    /// The systems the file marks as control cases (field `controls` of its lines, e.g. the
    /// paper's precomputed label-only, noise or IR-passages files), in order of first
    /// appearance. Generated controls are recognised by name instead.
    pub controls: Vec<String>,
}

/// One row of the human rankings CSV `instance,annotator,system,rank` (1 = best; ties allowed,
/// fractional ranks accepted).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HumanRank {
    pub instance: String,
    pub annotator: String,
    pub system: String,
    pub rank: f64,
    pub line: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HumanRankings {
    pub name: String,
    pub rows: Vec<HumanRank>,
    /// Distinct values in order of first appearance.
    pub instances: Vec<String>,
    pub annotators: Vec<String>,
    pub systems: Vec<String>,
}

/// One evaluator prediction: CSV/JSONL `instance,system,predicted,p_correct` with optional
/// per-label probabilities (written by `medrank evaluate`, readable without a model).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    pub instance: String,
    pub system: String,
    pub predicted: String,
    /// Probability the evaluator gave the correct label.
    pub p_correct: f64,
    /// Optional probability per label, (label, p), in the task's label order.
    pub probs: Vec<(String, f64)>,
}

/// An NRP topic (query).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Topic {
    pub qid: String,
    pub query: String,
}

/// Expert judgements for one quality dimension (relevance, credibility, readability, ...).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgments {
    pub dimension: String,
    /// qid -> docno -> grade, both maps sorted by key (deterministic iteration).
    pub grades: std::collections::BTreeMap<String, std::collections::BTreeMap<String, i64>>,
    /// Judgements with the "not able to judge" grade, treated as missing data (not a grade).
    pub missing: Vec<(String, String)>,
}

/// A document (NRP candidate, or a corpus passage for IR control cases).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Document {
    pub docno: String,
    pub text: String,
}

/// A generated answer to an NRP query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Answer {
    pub qid: String,
    pub system: String,
    pub prompt: String,
    /// Sample index (0-based) when a model answered the same query several times.
    pub sample: u32,
    pub text: String,
}

/// One line of a TREC run file `qid Q0 docno rank score tag`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunEntry {
    pub qid: String,
    pub docno: String,
    pub rank: u32,
    pub score: f64,
    pub tag: String,
}

/// A precomputed ranker score for a generated answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnswerScore {
    pub qid: String,
    pub system: String,
    pub prompt: String,
    pub sample: u32,
    pub score: f64,
}
