//! `medrank evaluate`: ranking over scoring from predictions files or with a model.

use super::args::*;
use super::output::{emit, OutputArgs, Outputs};
use crate::jobs;
use crate::Result;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug, Clone)]
pub struct RankingArgs {
    #[command(flatten)]
    pub bootstrap: BootstrapArgs,
    /// System names treated as control cases (comma separated), besides the control files
    /// the bundle marks (`import ranking-over-scoring --control-source`).
    #[arg(long, value_delimiter = ',', default_values_t = jobs::RankOptions::default().control_systems)]
    pub control_systems: Vec<String>,
    /// Keep misinformation instances labelled not_enough_evidence (the paper drops them).
    #[arg(long)]
    pub keep_not_enough_evidence: bool,
}

/// The options of the job both front ends run (`jobs::RankOptions`, whose `Default` the
/// flags' defaults come from).
fn options(a: &EvaluateArgs) -> jobs::RankOptions {
    jobs::RankOptions {
        bootstrap: a.ranking.bootstrap.settings(),
        control_systems: a.ranking.control_systems.clone(),
        keep_not_enough_evidence: a.ranking.keep_not_enough_evidence,
        controls: a.controls.as_deref().map(jobs::ControlChoice::parse).unwrap_or_default(),
        keep_empty_options: a.keep_empty_options,
        batch_size: a.batch_size,
        run: jobs::RunOptions { backend: a.backend.clone(), precision: a.precision.clone().unwrap_or_default() },
    }
}

#[derive(Args, Debug)]
pub struct EvaluateArgs {
    /// The argument bundle (JSONL). Control cases that the predictions score but the bundle
    /// lacks are added (seeded; ir_passages needs --corpus).
    #[arg(long, value_name = "FILE")]
    pub bundle: PathBuf,
    /// An evaluator's predictions, as [EVALUATOR=]FILE (repeat, one per evaluator): CSV
    /// `instance,system,predicted,p_correct[,prob:<label>..]` or JSONL. The evaluator's name
    /// defaults to the file name.
    #[arg(
        long = "predictions",
        value_name = "[EVALUATOR=]FILE",
        required_unless_present = "model",
        conflicts_with = "model"
    )]
    pub predictions: Vec<String>,
    /// Use a model folder as the evaluator instead (config.json, tokenizer.json,
    /// model.safetensors): its classification / multiple-choice head, or without a head the
    /// zero-training similarity evaluator (MCQA only; a weak baseline).
    /// Or a Hugging Face Hub id, ORG/NAME[@REVISION] (README, "Models").
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// With --model: add and score control cases (comma separated; without a list: all
    /// that the inputs allow, ir_passages only with --corpus).
    #[arg(long, value_name = "LIST", num_args = 0..=1, require_equals = false, default_missing_value = "all", requires = "model")]
    pub controls: Option<String>,
    /// With --model: write the model's predictions (CSV) for re-ranking without the model.
    #[arg(long, value_name = "FILE", requires = "model")]
    pub save_predictions: Option<PathBuf>,
    /// With --model: keep empty MCQA option texts as ordinary candidates. By default an
    /// empty option is not a candidate: left out of the softmax, probability 0, never
    /// predicted, and counted in the report.
    #[arg(long, requires = "model")]
    pub keep_empty_options: bool,
    /// With --model: sequences per forward pass (1 to 1,024).
    #[arg(long, default_value_t = jobs::RankOptions::default().batch_size, value_parser = count(1, crate::bounds::MAX_BATCH), requires = "model")]
    pub batch_size: usize,
    /// With --model: where the encoder runs: cpu (the reference), gpu (wgpu; an error when
    /// no adapter), or auto (the GPU when an adapter exists). The report's provenance says
    /// which ran.
    #[arg(long, default_value_t = jobs::RankOptions::default().run.backend, value_parser = ["auto", "cpu", "gpu"], requires = "model")]
    pub backend: String,
    /// With --model: the encoder's arithmetic on the CPU: f32, or int8 (weights int8 per
    /// output channel, activations 7-bit per token, exact integer sums). Default: the
    /// folder's own (int8 for a folder written by `medrank quantize`, else f32). The GPU
    /// runs f32 only: --backend gpu refuses int8, auto then runs on the CPU. The report's
    /// provenance names the precision that ran.
    // `requires` alone lets it pass beside --predictions (clap takes a present conflict of
    // --model as meeting the requirement), hence the conflict.
    #[arg(long, value_parser = ["f32", "int8"], requires = "model", conflicts_with = "predictions")]
    pub precision: Option<String>,
    /// Documents for the IR-passages control (JSONL {"docno","text"} or TSV docno<TAB>text).
    #[arg(long, value_name = "FILE")]
    pub corpus: Option<PathBuf>,
    /// Human rankings, CSV `instance,annotator,system,rank` (1 = best, ties allowed).
    #[arg(long, value_name = "FILE")]
    pub rankings: Option<PathBuf>,
    #[command(flatten)]
    pub ranking: RankingArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `[EVALUATOR=]FILE`: a path may itself contain '=', so only a leading NAME= without '/'
