//! `medrank controls`: add control cases to a bundle.

use super::args::*;
use super::output::{emit, OutputArgs, Outputs};
use crate::jobs;
use crate::Result;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct ControlsArgs {
    /// The argument bundle (JSONL).
    #[arg(long, value_name = "FILE")]
    pub bundle: PathBuf,
    /// Which controls: all (those the inputs allow; ir_passages only with --corpus, a
    /// control the bundle already has left out, each said), or names comma separated.
    #[arg(long, value_name = "LIST", default_value_t = jobs::ControlsOptions::default().which.into())]
    pub which: String,
    /// Documents for the IR-passages control (JSONL {"docno","text"} or TSV docno<TAB>text).
    #[arg(long, value_name = "FILE")]
    pub corpus: Option<PathBuf>,
    /// Seed of the noise derangement (recorded in the report): a whole number from 0 to
    /// 18446744073709551615.
    #[arg(long, default_value_t = jobs::ControlsOptions::default().seed)]
    pub seed: u64,
    /// Where to write the bundle with the control systems added.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub(super) fn controls(a: ControlsArgs) -> Result<()> {
    let inputs: Vec<&std::path::Path> = std::iter::once(a.bundle.as_path()).chain(a.corpus.as_deref()).collect();
    let mut outputs = Outputs::plan(&inputs, &a.output, &[&a.out], &[])?;
    let req = jobs::ControlsRequest {
        bundle: named(&a.bundle)?,
        corpus: named_opt(&a.corpus)?,
        options: jobs::ControlsOptions { which: jobs::ControlChoice::parse(&a.which), seed: a.seed },
    };
    let outcome = jobs::add_controls(&req)?;
    outputs.file(&a.out, outcome.bundle_jsonl.as_bytes())?;
    warn_all(&outcome.report.warnings, a.output.quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)?;
    if !a.output.quiet {
        println!("wrote the bundle with control cases to {} (seed {})", a.out.display(), a.seed);
    }
    Ok(())
}
