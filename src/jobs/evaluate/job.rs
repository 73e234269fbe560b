//! Ranking over scoring as the front ends run it: its options (`medrank evaluate`'s flags,
//! the page's Options under the same names), the page's files read into its request, its
//! runs (from predictions files, or with the kept model as the evaluator) and the check the
//! page runs before any model loads.

use serde::{Deserialize, Serialize};

use super::views::{proxy_views, ProxyViews};
use super::{drilldown, evaluate_predictions, plan_model_evaluation, EvaluateReport, EvaluateRequest};
use super::{EvaluatorPredictions, ModelOptions, ModelRunPlan, RankWithModel};
use crate::data::{self, controls::Control};
use crate::jobs::controls::ControlChoice;
use crate::jobs::import::{bundle_or_import, ImportOutcome, ImportReport, RosFile};
use crate::jobs::kept::{Progress, RunOptions};
use crate::jobs::spec::{between, page_tables, reply, JobRequest, JobSpec, LocalFuture, ModelRun, ReportPart};
use crate::jobs::spec::{RunViews, View};
use crate::jobs::{NamedText, Outcome};
use crate::stats::bootstrap::Bootstrap;
use crate::{Location, Result, Warning};

/// `medrank evaluate`'s options, named as its flags (the page's Options send the same
/// names). `Default` is the one home of each default, for both front ends.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct RankOptions {
    /// Seed, resamples and confidence of the paired bootstrap.
    #[serde(flatten)]
    pub bootstrap: Bootstrap,
    /// Systems ranked as control cases (`--control-systems`), besides the control files the
    /// bundle marks.
    pub control_systems: Vec<String>,
    /// Keep misinformation instances labelled not_enough_evidence (the paper drops them).
    pub keep_not_enough_evidence: bool,
    /// With a model: the control cases to add and score (`--controls`): `all` (those the
    /// inputs allow), names, or none.
    pub controls: ControlChoice,
    /// With a model: keep empty MCQA options as candidates (`--keep-empty-options`).
    pub keep_empty_options: bool,
    /// With a model: sequences per forward pass (`--batch-size`).
    pub batch_size: usize,
    /// With a model: where its encoder runs and in which arithmetic.
    #[serde(flatten)]
    pub run: RunOptions,
}

impl Default for RankOptions {
    fn default() -> Self {
        let model = ModelOptions::default();
        RankOptions {
            bootstrap: Bootstrap::default(),
            control_systems: Control::all_names(),
            keep_not_enough_evidence: false,
            controls: model.controls,
            keep_empty_options: model.keep_empty_options,
            batch_size: model.batch_size,
            run: RunOptions::default(),
        }
    }
}

impl RankOptions {
    /// The method's options.
    pub fn ranking(&self) -> crate::eval::proxy::ProxyOptions {
        crate::eval::proxy::ProxyOptions {
            bootstrap: self.bootstrap,
            controls: self.control_systems.clone(),
            drop_not_enough_evidence: !self.keep_not_enough_evidence,
        }
    }

    /// What a model evaluation adds.
    pub fn model(&self) -> ModelOptions {
        ModelOptions {
            controls: self.controls.clone(),
            batch_size: self.batch_size,
            keep_empty_options: self.keep_empty_options,
        }
    }
}

/// The job: ranking over scoring from the predictions files, or with the chosen model.
pub const JOB: JobSpec = JobSpec::new("rank_systems", "Rank systems", "ranking over scoring", "evaluate")
    .reads(&["bundle", "predictions", "rankings", "corpus", "ros"], &[&["bundle", "ros"], &["predictions"]])
    .views(&[
        View::tab("ranking", "Ranking"),
        View::tab("heatmap", "Heatmap"),
        View::tab("robustness", "Robustness"),
        View::tab("agreement", "Human agreement"),
        View::tab("instances", "Per instance"),
    ])
    .defaults(page_defaults)
    .runs(run)
    .runs_on_model(run_on_model, &["predictions"], "")
    .checks(check);

/// The page starts its model runs where the browser runs fastest (`auto`: its GPU when it
/// has one); the CLI's reference run is the CPU.
fn page_defaults() -> Result<serde_json::Value> {
    crate::jobs::spec::options_value(&RankOptions { run: RunOptions::page(), ..Default::default() })
}

