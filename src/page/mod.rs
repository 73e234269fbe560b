//! The page's front end, beside the CLI's (`src/cli/`): plain Rust, built and tested
//! natively, that `src/wasm.rs` only wraps for JavaScript.
//!
//! - `files`: the kinds of input file, which kinds each job reads, the first guess and the
//!   check of one file (the page learns all of it from here);
//! - `request`: the dropped files and the Options read into the job layer's requests;
//! - `views`: what each result tab draws (`www/results.js` only draws); `drilldown`: the
//!   per-instance view of ranking over scoring;
//! - `training`: the training form and a training kept between the worker's steps;
//! - `bench`: the benchmark page's encoder grid, with the clock passed in.
//!
//! Each job here returns the reply the page gets: the report (what `--json` writes), its
//! tables with their CSV (what `--csv` writes) and the page's views, as JSON text.

pub mod bench;
pub mod drilldown;
pub mod files;
pub mod request;
pub mod training;
pub mod views;

use serde::Serialize;

use crate::error::Result;
use crate::jobs::{self, KeptModel, NamedText, Outcome};
use crate::report::Table;
use request::JobRequest;

/// A table as the page shows and exports it: the shared `Table` plus its CSV text, made by
/// the same `Table::to_csv` as the CLI's `--csv`, so exports are identical.
#[derive(Serialize)]
pub struct PageTable<'a> {
    #[serde(flatten)]
    pub table: &'a Table,
    pub csv: String,
}

pub fn page_tables(tables: &[Table]) -> Vec<PageTable<'_>> {
    tables.iter().map(|t| PageTable { table: t, csv: t.to_csv() }).collect()
}

#[derive(Serialize)]
struct Reply<'a, R: Serialize, V: Serialize> {
    report: &'a R,
    tables: Vec<PageTable<'a>>,
    #[serde(flatten)]
    views: V,
}

fn reply<R: Serialize, V: Serialize>(outcome: &Outcome<R>, views: V) -> Result<String> {
    json(&Reply { report: &outcome.report, tables: page_tables(&outcome.tables), views })
}

/// A reply as JSON text (the page parses it once; `--json` writes the same serialisation).
pub fn json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| crate::Error::invalid(format!("could not write the reply: {e}")))
}

/// A message as the page writes it, a sentence: the CLI's `error: the import needs ...`
/// becomes "The import needs ...". Only a first word of lower-case letters changes, so a
/// message that starts with a file name (`gpt-4o.jsonl: ...`) or code keeps it.
pub fn sentence_case(message: &str) -> String {
    let first_word = message.split(' ').next().unwrap_or("");
    if message.contains(' ') && !first_word.is_empty() && first_word.chars().all(|c| c.is_ascii_lowercase()) {
        let mut chars = message.chars();
        let first = chars.next().map(|c| c.to_ascii_uppercase()).into_iter();
        first.chain(chars).collect()
    } else {
        message.to_string()
    }
}

/// The page's progress report: `(stage, done, total)`; `Err(Cancelled)` once the user
/// cancelled.
pub type Progress<'a> = &'a mut dyn FnMut(&str, usize, usize) -> Result<()>;

/// Runs a job between two progress reports (the model-free jobs have no inner steps).
fn between(progress: Progress, stage: &str, job: impl FnOnce() -> Result<String>) -> Result<String> {
    progress(stage, 0, 1)?;
    let out = job()?;
    progress(stage, 1, 1)?;
    Ok(out)
}

// ------------------------------------------------------------------ ranking over scoring ----

/// The import of the Ranking-Over-Scoring files, when the page made the bundle from them:
/// its report (reordered options, control files, empty options) and table.
#[derive(Serialize)]
struct ImportView<'a> {
    report: &'a jobs::ImportReport,
    tables: Vec<PageTable<'a>>,
}

/// Everything the ranking-over-scoring tabs draw.
#[derive(Serialize)]
struct RankViews<'a> {
    /// Systems treated as control cases (the options' and the control files the bundle marks).
    controls: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    import: Option<ImportView<'a>>,
    instances: Vec<drilldown::InstanceView<'a>>,
    #[serde(flatten)]
    proxy: views::ProxyViews<'a>,
}

/// The views of an evaluate outcome, with the bundle and every evaluator's predictions
/// for the drill-down.
fn rank_views<'a>(
    outcome: &'a Outcome<jobs::EvaluateReport>,
    imported: &'a Option<jobs::ImportOutcome>,
    bundle: &'a crate::data::Bundle,
    controls: &'a [String],
    predictions: &[(&'a str, &'a crate::data::Prediction)],
) -> RankViews<'a> {
    RankViews {
        controls,
        import: imported.as_ref().map(|o| ImportView { report: &o.report, tables: page_tables(&o.tables) }),
        instances: drilldown::instance_views(bundle, predictions),
        proxy: views::proxy_views(&outcome.report, controls),
    }
}

/// What the page knows of a ranking before any model loads: the checks a run makes first
/// (the import of the Ranking-Over-Scoring files, the bundle, the control cases) and what
/// it will encode. Run whenever files or options change; an error is the one the run
/// would give, so the page can show it before the wait.
#[derive(Serialize)]
pub struct RankCheck {
    /// The import's report, when the bundle comes from Ranking-Over-Scoring files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub import: Option<jobs::ImportReport>,
    /// With a model as the evaluator: what the run will do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_run: Option<jobs::ModelRunPlan>,
}

