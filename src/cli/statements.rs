//! `medrank statements`: answers checked against expert statements by an NLI model
//! (K-QA's comprehensiveness and hallucination).

use super::args::*;
use super::output::{emit, OutputArgs, Outputs};
use crate::jobs;
use crate::Result;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct StatementsArgs {
    /// Answers with expert statements, one per line: `{"id", "system", "prompt_id"?,
    /// "prompt"?, "response", "must_have": [..], "nice_to_have": [..]}` (format:
    /// src/data/FORMATS.md, section 11).
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// An NLI model folder (a sequence-classification head whose labels name `entailment`
    /// and `contradiction`; BERT, RoBERTa or DistilBERT).
    /// Or a Hugging Face Hub id, ORG/NAME[@REVISION] (README, "Models").
    #[arg(long, value_name = "DIR")]
    pub nli: PathBuf,
    /// Where the model runs, and the bootstrap of the intervals.
    #[command(flatten)]
    pub run: PairRunArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub(super) fn statements(a: StatementsArgs) -> Result<()> {
    let outputs = Outputs::plan(&[&a.input, &a.nli], &a.output, &[], &[])?;
    let model = read_model(&a.nli, a.run.precision.as_deref(), a.output.quiet)?;
    let req = jobs::StatementRequest {
        answers: named(&a.input)?,
        options: jobs::StatementOptions { bootstrap: a.run.bootstrap.settings(), batch_size: a.run.batch_size },
    };
    let outcome = run_model_job(&req, &model, &a.run.backend, "checked", a.output.quiet)?;
    warn_all(&outcome.report.warnings, a.output.quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)
}
