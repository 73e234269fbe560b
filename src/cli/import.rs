//! `medrank import ranking-over-scoring`: the public Ranking-Over-Scoring (HiTZ) files into a
//! bundle; `medrank import healthbench`: HealthBench's files into a rubric file (§7).

use super::args::*;
use super::output::{emit, OutputArgs, Outputs};
use crate::jobs;
use crate::Result;
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

#[derive(Subcommand, Debug)]
pub enum ImportCommand {
    /// The public Ranking-Over-Scoring MCQA files ({"question", "options", "correct_option"},
    /// the argument appended to the question). Instances match by line order; the argument
    /// is what follows the no-argument question; any mismatch refuses the import.
    RankingOverScoring(ImportRosArgs),
    /// HealthBench's JSONL (openai/simple-evals) into a rubric file (FORMATS.md §7, §10): an
    /// eval file (prompts with rubrics) with a completions file, as ungraded responses; or
    /// the meta-evaluation file, with the physicians' labels as human judgements.
    Healthbench(ImportHealthBenchArgs),
}

#[derive(Args, Debug)]
pub struct ImportHealthBenchArgs {
    /// A HealthBench eval file (`..._oss_eval.jsonl`, consensus, hard) or the
    /// meta-evaluation file (`..._oss_meta_eval.jsonl`); which one is read from its first line.
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// The responses to grade, for an eval file: JSONL {"prompt_id", "system", "response"},
    /// one per system and prompt (FORMATS.md §10).
    #[arg(long, value_name = "FILE")]
    pub completions: Option<PathBuf>,
    /// Where to write the rubric file (JSONL, FORMATS.md §7).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub(super) fn import_healthbench(a: ImportHealthBenchArgs) -> Result<()> {
    let inputs: Vec<&Path> = std::iter::once(a.input.as_path()).chain(a.completions.as_deref()).collect();
    let mut outputs = Outputs::plan(&inputs, &a.output, &[&a.out], &[])?;
    let req = jobs::HealthBenchImportRequest { input: named(&a.input)?, completions: named_opt(&a.completions)? };
    let outcome = jobs::import_healthbench(&req)?;
    outputs.file(&a.out, outcome.rubric_jsonl.as_bytes())?;
    warn_all(&outcome.report.warnings, a.output.quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)?;
    if !a.output.quiet {
        println!(
            "wrote {} responses ({} criteria, {} human judgements) to {}",
            outcome.report.responses,
            outcome.report.criteria,
            outcome.report.human_judgements,
            a.out.display()
        );
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct ImportRosArgs {
    /// The file with the bare questions (No_Argument).
    #[arg(long, value_name = "FILE")]
    pub no_argument: PathBuf,
    /// A system's file, as SYSTEM=FILE (repeat).
    #[arg(long = "source", value_name = "SYSTEM=FILE", value_parser = key_value, required_unless_present = "control_sources")]
    pub sources: Vec<(String, String)>,
    /// A precomputed control-case file (the paper's Label_Only, Noise, IR_Passages), as
    /// NAME=FILE (repeat): imported like a source and marked as a control case in the
    /// bundle, so the robustness verdict counts it. Pick a name that `evaluate --controls`
    /// does not generate (no_argument, label_only, noise, ir_passages) to use both, e.g.
    /// label_only_file=en.test_casimedicos_Label_Only.jsonl.
    #[arg(long = "control-source", value_name = "NAME=FILE", value_parser = key_value)]
    pub control_sources: Vec<(String, String)>,
    /// Where to write the bundle (JSONL).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub(super) fn import_ros(a: ImportRosArgs) -> Result<()> {
    let all: Vec<&(String, String)> = a.sources.iter().chain(&a.control_sources).collect();
    let inputs: Vec<&Path> =
        std::iter::once(a.no_argument.as_path()).chain(all.iter().map(|(_, f)| Path::new(f))).collect();
    let mut outputs = Outputs::plan(&inputs, &a.output, &[&a.out], &[])?;
    let req = jobs::ImportRequest {
        no_argument: named(&a.no_argument)?,
        sources: all.iter().map(|(s, f)| Ok((s.clone(), named(Path::new(f))?))).collect::<Result<_>>()?,
        controls: a.control_sources.iter().map(|(s, _)| s.clone()).collect(),
    };
    let outcome = jobs::import_ranking_over_scoring(&req)?;
    outputs.file(&a.out, outcome.bundle_jsonl.as_bytes())?;
    warn_all(&outcome.report.warnings, a.output.quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)?;
    if !a.output.quiet {
        let controls = match outcome.report.controls.len() {
            0 => String::new(),
            n => format!(" ({n} marked as control cases: {})", outcome.report.controls.join(", ")),
        };
        println!(
            "wrote {} instances x {} systems{controls} to {}",
            outcome.report.instances,
            outcome.report.systems.len(),
            a.out.display()
        );
    }
    Ok(())
}
