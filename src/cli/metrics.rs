//! `medrank metrics` and `medrank rubric`: reference-based metrics and rubric grading.

use super::args::*;
use super::output::{emit, OutputArgs, Outputs};
use crate::jobs;
use crate::{Error, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct MetricsArgs {
    /// JSONL `{"id", "system", "candidate", "references": [..], "human": {dim: score}?}`
    /// (format: src/data/FORMATS.md, section 6).
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// ROUGE tokenizer: rouge_score (ASCII only: non-ASCII letters vanish, as in Google's
    /// package) or unicode (letters of any script).
    #[arg(long, default_value = "rouge_score", value_parser = ["rouge_score", "unicode"])]
    pub tokenizer: String,
    /// Do not Porter-stem (rouge_score's use_stemmer=False).
    #[arg(long)]
    pub no_stem: bool,
    /// Bin a metric onto a human label scale for quadratic weighted kappa, as
    /// METRIC=MIN..MAX:CUT,CUT,.. e.g. rougeL=1..5:0.2,0.4,0.6,0.8 (repeat).
    #[arg(long = "kappa-bins", value_name = "METRIC=MIN..MAX:CUTS", value_parser = key_value)]
    pub kappa_bins: Vec<(String, String)>,
    /// Also compute BERTScore with this model folder (greedy max-cosine token matching).
    /// Or a Hugging Face Hub id, ORG/NAME[@REVISION] (README, "Models").
    #[arg(long, value_name = "DIR")]
    pub bertscore: Option<PathBuf>,
    /// BERTScore hidden layer (1-based, 1 to 1,000 and at most the model's layers; default:
    /// the last).
    #[arg(long, requires = "bertscore", value_parser = count(1, crate::bounds::MAX_LAYER))]
    pub bertscore_layer: Option<usize>,
    /// BERTScore idf weighting from the references.
    #[arg(long, requires = "bertscore")]
    pub bertscore_idf: bool,
    /// BERTScore baseline rescale, as P,R,F (e.g. the published baseline of the model):
    /// three finite numbers below 1 (the rescale divides by 1 - b).
    #[arg(long, value_name = "P,R,F", requires = "bertscore", value_parser = baseline)]
    pub bertscore_baseline: Option<(f64, f64, f64)>,
    /// BERTScore's encoder arithmetic: f32, or int8 (weights int8 per output channel,
    /// activations 7-bit per token, exact integer sums). Default: the folder's own (int8 for
    /// a folder written by `medrank quantize`, else f32). Recorded in the report's provenance.
    #[arg(long, value_parser = ["f32", "int8"], requires = "bertscore")]
    pub precision: Option<String>,
    /// A metric learned from human scores (a folder written by `medrank train --task score`,
    /// or a Hub id): its prediction of each dimension (`learned:DIM`) joins the tables and
    /// the agreement with the human scores of that dimension.
    #[arg(long, value_name = "DIR")]
    pub learned: Option<PathBuf>,
    /// Combine scorers into one, as the BioASQ study's aggregation: the mean of their values
    /// ranked or z-scored within each batch (`combined:mean-rank`, `combined:mean-z`). Name
    /// the scorers (e.g. rouge1,repscore,bertscore) or give none for every built-in metric but
    /// SMOG, plus BERTScore when computed.
    #[arg(long, value_name = "SCORERS", num_args = 0..=1, default_missing_value = "")]
    pub combine: Option<String>,
    /// Also fit non-negative weights of the combined scorers on the human scores of this
    /// file (a dev split, never the scored rows), one combination per dimension (`fitted:DIM`).
    #[arg(long, value_name = "FILE", requires = "combine")]
    pub combine_fit: Option<PathBuf>,
    #[command(flatten)]
    pub bootstrap: BootstrapArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub(super) fn metrics(a: MetricsArgs) -> Result<()> {
    use crate::eval::metrics::{rouge::Tokenizer, KappaBins, Metric, MetricsOptions};
    let inputs: Vec<&std::path::Path> = std::iter::once(a.input.as_path())
        .chain(a.bertscore.as_deref())
        .chain(a.learned.as_deref())
        .chain(a.combine_fit.as_deref())
        .collect();
    let outputs = Outputs::plan(&inputs, &a.output, &[], &[])?;
    let mut options = MetricsOptions { bootstrap: a.bootstrap.settings(), ..Default::default() };
    options.rouge.tokenizer = if a.tokenizer == "unicode" { Tokenizer::Unicode } else { Tokenizer::RougeScore };
    options.rouge.stem = !a.no_stem;
    for (metric, spec) in &a.kappa_bins {
        let bad = || {
            Error::invalid(format!(
                "--kappa-bins {metric}={spec}: expected MIN..MAX:CUT,CUT,.. e.g. 1..5:0.2,0.4,0.6,0.8"
            ))
        };
        let m =
            Metric::parse(metric).ok_or_else(|| Error::invalid(format!("--kappa-bins: unknown metric `{metric}`")))?;
        let (range, cuts) = spec.split_once(':').ok_or_else(bad)?;
        let (min, max) = range.split_once("..").ok_or_else(bad)?;
        let bins = KappaBins {
            min: min.trim().parse().map_err(|_| bad())?,
            max: max.trim().parse().map_err(|_| bad())?,
            cut_points: numbers::<f64>(
                &format!("--kappa-bins {metric}="),
                cuts,
                "MIN..MAX:CUT,CUT,.. e.g. 1..5:0.2,0.4,0.6,0.8",
            )?,
        };
        bins.validate().map_err(|e| Error::invalid(format!("--kappa-bins {metric}: {e}")))?;
        options.kappa_bins.insert(m, bins);
    }
    if let Some(list) = &a.combine {
        options.combine = true;
        options.combine_scorers = list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
    }
    let fit = a.combine_fit.as_deref().map(named).transpose()?;
    let req = jobs::MetricsRequest { file: named(&a.input)?, fit, options };
    let settings =
        jobs::BertScoreRequest { layer: a.bertscore_layer, idf: a.bertscore_idf, baseline: a.bertscore_baseline };
    let bertscore = match &a.bertscore {
        None => None,
        Some(dir) => {
            let files = super::hub::model_files(dir, a.output.quiet)?;
            let model = with_precision(crate::model::TextModel::from_files(&files)?, a.precision.as_deref())?;
            Some((model, jobs::model_fingerprints(&files)))
        }
    };
    // The learned metric's measured quality (its train_log.json), beside the report as the
    // page's Metrics job gives it.
    let mut quality = None;
    let learned = match &a.learned {
        None => None,
        Some(dir) => {
            let files = super::hub::model_files(dir, a.output.quiet)?;
            quality = jobs::model_quality(&files)?;
            Some((crate::model::TextModel::from_files(&files)?, jobs::model_fingerprints(&files)))
        }
    };
    let models = jobs::MetricModels {
        bertscore: bertscore
            .as_ref()
            .map(|(model, fingerprints)| (model, &model.encoder, fingerprints.clone(), &settings)),
        learned: learned.as_ref().map(|(model, fingerprints)| (model, &model.encoder, fingerprints.clone())),
    };
    let outcome = jobs::metrics_with(&req, &models)?;
    let report = jobs::metrics::MetricsOnModel::with_quality(outcome.report, quality.as_ref());
    warn_all(&report.metrics.warnings, a.output.quiet);
    emit(&report, &outcome.tables, &a.output, outputs)
}

/// `--bertscore-baseline P,R,F`: three finite numbers below 1 (`(x - b) / (1 - b)` divides
/// by zero at 1 and flips the scale above it).
fn baseline(s: &str) -> std::result::Result<(f64, f64, f64), String> {
    let bad = || format!("expected three finite numbers below 1, P,R,F (e.g. 0.83,0.83,0.83), got `{s}`");
    let values: Vec<f64> =
        s.split(',').map(|x| x.trim().parse::<f64>()).collect::<std::result::Result<_, _>>().map_err(|_| bad())?;
    match values[..] {
        [p, r, f] if [p, r, f].iter().all(|b| b.is_finite() && *b < 1.0) => Ok((p, r, f)),
        _ => Err(bad()),
    }
}

#[derive(Args, Debug)]
pub struct RubricArgs {
    /// JSONL, one graded response per line: `{"id", "system", "criteria": [{"criterion",
    /// "points", "tags", "met"}]}` (format: src/eval/rubric.rs).
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    #[command(flatten)]
    pub bootstrap: BootstrapArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub(super) fn rubric(a: RubricArgs) -> Result<()> {
    let outputs = Outputs::plan(&[&a.input], &a.output, &[], &[])?;
    let options = crate::eval::rubric::RubricOptions { bootstrap: a.bootstrap.settings() };
    let outcome = jobs::rubric(&jobs::RubricRequest { file: named(&a.input)?, options })?;
    warn_all(&outcome.report.warnings, a.output.quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)
}
