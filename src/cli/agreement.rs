//! `medrank agreement`: agreement among human annotators.

use super::args::*;
use super::output::{emit, OutputArgs, Outputs};
use crate::jobs;
use crate::Result;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct AgreementArgs {
    /// Human rankings, CSV `instance,annotator,system,rank`.
    #[arg(long, value_name = "FILE")]
    pub rankings: PathBuf,
    /// The bundle the rankings refer to (checks instance and system names).
    #[arg(long, value_name = "FILE")]
    pub bundle: Option<PathBuf>,
    /// System names that are control cases (humans do not rank them).
    #[arg(long, value_delimiter = ',', default_values_t = crate::eval::controls::Control::all_names())]
    pub control_systems: Vec<String>,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub(super) fn agreement(a: AgreementArgs) -> Result<()> {
    let inputs: Vec<&std::path::Path> = std::iter::once(a.rankings.as_path()).chain(a.bundle.as_deref()).collect();
    let outputs = Outputs::plan(&inputs, &a.output, &[], &[])?;
    let req = jobs::AgreementRequest {
        rankings: named(&a.rankings)?,
        bundle: named_opt(&a.bundle)?,
        controls: a.control_systems,
    };
    let outcome = jobs::agreement(&req)?;
    warn_all(&outcome.report.warnings, a.output.quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)
}
