//! `medrank rubric-draft`: a rubric drafted from the user's evidence, extractively (every
//! criterion a statement of the evidence, with its source), for a clinician to review.

use super::args::*;
use super::output::{emit, OutputArgs, Outputs};
use crate::jobs::draft::{self as job, DraftModels, OnEncoder};
use crate::{Error, Result};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct RubricDraftArgs {
    /// Prompts, one per line: `{"id", "prompt", "tags"?, "must_have"?, "nice_to_have"?,
    /// "responses"?: {"SYSTEM": "text"}}`; prompt is a text or [{"role", "content"}]
    /// messages (format: src/data/FORMATS.md, section 12).
    #[arg(long, value_name = "FILE")]
    pub prompts: PathBuf,
    /// An evidence file (repeat): .jsonl / .tsv documents as NRP reads them ({"docno",
    /// "text"} or docno<TAB>text), or a .txt / .md file as one document (section 13).
    #[arg(long = "evidence", value_name = "FILE", required = true)]
    pub evidence: Vec<PathBuf>,
    /// Write the drafted rubric here (section 7): per prompt one line per response (a
    /// `draft` line without one), every criterion with its source document and span.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Criteria per prompt (1 to 100).
    #[arg(long, default_value_t = job::DraftOptions::default().criteria, value_parser = count(1, job::MAX_CRITERIA))]
    pub criteria: usize,
    /// Passages kept per prompt, criteria drawn from their statements (1 to 100).
    #[arg(long, default_value_t = job::DraftOptions::default().passages, value_parser = count(1, job::MAX_PASSAGES))]
    pub passages: usize,
    /// With a ranker: passages BM25 retrieves for it to order (1 to 1,000; fewer than
    /// --passages counts as --passages).
    #[arg(long, default_value_t = job::DraftOptions::default().candidates, value_parser = count(1, job::MAX_CANDIDATES))]
    pub candidates: usize,
    /// Words a passage holds at most (10 to 10,000); longer blocks are cut between
    /// sentences.
    #[arg(long, default_value_t = job::DraftOptions::default().passage_words, value_parser = count(10, job::MAX_PASSAGE_WORDS))]
    pub passage_words: usize,
    /// Words a statement needs to become a criterion (1 to 100).
    #[arg(long, default_value_t = job::DraftOptions::default().min_words, value_parser = count(1, job::MAX_MIN_WORDS))]
    pub min_words: usize,
    /// Points of every drafted criterion (above 0, at most 100).
    #[arg(long, default_value_t = job::DraftOptions::default().points, value_parser = points)]
    pub points: f64,
    /// A tag of every drafted criterion (repeat; default: axis:completeness).
    #[arg(long = "tag", value_name = "TAG", value_parser = job::check_tag)]
    pub tags: Vec<String>,
    /// Without --nli, with --dense-ranker: statements whose embeddings' cosine reaches
    /// this are near-duplicates (0 to 1).
    #[arg(long, default_value_t = job::DraftOptions::default().duplicate_cosine, value_parser = duplicate_cosine)]
    pub duplicate_cosine: f64,
    /// A dense bi-encoder (cosine of pooled embeddings) that ranks passages and statements
    /// beside BM25 and, without --nli, tells near-duplicates by cosine.
    /// Here and in --cross-encoder and --nli, a Hugging Face Hub id ORG/NAME[@REVISION]
    /// may stand for the folder (README, "Models").
    #[arg(long, value_name = "DIR")]
    pub dense_ranker: Option<PathBuf>,
    /// A cross-encoder (a BERT-family folder with a one-logit head) that ranks passages and
    /// statements beside BM25.
    #[arg(long, value_name = "DIR")]
    pub cross_encoder: Option<PathBuf>,
    /// An NLI model (labels naming `entailment` and `contradiction`): near-duplicates by
    /// entailment both ways, criteria the conversation contradicts flagged, and with the
    /// prompts' expert statements the draft's recall and precision.
    #[arg(long, value_name = "DIR")]
    pub nli: Option<PathBuf>,
    /// The models' arithmetic on the CPU: f32 or int8 (default: each folder's own).
    #[arg(long, value_parser = ["f32", "int8"])]
    pub precision: Option<String>,
    /// Sequences per forward pass (1 to 1,024).
    #[arg(long, default_value_t = job::DraftOptions::default().batch_size, value_parser = count(1, crate::bounds::MAX_BATCH))]
    pub batch_size: usize,
    #[command(flatten)]
    pub output: OutputArgs,
}

fn points(s: &str) -> std::result::Result<f64, String> {
    let p: f64 = s.trim().parse().map_err(|_| format!("expected a number, got `{s}`"))?;
    job::check_points(p)
}