/// [`RankCheck`] for a request; `with_model` when a model is the evaluator (else the
/// predictions files are).
pub fn check_rank(request: &JobRequest, with_model: bool) -> Result<RankCheck> {
    let (bundle, imported) = request.bundle()?;
    let model_run = if with_model {
        let (req, model_options, _) = request.evaluate_with_model(bundle)?;
        Some(jobs::plan_model_evaluation(&req, &model_options)?)
    } else {
        request.evaluate(bundle)?;
        None
    };
    Ok(RankCheck { import: imported.map(|o| o.report), model_run })
}

/// Ranking over scoring from imported predictions (`medrank evaluate --predictions`).
pub fn rank_systems(request: &JobRequest, progress: Progress) -> Result<String> {
    let (bundle_text, imported) = request.bundle()?;
    let req = request.evaluate(bundle_text.clone())?;
    between(progress, "Ranking systems", || {
        let outcome = jobs::evaluate_predictions(&req)?;
        // The drill-down reads the same files again with the same readers (cheap, and keeps
        // the job's report free of page-only data).
        let (bundle, _) = crate::data::parse_bundle(&bundle_text.name, &bundle_text.text)?;
        let mut parsed = Vec::new();
        for p in &req.predictions {
            let (file, _) = crate::data::parse_predictions(&p.file.name, &p.file.text)?;
            parsed.push((p.evaluator.as_deref().unwrap_or_default(), file));
        }
        let flat: Vec<(&str, &crate::data::Prediction)> =
            parsed.iter().flat_map(|(e, file)| file.predictions.iter().map(move |p| (*e, p))).collect();
        let controls = drilldown::with_file_controls(&req.options.controls, &bundle);
        reply(&outcome, rank_views(&outcome, &imported, &bundle, &controls, &flat))
    })
}

/// Ranking over scoring with the kept model as the evaluator (`medrank evaluate --model
/// --controls --backend`): on WebGPU when the options allow it and the browser gives an
/// adapter, else on the CPU; the reply says which (`backend`) and on how many threads.
///
/// The encoding stage reports work done of work in all ([`jobs::EncodeProgress`]), and
/// says in words the sequences, tokens and time left ([`jobs::TimeEstimate`]: measured on
/// this run once 2 % is done, before that at this kept model's last rate).
pub async fn rank_with_model(
    kept: &mut KeptModel,
    request: &JobRequest,
    now: &dyn Fn() -> f64,
    progress: Progress<'_>,
) -> Result<String> {
    #[derive(Serialize)]
    struct ModelViews<'a> {
        #[serde(flatten)]
        rank: RankViews<'a>,
        #[serde(flatten)]
        run: RunViews<'a>,
    }
    let precision = request.options.precision()?;
    let (bundle_text, imported) = request.bundle()?;
    let (req, model_options, choice) = request.evaluate_with_model(bundle_text.clone())?;
    let estimate = start_estimate(kept, precision, choice, now());
    let mut last = jobs::EncodeProgress::default();
    let mut on_batch = |p: &jobs::EncodeProgress| {
        last = *p;
        let (done, total) = progress_parts(p);
        progress(&encoding_stage(p, &estimate, now()), done, total).is_ok()
    };
    let ((outcome, predictions), backend) = kept.evaluate(&req, choice, &model_options, &mut on_batch).await?;
    keep_rate(kept, choice, &estimate, &last, now());
    progress("Ranking systems", 1, 1)?;
    let (bundle, _) = crate::data::parse_bundle(&bundle_text.name, &bundle_text.text)?;
    let evaluator = outcome.report.evaluators.first().map(|e| e.evaluator.as_str()).unwrap_or("model");
    let flat: Vec<(&str, &crate::data::Prediction)> = predictions.iter().map(|p| (evaluator, p)).collect();
    let controls = drilldown::with_file_controls(&req.options.controls, &bundle);
    let views = ModelViews {
        rank: rank_views(&outcome, &imported, &bundle, &controls, &flat),
        run: RunViews::of(kept, &backend),
    };
    reply(&outcome, views)
}

/// What every reply of a kept-model job says of the run.
#[derive(Serialize)]
struct RunViews<'a> {
    /// Which backend ran the encoder, on what, and why the CPU when it was a fallback.
    backend: &'a crate::gpu::BackendReport,
    /// Threads the CPU path used (1 in the single-threaded build).
    threads: usize,
    /// The precision the model ran in (`f32`, `int8`; the provenance says how).
    precision: &'static str,
}

impl<'a> RunViews<'a> {
    fn of(kept: &KeptModel, backend: &'a crate::gpu::BackendReport) -> Self {
        RunViews {
            backend,
            threads: crate::model::cpu::worker_threads(),
            // The GPU refuses int8 (or Auto falls back to the CPU): the model's precision ran.
            precision: kept.model.encoder.model.precision.name(),
        }
    }
}