/// (and not the name of an existing file) is a name.
fn evaluator_and_path(p: &str) -> (Option<String>, &Path) {
    match p.split_once('=') {
        Some((name, path)) if !name.is_empty() && !name.contains('/') && !Path::new(p).exists() => {
            (Some(name.to_string()), Path::new(path))
        }
        _ => (None, Path::new(p)),
    }
}

/// Checks the outputs against every file the run reads, before any work.
fn plan_outputs(a: &EvaluateArgs) -> Result<Outputs> {
    let mut inputs: Vec<&Path> = vec![&a.bundle];
    inputs.extend(a.predictions.iter().map(|p| evaluator_and_path(p).1));
    inputs.extend([&a.model, &a.corpus, &a.rankings].into_iter().filter_map(|p| p.as_deref()));
    let saved: Vec<&Path> = a.save_predictions.iter().map(PathBuf::as_path).collect();
    Outputs::plan(&inputs, &a.output, &saved, &[])
}

pub(super) fn evaluate(a: EvaluateArgs) -> Result<()> {
    let outputs = plan_outputs(&a)?;
    if let Some(dir) = &a.model {
        return evaluate_with_model(&a, dir, outputs);
    }
    let mut predictions = Vec::new();
    for p in &a.predictions {
        let (evaluator, path) = evaluator_and_path(p);
        predictions.push(jobs::EvaluatorPredictions { evaluator, file: named(path)? });
    }
    let req = jobs::EvaluateRequest {
        bundle: named(&a.bundle)?,
        predictions,
        rankings: named_opt(&a.rankings)?,
        corpus: named_opt(&a.corpus)?,
        options: options(&a).ranking(),
    };
    let outcome = jobs::evaluate_predictions(&req)?;
    warn_all(&outcome.report.warnings, a.output.quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)
}

fn evaluate_with_model(a: &EvaluateArgs, dir: &Path, mut outputs: Outputs) -> Result<()> {
    let options = options(a);
    let model = read_model(dir, a.precision.as_deref(), a.output.quiet)?;
    let req = jobs::EvaluateRequest {
        bundle: named(&a.bundle)?,
        predictions: Vec::new(),
        rankings: named_opt(&a.rankings)?,
        corpus: named_opt(&a.corpus)?,
        options: options.ranking(),
    };
    let model_options = options.model();
    let job = jobs::RankWithModel { request: &req, options: &model_options };
    let (outcome, predictions) = run_model_job(&job, &model, &options.run.backend, "encoded", a.output.quiet)?;
    if let Some(path) = &a.save_predictions {
        outputs.file(path, crate::data::write_predictions_csv(&predictions).as_bytes())?;
    }
    warn_all(&outcome.report.warnings, a.output.quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::parse_flags;

    #[test]
    fn the_flags_left_out_are_the_job_layers_defaults() {
        let a: EvaluateArgs = parse_flags(&["evaluate", "--bundle", "b.jsonl", "--model", "m"]);
        assert_eq!(options(&a), jobs::RankOptions::default());
        // A bare --controls is every control the inputs allow; a list is taken as given.
        let a: EvaluateArgs = parse_flags(&["evaluate", "--bundle", "b.jsonl", "--model", "m", "--controls"]);
        assert_eq!(options(&a).controls, jobs::ControlChoice::All);
    }
}
