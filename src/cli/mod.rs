//! The `medrank` command line. Thin on purpose: read files, build the same job requests as
//! the browser's worker (`crate::jobs`), print tables and write `--json` / `--csv` reports.
//! Every subcommand lives in its own file.

use clap::Parser;

mod agreement;
mod args;
mod bench;
mod bench_train;
mod commands;
mod controls;
mod draft;
mod embed;
mod evaluate;
mod grade;
mod hub;
mod import;
mod metrics;
mod nrp;
mod output;
mod peers;
mod quantize;
mod rubric_agreement;
pub mod serve;
mod statements;
mod train;

#[derive(Parser, Debug)]
#[command(
    name = "medrank",
    version,
    about = "Evaluate LLM-generated medical arguments and answers by ranking.",
    long_about = "Evaluate LLM-generated medical arguments and answers by ranking: proxy-task \
evaluators (ranking over scoring) with control cases and agreement with human rankings, NRP \
(normalized rank position) of generated answers among expert-judged documents, reference-based \
metrics and rubric grading.\n\nEvery subcommand prints tables, writes its full report with \
--json PATH and its tables with --csv DIR. Reports carry the seed, sha256 fingerprints of all \
inputs and models, and the conventions used. Input formats: src/data/FORMATS.md."
)]
struct Cli {
    #[command(subcommand)]
    command: commands::Command,
}

/// The whole command line as clap sees it (every subcommand and option, hidden ones too):
/// tests enumerate the options from it, so a new option cannot be left out of them.
pub fn command() -> clap::Command {
    <Cli as clap::CommandFactory>::command()
}

/// Runs the CLI; returns the process exit code: 0 ok, 1 bad input or a failed run (the
/// message names file, line and field), 2 bad usage (clap's convention).
pub fn main() -> i32 {
    let cli = Cli::parse();
    match commands::run(cli.command) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}