/// Switches the kept model to `precision` and starts a run's time estimate from its last
/// speed under `choice` (none when that speed was another arithmetic's or backend's).
fn start_estimate(
    kept: &mut KeptModel,
    precision: crate::model::Precision,
    choice: crate::gpu::BackendChoice,
    started: f64,
) -> jobs::TimeEstimate {
    if kept.model.encoder.model.precision != precision {
        kept.last_rate = None;
    }
    kept.set_precision(precision);
    let prior_rate = kept.last_rate.filter(|(kept_choice, _)| *kept_choice == choice).map(|(_, rate)| rate);
    jobs::TimeEstimate { started, prior_rate }
}

/// Keeps this run's speed for the next run's first estimate.
fn keep_rate(
    kept: &mut KeptModel,
    choice: crate::gpu::BackendChoice,
    estimate: &jobs::TimeEstimate,
    last: &jobs::EncodeProgress,
    now: f64,
) {
    if let Some(rate) = estimate.rate(last, now) {
        kept.last_rate = Some((choice, rate));
    }
}

/// The encoding's work done and in all as the page's progress takes them: parts per
/// million of the work, since the work itself passes 2^32 (usize on wasm32) on a large run
/// (8,605 sequences of ~250 tokens with MiniLM: ~5.5e9).
pub fn progress_parts(p: &jobs::EncodeProgress) -> (usize, usize) {
    const PARTS: u64 = 1_000_000;
    match p.work {
        0 => (0, 0),
        work => ((p.work_done.min(work) as u128 * PARTS as u128 / work as u128) as usize, PARTS as usize),
    }
}

/// "Encoding with the model: 1,234 of 8,605 sequences (1.9 M tokens) · about 4 min 05 s
/// left": what the run will encode and how long it may take, from before its first batch.
pub fn encoding_stage(p: &jobs::EncodeProgress, estimate: &jobs::TimeEstimate, now: f64) -> String {
    if p.work == 0 {
        // Before the evaluator's plan: it is tokenizing the inputs.
        return format!(
            "Encoding with the model: splitting {} sequences into tokens",
            crate::report::thousands(p.sequences)
        );
    }
    format!("Encoding with the model: {}{}", p.describe(), time_left(p, estimate, now))
}

// ------------------------------------------------------------------ NRP, metrics, rubric, agreement

/// NRP of generated answers among expert-judged documents (`medrank nrp`).
pub fn nrp(request: &JobRequest, progress: Progress) -> Result<String> {
    #[derive(Serialize)]
    struct NrpViews<'a> {
        nrp_view: views::NrpView<'a>,
    }
    let req = request.nrp()?;
    between(progress, "Placing answers among the judged documents", || {
        let outcome = jobs::nrp(&req)?;
        reply(&outcome, NrpViews { nrp_view: views::nrp_view(&outcome.report) })
    })
}

/// Reference-based metrics over one candidates file (`medrank metrics`).
pub fn metrics(request: &JobRequest, progress: Progress) -> Result<String> {
    let req = request.metrics()?;
    between(progress, "Scoring candidates", || reply(&jobs::metrics(&req)?, ()))
}

/// The rubric's Scores tab, for the Rubric and the Grade job.
#[derive(Serialize)]
struct RubricViews<'a> {
    rubric_view: views::RubricView<'a>,
}

/// Rubric grading over one file of graded responses (`medrank rubric`).
pub fn rubric(request: &JobRequest, progress: Progress) -> Result<String> {
    let req = request.rubric()?;
    between(progress, "Scoring the graded responses", || {
        let outcome = jobs::rubric(&req)?;
        let confidence = req.options.bootstrap.confidence;
        reply(&outcome, RubricViews { rubric_view: views::rubric_view(&outcome.report.system_scores, confidence) })
    })
}

/// A grader's agreement with people, and each person's with the others (`medrank
/// rubric-agreement --input --grader-file`): the report, its two tables and the Agreement tab.
pub fn rubric_agreement(request: &JobRequest, progress: Progress) -> Result<String> {
    #[derive(Serialize)]
    struct AgreementViews<'a> {
        rubric_agreement_view: views::RubricAgreementView<'a>,
    }
    let req = request.rubric_agreement()?;
    between(progress, "Comparing the judgements", || {
        let outcome = jobs::rubric_agreement(&req)?;
        reply(&outcome, AgreementViews { rubric_agreement_view: views::rubric_agreement_view(&outcome.report) })
    })
}

