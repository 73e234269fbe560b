//! The subcommand list and its dispatch; each subcommand (its arguments and what it runs)
//! has a file of its own in `src/cli/`, and the helpers they share live in `args.rs`.

use super::agreement::AgreementArgs;
use super::bench::BenchArgs;
use super::controls::ControlsArgs;
use super::draft::RubricDraftArgs;
use super::embed::EmbedArgs;
use super::evaluate::EvaluateArgs;
use super::grade::GradeArgs;
use super::import::ImportCommand;
use super::metrics::{MetricsArgs, RubricArgs};
use super::nrp::NrpArgs;
use super::quantize::QuantizeArgs;
use super::rubric_agreement::RubricAgreementArgs;
use super::statements::StatementsArgs;
use super::train::TrainArgs;
use crate::{Error, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Import files of other tools: into an argument bundle, or a rubric file.
    #[command(subcommand)]
    Import(ImportCommand),
    /// Add control cases (no_argument, label_only, noise, ir_passages) to a bundle.
    Controls(ControlsArgs),
    /// Ranking over scoring: score and rank each system's arguments by an evaluator's
    /// predictions (a file, or a model run here), check the control cases, compare with
    /// human rankings.
    Evaluate(EvaluateArgs),
    /// Agreement among human annotators: average ranks, Friedman test, Krippendorff's alpha
    /// (per task with --bundle). An evaluator's agreement with them is part of `evaluate`.
    Agreement(AgreementArgs),
    /// NRP: normalized rank position of generated answers among expert-judged documents.
    Nrp(NrpArgs),
    /// Reference-based metrics (ROUGE-1/2/L/Lsum as Google's rouge_score, SMOG, Repscore,
    /// BERTScore with a model) and their agreement with human scores.
    Metrics(MetricsArgs),
    /// Rubric grading (HealthBench style): points of met criteria over positive points.
    Rubric(RubricArgs),
    /// A rubric grader's agreement with people (HealthBench's meta-evaluation: macro-F1 of
    /// met / not met and Cohen's kappa over pairs of labels), beside each person's agreement
    /// with the others; overall, per theme, axis and cluster tag.
    RubricAgreement(RubricAgreementArgs),
    /// Grade rubric criteria with a model (a grader trained with `train --task criterion`,
    /// or an NLI model zero-shot): P(met) per criterion, HealthBench scores whose intervals
    /// carry the grader's uncertainty, and the graded file (--out).
    Grade(GradeArgs),
    /// Draft a rubric from your own evidence for a clinician to review, extractively: every
    /// criterion is a statement cut from the evidence (with its document and span), chosen
    /// by BM25 and the rankers given, near-duplicates dropped; no generative model runs.
    /// With an NLI model: criteria the conversation contradicts are flagged, and with the
    /// prompts' expert statements the draft's recall and precision.
    RubricDraft(RubricDraftArgs),
    /// Check answers against expert statements with an NLI model (K-QA): the share of
    /// must-have statements each answer entails (comprehensiveness), the statements it
    /// contradicts (hallucination), per system with intervals.
    Statements(StatementsArgs),
    /// Sentence embeddings of every line of a text file (JSONL out), e.g. for parity checks
    /// against other implementations. Pooling and normalisation follow the model folder.
    Embed(EmbedArgs),
    /// Train a proxy-task evaluator (a multiple-choice or classification head, optionally the
    /// top layers or everything) with AdamW, warm-up and linear decay, early stopping on dev.
    Train(TrainArgs),
    /// An int8 copy of a model folder (`--precision int8` runs it; about a quarter of the
    /// download), with its accuracy against the f32 model measured and kept in the folder.
    Quantize(QuantizeArgs),
    /// Throughput of the core (statistics, ranking, NRP at 100,000 arguments and 1,000,000
    /// qrels lines) and of the encoder (CPU, GPU, and peers). Use a release build.
    Bench(BenchArgs),
    /// Serve a built site folder (the browser app) on 127.0.0.1.
    Serve(ServeArgs),
}

pub fn run(command: Command) -> Result<()> {
    match command {
        Command::Import(ImportCommand::RankingOverScoring(a)) => super::import::import_ros(a),
        Command::Import(ImportCommand::Healthbench(a)) => super::import::import_healthbench(a),
        Command::Controls(a) => super::controls::controls(a),
        Command::Evaluate(a) => super::evaluate::evaluate(a),
        Command::Agreement(a) => super::agreement::agreement(a),
        Command::Nrp(a) => super::nrp::nrp(a),
        Command::Metrics(a) => super::metrics::metrics(a),
        Command::Rubric(a) => super::metrics::rubric(a),
        Command::RubricAgreement(a) => super::rubric_agreement::rubric_agreement(a),
        Command::Grade(a) => super::grade::grade(a),
        Command::RubricDraft(a) => super::draft::rubric_draft(a),
        Command::Statements(a) => super::statements::statements(a),
        Command::Embed(a) => super::embed::embed(a),
        Command::Train(a) => super::train::train(a),
        Command::Quantize(a) => super::quantize::quantize(a),
        Command::Bench(a) => super::bench::bench(a),
        Command::Serve(a) => {
            let limits = super::serve::Limits {
                request_timeout: std::time::Duration::from_secs(a.request_timeout),
                ..Default::default()
            };
            super::serve::serve(&a.dir, a.port, limits, a.hub_stand_in.as_ref())
                .map_err(|e| Error::io(a.dir.display().to_string(), e))
        }
    }
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The site folder (built by scripts/build-web.sh into dist/site).
    #[arg(default_value = "dist/site")]
    pub dir: PathBuf,
    /// The port on 127.0.0.1 (0 to 65535; 0 picks a free one, printed with the URL).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Seconds a client has to send its whole request head, counted from its connection
    /// (1 to 600); a slower one gets 408 and is disconnected, so clients that send a byte
    /// now and then cannot hold the server.
    #[arg(long, value_name = "SECONDS", default_value_t = super::serve::REQUEST_TIMEOUT_SECONDS, value_parser = request_timeout)]
    pub request_timeout: u64,
    /// A stand-in Hub on this machine (http://127.0.0.1:PORT), for the browser tests: the
    /// policy's connect-src allows its host on every port besides the public Hub's hosts.
    #[arg(long, value_name = "URL", value_parser = hub_stand_in)]
    pub hub_stand_in: Option<crate::hub::Endpoint>,
}

/// `--hub-stand-in`: an http URL on this machine.
fn hub_stand_in(s: &str) -> std::result::Result<crate::hub::Endpoint, String> {
    match crate::hub::Endpoint::new(s) {
        Ok(endpoint) if endpoint.is_loopback() => Ok(endpoint),
        _ => Err("expected a Hub on this machine: http://127.0.0.1:PORT".into()),
    }
}

/// `--request-timeout`: 1 to [`super::serve::MAX_REQUEST_TIMEOUT_SECONDS`] seconds.
fn request_timeout(s: &str) -> std::result::Result<u64, String> {
    let max = super::serve::MAX_REQUEST_TIMEOUT_SECONDS;
    match s.trim().parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!("expected a whole number of seconds from 1 to {max}")),
    }
}
