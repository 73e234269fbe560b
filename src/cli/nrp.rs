//! `medrank nrp`: normalized rank position of generated answers.

use super::args::*;
use super::output::{emit, OutputArgs, Outputs};
use crate::jobs;
use crate::{Error, Result};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct NrpArgs {
    /// Topics: TREC XML (<topic><id>..</id><query>..</query></topic>) or JSONL {"qid","query"}.
    #[arg(long, value_name = "FILE")]
    pub topics: PathBuf,
    /// Qrels of one dimension, TREC `qid 0 docno grade`, as DIMENSION=FILE (repeat).
    #[arg(long = "qrels", value_name = "DIMENSION=FILE", value_parser = key_value)]
    pub qrels: Vec<(String, String)>,
    /// Combined qrels with a header such as `qid docno rel cred read`.
    #[arg(long, value_name = "FILE")]
    pub qrels_combined: Option<PathBuf>,
    /// Grades meaning "not able to judge" (missing data: out of D_q and of nDCG@10), as
    /// DIMENSION=G[,G..] (repeat; whole numbers; a dimension the qrels judge), e.g.
    /// credibility=3 for the CLEF eHealth 2021 qrels. Without it every grade is a gain,
    /// which is what reproduces the NRP paper's nDCG@10.
    #[arg(long = "not-judgeable", value_name = "DIMENSION=GRADES", value_parser = not_judgeable)]
    pub not_judgeable: Vec<(String, Vec<i64>)>,
    /// Documents: JSONL {"docno","text"} or TSV docno<TAB>text (needed by BM25).
    #[arg(long, value_name = "FILE")]
    pub docs: Option<PathBuf>,
    /// Generated answers: CSV `qid,query,answer1..N` named <system>__<prompt>.csv, or JSONL
    /// {qid,system,prompt,sample,text} (repeat).
    #[arg(long = "answers", value_name = "FILE", required = true)]
    pub answers: Vec<PathBuf>,
    /// A precomputed ranker as NAME=RUN_FILE,ANSWER_SCORES_FILE (repeat): a TREC run for the
    /// documents and a CSV/JSONL `qid,system,prompt,sample,score` for the answers.
    #[arg(long = "ranker", value_name = "NAME=RUN,SCORES", value_parser = key_value)]
    pub rankers: Vec<(String, String)>,
    /// Do not add the model-free BM25 ranker.
    #[arg(long)]
    pub no_bm25: bool,
    /// A dense bi-encoder ranker (cosine of pooled embeddings), as NAME=MODEL_DIR (repeat).
    /// Here and in --cross-encoder and --monot5, a Hugging Face Hub id ORG/NAME[@REVISION]
    /// may stand for the folder (README, "Models").
    #[arg(long = "dense-ranker", value_name = "NAME=DIR", value_parser = key_value)]
    pub dense_rankers: Vec<(String, String)>,
    /// A cross-encoder ranker (a BERT-family folder with a one-logit head), as NAME=DIR.
    #[arg(long = "cross-encoder", value_name = "NAME=DIR", value_parser = key_value)]
    pub cross_encoders: Vec<(String, String)>,
    /// A monoT5 ranker (a T5 folder: config.json, tokenizer.json, model.safetensors), as NAME=DIR.
    #[arg(long = "monot5", value_name = "NAME=DIR", value_parser = key_value)]
    pub monot5: Vec<(String, String)>,
    /// The encoder's arithmetic in the --dense-ranker and --cross-encoder rankers: f32, or
    /// int8 (weights int8 per output channel, activations 7-bit per token, exact integer
    /// sums). Default: each folder's own (int8 for a folder written by `medrank quantize`,
    /// else f32). monoT5 (candle's T5) runs f32 only: int8 is refused with --monot5.
    /// Recorded in the report's provenance.
    #[arg(long, value_parser = ["f32", "int8"])]
    pub precision: Option<String>,
    /// Score long texts with the neural rankers by their best window of WORDS words every
    /// STRIDE words, as WORDS,STRIDE (WORDS 1 to 10,000, STRIDE 1 to WORDS; default: one
    /// pass, long texts lose their end, counted). Recorded in the report's provenance.
    #[arg(long, value_name = "WORDS,STRIDE", value_parser = window)]
    pub window: Option<(usize, usize)>,
    /// A fusion ranker over rankers given (by name: bm25, a --ranker/--monot5/... NAME, or an
    /// earlier fusion), as [NAME=]rrf:A,B[,..] (reciprocal rank fusion, k = 60) or
    /// [NAME=]zsum:A,B[,..] (sum of per-query z-scores); default name rrf(A+B) (repeat).
    #[arg(long = "fuse", value_name = "[NAME=]METHOD:RANKERS")]
    pub fuse: Vec<String>,
    /// Where the fusion rankers' components rank (or z-score) an item for the expert
    /// agreement: items = among the items the expert ranked for the query (the way the expert
    /// compared them); pool = among the query's documents, an answer alone among them. NRP and
    /// the ranker validation always use pool (a score comparable with every judged document).
    #[arg(long, default_value_t = jobs::NrpRequestOptions::default().fuse_scope, value_parser = ["items", "pool"])]
    pub fuse_scope: String,
    /// Use this ranker for a dimension instead of the best by nDCG@10, as DIMENSION=RANKER.
    #[arg(long = "force-ranker", value_name = "DIMENSION=RANKER", value_parser = key_value)]
    pub force_rankers: Vec<(String, String)>,
    /// Weight of a dimension in the combined NRP, as DIMENSION=W (repeat; W from 0 to
    /// 1,000,000; normalised to sum 1; default equal).
    #[arg(long = "weight", value_name = "DIMENSION=W", value_parser = key_number(crate::bounds::MAX_WEIGHT))]
    pub weights: Vec<(String, f64)>,
    /// How an answer tied with documents is placed.
    #[arg(long, default_value_t = jobs::NrpRequestOptions::default().ties, value_parser = ["pessimistic", "optimistic", "average"])]
    pub ties: String,
    /// NRP denominator: docs = |D_q| (the paper's formula), docs+1 = |D_q|+1 (the list
    /// length with the answer, as in the public code; that code also drops unscored judged
    /// documents: see --as-public-code).
    #[arg(long, default_value_t = jobs::NrpRequestOptions::default().denominator, value_parser = ["docs", "docs+1"])]
    pub denominator: String,
    /// A judged document the ranker did not score: below = stays in D_q, ranked below every
    /// scored item; drop = left out of D_q and of nDCG@10 (as the public code).
    #[arg(long, default_value_t = jobs::NrpRequestOptions::default().unscored, value_parser = ["below", "drop"])]
    pub unscored: String,
    /// The NRP paper's public code in one choice: --denominator docs+1, --unscored drop and
    /// every grade a gain (no --not-judgeable); ties stay as --ties says.
    #[arg(long, conflicts_with_all = ["denominator", "unscored", "not_judgeable"])]
    pub as_public_code: bool,
    /// Expert rankings for agreement: CSV instance=qid, system=docno or system/prompt/sample.
    #[arg(long, value_name = "FILE")]
    pub expert_rankings: Option<PathBuf>,
    #[command(flatten)]
    pub bootstrap: BootstrapArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `--window WORDS,STRIDE` ([`crate::model::rankers::Window::new`]'s bounds).
fn window(s: &str) -> std::result::Result<(usize, usize), String> {
    let numbers: Vec<usize> = s
        .split(',')
        .map(|x| x.trim().parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| format!("expected WORDS,STRIDE, two whole numbers such as 200,100, got `{s}`"))?;
    match numbers[..] {
        [words, stride] => crate::model::rankers::Window::new(words, stride).map(|w| (w.words, w.stride)),
        _ => Err(format!("expected WORDS,STRIDE, two whole numbers such as 200,100, got `{s}`")),
    }
}

/// `--precision` applies to the rankers that run our encoder: refused without any neural
/// ranker, and int8 refused with monoT5 (candle's T5, f32 only), before any model is read.
fn check_precision(a: &NrpArgs) -> Result<()> {
    let Some(p) = precision(a.precision.as_deref())? else { return Ok(()) };
    if a.dense_rankers.is_empty() && a.cross_encoders.is_empty() && a.monot5.is_empty() {
        return Err(Error::invalid(format!(
            "--precision {}: only the neural rankers (--dense-ranker, --cross-encoder) run an encoder, and none is given",
            p.name()
        )));
    }
    if p == crate::model::Precision::Int8 {
        if let Some((name, _)) = a.monot5.first() {
            return Err(Error::invalid(format!(
                "--precision int8: the monoT5 ranker `{name}` runs candle's T5 in f32 only (int8 products are for the BERT-family encoder of --dense-ranker and --cross-encoder); leave out --precision or give f32, or rank without --monot5"
            )));
        }
    }
    Ok(())
}

/// Every file and model folder the run reads (for the output check before any work).
fn input_paths(a: &NrpArgs) -> Vec<&Path> {
    let mut inputs: Vec<&Path> = vec![&a.topics];
    inputs.extend(a.qrels.iter().map(|(_, f)| Path::new(f)));
    inputs.extend([&a.qrels_combined, &a.docs, &a.expert_rankings].into_iter().filter_map(|p| p.as_deref()));
    inputs.extend(a.answers.iter().map(PathBuf::as_path));
    inputs.extend(a.rankers.iter().flat_map(|(_, files)| files.split(',').map(Path::new)));
    inputs.extend(a.dense_rankers.iter().chain(&a.cross_encoders).chain(&a.monot5).map(|(_, d)| Path::new(d)));
    inputs
}

pub(super) fn nrp(a: NrpArgs) -> Result<()> {
    let outputs = Outputs::plan(&input_paths(&a), &a.output, &[], &[])?;
    check_precision(&a)?;
    let mut qrels = Vec::new();
    for (dimension, file) in &a.qrels {
        qrels.push(jobs::QrelsFile { dimension: Some(dimension.clone()), file: named(Path::new(file))? });
    }
    if let Some(c) = &a.qrels_combined {
        qrels.push(jobs::QrelsFile { dimension: None, file: named(c)? });
    }
    let not_judgeable = a.not_judgeable.clone();
    let weights: Vec<(String, f64)> = a.weights.iter().map(|(dim, w)| (crate::data::dimension_name(dim), *w)).collect();
    let mut rankers = Vec::new();
    for (name, files) in &a.rankers {
        let (run, scores) = files.split_once(',').ok_or_else(|| {
            Error::invalid(format!("--ranker {name}={files}: expected NAME=RUN_FILE,ANSWER_SCORES_FILE"))
        })?;
        rankers.push(jobs::PrecomputedRanker {
            name: name.clone(),
            run: named(Path::new(run))?,
            answer_scores: named(Path::new(scores))?,
        });
    }
    let req = jobs::NrpRequest {
        topics: named(&a.topics)?,
        qrels,
        documents: named_opt(&a.docs)?,
        answers: a
            .answers
            .iter()
            .map(|p| Ok(jobs::AnswerFile { file: named(p)?, system: None, prompt: None }))
            .collect::<Result<_>>()?,
        rankers,
        expert_rankings: named_opt(&a.expert_rankings)?,
        options: jobs::NrpRequestOptions {
            ties: a.ties,
            denominator: a.denominator,
            unscored: a.unscored,
            as_public_code: a.as_public_code,
            fuse: a.fuse,
            fuse_scope: a.fuse_scope,
            weights,
            forced_rankers: a.force_rankers.iter().map(|(d, r)| (crate::data::dimension_name(d), r.clone())).collect(),
            not_judgeable,
            bm25: !a.no_bm25,
            bootstrap: a.bootstrap.settings(),
        },
    };
    let mut models = Vec::new();
    for (name, dir) in a.dense_rankers.iter().chain(&a.cross_encoders) {
        let files = super::hub::model_files(Path::new(dir), a.output.quiet)?;
        let model = with_precision(crate::model::TextModel::from_files(&files)?, a.precision.as_deref())?;
        let ranker = if a.dense_rankers.iter().any(|(n, d)| n == name && d == dir) {
            jobs::rankers::NeuralRanker::Dense(model)
        } else {
            jobs::rankers::NeuralRanker::CrossEncoder(model)
        };
        models.push((name.clone(), ranker, jobs::model_fingerprints(&files)));
    }
    for (name, dir) in &a.monot5 {
        let files = super::hub::model_files(Path::new(dir), a.output.quiet)?;
        let t5 =
            crate::model::monot5::MonoT5::from_bytes(&files.config_json, &files.tokenizer_json, files.weights.clone())?;
        models.push((
            name.clone(),
            jobs::rankers::NeuralRanker::MonoT5(std::cell::RefCell::new(t5)),
            jobs::model_fingerprints(&files),
        ));
    }
    let outcome = jobs::nrp_with_models(&req, &models, a.window)?;
    warn_all(&outcome.report.warnings, a.output.quiet);
    emit(&outcome.report, &outcome.tables, &a.output, outputs)
}
