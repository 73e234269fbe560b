//! NRP: generated answers placed among expert-judged documents by the best ranker per
//! quality dimension (BM25, precomputed runs, neural rankers).

use super::kept::Progress;
use super::spec::{between, defaults_of, reply, JobRequest, JobSpec, View};
use super::views::{nrp_view, NrpView};
use super::{fingerprint_all, tables, NamedText, Outcome};
use crate::data;
use crate::eval::nrp::fusion::{FusionSpec, Scope};
use crate::eval::nrp::{
    self as method, AnswerKey, Denominator, NrpOptions, NrpReport, RankerScores, TiePolicy, Unscored,
};
use crate::report::Fingerprint;
use crate::stats::bootstrap::Bootstrap;
use crate::{Error, Result, Warning};
use serde::{Deserialize, Serialize};

/// A file of generated answers: JSONL carries system and prompt itself; a CSV
/// `qid,query,answer1..N` needs them, given here or taken from a `<system>__<prompt>.csv` name.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct AnswerFile {
    pub file: NamedText,
    #[serde(default)]
    pub system: Option<String>,
    #[serde(default)]
    pub prompt: Option<String>,
}

/// A ranker's precomputed scores: a TREC run for the documents and the answers' scores.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct PrecomputedRanker {
    pub name: String,
    pub run: NamedText,
    pub answer_scores: NamedText,
}

/// Pairs each run file with the answer-scores file of the same ranker name (a lone run and
/// a lone answer-scores file pair whatever their names): the page's way of giving
/// precomputed rankers, where the CLI names both files in one `--ranker NAME=RUN,SCORES`.
pub fn pair_precomputed(
    runs: &[(String, NamedText)],
    answer_scores: &[(String, NamedText)],
) -> Result<Vec<PrecomputedRanker>> {
    runs.iter()
        .map(|(name, run)| {
            let matching = match (runs.len(), answer_scores) {
                (1, [only]) => Some(only),
                _ => answer_scores.iter().find(|(n, _)| n == name),
            };
            let (_, scores) = matching.ok_or_else(|| {
                Error::in_file(
                    &run.name,
                    format!("no answer-scores file for ranker `{name}`: give one with the same ranker name"),
                )
            })?;
            Ok(PrecomputedRanker { name: name.clone(), run: run.clone(), answer_scores: scores.clone() })
        })
        .collect()
}

/// A qrels file: TREC format for one named dimension, or the combined variant with a header
/// (then `dimension` is ignored).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct QrelsFile {
    #[serde(default)]
    pub dimension: Option<String>,
    pub file: NamedText,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct NrpRequestOptions {
    /// `pessimistic` (default), `optimistic` or `average`.
    pub ties: String,
    /// `docs` (|D_q|, the paper) or `docs+1` (|D_q|+1, the public code's list length).
    pub denominator: String,
    /// A judged document the ranker did not score: `below` (stays in D_q, ranks below every
    /// scored item; default) or `drop` (left out of D_q and nDCG@10, as the public code).
    pub unscored: String,
    /// The NRP paper's public code in one choice: denominator docs+1, unscored documents
    /// dropped, every grade a gain (no "not able to judge" grades may be given).
    pub as_public_code: bool,
    /// Fusion rankers, `[NAME=]rrf:A,B[,...]` or `[NAME=]zsum:A,B[,...]`
    /// (`eval::nrp::fusion::FusionSpec`), over the rankers given before them.
    pub fuse: Vec<String>,
    /// Among which scores the fusion rankers' components are ranked (or z-scored) for the
    /// expert agreement: `items` (the items the expert ranked for the query; default) or
    /// `pool` (the query's documents, an answer alone among them). NRP always uses `pool`.
    pub fuse_scope: String,
    pub weights: Vec<(String, f64)>,
    pub forced_rankers: Vec<(String, String)>,
    /// (dimension, grades) meaning "not able to judge"; the page sends the CLI's
    /// `--not-judgeable` values (`DIMENSION=GRADES`), read by [`parse_not_judgeable`].
    #[serde(deserialize_with = "not_judgeable_entries")]
    pub not_judgeable: Vec<(String, Vec<i64>)>,
    /// Add the model-free BM25 ranker (needs the documents).
    pub bm25: bool,
    #[serde(flatten)]
    pub bootstrap: Bootstrap,
}