/// The bundle the request gives, or the Ranking-Over-Scoring files to import it from
/// (with the import's outcome).
fn bundle(request: &JobRequest) -> Result<(NamedText, Option<ImportOutcome>)> {
    let ros = request
        .files_of("ros")
        .map(|f| {
            Ok(RosFile {
                system: f.param("system")?.to_string(),
                // The file's "control case" switch: `medrank import --control-source`.
                control: f.params.get("control").is_some_and(|v| v == "true"),
                file: f.named(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    bundle_or_import(request.optional("bundle", "argument bundle")?, ros)
}

/// The request of `medrank evaluate --predictions`: each predictions file one evaluator,
/// named by its `evaluator` parameter or its file name.
fn evaluate_request(request: &JobRequest, bundle: NamedText, options: &RankOptions) -> Result<EvaluateRequest> {
    Ok(EvaluateRequest {
        bundle,
        predictions: request
            .files_of("predictions")
            .map(|f| EvaluatorPredictions { evaluator: Some(f.param_or_stem("evaluator")), file: f.named() })
            .collect(),
        rankings: request.optional("rankings", "human rankings file")?,
        corpus: request.optional("corpus", "corpus")?,
        options: options.ranking(),
    })
}

/// Everything the ranking-over-scoring tabs draw.
#[derive(Serialize)]
struct RankViews<'a> {
    /// Systems treated as control cases (the options' and the control files the bundle marks).
    controls: &'a [String],
    /// The import of the Ranking-Over-Scoring files, when the bundle was made from them.
    #[serde(skip_serializing_if = "Option::is_none")]
    import: Option<ReportPart<'a, ImportReport, ()>>,
    instances: Vec<drilldown::InstanceView<'a>>,
    #[serde(flatten)]
    proxy: ProxyViews<'a>,
}

/// The reply of a ranking: the report, its tables and every tab's view (the bundle read
/// again for the drill-down, with the evaluators' `predictions`).
fn rank_reply<V: Serialize>(
    outcome: &Outcome<EvaluateReport>,
    imported: &Option<ImportOutcome>,
    bundle_text: &NamedText,
    req: &EvaluateRequest,
    predictions: &[(&str, &data::Prediction)],
    more: V,
) -> Result<String> {
    #[derive(Serialize)]
    struct Views<'a, V: Serialize> {
        #[serde(flatten)]
        rank: RankViews<'a>,
        #[serde(flatten)]
        more: V,
    }
    // The drill-down reads the bundle again with the same reader (cheap, and keeps the
    // job's report free of page-only data).
    let (bundle, _) = data::parse_bundle(&bundle_text.name, &bundle_text.text)?;
    let controls = drilldown::with_file_controls(&req.options.controls, &bundle);
    let rank = RankViews {
        controls: &controls,
        import: imported.as_ref().map(|o| ReportPart { report: &o.report, tables: page_tables(&o.tables), views: () }),
        instances: drilldown::instance_views(&bundle, predictions),
        proxy: proxy_views(&outcome.report, &controls),
    };
    reply(outcome, Views { rank, more })
}

/// Ranking over scoring from the predictions files (`medrank evaluate --predictions`).
fn run(request: &JobRequest, progress: Progress) -> Result<String> {
    let options: RankOptions = request.options()?;
    let (bundle_text, imported) = bundle(request)?;
    let req = evaluate_request(request, bundle_text.clone(), &options)?;
    between(progress, "Ranking systems", || {
        let outcome = evaluate_predictions(&req)?;
        let mut parsed = Vec::new();
        for p in &req.predictions {
            let (file, _) = data::parse_predictions(&p.file.name, &p.file.text)?;
            parsed.push((p.evaluator.as_deref().unwrap_or_default(), file));
        }
        let flat: Vec<(&str, &data::Prediction)> =
            parsed.iter().flat_map(|(e, file)| file.predictions.iter().map(move |p| (*e, p))).collect();
        rank_reply(&outcome, &imported, &bundle_text, &req, &flat, ())
    })
}

/// Ranking over scoring with the kept model as the evaluator (`medrank evaluate --model
/// --controls --backend`): on WebGPU when the options allow it and the browser gives an
/// adapter, else on the CPU; the reply says which (`backend`) and on how many threads.
fn run_on_model(model: ModelRun<'_>) -> LocalFuture<'_, Result<String>> {
    Box::pin(async move {
        let options: RankOptions = model.request.options()?;
        let (bundle_text, imported) = bundle(model.request)?;
        let mut req = evaluate_request(model.request, bundle_text.clone(), &options)?;
        req.predictions.clear();
        let model_options = options.model();
        let job = RankWithModel { request: &req, options: &model_options };
        let ((outcome, predictions), backend, kept) = model.run(&job, &options.run, "Ranking systems").await?;
        let evaluator = outcome.report.evaluators.first().map(|e| e.evaluator.as_str()).unwrap_or("model");
        let flat: Vec<(&str, &data::Prediction)> = predictions.iter().map(|p| (evaluator, p)).collect();
        rank_reply(&outcome, &imported, &bundle_text, &req, &flat, RunViews::of(kept, &backend))
    })
}

/// What the page knows of a ranking before any model loads: the checks a run makes first
/// (the import of the Ranking-Over-Scoring files, the bundle, the control cases) and what
/// it will encode. Run whenever files or options change; an error is the one the run
/// would give, so the page can show it before the wait.
#[derive(Serialize)]
pub struct RankCheck {
    /// The import's report, when the bundle comes from Ranking-Over-Scoring files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub import: Option<ImportReport>,
    /// With a model as the evaluator: what the run will do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_run: Option<ModelRunPlan>,
    /// What the page says under the Run buttons about the run's warnings: each about the
    /// user's own file, in words, the engine's message as detail where the words differ.
    pub notes: Vec<CheckNote>,
}

/// One note of the check: where (a file the user gave, never the bundle the page imported
/// from them), what in words, and the engine's own message behind a disclosure.
#[derive(Debug, Serialize)]
pub struct CheckNote {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<Location>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// [`RankCheck`] for a request; `with_model` when a model is the evaluator (else the
/// predictions files are).
pub fn rank_check(request: &JobRequest, with_model: bool) -> Result<RankCheck> {
    let options: RankOptions = request.options()?;
    let (bundle, imported) = bundle(request)?;
    let req = evaluate_request(request, bundle, &options)?;
    let model_run = if with_model { Some(plan_model_evaluation(&req, &options.model())?) } else { None };
    let import = imported.map(|o| o.report);
    let notes = match &model_run {
        Some(run) => check_notes(run, &req.bundle.name, import.as_ref(), options.keep_empty_options),
        None => Vec::new(),
    };
    Ok(RankCheck { import, model_run, notes })
}

/// The notes of a ranking's check. A bundle imported from Ranking-Over-Scoring files is a
/// file the user never saw: a warning about it names the file the import read (the import
/// says the same message of that file), and its questions are that no-argument file's
/// lines. Empty answer options are said in words: which questions, and what the model
/// does with them.
fn check_notes(run: &ModelRunPlan, bundle: &str, import: Option<&ImportReport>, keep_empty: bool) -> Vec<CheckNote> {
    let in_import = |w: &Warning| import.is_some() && w.location.as_ref().is_some_and(|l| l.file == bundle);
    let mut notes = Vec::new();
    let mut empty_said = Vec::new();
    for w in &run.warnings {
        if w.message.starts_with(data::bundle::EMPTY_OPTION_TEXTS) {
            empty_said.push(match (in_import(w), import) {
                (true, Some(i)) => format!(
                    "{} (the questions imported from {}, each instance id its line there)",
                    w.message, i.no_argument_file
                ),
                _ => w.to_string(),
            });
            continue;
        }
        let location = match (in_import(w), import) {
            (true, Some(i)) => {
                let said = i.warnings.iter().find(|iw| iw.message == w.message).and_then(|iw| iw.location.clone());
                Some(said.unwrap_or_else(|| Location::file(i.no_argument_file.clone())))
            }
            _ => w.location.clone(),
        };
        notes.push(CheckNote { location, message: w.message.clone(), detail: None });
    }
    if run.empty_options.is_empty() {
        return notes;
    }
    // Each instance of an imported bundle is the no-argument file's line of the same number.
    let (file, place) = match import {
        Some(i) => (i.no_argument_file.clone(), "line"),
        None => (bundle.to_string(), "question"),
    };
    let listed: Vec<String> = run
        .empty_options
        .iter()
        .take(MAX_NOTED_OPTIONS)
        .map(|o| format!("{place} {}, option {}", o.instance, o.option))
        .collect();
    let more = run.empty_options.len() - listed.len();
    let questions = run.empty_options.iter().map(|o| &o.instance).collect::<std::collections::HashSet<_>>().len();
    let what = if keep_empty {
        "the model keeps an empty option as a choice, as Options \u{2192} \u{201c}keep empty options\u{201d} asks"
    } else {
        "the model leaves an empty option out of the answers it chooses from, so it is never picked \
         (Options \u{2192} \u{201c}keep empty options\u{201d} keeps it as a choice)"
    };
    notes.push(CheckNote {
        location: Some(Location::file(file)),
        message: format!(
            "{questions} question{} {} an empty answer option ({}{}): {what}",
            if questions == 1 { "" } else { "s" },
            if questions == 1 { "has" } else { "have" },
            listed.join("; "),
            if more > 0 { format!("; and {more} more") } else { String::new() },
        ),
        detail: (!empty_said.is_empty()).then(|| empty_said.join("; ")),
    });
    notes
}

/// Empty options a note lists by place before it says how many more.
const MAX_NOTED_OPTIONS: usize = 10;

fn check(request: &JobRequest, with_model: bool) -> Result<String> {
    crate::jobs::spec::json(&rank_check(request, with_model)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::BackendChoice;
    use crate::jobs::spec::testing::{file, request};
    use serde_json::json;

    #[test]
    fn options_left_out_take_the_defaults_of_medrank_evaluate() {
        let o: RankOptions = request(vec![], json!({})).options().unwrap();
        assert_eq!(o, RankOptions::default());
        assert_eq!(o.ranking(), crate::eval::proxy::ProxyOptions::default());
        assert_eq!(o.model().controls, ControlChoice::Named(vec![]), "a model adds no control case unless asked");
        assert_eq!(o.run.read().unwrap(), (None, BackendChoice::Cpu));
        // The page starts on auto; everything else is the same.
        let page: RankOptions = serde_json::from_value(page_defaults().unwrap()).unwrap();
        assert_eq!(page, RankOptions { run: RunOptions::page(), ..RankOptions::default() });
        // The three bootstrap fields arrive flat, as the CLI's flags.
        let o: RankOptions = request(vec![], json!({"seed": 7, "resamples": 50, "confidence": 0.9})).options().unwrap();
        assert_eq!((o.bootstrap.seed, o.bootstrap.resamples, o.bootstrap.confidence), (7, 50, 0.9));
        assert_eq!(o.ranking().bootstrap, o.bootstrap);
    }

    #[test]
    fn the_two_controls_fields_read_as_the_clis_two_flags() {
        // `controls`: what a model ranking adds and scores (`--controls`); `control_systems`:
        // the systems ranked as controls (`--control-systems`).
        let read = |options| {
            let o: RankOptions = request(vec![file("b.jsonl", "bundle", &[])], options).options().unwrap();
            (o.model().controls, o.ranking().controls)
        };
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(read(json!({"controls": "All"})), (ControlChoice::All, Control::all_names()));
        assert_eq!(
            read(json!({"controls": " noise , label_only", "control_systems": ["noise"]})),
            (ControlChoice::Named(names(&["noise", "label_only"])), names(&["noise"]))
        );
        assert_eq!(read(json!({"controls": ""})).0, ControlChoice::Named(vec![]));
    }

    #[test]
    fn the_precision_field_reads_as_the_clis_precision_flag() {
        let read = |precision: &str| RunOptions { precision: precision.into(), ..RunOptions::default() }.read();
        assert_eq!(read("int8").unwrap().0, Some(crate::model::Precision::Int8));
        assert_eq!(read("f32").unwrap().0, Some(crate::model::Precision::F32));
        assert_eq!(read("").unwrap().0, None, "the model folder's own");
        assert_eq!(read("f16").unwrap_err().to_string(), "precision `f16`: expected f32 or int8");
    }

    #[test]
    fn predictions_name_their_evaluator_by_parameter_or_file_name() {
        let r = request(
            vec![
                file("b.jsonl", "bundle", &[]),
                file("dir/gpt.csv", "predictions", &[]),
                file("x.csv", "predictions", &[("evaluator", "judge")]),
                file("h.csv", "rankings", &[]),
            ],
            json!({}),
        );
        let (bundle_file, imported) = bundle(&r).unwrap();
        assert!(imported.is_none());
        let req = evaluate_request(&r, bundle_file, &RankOptions::default()).unwrap();
        let evaluators: Vec<_> = req.predictions.iter().map(|p| p.evaluator.clone().unwrap()).collect();
        assert_eq!(evaluators, ["gpt", "judge"]);
        assert_eq!(req.rankings.unwrap().name, "h.csv");
        assert!(req.corpus.is_none());
    }

    #[test]
    fn two_files_where_one_is_read_are_refused_naming_both() {
        let r = request(vec![file("a.jsonl", "bundle", &[]), file("b.jsonl", "bundle", &[])], json!({}));
        let e = bundle(&r).unwrap_err().to_string();
        assert!(e.contains("give one argument bundle, not several (a.jsonl and b.jsonl)"), "{e}");
    }
}
