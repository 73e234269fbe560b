//! What the subcommands share: reading input files, `NAME=VALUE` and number-list flags,
//! the bootstrap's flags, and printing warnings. Only the subcommands' own files use it;
//! it uses nothing of theirs (no cycle through the dispatch in `commands.rs`).

use super::output::read_input;
use crate::jobs::{self, NamedText};
use crate::stats::bootstrap::Bootstrap;
use crate::{Error, Result};
use clap::Args;
use std::path::{Path, PathBuf};

pub(super) fn named(path: &Path) -> Result<NamedText> {
    read_input(path)
}

pub(super) fn named_opt(path: &Option<PathBuf>) -> Result<Option<NamedText>> {
    path.as_deref().map(named).transpose()
}

/// Splits `NAME=VALUE` arguments.
pub(super) fn key_value(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected NAME=VALUE, got `{s}`")),
    }
}

/// The seeded percentile bootstrap every report's intervals come from (recorded in it). The
/// defaults are the job layer's (the page's Options start at them too).
#[derive(Args, Debug, Clone)]
pub struct BootstrapArgs {
    /// Seed of every random choice (bootstrap resamples; recorded in the report): a whole
    /// number from 0 to 18446744073709551615.
    #[arg(long, default_value_t = Bootstrap::default().seed)]
    pub seed: u64,
    /// Bootstrap resamples (1 to 1,000,000).
    #[arg(long, default_value_t = Bootstrap::default().resamples, value_parser = resamples)]
    pub resamples: usize,
    /// Confidence level of the intervals (a number between 0 and 1, both excluded).
    #[arg(long, default_value_t = Bootstrap::default().confidence, value_parser = confidence)]
    pub confidence: f64,
}

/// `--confidence`: strictly between 0 and 1 (NaN and infinities are not).
fn confidence(s: &str) -> std::result::Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(c) if c > 0.0 && c < 1.0 => Ok(c),
        _ => Err(format!("expected a number between 0 and 1 (both excluded), got `{s}`")),
    }
}

/// A `value_parser` for a whole number from `min` to `max`: the bound is the flag's, said
/// in its help and, by clap, in the error next to the flag's name (checked before any work).
pub(super) fn count(
    min: usize,
    max: usize,
) -> impl Fn(&str) -> std::result::Result<usize, String> + Clone + Send + Sync + 'static {
    move |s: &str| match s.trim().parse::<usize>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number from {min} to {max}")),
    }
}

/// `--resamples`: a whole number in the bootstrap's range, checked before any work.
fn resamples(s: &str) -> std::result::Result<usize, String> {
    let n: usize = s.trim().parse().map_err(|_| format!("expected a whole number, got `{s}`"))?;
    crate::stats::bootstrap::check_resamples(n)?;
    Ok(n)
}

impl BootstrapArgs {
    pub fn settings(&self) -> Bootstrap {
        Bootstrap { seed: self.seed, resamples: self.resamples, confidence: self.confidence }
    }
}

/// A `value_parser` for `NAME=VALUE` whose value is a finite number from 0 to `max`.
pub(super) fn key_number(
    max: f64,
) -> impl Fn(&str) -> std::result::Result<(String, f64), String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        let (k, v) = key_value(s)?;
        match v.trim().parse::<f64>() {
            Ok(w) if (0.0..=max).contains(&w) => Ok((k, w)),
            _ => Err(format!("expected NAME=W with W a number from 0 to {max}, got `{s}`")),
        }
    }
}

/// `--not-judgeable DIMENSION=GRADES`, read by the job layer's function (the page's field
/// goes through it too), at parse time so a bad grade is a usage error naming the flag.
pub(super) fn not_judgeable(s: &str) -> std::result::Result<(String, Vec<i64>), String> {
    crate::jobs::parse_not_judgeable(s).map_err(|e| e.to_string())
}

/// Parses a comma-separated list of numbers; `expected` says what the flag wants.
pub(super) fn numbers<T: std::str::FromStr>(flag: &str, value: &str, expected: &str) -> Result<Vec<T>> {
    value
        .split(',')
        .map(|x| {
            x.trim().parse::<T>().map_err(|_| {
                Error::invalid(format!("{flag} {value}: `{}` is not a number; expected {expected}", x.trim()))
            })
        })
        .collect()
}

/// `--precision f32|int8` (clap lists the two names; the page's field goes through the
/// same [`Precision::parse`](crate::model::Precision::parse)): `None`, without the flag, runs
/// the model folder's own precision (int8 for a folder written by `medrank quantize`).
pub(super) fn precision(name: Option<&str>) -> Result<Option<crate::model::Precision>> {
    name.map(crate::model::Precision::parse).transpose()
}