/// `not_judgeable` as `DIMENSION=GRADES` entries, or as (dimension, grades) pairs.
fn not_judgeable_entries<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<(String, Vec<i64>)>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Entry {
        Text(String),
        Pair(String, Vec<i64>),
    }
    Vec::<Entry>::deserialize(d)?
        .into_iter()
        .map(|e| match e {
            Entry::Text(text) => parse_not_judgeable(&text).map_err(serde::de::Error::custom),
            Entry::Pair(dimension, grades) => Ok((dimension, grades)),
        })
        .collect()
}

impl Default for NrpRequestOptions {
    fn default() -> Self {
        let d = NrpOptions::default();
        NrpRequestOptions {
            ties: "pessimistic".into(),
            denominator: "docs".into(),
            unscored: "below".into(),
            as_public_code: false,
            fuse: Vec::new(),
            fuse_scope: d.fusion_scope.name().into(),
            weights: d.weights,
            forced_rankers: d.forced_rankers,
            not_judgeable: Vec::new(),
            bm25: true,
            bootstrap: d.bootstrap,
        }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct NrpRequest {
    pub topics: NamedText,
    pub qrels: Vec<QrelsFile>,
    #[serde(default)]
    pub documents: Option<NamedText>,
    pub answers: Vec<AnswerFile>,
    #[serde(default)]
    pub rankers: Vec<PrecomputedRanker>,
    #[serde(default)]
    pub expert_rankings: Option<NamedText>,
    #[serde(default)]
    pub options: NrpRequestOptions,
}

pub fn nrp(req: &NrpRequest) -> Result<Outcome<NrpReport>> {
    nrp_with_models(req, &[], None)
}

/// NRP with neural rankers besides BM25 and the precomputed ones: (name, ranker, model
/// fingerprints). `window` = (words, stride) scores long texts by their best window.
pub fn nrp_with_models(
    req: &NrpRequest,
    models: &[(String, super::rankers::NeuralRanker, Vec<Fingerprint>)],
    window: Option<(usize, usize)>,
) -> Result<Outcome<NrpReport>> {
    let o = &req.options;
    let window = match window {
        None => None,
        Some(_) if models.is_empty() => {
            return Err(Error::invalid(
                "--window: only the neural rankers (--dense-ranker, --cross-encoder, --monot5) score windows, and none is given",
            ))
        }
        Some((words, stride)) => Some(
            crate::model::rankers::Window::new(words, stride)
                .map_err(|e| Error::invalid(format!("--window {words},{stride}: {e}")))?,
        ),
    };
    let mut warnings = Vec::new();
    let mut inputs: Vec<&NamedText> = vec![&req.topics];

    let (topics, w) = data::parse_topics(&req.topics.name, &req.topics.text)?;
    warnings.extend(w);

    let specs = o.fuse.iter().map(|f| FusionSpec::parse(f)).collect::<Result<Vec<_>>>()?;
    let fusion_scope = Scope::parse(&o.fuse_scope)?;
    let (denominator, unscored) = if o.as_public_code {
        if o.not_judgeable.iter().any(|(_, g)| !g.is_empty()) {
            return Err(Error::invalid(
                "the public code's settings count every grade as a gain (CLEF eHealth 2021 credibility grade 3 too, which is what reproduces the paper's nDCG@10): leave out the \"not able to judge\" grades, or do not ask for the public code's settings",
            ));
        }
        (Denominator::JudgedDocumentsPlusAnswer, Unscored::Drop)
    } else {
        (parse_denominator(&o.denominator)?, parse_unscored(&o.unscored)?)
    };
    let ties = parse_ties(&o.ties)?;
    let mut not_judgeable = data::trec::NotJudgeable::none();
    for (dim, grades) in &o.not_judgeable {
        not_judgeable = not_judgeable.with(&data::trec::dimension_name(dim), grades);
    }
    let mut judgments = Vec::new();
    for q in &req.qrels {
        inputs.push(&q.file);
        let (js, w) = match &q.dimension {
            // Given for one dimension: it stays that dimension, header or not.
            Some(d) => {
                let (j, w) = data::parse_qrels_dimension(
                    &q.file.name,
                    &q.file.text,
                    &data::trec::dimension_name(d),
                    &not_judgeable,
                )?;
                (vec![j], w)
            }
            None => data::trec::parse_qrels_any(&q.file.name, &q.file.text, "relevance", &not_judgeable)?,
        };
        warnings.extend(w);
        for j in js {
            if judgments.iter().any(|k: &data::Judgments| k.dimension == j.dimension) {
                return Err(Error::invalid(format!(
                    "{}: dimension `{}` is judged by two qrels files",
                    q.file.name, j.dimension
                )));
            }
            judgments.push(j);
        }
    }
    if judgments.is_empty() {
        return Err(Error::invalid("NRP needs at least one qrels file"));
    }
    // "Not able to judge" grades of a dimension no qrels file judges change nothing: a
    // name that is no dimension here nor a standard one (a typo such as `credibilty=3`) is
    // refused; a standard dimension these qrels do not judge (the page's default
    // credibility=3 beside relevance qrels alone) is a warning.
    for (dim, grades) in &o.not_judgeable {
        let dimension = data::trec::dimension_name(dim);
        if judgments.iter().any(|j| j.dimension == dimension) {
            continue;
        }
        let judged: Vec<&str> = judgments.iter().map(|j| j.dimension.as_str()).collect();
        let grades: Vec<String> = grades.iter().map(i64::to_string).collect();
        let message = format!(
            "--not-judgeable {dim}={}: no qrels file judges dimension `{dimension}` (judged: {})",
            grades.join(","),
            judged.join(", ")
        );
        if ["relevance", "credibility", "readability"].contains(&dimension.as_str()) {
            warnings.push(Warning::new(format!("{message}; these grades change nothing")));
        } else {
            return Err(Error::invalid(message));
        }
    }

    let mut answers = Vec::new();
    for a in &req.answers {
        inputs.push(&a.file);
        let (mut parsed, queries, w) = read_answers(a)?;
        warnings.extend(w);
        data::check_answers_have_topics(&a.file.name, &a.file.text, &parsed, &topics)?;
        warnings.extend(data::check_answer_queries(&a.file.name, &queries, &topics));
        answers.append(&mut parsed);
    }
    if answers.is_empty() {
        return Err(Error::invalid("NRP needs at least one file of generated answers"));
    }

    let documents = match &req.documents {
        Some(d) => {
            inputs.push(d);
            let (docs, w) = data::parse_documents(&d.name, &d.text)?;
            warnings.extend(w);
            Some(docs)
        }
        None => None,
    };

    let mut rankers = Vec::new();
    let mut all_runs = Vec::new();
    let mut all_scores = Vec::new();
    for r in &req.rankers {
        inputs.push(&r.run);
        inputs.push(&r.answer_scores);
        let (run, w) = data::parse_run(&r.run.name, &r.run.text)?;
        warnings.extend(w);
        let (scores, w) = data::parse_answer_scores(&r.answer_scores.name, &r.answer_scores.text)?;
        warnings.extend(w);
        data::check_answers_scored(&r.answer_scores.name, &scores, &answers)?;
        rankers.push(RankerScores::from_run(&r.name, &run, &scores)?);
        all_runs.extend(run);
        all_scores.extend(scores);
    }
    if o.bm25 {
        let docs = documents.as_deref().ok_or_else(|| {
            Error::invalid("the BM25 ranker needs the documents' texts: give a documents file, or turn BM25 off and give precomputed rankers")
        })?;
        rankers.push(method::bm25_ranker("bm25", &topics, docs, &judgments, &answers, Default::default())?);
    }
    let mut model_inputs = Vec::new();
    for (name, ranker, fingerprints) in models {
        let docs = documents.as_deref().ok_or_else(|| {
            Error::invalid(format!("ranker `{name}` needs the documents' texts: give a documents file"))
        })?;
        rankers.push(super::rankers::neural_ranker_scores(
            name,
            ranker,
            &topics,
            docs,
            &judgments,
            &answers,
            window,
            &mut warnings,
        )?);
        model_inputs.extend(fingerprints.iter().cloned());
    }
    if rankers.is_empty() {
        return Err(Error::invalid(
            "NRP needs a ranker: BM25 over the documents, a model, or precomputed run + answer scores",
        ));
    }
    for spec in &specs {
        let fused = spec.fuse(&rankers)?;
        rankers.push(fused);
    }

    let expert = match &req.expert_rankings {
        Some(e) => {
            inputs.push(e);
            let (r, w) = data::parse_rankings(&e.name, &e.text)?;
            warnings.extend(w);
            Some(r)
        }
        None => None,
    };

    warnings.extend(data::check_nrp_inputs(&data::answers::NrpInputs {
        topics: &topics,
        judgments: &judgments,
        answers: &answers,
        documents: documents.as_deref(),
        run: (!req.rankers.is_empty()).then_some(all_runs.as_slice()),
        answer_scores: (!req.rankers.is_empty()).then_some(all_scores.as_slice()),
        expert_rankings: expert.as_ref(),
    })?);

    let keys: Vec<AnswerKey> = answers.iter().map(AnswerKey::of).collect();
    let options = NrpOptions {
        ties,
        denominator,
        unscored,
        weights: o.weights.clone(),
        forced_rankers: o.forced_rankers.clone(),
        bootstrap: o.bootstrap,
        fusion_scope,
    };
    let mut report = method::nrp(&judgments, &rankers, &keys, &options, expert.as_ref())?;
    fingerprint_all(&mut report.provenance, &inputs);
    report.provenance.inputs.extend(model_inputs);
    for (name, ranker, _) in models {
        report.provenance.conventions.push((format!("ranker {name}"), ranker.kind().into()));
    }
    if !models.is_empty() {
        let windows = match window {
            Some(w) => w.describe(),
            None => "none: each text in one pass, a text longer than the model's limit loses its end (counted)".into(),
        };
        report.provenance.conventions.push(("window".into(), windows));
        report.provenance.conventions.push(("precision".into(), rankers_precision(models)));
    }
    for spec in &specs {
        report.provenance.conventions.push((
            format!("ranker {}", spec.name),
            format!("{} of {}", spec.method.describe(), spec.rankers.join(", ")),
        ));
    }
    report.provenance.conventions.push(("not_judgeable".into(), not_judgeable_convention(&o.not_judgeable)));
    if o.as_public_code {
        report.provenance.conventions.push((
            "settings".into(),
            "the NRP paper's public code: 1 - r/(|D_q|+1), unscored judged documents dropped, every grade a gain"
                .into(),
        ));
    }
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    let tables = tables::nrp(&report);
    Ok(Outcome { report, tables })
}

/// The grades meaning "not able to judge" in one dimension, `DIMENSION=GRADES` with
/// comma-separated whole numbers: one `--not-judgeable` of the CLI.
pub fn parse_not_judgeable(spec: &str) -> Result<(String, Vec<i64>)> {
    let (dimension, grades) = match spec.split_once('=') {
        Some((d, g)) if !d.trim().is_empty() && !g.trim().is_empty() => (d.trim(), g),
        _ => {
            return Err(Error::invalid(format!(
                "not-judgeable grades `{spec}`: expected DIMENSION=GRADES, e.g. credibility=3"
            )))
        }
    };
    let grades = grades
        .split(',')
        .map(|g| {
            g.trim().parse::<i64>().map_err(|_| {
                Error::invalid(format!(
                    "not-judgeable grades `{spec}`: `{}` is not a whole number; expected integer grades such as 3",
                    g.trim()
                ))
            })
        })
        .collect::<Result<Vec<i64>>>()?;
    Ok((dimension.to_string(), grades))
}

pub fn parse_ties(s: &str) -> Result<TiePolicy> {
    match s {
        "pessimistic" => Ok(TiePolicy::Pessimistic),
        "optimistic" => Ok(TiePolicy::Optimistic),
        "average" => Ok(TiePolicy::Average),
        _ => Err(Error::invalid(format!("unknown tie policy `{s}` (pessimistic, optimistic, average)"))),
    }
}

pub fn parse_denominator(s: &str) -> Result<Denominator> {
    match s {
        "docs" => Ok(Denominator::JudgedDocuments),
        "docs+1" => Ok(Denominator::JudgedDocumentsPlusAnswer),
        _ => Err(Error::invalid(format!("unknown NRP denominator `{s}` (docs = |D_q|, docs+1 = |D_q|+1)"))),
    }
}

pub fn parse_unscored(s: &str) -> Result<Unscored> {
    match s {
        "below" => Ok(Unscored::RankBelow),
        "drop" => Ok(Unscored::Drop),
        _ => Err(Error::invalid(format!("unknown treatment of unscored judged documents `{s}` (below, drop)"))),
    }
}

/// The arithmetic of the neural rankers: one precision when they share it, else each
/// ranker's.
fn rankers_precision(models: &[(String, super::rankers::NeuralRanker, Vec<Fingerprint>)]) -> String {
    let first = models[0].1.precision();
    if models.iter().all(|(_, r, _)| r.precision() == first) {
        return crate::model::describe_precision(first);
    }
    models
        .iter()
        .map(|(name, r, _)| format!("ranker {name}: {}", crate::model::describe_precision(r.precision())))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The grade convention in words, for the provenance.
fn not_judgeable_convention(given: &[(String, Vec<i64>)]) -> String {
    let given: Vec<String> = given
        .iter()
        .filter(|(_, g)| !g.is_empty())
        .map(|(d, g)| {
            format!("{} {}", data::trec::dimension_name(d), g.iter().map(i64::to_string).collect::<Vec<_>>().join(","))
        })
        .collect();
    if given.is_empty() {
        "none: every grade is a gain and its document is in D_q (for CLEF eHealth 2021 credibility, grade 3 \"not able to judge\" then counts as gain 3, which is what reproduces the NRP paper's nDCG@10)".into()
    } else {
        format!("{}: missing data, out of D_q and of nDCG@10", given.join("; "))
    }
}

/// Answers of one file, plus the queries a CSV names (checked against the topics).
fn read_answers(a: &AnswerFile) -> Result<(Vec<data::Answer>, Vec<data::Topic>, Vec<Warning>)> {
    let f = &a.file;
    // Detected by content, past a byte-order mark; an empty file is named as such rather
    // than taken for a CSV without its system and prompt.
    match crate::data::common::first_content_char(&f.text) {
        None => return Err(Error::in_file(&f.name, "the answers file is empty")),
        Some('{') => {
            let (answers, warnings) = data::parse_answers_jsonl(&f.name, &f.text)?;
            return Ok((answers, Vec::new(), warnings));
        }
        Some(_) => {}
    }
    let (system, prompt) = match (&a.system, &a.prompt) {
        (Some(s), Some(p)) => (s.clone(), p.clone()),
        _ => data::system_prompt_from_file_name(&f.name).ok_or_else(|| {
            Error::in_file(
                &f.name,
                "an answers CSV needs its system and prompt: name the file <system>__<prompt>.csv or give them explicitly",
            )
        })?,
    };
    data::parse_answers_csv(&f.name, &f.text, &system, &prompt)
}

// ------------------------------------------------------------------ the job ----------------

/// The job: NRP of generated answers among expert-judged documents.
pub const JOB: JobSpec = JobSpec::new("nrp", "NRP", "normalized rank position (NRP)", "nrp")
    .reads(
        &[
            "topics",
            "qrels",
            "qrels_combined",
            "documents",
            "answers",
            "answers_jsonl",
            "run",
            "answer_scores",
            "expert_rankings",
        ],
        &[&["qrels", "qrels_combined"], &["documents", "run"], &["answers", "answers_jsonl", "answer_scores"]],
    )
    .views(&[View::tab("nrp_view", "NRP")])
    .defaults(defaults_of::<NrpRequestOptions>)
    .runs(run);

/// The request of `medrank nrp`. A run file and an answer-scores file form one precomputed
/// ranker (matched by their `ranker` names; a lone pair belongs together); BM25 is added
/// when the documents are given.
pub fn nrp_request(request: &JobRequest) -> Result<NrpRequest> {
    let named = |kind| request.files_of(kind).map(|f| (f.param_or_stem("ranker"), f.named())).collect::<Vec<_>>();
    let documents = request.optional("documents", "documents file")?;
    let mut options: NrpRequestOptions = request.options()?;
    options.bm25 = documents.is_some();
    Ok(NrpRequest {
        topics: request.required("topics", "the topics (queries)")?.named(),
        qrels: request
            .files_of("qrels")
            .map(|f| QrelsFile { dimension: f.params.get("dimension").cloned(), file: f.named() })
            .chain(request.files_of("qrels_combined").map(|f| QrelsFile { dimension: None, file: f.named() }))
            .collect(),
        documents,
        answers: request
            .files_of("answers")
            .chain(request.files_of("answers_jsonl"))
            .map(|f| AnswerFile {
                file: f.named(),
                system: f.params.get("system").cloned(),
                prompt: f.params.get("prompt").cloned(),
            })
            .collect(),
        rankers: pair_precomputed(&named("run"), &named("answer_scores"))?,
        expert_rankings: request.optional("expert_rankings", "expert rankings file")?,
        options,
    })
}

/// NRP of generated answers among expert-judged documents (`medrank nrp`).
fn run(request: &JobRequest, progress: Progress) -> Result<String> {
    #[derive(Serialize)]
    struct NrpViews<'a> {
        nrp_view: NrpView<'a>,
    }
    let req = nrp_request(request)?;
    between(progress, "Placing answers among the judged documents", || {
        let outcome = nrp(&req)?;
        reply(&outcome, NrpViews { nrp_view: nrp_view(&outcome.report) })
    })
}

#[cfg(test)]
mod tests {
    use crate::jobs::spec::testing::{file as kinded, request};

    #[test]
    fn the_page_request_reads_the_options_and_pairs_files_as_the_cli() {
        let r = request(
            vec![
                kinded("topics.xml", "topics", &[]),
                kinded("qrels.credibility.txt", "qrels", &[("dimension", "credibility")]),
                kinded("q.tsv", "qrels_combined", &[]),
                kinded("gpt__expert.csv", "answers", &[("system", "gpt"), ("prompt", "expert")]),
                kinded("dense.run", "run", &[("ranker", "dense")]),
                kinded("dense.csv", "answer_scores", &[("ranker", "dense")]),
            ],
            serde_json::json!({"not_judgeable": ["credibility=3", "relevance=-1, 9"], "ties": "average",
                               "weights": [["credibility", 2.0]], "resamples": 10}),
        );
        let req = nrp_request(&r).unwrap();
        assert_eq!(
            req.options.not_judgeable,
            [("credibility".to_string(), vec![3]), ("relevance".into(), vec![-1, 9])]
        );
        assert_eq!(req.options.ties, "average");
        assert_eq!(req.options.weights, [("credibility".to_string(), 2.0)]);
        assert_eq!(req.options.bootstrap.resamples, 10);
        assert!(!req.options.bm25, "BM25 only with the documents");
        assert_eq!(
            req.qrels.iter().map(|q| q.dimension.clone()).collect::<Vec<_>>(),
            [Some("credibility".into()), None]
        );
        assert_eq!(req.rankers.len(), 1);
        assert_eq!((req.answers[0].system.as_deref(), req.answers[0].prompt.as_deref()), (Some("gpt"), Some("expert")));
        // A grade that is not a whole number is an error naming the entry.
        let r = request(vec![kinded("t.xml", "topics", &[])], serde_json::json!({"not_judgeable": ["credibility=x"]}));
        let e = nrp_request(&r).unwrap_err().to_string();
        assert!(e.contains("`credibility=x`: `x` is not a whole number"), "{e}");
    }

    use super::*;

    fn file(name: &str) -> NamedText {
        NamedText::new(name, "")
    }

    #[test]
    fn run_files_pair_with_the_answer_scores_of_the_same_ranker() {
        let runs = [("bm25".to_string(), file("run.bm25")), ("colbert".to_string(), file("run.colbert"))];
        let scores = [("colbert".to_string(), file("scores.colbert")), ("bm25".to_string(), file("scores.bm25"))];
        let pairs = pair_precomputed(&runs, &scores).unwrap();
        let names: Vec<(&str, &str, &str)> =
            pairs.iter().map(|p| (p.name.as_str(), p.run.name.as_str(), p.answer_scores.name.as_str())).collect();
        assert_eq!(names, [("bm25", "run.bm25", "scores.bm25"), ("colbert", "run.colbert", "scores.colbert")]);
        // One of each pairs whatever the names.
        let lone = pair_precomputed(&runs[..1], &scores[..1]).unwrap();
        assert_eq!((lone[0].name.as_str(), lone[0].answer_scores.name.as_str()), ("bm25", "scores.colbert"));
        // A run without its scores is an error naming the run file and the ranker.
        let err = pair_precomputed(&runs, &scores[..1]).unwrap_err().to_string();
        assert!(err.starts_with("run.bm25: no answer-scores file for ranker `bm25`"), "{err}");
    }
}