/// A rubric file graded by the kept model (`medrank grade --rubric --grader --backend`):
/// P(met) for every (response, criterion) pair, then the HealthBench scores with met =
/// P(met) >= 0.5, expected means and intervals that draw met from P(met). On WebGPU when
/// the options allow it and the browser gives an adapter, else on the CPU, in the options'
/// precision; the reply says which, and carries the graded file (the CLI's `--out`).
///
/// Progress and cancelling as [`rank_with_model`]: the grading stage reports work done of
/// work in all, the pairs and tokens, and the time left.
pub async fn grade_with_model(
    kept: &mut KeptModel,
    request: &JobRequest,
    now: &dyn Fn() -> f64,
    progress: Progress<'_>,
) -> Result<String> {
    #[derive(Serialize)]
    struct GradeViews<'a> {
        grade_view: views::GradeView<'a>,
        #[serde(flatten)]
        rubric: RubricViews<'a>,
        #[serde(flatten)]
        run: RunViews<'a>,
        /// When the file carries people's `met_by`: this grader against them.
        #[serde(skip_serializing_if = "Option::is_none")]
        grader_agreement: Option<GraderAgreement<'a>>,
    }
    /// Kept beside the Grade report (not in its tables), so the reply's report and tables
    /// stay those of `medrank grade`.
    #[derive(Serialize)]
    struct GraderAgreement<'a> {
        report: &'a crate::eval::rubric_agreement::RubricAgreementReport,
        tables: Vec<PageTable<'a>>,
        rubric_agreement_view: views::RubricAgreementView<'a>,
    }
    let precision = request.options.precision()?;
    let (req, choice) = request.grade()?;
    let estimate = start_estimate(kept, precision, choice, now());
    let mut last = jobs::EncodeProgress::default();
    let mut on_batch = |p: &jobs::EncodeProgress| {
        last = *p;
        let (done, total) = progress_parts(p);
        progress(&grading_stage(p, &estimate, now()), done, total).is_ok()
    };
    let (graded, backend) = kept.grade(&req, choice, &mut on_batch).await?;
    keep_rate(kept, choice, &estimate, &last, now());
    progress("Scoring the graded responses", 1, 1)?;
    let outcome = &graded.outcome;
    let max_tokens = kept.model.tokenizer.max_tokens;
    let grade_view = views::grade_view(&outcome.report, &graded.graded_jsonl, &req.rubric.name, max_tokens);
    let agreement = grader_agreement(&req.rubric, &grade_view.graded_name, &graded.graded_jsonl)?;
    let views = GradeViews {
        grader_agreement: agreement.as_ref().map(|a| GraderAgreement {
            report: &a.report,
            tables: page_tables(&a.tables),
            rubric_agreement_view: views::rubric_agreement_view(&a.report),
        }),
        grade_view,
        rubric: RubricViews {
            rubric_view: views::rubric_view(&outcome.report.system_scores, req.options.rubric.bootstrap.confidence),
        },
        run: RunViews::of(kept, &backend),
    };
    reply(outcome, views)
}

/// The grader just run against the people who judged the same criteria (`met_by`), when
/// the graded file carries any: `medrank rubric-agreement --input RUBRIC --grader-file
/// GRADED` on the graded file this reply carries (the same job, `jobs::rubric_agreement`).
fn grader_agreement(
    rubric: &NamedText,
    graded_name: &str,
    graded_jsonl: &str,
) -> Result<Option<Outcome<crate::eval::rubric_agreement::RubricAgreementReport>>> {
    let (responses, _) = crate::data::graded::parse_rubric(&rubric.name, &rubric.text)?;
    if !responses.iter().flat_map(|r| &r.criteria).any(|c| !c.met_by.is_empty()) {
        return Ok(None);
    }
    let request = jobs::RubricAgreementRequest {
        file: rubric.clone(),
        grader_file: Some(NamedText::new(graded_name, graded_jsonl)),
    };
    jobs::rubric_agreement(&request).map(Some)
}

/// Statement checks with the kept model as the NLI model (`medrank statements --input --nli
/// --backend`): on WebGPU when the options allow it and the browser gives an adapter, else
/// on the CPU, in the options' precision; progress and cancelling as [`grade_with_model`].
pub async fn statements_with_model(
    kept: &mut KeptModel,
    request: &JobRequest,
    now: &dyn Fn() -> f64,
    progress: Progress<'_>,
) -> Result<String> {
    let precision = request.options.precision()?;
    let (req, choice) = request.statements()?;
    let estimate = start_estimate(kept, precision, choice, now());
    let mut last = jobs::EncodeProgress::default();
    let mut on_batch = |p: &jobs::EncodeProgress| {
        last = *p;
        let (done, total) = progress_parts(p);
        let stage = format!("Checking statements with the model: {}{}", p.describe(), time_left(p, &estimate, now()));
        progress(&stage, done, total).is_ok()
    };
    let (outcome, backend) = kept.check_statements(&req, choice, &mut on_batch).await?;
    keep_rate(kept, choice, &estimate, &last, now());
    progress("Checking statements with the model", 1, 1)?;
    reply(&outcome, RunViews::of(kept, &backend))
}

/// "Grading with the model: 12 of 46 sequences (5.1 k tokens) · about 3 s left": one
/// sequence per (response, criterion) pair.
pub fn grading_stage(p: &jobs::EncodeProgress, estimate: &jobs::TimeEstimate, now: f64) -> String {
    if p.work == 0 {
        return format!(
            "Grading with the model: {} (response, criterion) pairs",
            crate::report::thousands(p.sequences)
        );
    }
    format!("Grading with the model: {}{}", p.describe(), time_left(p, estimate, now))
}

/// " · about 4 min 05 s left" (the stage's tail, measured or from the model's last speed).
fn time_left(p: &jobs::EncodeProgress, estimate: &jobs::TimeEstimate, now: f64) -> String {
    match estimate.seconds_left(p, now) {
        Some(s) if p.work_done == 0 => {
            format!(" · about {} at this model's last speed", crate::report::fmt_duration(s))
        }
        Some(s) => format!(" · about {} left", crate::report::fmt_duration(s)),
        None => " · timing the first batches to estimate the time".into(),
    }
}

