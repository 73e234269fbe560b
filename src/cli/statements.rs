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
    #[command(flatten)]
    pub run: PairRunArgs,
    #[command(flatten)]
    pub bootstrap: BootstrapArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub(super) fn statements(a: StatementsArgs) -> Result<()> {
    let outputs = Outputs::plan(&[&a.input, &a.nli], &a.output, &[], &[])?;
    let files = super::hub::model_files(&a.nli, a.output.quiet)?;
    let model = with_precision(crate::model::TextModel::from_files(&files)?, a.run.precision.as_deref())?;
    let req = jobs::StatementRequest {
        answers: named(&a.input)?,
        options: jobs::StatementOptions { bootstrap: a.bootstrap.settings(), batch_size: a.run.batch_size },
    };
    let choice = jobs::parse_backend(&a.run.backend)?;
    let (outcome, backend) = pollster::block_on(jobs::check_statements_with_backend(
        &req,
        &model,
        choice,
        jobs::model_fingerprints(&files),
        &mut |_| true,
    ))?;
    if !a.output.quiet {
        eprintln!("encoder backend: {}", jobs::describe_backend(&backend));
    }
    warn_all(&outcome.report.warnings, a.output.quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)
}
