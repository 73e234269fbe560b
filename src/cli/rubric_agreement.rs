//! `medrank rubric-agreement`: a rubric grader's agreement with people (HealthBench's
//! meta-evaluation), beside the people's agreement with each other.

use super::args::*;
use super::output::{emit, OutputArgs, Outputs};
use crate::jobs;
use crate::Result;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct RubricAgreementArgs {
    /// Rubric responses whose criteria carry human judgements: `met_by` {"person": true, ..}
    /// per criterion, or a lone `met` (format: src/data/FORMATS.md, section 7; `medrank
    /// import healthbench` writes HealthBench's meta-evaluation file so).
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// The grader's graded file: the same (system, id) responses with the same criteria in
    /// the same order, each with the grader's `met`. Without it, only the people's agreement
    /// with each other is reported.
    #[arg(long, value_name = "FILE")]
    pub grader_file: Option<PathBuf>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub(super) fn rubric_agreement(a: RubricAgreementArgs) -> Result<()> {
    let inputs: Vec<&std::path::Path> = std::iter::once(a.input.as_path()).chain(a.grader_file.as_deref()).collect();
    let outputs = Outputs::plan(&inputs, &a.output, &[], &[])?;
    let req = jobs::RubricAgreementRequest { file: named(&a.input)?, grader_file: named_opt(&a.grader_file)? };
    let outcome = jobs::rubric_agreement(&req)?;
    warn_all(&outcome.report.warnings, a.output.quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)
}