/// The benchmark page's workload (`jobs::run_workload`, as `medrank bench --parts
/// workload`): `evaluate` on the bundle made from the CasiMedicos dev file's text.
pub async fn workload(
    kept: &mut KeptModel,
    dev_text: String,
    backend: &str,
    now: &dyn Fn() -> f64,
    cpu_device: &dyn Fn(usize) -> String,
    progress: Progress<'_>,
) -> Result<String> {
    // "cpu-int8": the CPU in int8; any other backend in f32 (the bench grid may have left
    // the kept model in int8), as `medrank bench --parts workload --precision f32,int8`.
    let (name, precision) = match backend.strip_suffix("-int8") {
        Some(name) => (name, crate::model::Precision::Int8),
        None => (backend, crate::model::Precision::F32),
    };
    let choice = jobs::parse_backend(name)?;
    kept.set_precision(precision);
    let dev = NamedText::new("data/casimedicos/dev.jsonl", dev_text);
    let stage = format!("workload on {backend}");
    let mut on_batch = |done: usize, total: usize| progress(&stage, done, total).is_ok();
    let mut result = jobs::run_workload(kept, &dev, choice, now, &mut on_batch).await?;
    if result.backend == "cpu" {
        result.device = cpu_device(result.threads);
    }
    json(&result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pages_progress_is_a_share_of_the_work_that_fits_32_bits() {
        let p = |work_done, work| jobs::EncodeProgress { work_done, work, ..Default::default() };
        assert_eq!(progress_parts(&p(0, 0)), (0, 0));
        // 5.5e9 units, more than u32 holds: a quarter done is 250,000 parts of a million.
        assert_eq!(progress_parts(&p(1_375_000_000, 5_500_000_000)), (250_000, 1_000_000));
        assert_eq!(progress_parts(&p(5_500_000_000, 5_500_000_000)), (1_000_000, 1_000_000));
    }

    #[test]
    fn messages_read_as_sentences_unless_they_start_with_a_name() {
        assert_eq!(sentence_case("the import needs the file"), "The import needs the file");
        assert_eq!(sentence_case("gpt-4o.jsonl: line 3"), "gpt-4o.jsonl: line 3");
        assert_eq!(sentence_case("`x` is unknown"), "`x` is unknown");
        assert_eq!(sentence_case("Already a sentence"), "Already a sentence");
        assert_eq!(sentence_case("cancelled"), "cancelled", "a bare word is a code, not a sentence");
    }

    fn ros_file(name: &str, system: &str, control: bool) -> request::InputFile {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/ros_published/{name}.jsonl",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        let mut params = std::collections::BTreeMap::from([("system".to_string(), system.to_string())]);
        if control {
            params.insert("control".into(), "true".into());
        }
        request::InputFile { name: format!("en.test_casimedicos_{name}.jsonl"), text, kind: "ros".into(), params }
    }

    #[test]
    fn the_check_before_a_model_run_sees_the_control_files_and_counts_the_sequences() {
        // The published files as the page names them by default: the controls in their own
        // spelling and ticked, the no-argument file in any case.
        let files = vec![
            ros_file("no_argument", "No_Argument", false),
            ros_file("gpt-4o", "gpt-4o", false),
            ros_file("llama-3-70b", "llama-3-70b", false),
            ros_file("label_only", "Label_Only", true),
            ros_file("noise", "Noise", true),
        ];
        let request = JobRequest { files, options: Default::default() };
        let check = check_rank(&request, true).unwrap();
        let import = check.import.unwrap();
        assert_eq!(import.instances, 6);
        let run = check.model_run.unwrap();
        // Only no_argument is generated: the files are label_only and noise, and there is no
        // corpus for ir_passages; both left out are said.
        assert_eq!(run.generated, [crate::data::controls::Control::NoArgument]);
        let said: Vec<String> = run.warnings.iter().map(|w| w.to_string()).collect();
        assert!(
            said.iter().any(|w| w.contains("label_only control was not generated") && w.contains("`Label_Only`")),
            "{said:?}"
        );
        assert!(said.iter().any(|w| w.contains("noise control was not generated")), "{said:?}");
        assert!(said.iter().any(|w| w.contains("ir_passages control was not added")), "{said:?}");
        // By hand: 6 questions, 4 systems + no_argument = 5 arguments each; option 5 is empty
        // on 3 questions (make.py), so 4 or 5 candidates. Similarity: 5 contexts + the
        // candidates per question = 6*5 + (3*4 + 3*5) = 57; a head: 5 * 27 = 135.
        assert_eq!((run.sequences_similarity, run.sequences_head), (Some(57), 135));
        assert!(run.controls.contains(&"Label_Only".to_string()) && run.controls.contains(&"no_argument".to_string()));
    }

    #[test]
    fn without_the_no_argument_file_the_check_names_the_files_it_has() {
        let request = JobRequest {
            files: vec![ros_file("gpt-4o", "gpt-4o", false), ros_file("noise", "noise", true)],
            options: Default::default(),
        };
        let e = sentence_case(&check_rank(&request, true).err().unwrap().to_string());
        assert!(e.starts_with("The Ranking-Over-Scoring import needs the no-argument file"), "{e}");
        assert!(
            e.contains(
                "none of en.test_casimedicos_gpt-4o.jsonl, en.test_casimedicos_noise.jsonl has the system no_argument"
            ),
            "{e}"
        );
    }

    // ------------------------------------------------------------------ grade ----------------

    /// A kept 2-layer random BERT (64 positions: the example's pairs get cut) with the
    /// MiniLM tokenizer and a head of `labels` (none when empty).
    fn tiny_grader(labels: &[&str]) -> KeptModel {
        use crate::model::config::{Arch, EncoderConfig, HeadKind};
        let head = if labels.is_empty() { HeadKind::None } else { HeadKind::SequenceClassification };
        let config = EncoderConfig { vocab_size: 30522, ..EncoderConfig::tiny(Arch::Bert, 2, head, labels) };
        let model = crate::model::load::random_model(config, 11).unwrap();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let files = crate::model::ModelFiles {
            name: "tiny-grader".into(),
            config_json: model.config.to_json().into_bytes(),
            tokenizer_json: std::fs::read(root.join("models/all-MiniLM-L6-v2/tokenizer.json")).unwrap(),
            weights: crate::model::load::to_safetensors(&model).unwrap(),
            pooling_json: None,
            modules_json: None,
            sentence_config_json: None,
            weights_source: None,
            tokenizer_source: None,
        };
        KeptModel::from_files(&files).unwrap()
    }

    /// The example rubric to grade, as the page sends it, with `options`.
    fn grade_request(options: serde_json::Value) -> JobRequest {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(root.join("examples/rubric/conversations.jsonl")).unwrap();
        let graded = std::fs::read_to_string(root.join("examples/rubric/graded.jsonl")).unwrap();
        let file = |name: &str, text: String, kind: &str| request::InputFile {
            name: name.into(),
            text,
            kind: kind.into(),
            params: Default::default(),
        };
        JobRequest {
            // The graded example beside it is the Rubric job's: Grade reads only its own kind.
            files: vec![file("graded.jsonl", graded, "rubric"), file("conversations.jsonl", text, "rubric_responses")],
            options: serde_json::from_value(options).unwrap(),
        }
    }

    /// The page's Grade on `kept`: the reply as JSON and the stages it reported.
    fn page_grade(kept: &mut KeptModel, request: &JobRequest) -> Result<(serde_json::Value, Vec<String>)> {
        let mut stages = Vec::new();
        let mut progress = |stage: &str, _: usize, _: usize| {
            stages.push(stage.to_string());
            Ok(())
        };
        let reply = pollster::block_on(grade_with_model(kept, request, &|| 0.0, &mut progress))?;
        Ok((serde_json::from_str(&reply).unwrap(), stages))
    }

    #[test]
    fn the_pages_grade_is_the_jobs_grade_with_its_views_and_the_graded_file() {
        let mut kept = tiny_grader(&["contradiction", "neutral", "entailment"]);
        let request = grade_request(serde_json::json!({"seed": 3, "resamples": 40, "backend": "cpu"}));
        let (reply, stages) = page_grade(&mut kept, &request).unwrap();

        // The job as the CLI runs it (`grade_with_backend`, the same request and backend).
        let (req, choice) = request.grade().unwrap();
        let mut all_right = |_: &jobs::EncodeProgress| true;
        let (cli, _) = pollster::block_on(jobs::grade_with_backend(
            &req,
            &kept.model,
            choice,
            kept.fingerprints.clone(),
            &mut all_right,
        ))
        .unwrap();
        // Both through JSON text (serde_json reads some floats back one bit apart).
        let cli_report: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&cli.outcome.report).unwrap()).unwrap();
        assert_eq!(reply["report"], cli_report, "the same report");
        let csv: Vec<&str> = reply["tables"].as_array().unwrap().iter().map(|t| t["csv"].as_str().unwrap()).collect();
        assert_eq!(csv, cli.outcome.tables.iter().map(|t| t.to_csv()).collect::<Vec<_>>(), "the same CSV");
        let view = &reply["grade_view"];
        assert_eq!(view["graded_jsonl"], cli.graded_jsonl.as_str(), "the graded file is the CLI's --out");
        assert_eq!(view["graded_name"], "conversations.graded.jsonl");
        assert_eq!(view["grader"]["kind"], "zero_shot_nli");
        assert!(view["grader"]["description"].as_str().unwrap().starts_with("an NLI model, zero-shot"));

        // Every criterion once, under its response, in file order; each response's score.
        let responses = view["responses"].as_array().unwrap();
        assert_eq!(responses.len(), 12);
        let flat: Vec<&serde_json::Value> =
            responses.iter().flat_map(|r| r["criteria"].as_array().unwrap().iter()).collect();
        assert_eq!(flat, cli_report["criteria"].as_array().unwrap().iter().collect::<Vec<_>>());
        for (v, r) in responses.iter().zip(cli_report["responses"].as_array().unwrap()) {
            assert_eq!((&v["id"], &v["line"]), (&r["id"], &r["line"]));
            assert_eq!(v["score"], r["overall"]["score"]);
        }
        let report = &cli.outcome.report;
        // 64 positions: the conversations are cut, and the view says so in a sentence.
        assert!(!report.truncated.is_empty());
        let note = view["truncation"].as_str().unwrap();
        assert!(
            note.starts_with(&format!(
                "{} of {} (response, criterion) pairs",
                report.truncated.len(),
                report.criteria.len()
            )),
            "{note}"
        );
        assert!(note.contains("64-token limit"), "{note}");

        // The Scores tab: overall first, every system's mean, expected mean and interval.
        let scores = reply["rubric_view"]["scores"].as_array().unwrap();
        assert_eq!(reply["rubric_view"]["graded_by_model"], true);
        assert_eq!(scores[0]["score"], "overall");
        for s in cli_report["system_scores"].as_array().unwrap() {
            for m in s["scores"].as_array().unwrap() {
                let score = scores.iter().find(|v| v["score"] == m["score"]).unwrap();
                let row = score["systems"].as_array().unwrap().iter().find(|r| r["system"] == s["system"]).unwrap();
                assert_eq!(
                    (&row["mean"], &row["expected_mean"], &row["n"]),
                    (&m["mean"], &m["expected_mean"], &m["n"])
                );
                assert_eq!((&row["lo"], &row["hi"]), (&m["interval"]["lo"], &m["interval"]["hi"]));
            }
        }
        assert_eq!(reply["backend"]["backend"], "cpu");
        assert_eq!(reply["precision"], "f32");

        // The conversations carry a physician's `met_by`: the reply sets the grader against
        // them, as `medrank rubric-agreement --input conversations.jsonl --grader-file
        // conversations.graded.jsonl` does on the graded file it carries.
        let agreement = jobs::rubric_agreement(&jobs::RubricAgreementRequest {
            file: req.rubric.clone(),
            grader_file: Some(NamedText::new("conversations.graded.jsonl", cli.graded_jsonl.clone())),
        })
        .unwrap();
        let got = &reply["grader_agreement"];
        assert_eq!(got["report"], json_of(&agreement.report));
        let csv: Vec<&str> = got["tables"].as_array().unwrap().iter().map(|t| t["csv"].as_str().unwrap()).collect();
        assert_eq!(csv, agreement.tables.iter().map(|t| t.to_csv()).collect::<Vec<_>>());
        assert_eq!(got["rubric_agreement_view"]["has_grader"], true);
        assert_eq!(got["rubric_agreement_view"]["groups"][0]["group"], "all");

        // Progress: the pairs first, then the work, then the scores.
        assert_eq!(stages.first().unwrap(), "Grading with the model: 46 (response, criterion) pairs");
        assert!(stages.iter().any(|s| s.starts_with("Grading with the model: 46 of 46 sequences")), "{stages:?}");
        assert_eq!(stages.last().unwrap(), "Scoring the graded responses");
    }

    #[test]
    fn grade_sets_the_grader_against_people_only_where_they_judged() {
        // The example without its physicians' `met_by`: nobody to compare with, nothing added.
        let mut request = grade_request(serde_json::json!({"backend": "cpu", "resamples": 10}));
        let to_grade = request.files.iter_mut().find(|f| f.kind == "rubric_responses").unwrap();
        to_grade.text = to_grade
            .text
            .lines()
            .map(|line| {
                let mut v: serde_json::Value = serde_json::from_str(line).unwrap();
                for c in v["criteria"].as_array_mut().unwrap() {
                    c.as_object_mut().unwrap().remove("met_by");
                }
                v.to_string()
            })
            .collect::<Vec<_>>()
            .join("\n");
        let (reply, _) = page_grade(&mut tiny_grader(&["met", "not_met"]), &request).unwrap();
        assert!(reply.get("grader_agreement").is_none());
        assert!(reply["grade_view"]["responses"].as_array().is_some_and(|r| r.len() == 12));
    }

    #[test]
    fn grading_stops_when_the_user_cancels() {
        let mut kept = tiny_grader(&["met", "not_met"]);
        let request = grade_request(serde_json::json!({"backend": "cpu", "resamples": 10}));
        let mut calls = 0;
        let mut progress = |_: &str, _: usize, _: usize| {
            calls += 1;
            if calls > 2 {
                Err(crate::Error::Cancelled)
            } else {
                Ok(())
            }
        };
        let e = pollster::block_on(grade_with_model(&mut kept, &request, &|| 0.0, &mut progress)).unwrap_err();
        assert!(matches!(e, crate::Error::Cancelled), "{e}");
    }

    #[test]
    fn a_model_that_cannot_grade_is_refused_in_a_sentence_that_says_what_can() {
        let request = grade_request(serde_json::json!({"backend": "cpu"}));
        let no_head = page_grade(&mut tiny_grader(&[]), &request).unwrap_err().to_string();
        assert!(no_head.starts_with("tiny-grader has no sequence-classification head: a grader is"), "{no_head}");
        let other = page_grade(&mut tiny_grader(&["LABEL_0", "LABEL_1"]), &request).unwrap_err().to_string();
        assert!(other.contains("name neither `met` and `not_met`"), "{other}");
        // No file to grade: the request says what to add.
        let mut request = request;
        request.files.retain(|f| f.kind != "rubric_responses");
        let missing = page_grade(&mut tiny_grader(&["met", "not_met"]), &request).unwrap_err().to_string();
        assert_eq!(missing, "add a rubric file with the responses\u{2019} text to grade");
    }

    /// Agreement on the example's people (judged.jsonl) and, when `with_grader`, its grader
    /// (grader.jsonl), as the page sends them: the reply as JSON.
    fn page_agreement(with_grader: bool) -> serde_json::Value {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rubric");
        let file = |name: &str, kind: &str| request::InputFile {
            name: name.into(),
            text: std::fs::read_to_string(root.join(name)).unwrap(),
            kind: kind.into(),
            params: Default::default(),
        };
        let mut files = vec![file("graded.jsonl", "rubric"), file("judged.jsonl", "rubric_judged")];
        if with_grader {
            files.push(file("grader.jsonl", "rubric_grader"));
        }
        let request = JobRequest { files, options: Default::default() };
        let mut progress = |_: &str, _: usize, _: usize| Ok(());
        serde_json::from_str(&rubric_agreement(&request, &mut progress).unwrap()).unwrap()
    }

    /// A value as the page reads it: through JSON text (serde_json's own parser may round a
    /// last digit, the same way for both sides).
    fn json_of<T: Serialize>(value: &T) -> serde_json::Value {
        serde_json::from_str(&serde_json::to_string(value).unwrap()).unwrap()
    }

    #[test]
    fn the_agreement_reply_is_the_jobs_report_tables_and_view() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rubric");
        let named = |name: &str| NamedText::new(name, std::fs::read_to_string(root.join(name)).unwrap());
        let outcome = jobs::rubric_agreement(&jobs::RubricAgreementRequest {
            file: named("judged.jsonl"),
            grader_file: Some(named("grader.jsonl")),
        })
        .unwrap();
        let reply = page_agreement(true);
        // The report and the CSVs are the job's: what `--json` and `--csv` write.
        assert_eq!(reply["report"], json_of(&outcome.report));
        let csvs: Vec<&str> = reply["tables"].as_array().unwrap().iter().map(|t| t["csv"].as_str().unwrap()).collect();
        assert_eq!(csvs, outcome.tables.iter().map(|t| t.to_csv()).collect::<Vec<_>>());
        // The view: every group in the report's order, the grader's and each person's figures.
        let view = &reply["rubric_agreement_view"];
        assert_eq!(view["has_grader"], true);
        let groups = view["groups"].as_array().unwrap();
        assert_eq!(groups.len(), outcome.report.groups.len());
        assert_eq!(groups[0]["group"], "all");
        for (v, g) in groups.iter().zip(&outcome.report.groups) {
            let grader = g.grader.as_ref().unwrap();
            assert_eq!(v["grader"]["macro_f1"], json_of(&grader.macro_f1), "{}", g.group);
            assert_eq!(v["grader"]["kappa"], json_of(&grader.kappa), "{}", g.group);
            assert_eq!(v["people"].as_array().unwrap().len(), g.humans.len());
            for (p, h) in v["people"].as_array().unwrap().iter().zip(&g.humans) {
                assert_eq!(p["rater"], h.grader.as_str());
                assert_eq!(p["macro_f1"], json_of(&h.agreement.macro_f1));
            }
            let against = match (grader.macro_f1.value(), g.human_mean_macro_f1.value()) {
                (Some(a), Some(m)) => serde_json::json!(if a >= m { "at_or_above" } else { "below" }),
                _ => serde_json::Value::Null,
            };
            assert_eq!(v["grader_against_people"], against, "{}", g.group);
        }
        // An undefined figure stays undefined, with its reason (never 0).
        let undefined = groups
            .iter()
            .flat_map(|g| g["people"].as_array().unwrap().iter().chain(g.get("grader")))
            .any(|r| r["macro_f1"].get("undefined").is_some());
        assert!(undefined, "the example has a group where a figure is undefined");
        // The people alone: no grader columns, the same people's figures.
        let humans = page_agreement(false);
        assert_eq!(humans["rubric_agreement_view"]["has_grader"], false);
        assert!(humans["rubric_agreement_view"]["groups"][0]["grader"].is_null());
        assert_eq!(humans["rubric_agreement_view"]["groups"][0]["people"], groups[0]["people"]);
    }

    #[test]
    fn the_rubric_reply_has_the_scores_view_of_its_report() {
        let request = grade_request(serde_json::json!({"resamples": 20, "confidence": 0.9}));
        let mut progress = |_: &str, _: usize, _: usize| Ok(());
        let reply: serde_json::Value = serde_json::from_str(&rubric(&request, &mut progress).unwrap()).unwrap();
        let view = &reply["rubric_view"];
        assert_eq!((view["confidence"].as_f64(), &view["graded_by_model"]), (Some(0.9), &serde_json::json!(false)));
        let overall = &view["scores"][0];
        assert_eq!(overall["score"], "overall");
        let systems = &reply["report"]["system_scores"];
        assert_eq!(overall["systems"][1]["system"], systems[1]["system"]);
        assert_eq!(overall["systems"][1]["mean"], systems[1]["scores"][0]["mean"]);
        assert_eq!(overall["systems"][1]["lo"], systems[1]["scores"][0]["interval"]["lo"]);
        assert!(overall["systems"][1]["expected_mean"].is_null(), "people graded: no expected mean");
    }
}