fn duplicate_cosine(s: &str) -> std::result::Result<f64, String> {
    let c: f64 = s.trim().parse().map_err(|_| format!("expected a number, got `{s}`"))?;
    job::check_duplicate_cosine(c)
}

/// A model folder (or Hub id) loaded in the precision asked for.
fn load(
    dir: &Path,
    precision: Option<&str>,
    quiet: bool,
) -> Result<(crate::model::TextModel, crate::model::ModelFiles)> {
    let files = super::hub::model_files(dir, quiet)?;
    Ok((with_precision(crate::model::TextModel::from_files(&files)?, precision)?, files))
}

/// A model on its CPU encoder (the CLI's drafting runs on the CPU, as NRP's rankers do).
fn on_cpu(model: &crate::model::TextModel, batch_size: usize) -> OnEncoder<'_, crate::model::CpuEncoder> {
    OnEncoder { model, encoder: &model.encoder, batch_size }
}

/// The job's options from the flags (no `--tag`: the default tags).
fn options(a: &RubricDraftArgs) -> job::DraftOptions {
    job::DraftOptions {
        criteria: a.criteria,
        passages: a.passages,
        candidates: a.candidates,
        passage_words: a.passage_words,
        min_words: a.min_words,
        points: a.points,
        tags: if a.tags.is_empty() { job::DraftOptions::default().tags } else { a.tags.clone() },
        duplicate_cosine: a.duplicate_cosine,
        batch_size: a.batch_size,
    }
}

pub(super) fn rubric_draft(a: RubricDraftArgs) -> Result<()> {
    let models_given: Vec<&Path> =
        [&a.dense_ranker, &a.cross_encoder, &a.nli].into_iter().flatten().map(PathBuf::as_path).collect();
    let mut inputs: Vec<&Path> = vec![&a.prompts];
    inputs.extend(a.evidence.iter().map(PathBuf::as_path));
    inputs.extend(models_given.iter().copied());
    let mut outputs = Outputs::plan(&inputs, &a.output, &[&a.out], &[])?;
    if a.precision.is_some() && models_given.is_empty() {
        return Err(Error::invalid(
            "--precision: no model runs (give --dense-ranker, --cross-encoder or --nli), so there is no arithmetic to set",
        ));
    }
    let precision = a.precision.as_deref();
    let quiet = a.output.quiet;
    let dense = a.dense_ranker.as_deref().map(|d| load(d, precision, quiet)).transpose()?;
    let cross = a.cross_encoder.as_deref().map(|d| load(d, precision, quiet)).transpose()?;
    let nli = a.nli.as_deref().map(|d| load(d, precision, quiet)).transpose()?;
    let batch = a.batch_size;
    let dense_ranker = dense.as_ref().map(|m| job::DenseRanker(on_cpu(&m.0, batch)));
    let cross_ranker = cross.as_ref().map(|m| job::CrossEncoderRanker::new(on_cpu(&m.0, batch))).transpose()?;
    let nli_head = nli.as_ref().map(|m| job::NliHead::new(on_cpu(&m.0, batch))).transpose()?;
    let mut models = DraftModels::default();
    if let Some(d) = &dense_ranker {
        models.rankers.push(d);
        models.encoder = Some(d);
    }
    if let Some(c) = &cross_ranker {
        models.rankers.push(c);
    }
    if let Some(n) = &nli_head {
        models.nli = Some(n);
    }
    for (_, files) in [&dense, &cross, &nli].into_iter().flatten() {
        models.fingerprints.extend(crate::jobs::model_fingerprints(files));
    }

    let req = job::DraftRequest {
        prompts: named(&a.prompts)?,
        evidence: a
            .evidence
            .iter()
            .map(|p| Ok(job::EvidenceFile { file: named(p)?, format: None }))
            .collect::<Result<_>>()?,
        options: options(&a),
    };
    let clock = std::time::Instant::now();
    let mut last = 0.0f64;
    let mut progress = |done: usize, total: usize| {
        let t = clock.elapsed().as_secs_f64();
        if !quiet && done > 0 && (t - last >= 2.0 || done == total) {
            last = t;
            eprintln!("  drafted {done} of {total} prompts, {} elapsed", crate::report::fmt_duration(t));
        }
        true
    };
    let drafted = pollster::block_on(job::draft_rubric(&req, &models, &mut progress))?;
    outputs.file(&a.out, drafted.rubric_jsonl.as_bytes())?;
    let outcome = drafted.outcome;
    warn_all(&outcome.report.warnings, quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::parse_flags;

    #[test]
    fn a_bare_command_line_drafts_with_the_jobs_defaults() {
        let a: RubricDraftArgs =
            parse_flags(&["rubric-draft", "--prompts", "p.jsonl", "--evidence", "e.md", "--out", "o.jsonl"]);
        assert_eq!(options(&a), job::DraftOptions::default());
    }
}
