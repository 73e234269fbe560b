//! `medrank grade`: a model grades every criterion of a rubric file (P(met)), then the
//! HealthBench scores with the grader's uncertainty in the intervals.

use super::args::*;
use super::output::{emit, OutputArgs, Outputs};
use crate::jobs;
use crate::Result;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct GradeArgs {
    /// Rubric responses with their text: `{"id", "system", "prompt", "response", "criteria":
    /// [{"criterion", "points", "tags"}]}` per line, `met` absent or ignored (format:
    /// src/data/FORMATS.md, section 7; `medrank import healthbench` writes HealthBench's
    /// files so).
    #[arg(long, value_name = "FILE")]
    pub rubric: PathBuf,
    /// The criterion grader, a model folder with a sequence-classification head: one trained
    /// with `medrank train --task criterion` (labels met / not_met), or an NLI model used
    /// zero-shot (its id2label names `entailment`; BERT, RoBERTa or DistilBERT).
    /// Or a Hugging Face Hub id, ORG/NAME[@REVISION] (README, "Models").
    #[arg(long, value_name = "DIR")]
    pub grader: PathBuf,
    /// Write the graded file here: the rubric with each criterion's `met` (P(met) >= 0.5)
    /// and `p_met`, for `medrank rubric` and `medrank rubric-agreement --grader-file`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Where the model runs, and the bootstrap of the intervals.
    #[command(flatten)]
    pub run: PairRunArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub(super) fn grade(a: GradeArgs) -> Result<()> {
    let written: Vec<&std::path::Path> = a.out.iter().map(PathBuf::as_path).collect();
    let mut outputs = Outputs::plan(&[&a.rubric, &a.grader], &a.output, &written, &[])?;
    let model = read_model(&a.grader, a.run.precision.as_deref(), a.output.quiet)?;
    let req = jobs::GradeRequest {
        rubric: named(&a.rubric)?,
        options: jobs::GradeOptions {
            rubric: crate::eval::rubric::RubricOptions { bootstrap: a.run.bootstrap.settings() },
            batch_size: a.run.batch_size,
        },
    };
    let quiet = a.output.quiet;
    let graded = run_model_job(&req, &model, &a.run.backend, "graded", quiet)?;
    if let Some(path) = &a.out {
        outputs.file(path, graded.graded_jsonl.as_bytes())?;
    }
    let outcome = graded.outcome;
    warn_all(&outcome.report.warnings, quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)
}