/// A model folder read and run in `--precision` (its own without the flag): the files (their
/// fingerprints go into the report) and the model.
pub(super) fn read_model(
    dir: &Path,
    precision: Option<&str>,
    quiet: bool,
) -> Result<(crate::model::ModelFiles, crate::model::TextModel)> {
    let files = super::hub::model_files(dir, quiet)?;
    let model = with_precision(crate::model::TextModel::from_files(&files)?, precision)?;
    Ok((files, model))
}

/// A job that runs the model's encoder (`jobs::ModelJob`) on `--backend`: its progress on
/// stderr at most every 2 seconds (`verb` and what is done, the time left from the work done,
/// `jobs::TimeEstimate` as the page's), then the backend and the precision that ran.
pub(super) fn run_model_job<J: jobs::ModelJob>(
    job: &J,
    (files, model): &(crate::model::ModelFiles, crate::model::TextModel),
    backend: &str,
    verb: &str,
    quiet: bool,
) -> Result<J::Output> {
    use crate::report::fmt_duration;
    let choice = jobs::parse_backend(backend)?;
    let clock = std::time::Instant::now();
    let seconds = || clock.elapsed().as_secs_f64();
    let mut estimate = jobs::TimeEstimate::new(seconds(), None);
    let mut last = 0.0f64;
    let mut progress = |p: &jobs::EncodeProgress| {
        let t = seconds();
        let finished = p.sequences_done == p.sequences;
        // Every batch feeds the estimate (its rate comes from the batches between); stderr
        // hears of it at most every 2 seconds.
        let seconds_left = estimate.observe(p, t);
        if !quiet && p.sequences_done > 0 && (t - last >= 2.0 || finished) {
            last = t;
            let left = match seconds_left {
                Some(s) if !finished => format!(", about {} left", fmt_duration(s)),
                _ => String::new(),
            };
            eprintln!("  {verb} {}, {} elapsed{left}", p.describe(), fmt_duration(t));
        }
        true
    };
    let fingerprints = jobs::model_fingerprints(files);
    let quality = jobs::model_quality(files)?;
    let (output, backend) =
        pollster::block_on(jobs::run_on_backend(job, model, choice, fingerprints, quality.as_ref(), &mut progress))?;
    if !quiet {
        eprintln!("encoder backend: {}", jobs::describe_backend(&backend));
        eprintln!("encoder precision: {}", jobs::describe_precision(model, &backend));
    }
    Ok(output)
}

/// The model run in the precision `--precision` asked for, or in its folder's own.
pub(super) fn with_precision(
    mut model: crate::model::TextModel,
    name: Option<&str>,
) -> Result<crate::model::TextModel> {
    if let Some(p) = precision(name)? {
        model.set_precision(p);
    }
    Ok(model)
}

pub(super) fn warn_all(warnings: &[crate::Warning], quiet: bool) {
    if quiet {
        return;
    }
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

/// Where and how a model job runs its encoder over (text, text) pairs (`grade`,
/// `statements`); the defaults are the job layer's.
#[derive(Args, Debug, Clone)]
pub struct PairRunArgs {
    /// Pairs per forward pass (1 to 1,024).
    #[arg(long, default_value_t = jobs::GradeOptions::default().batch_size, value_parser = count(1, crate::bounds::MAX_BATCH))]
    pub batch_size: usize,
    /// Where the encoder runs: cpu (the reference), gpu (wgpu; an error when no adapter),
    /// or auto. The report's provenance says which ran.
    #[arg(long, default_value_t = jobs::RunOptions::default().backend, value_parser = ["auto", "cpu", "gpu"])]
    pub backend: String,
    /// The encoder's arithmetic on the CPU: f32 or int8 (default: the folder's own).
    #[arg(long, value_parser = ["f32", "int8"])]
    pub precision: Option<String>,
    #[command(flatten)]
    pub bootstrap: BootstrapArgs,
}

/// A subcommand's flags as a test types them (`["evaluate", "--bundle", ...]`), parsed by
/// clap as `medrank` parses them: the tests that hold clap's defaults to the job layer's.
#[cfg(test)]
pub(super) fn parse_flags<A: clap::Args + clap::FromArgMatches>(argv: &[&str]) -> A {
    try_parse_flags(argv).expect("the flags parse")
}

/// [`parse_flags`], the refusal (what the CLI prints, exiting 2) as an error.
#[cfg(test)]
pub(super) fn try_parse_flags<A: clap::Args + clap::FromArgMatches>(argv: &[&str]) -> Result<A, clap::Error> {
    let matches = A::augment_args(clap::Command::new("medrank")).try_get_matches_from(argv)?;
    A::from_arg_matches(&matches)
}
