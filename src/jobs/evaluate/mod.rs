//! Ranking over scoring: from evaluators' predictions files, or with a model as the
//! evaluator ([`RankWithModel`], run on any backend by `kept`) with progress and cancellation.

pub mod drilldown;
pub mod job;
pub mod views;

pub use job::{rank_check, RankCheck, RankOptions, JOB};

use super::kept::{Encoding, ModelJob, ProgressEncoder};
use super::quality::PeopleAgreement;
use super::{file_stem, read_bundle, read_rankings, tables, ControlChoice, NamedText, Outcome};
use crate::data::{self, Bundle};
use crate::eval::controls::{self, Control, ControlsReport};
/// Options of ranking over scoring: the method's own, as both front ends send them.
pub use crate::eval::proxy::ProxyOptions;
use crate::eval::proxy::{self, ProxyReport};
use crate::report::{fmt_num, Fingerprint, Provenance, Table};
use crate::{Error, Result, Warning};
use serde::{Deserialize, Serialize};

/// One evaluator's predictions file. The evaluator's name defaults to the file's stem.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct EvaluatorPredictions {
    #[serde(default)]
    pub evaluator: Option<String>,
    pub file: NamedText,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct EvaluateRequest {
    pub bundle: NamedText,
    /// One file per evaluator (the heatmap compares evaluators).
    pub predictions: Vec<EvaluatorPredictions>,
    #[serde(default)]
    pub rankings: Option<NamedText>,
    /// Documents for the IR-passages control, when the predictions score it and the bundle
    /// does not have it yet.
    #[serde(default)]
    pub corpus: Option<NamedText>,
    #[serde(default)]
    pub options: ProxyOptions,
}

impl EvaluateRequest {
    /// `bundle` alone (no predictions, rankings or corpus) with the ranking's `options`: what
    /// a model evaluates.
    pub fn of_bundle(bundle: NamedText, options: ProxyOptions) -> Self {
        EvaluateRequest { bundle, predictions: Vec::new(), rankings: None, corpus: None, options }
    }
}

/// One evaluator's ranking over scoring.
#[derive(Debug, Clone, Serialize)]
pub struct EvaluatorReport {
    pub evaluator: String,
    pub report: ProxyReport,
}

#[derive(Debug, Clone, Serialize)]
pub struct EvaluateReport {
    pub provenance: Provenance,
    /// Control cases added to the bundle because the predictions score them (seeded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub controls_added: Option<ControlsReport>,
    pub evaluators: Vec<EvaluatorReport>,
    /// Inputs cut to the model's token limit (model evaluations only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub truncated: Vec<crate::model::TruncatedInput>,
    /// How empty MCQA options were treated (model evaluations only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub empty_options: Option<EmptyOptionsReport>,
    /// The evaluator's measured quality, when it was trained by medrank (`jobs::quality`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_quality: Option<super::quality::ModelQuality>,
    pub warnings: Vec<Warning>,
}

/// What a model evaluation did with empty option texts (FORMATS.md, "Empty options").
#[derive(Debug, Clone, Serialize)]
pub struct EmptyOptionsReport {
    /// `leave_out` (the convention) or `keep` (`--keep-empty-options`).
    pub treatment: crate::model::evaluate::EmptyOptions,
    /// Empty options left out of the candidates (each counted once per instance; every
    /// system of that instance was scored without it).
    pub left_out: usize,
    /// Every one of them (instance, option key), in bundle order.
    pub options: Vec<crate::model::evaluate::LeftOutOption>,
}

/// Ranking over scoring from evaluators' predictions files (no model needed). Steps: read
/// the bundle; add the control cases that the predictions score but the bundle lacks
/// (seeded; IR passages need the corpus); check every predictions file and the rankings
/// against the bundle; rank the systems once per evaluator.
pub fn evaluate_predictions(req: &EvaluateRequest) -> Result<Outcome<EvaluateReport>> {
    let mut warnings = Vec::new();
    let mut bundle = read_bundle(&req.bundle, &mut warnings)?;
    if req.predictions.is_empty() {
        return Err(Error::invalid("give at least one predictions file (one per evaluator)"));
    }
    let mut files = Vec::new();
    for p in &req.predictions {
        let (file, w) = data::parse_predictions(&p.file.name, &p.file.text)?;
        warnings.extend(w);
        let evaluator = p.evaluator.clone().filter(|e| !e.trim().is_empty()).unwrap_or_else(|| file_stem(&p.file.name));
        if files.iter().any(|(e, _, _): &(String, _, _)| *e == evaluator) {
            return Err(Error::invalid(format!(
                "two predictions files are named evaluator `{evaluator}`; name them apart"
            )));
        }
        files.push((evaluator, &p.file, file));
    }

    let scored = |name: &str| files.iter().any(|(_, _, f)| f.predictions.iter().any(|x| x.system == name));
    let wanted: Vec<Control> = Control::ALL
        .into_iter()
        .filter(|c| req.options.controls.iter().any(|n| n == c.system_name()))
        .filter(|c| scored(c.system_name()) && !bundle.systems.iter().any(|s| s == c.system_name()))
        .collect();
    let controls_added =
        add_wanted_controls(&mut bundle, &wanted, req.corpus.as_ref(), req.options.bootstrap.seed, &mut warnings)?;
    for (_, _, file) in &files {
        warnings.extend(data::check_prediction_file_against(file, &bundle)?);
    }
    let evaluators: Vec<Scored> = files
        .iter()
        .map(|(evaluator, named, file)| Scored {
            evaluator: evaluator.clone(),
            predictions: &file.predictions,
            inputs: vec![named.fingerprint()],
        })
        .collect();
    rank_all(req, &bundle, &bundle, evaluators, controls_added, Vec::new(), warnings)
}

/// The predictions of one evaluator and what they came from (a file, or a model's files).
struct Scored<'a> {
    evaluator: String,
    predictions: &'a [data::Prediction],
    inputs: Vec<Fingerprint>,
}

/// Adds the `wanted` control cases to the bundle (none: nothing to do).
fn add_wanted_controls(
    bundle: &mut Bundle,
    wanted: &[Control],
    corpus: Option<&NamedText>,
    seed: u64,
    warnings: &mut Vec<Warning>,
) -> Result<Option<ControlsReport>> {
    if wanted.is_empty() {
        return Ok(None);
    }
    let corpus = match corpus {
        Some(c) if wanted.contains(&Control::IrPassages) => {
            let (docs, w) = data::parse_documents(&c.name, &c.text)?;
            warnings.extend(w);
            Some(docs)
        }
        _ => None,
    };
    let mut report = controls::add_controls(bundle, wanted, corpus.as_deref(), seed)?;
    warnings.append(&mut report.warnings);
    Ok(Some(report))
}

/// The common end of both evaluate paths: human rankings, one ranking per evaluator, the
/// report with every input fingerprinted.
fn rank_all(
    req: &EvaluateRequest,
    bundle: &Bundle,
    rankings_bundle: &Bundle,
    evaluators: Vec<Scored>,
    controls_added: Option<ControlsReport>,
    truncated: Vec<crate::model::TruncatedInput>,
    mut warnings: Vec<Warning>,
) -> Result<Outcome<EvaluateReport>> {
    let rankings = match &req.rankings {
        Some(r) => {
            let controls = rankings_bundle.controls_with(&req.options.controls);
            let mut rankings = read_rankings(r, Some(rankings_bundle), &controls, &mut warnings)?;
            // Instances the evaluator could not score were left out (with a warning): their
            // human rows are left out of the comparison too.
            let kept: std::collections::HashSet<&str> = bundle.instances.iter().map(|i| i.id.as_str()).collect();
            rankings.rows.retain(|row| kept.contains(row.instance.as_str()));
            rankings.instances.retain(|i| kept.contains(i.as_str()));
            Some(rankings)
        }
        None => None,
    };
    let mut options = req.options.clone();
    // Control files marked in the bundle count as control cases like the generated ones.
    options.controls = bundle.controls_with(&options.controls);
    let mut shared: Vec<Fingerprint> = vec![req.bundle.fingerprint()];
    shared.extend(req.rankings.as_ref().map(NamedText::fingerprint));
    shared.extend(req.corpus.as_ref().filter(|_| controls_added.is_some()).map(NamedText::fingerprint));
    let mut provenance = Provenance::new(req.options.bootstrap.seed);
    provenance.inputs = shared.clone();
    let mut reports = Vec::new();
    for e in evaluators {
        let mut report =
            proxy::rank_systems(bundle, e.predictions, &options, rankings.as_ref()).map_err(|err| match err {
                // Say whose predictions lack the pair (one bundle, several evaluators).
                Error::Input { location, message } => {
                    Error::Input { location, message: format!("{message} (evaluator `{}`)", e.evaluator) }
                }
                other => other,
            })?;
        warnings.append(&mut report.warnings);
        // A ranking no better than chance against people's is said in the warnings, as the
        // Ranking tab says it beside the ranking.
        for t in &report.tasks {
            let said_of = format!("evaluator `{}`'s ranking of {} is", e.evaluator, t.task.name());
            warnings.extend(PeopleAgreement::of_ranking(t.human.as_ref()).and_then(|a| a.warning(&said_of)));
        }
        report.provenance.inputs.extend(shared.iter().cloned());
        report.provenance.inputs.extend(e.inputs.iter().cloned());
        provenance.inputs.extend(e.inputs);
        if provenance.conventions.is_empty() {
            provenance.conventions = report.provenance.conventions.clone();
        }
        reports.push(EvaluatorReport { evaluator: e.evaluator, report });
    }
    let report = EvaluateReport {
        provenance,
        controls_added,
        evaluators: reports,
        truncated,
        empty_options: None,
        model_quality: None,
        warnings,
    };
    let tables = evaluate_tables(&report);
    Ok(Outcome { report, tables })
}

/// Every evaluator's tables (names suffixed with the evaluator when there are several), the
/// rank heatmap per task (evaluators x systems, controls last) and the controls added.
pub fn evaluate_tables(report: &EvaluateReport) -> Vec<Table> {
    let several = report.evaluators.len() > 1;
    let mut tables = Vec::new();
    for e in &report.evaluators {
        for mut t in tables::proxy(&e.report) {
            if several {
                t.name = format!("{}__{}", t.name, e.evaluator);
                t.title = format!("[{}] {}", e.evaluator, t.title);
            }
            tables.push(t);
        }
    }
    let tasks = crate::data::common::first_appearance(
        report.evaluators.iter().flat_map(|e| e.report.tasks.iter().map(|t| t.task)),
    );
    for task in tasks {
        tables.push(heatmap(report, task));
    }
    if let Some(c) = &report.controls_added {
        tables.extend(tables::controls(c));
    }
    tables
}

/// Ranks of every system under every evaluator for one task: primary systems first (in
/// the first evaluator's order), then the controls (paper, Figures 3 and 4).
fn heatmap(report: &EvaluateReport, task: crate::data::Task) -> Table {
    let m = report.rank_matrix(&[task]);
    let mut headers = vec!["evaluator"];
    headers.extend(m.systems.iter().map(|(n, _)| n.as_str()));
    let mut table = Table::new(
        &format!("heatmap_{}", task.name()),
        &format!("Rank of each system per evaluator — {} (1 = best; control cases last)", task.name()),
        &headers,
    );
    for ((evaluator, _), cells) in m.rows.iter().zip(&m.cells) {
        let mut row = vec![evaluator.clone()];
        row.extend(cells.iter().map(|c| c.map(|c| fmt_num(c.rank, 1)).unwrap_or_default()));
        table.push(row);
    }
    table
}

/// Ranks of every system under every evaluator: the heatmap, as a table per task (CLI,
/// `--csv`) and as one chart over every task (the page).
#[derive(Debug, Clone, PartialEq)]
pub struct RankMatrix {
    /// One row per (evaluator, task) the report has among the tasks asked for: evaluators
    /// in the report's order, each evaluator's tasks in its own order.
    pub rows: Vec<(String, data::Task)>,
    /// Every system any row scored, in order of first appearance, the control cases last
    /// (paper, Figures 3 and 4); `true` marks a control.
    pub systems: Vec<(String, bool)>,
    /// `cells[row][system]`: the system's rank and score, `None` where the row did not score it.
    pub cells: Vec<Vec<Option<RankCell>>>,
}

/// One system's place under one evaluator.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RankCell {
    pub rank: f64,
    pub score: Option<f64>,
}

impl EvaluateReport {
    pub fn rank_matrix(&self, tasks: &[data::Task]) -> RankMatrix {
        let rows: Vec<(&str, &proxy::TaskReport)> = self
            .evaluators
            .iter()
            .flat_map(|e| e.report.tasks.iter().filter(|t| tasks.contains(&t.task)).map(|t| (e.evaluator.as_str(), t)))
            .collect();
        let mut systems: Vec<(String, bool)> = Vec::new();
        for (_, t) in &rows {
            for s in &t.systems {
                if !systems.iter().any(|(n, _)| *n == s.system) {
                    systems.push((s.system.clone(), s.is_control));
                }
            }
        }
        systems.sort_by_key(|(_, control)| *control); // stable: order kept within each group
        let cells = rows
            .iter()
            .map(|(_, t)| {
                let cell = |name: &str| {
                    t.systems
                        .iter()
                        .find(|s| s.system == name)
                        .map(|s| RankCell { rank: s.rank, score: s.score.value().copied() })
                };
                systems.iter().map(|(name, _)| cell(name)).collect()
            })
            .collect();
        RankMatrix { rows: rows.iter().map(|(e, t)| (e.to_string(), t.task)).collect(), systems, cells }
    }
}

/// What a model evaluation adds to a request: which control cases to score, and batching.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelOptions {
    /// Control cases to add and score: `all` (those the inputs allow, each one left out
    /// stated in the report) or names; none by default.
    pub controls: ControlChoice,
    /// Sequences per forward pass.
    pub batch_size: usize,
    /// Keep empty MCQA options as ordinary candidates (`--keep-empty-options`); by default
    /// they are left out (FORMATS.md, "Empty options").
    pub keep_empty_options: bool,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            controls: ControlChoice::default(),
            batch_size: crate::model::embed::DEFAULT_BATCH,
            keep_empty_options: false,
        }
    }
}

/// A model evaluation's result: the report (as with predictions files) and the model's
/// predictions (`--save-predictions`).
pub type ModelOutcome = (Outcome<EvaluateReport>, Vec<data::Prediction>);

/// Ranking over scoring with a model as the evaluator: the request and the model's options,
/// run on the CLI's backend or the page's kept encoder ([`ModelJob`]).
pub struct RankWithModel<'a> {
    pub request: &'a EvaluateRequest,
    pub options: &'a ModelOptions,
}

impl ModelJob for RankWithModel<'_> {
    type Output = ModelOutcome;
    const STAGE: &'static str = "Encoding with the model";

    /// Before the evaluator's plan: it is tokenizing the inputs.
    fn planning(sequences: usize) -> Option<String> {
        Some(format!("splitting {} sequences into tokens", crate::report::thousands(sequences)))
    }

    /// Ranking over scoring with a model as the evaluator, on any backend: add the requested
    /// control cases, predict every (instance, system) with the model (its head, or the
    /// zero-training similarity evaluator for MCQA when it has none) run by `encoder`, then
    /// rank as with a predictions file. `req.predictions` is ignored. `progress` is called once
    /// before the first batch (nothing done yet) and after every batch; `false` cancels.
    async fn run_on<E: crate::model::Encoder>(&self, on: Encoding<'_, E>) -> Result<ModelOutcome> {
        let Encoding { model, encoder, model_inputs, progress } = on;
        let (req, model_options) = (self.request, self.options);
        let Prepared { bundle, full_bundle, controls_added, mut warnings } =
            prepare_model_bundle(req, model_options, |b, w| {
                keep_tasks_the_model_handles(b, &model.encoder.model, &model.name, w)
            })?;
        let kind = if model.encoder.model.head.is_some() {
            crate::model::EvaluatorKind::Head
        } else {
            crate::model::EvaluatorKind::Similarity
        };
        let empty = if model_options.keep_empty_options {
            crate::model::evaluate::EmptyOptions::Keep
        } else {
            crate::model::evaluate::EmptyOptions::LeaveOut
        };
        let sequences = crate::model::evaluate::sequences_to_encode(&bundle, kind, empty);
        let counted = ProgressEncoder::start(encoder, sequences, progress)?;
        let (output, kind) = crate::model::evaluate::evaluate_bundle_on(
            model,
            &counted,
            &bundle,
            model_options.batch_size.max(1),
            empty,
        )
        .await
        .map_err(|e| e.naming_input(&model.name, |i| format!("input #{}", i + 1)))?;
        if !output.left_out.is_empty() {
            let ids: Vec<String> =
                output.left_out.iter().take(10).map(|o| format!("{} option {}", o.instance, o.option)).collect();
            let instances =
                output.left_out.iter().map(|o| o.instance.as_str()).collect::<std::collections::HashSet<_>>().len();
            let more = output.left_out.len().saturating_sub(ids.len());
            warnings.push(Warning::new(format!(
                "{} empty options ({instances} instances) were left out of the evaluator's candidates (probability 0, never predicted; --keep-empty-options keeps them): {}{}",
                output.left_out.len(),
                ids.join(", "),
                if more > 0 { format!(", and {more} more (all listed in the JSON report)") } else { String::new() }
            )));
            // A left-out option that is the gold answer can never be predicted: say so.
            let gold_left_out: Vec<&str> = output
                .left_out
                .iter()
                .filter(|o| bundle.instance(&o.instance).is_some_and(|i| i.problem.gold() == o.option))
                .map(|o| o.instance.as_str())
                .collect();
            if !gold_left_out.is_empty() {
                let shown: Vec<&str> = gold_left_out.iter().take(10).copied().collect();
                warnings.push(Warning::new(format!(
                    "{} instances have an empty correct option, which is left out, so every system scores wrong on them: {}{}",
                    gold_left_out.len(),
                    shown.join(", "),
                    if gold_left_out.len() > shown.len() { format!(" and {} more", gold_left_out.len() - shown.len()) } else { String::new() }
                )));
            }
        }
        if !output.truncated.is_empty() {
            let ids: Vec<String> = output
                .truncated
                .iter()
                .take(10)
                .map(|t| {
                    if t.option.is_empty() {
                        format!("({}, {})", t.instance, t.system)
                    } else {
                        format!("({}, {}, option {})", t.instance, t.system, t.option)
                    }
                })
                .collect();
            let more = output.truncated.len().saturating_sub(ids.len());
            warnings.push(Warning::new(format!(
                "{} inputs were longer than the model's {}-token limit and were cut (the case or argument, never the option or label): {}{}",
                output.truncated.len(),
                model.tokenizer.max_tokens,
                ids.join(", "),
                if more > 0 { format!(", and {more} more (all listed in the JSON report)") } else { String::new() }
            )));
        }
        let evaluator = match kind {
            crate::model::EvaluatorKind::Head => file_stem(&model.name),
            crate::model::EvaluatorKind::Similarity => format!("{} (similarity)", file_stem(&model.name)),
        };
        let scored = vec![Scored { evaluator, predictions: &output.predictions, inputs: model_inputs }];
        let mut outcome =
            rank_all(req, &bundle, &full_bundle, scored, controls_added, output.truncated.clone(), warnings)?;
        outcome.report.provenance.conventions.push((
            "empty options".into(),
            match empty {
                crate::model::evaluate::EmptyOptions::LeaveOut => {
                    "an empty MCQA option text is not a candidate: left out of the softmax, probability 0, never predicted"
                        .into()
                }
                crate::model::evaluate::EmptyOptions::Keep => {
                    "empty MCQA option texts kept as ordinary candidates (--keep-empty-options)".into()
                }
            },
        ));
        if !output.left_out.is_empty() {
            let mut table =
                Table::new("empty_options", "Empty options left out of the candidates", &["instance", "option"]);
            for o in &output.left_out {
                table.push(vec![o.instance.clone(), o.option.clone()]);
            }
            outcome.tables.push(table);
        }
        outcome.report.empty_options = Some(EmptyOptionsReport {
            treatment: empty,
            left_out: output.left_out.len(),
            options: output.left_out.clone(),
        });
        if kind == crate::model::EvaluatorKind::Similarity {
            outcome.report.provenance.conventions.push((
                "evaluator".into(),
                "zero-training similarity: softmax over options of cosine(embed(case + argument), embed(option)) / 0.05 — a weak baseline, not a trained proxy-task evaluator".into(),
            ));
        }
        Ok((outcome, output.predictions))
    }

    fn provenance(output: &mut ModelOutcome) -> &mut Provenance {
        &mut output.0.report.provenance
    }

    fn trust(output: &mut ModelOutcome) -> (&mut Option<super::quality::ModelQuality>, &mut Vec<Warning>) {
        let report = &mut output.0.report;
        (&mut report.model_quality, &mut report.warnings)
    }
}

/// A [`RankWithModel`] on the model's CPU encoder, synchronously (it never waits).
pub fn evaluate_with_model(
    req: &EvaluateRequest,
    model: &crate::model::TextModel,
    model_inputs: Vec<Fingerprint>,
    model_options: &ModelOptions,
) -> Result<ModelOutcome> {
    let on = Encoding { model, encoder: &model.encoder, model_inputs, progress: &mut |_| true };
    crate::model::run_ready(RankWithModel { request: req, options: model_options }.run_on(on))
}

/// The proxy tasks a model can evaluate: a multiple-choice head or no head (the
/// zero-training similarity evaluator) handles MCQA; a classification head handles the
/// tasks whose labels it names.
pub fn tasks_of_model(model: &crate::model::LoadedModel) -> Vec<data::Task> {
    use crate::data::tasks::{Head, TASKS};
    let head = match model.config.head {
        crate::model::HeadKind::None | crate::model::HeadKind::MultipleChoice => Head::MultipleChoice,
        crate::model::HeadKind::SequenceClassification => Head::Classification,
    };
    TASKS
        .iter()
        .filter(|t| t.head == head)
        .filter_map(|t| t.task)
        .filter(|t| {
            head == Head::MultipleChoice || crate::model::evaluate::label_mapping(&model.config.labels, *t).is_ok()
        })
        .collect()
}

/// Leaves out (with a warning naming them) the instances of tasks the model cannot
/// evaluate; an error when none is left.
fn keep_tasks_the_model_handles(
    bundle: &mut Bundle,
    model: &crate::model::LoadedModel,
    name: &str,
    warnings: &mut Vec<Warning>,
) -> Result<()> {
    let tasks = tasks_of_model(model);
    let names: Vec<&str> = tasks.iter().map(|t| t.name()).collect();
    let what = match model.config.head {
        crate::model::HeadKind::None => "has no head; its zero-training similarity evaluator handles".to_string(),
        _ => format!("has a {:?} head with labels {:?}; it handles", model.config.head, model.config.labels),
    };
    let other: Vec<&str> =
        bundle.instances.iter().filter(|i| !tasks.contains(&i.problem.task())).map(|i| i.id.as_str()).collect();
    if other.len() == bundle.instances.len() {
        return Err(Error::invalid(format!(
            "model {name} {what} [{}] only, and the bundle has no such instance; train an evaluator for the task with `medrank train` or give predictions",
            names.join(", ")
        )));
    }
    if !other.is_empty() {
        let shown: Vec<&str> = other.iter().take(10).copied().collect();
        warnings.push(Warning::new(format!(
            "model {name} {what} [{}] only, so {} instances of other tasks are not evaluated: {}{}",
            names.join(", "),
            other.len(),
            shown.join(", "),
            if other.len() > shown.len() { format!(" and {} more", other.len() - shown.len()) } else { String::new() }
        )));
        bundle.instances.retain(|i| tasks.contains(&i.problem.task()));
    }
    Ok(())
}

/// The bundle a model evaluation encodes, and what making it said.
struct Prepared {
    /// Narrowed to the model's tasks, with the control cases added.
    bundle: Bundle,
    /// As read (human rankings are checked against it).
    full_bundle: Bundle,
    controls_added: Option<ControlsReport>,
    warnings: Vec<Warning>,
}

/// Reads the bundle, narrows it to what the model handles (`narrow`), and adds the control
/// cases the options ask for ([`ControlChoice::resolve`]): every step of a model
/// evaluation before the model runs, so a check can run it before any model loads.
fn prepare_model_bundle(
    req: &EvaluateRequest,
    model_options: &ModelOptions,
    narrow: impl FnOnce(&mut Bundle, &mut Vec<Warning>) -> Result<()>,
) -> Result<Prepared> {
    let mut warnings = Vec::new();
    let mut bundle = read_bundle(&req.bundle, &mut warnings)?;
    let full_bundle = bundle.clone();
    narrow(&mut bundle, &mut warnings)?;
    let controls = model_options.controls.resolve(&bundle, req.corpus.is_some())?;
    warnings.extend(controls.left_out);
    let controls_added = add_wanted_controls(
        &mut bundle,
        &controls.add,
        req.corpus.as_ref(),
        req.options.bootstrap.seed,
        &mut warnings,
    )?;
    Ok(Prepared { bundle, full_bundle, controls_added, warnings })
}

/// What a model evaluation of `req` will do, known before any model loads: the bundle's
/// size, the control cases generated and those left out (with why), and the sequences to
/// encode for either kind of evaluator. Errors are those the run would give.
#[derive(Debug, Clone, Serialize)]
pub struct ModelRunPlan {
    pub instances: usize,
    /// The systems of the bundle, control files included.
    pub systems: Vec<String>,
    /// The systems ranked as control cases: control files and generated ones.
    pub controls: Vec<String>,
    /// The control cases the run generates.
    pub generated: Vec<Control>,
    /// Sequences to encode by the zero-training similarity evaluator (a model without a
    /// head), which judges the MCQA instances only; `None` where there are none.
    pub sequences_similarity: Option<usize>,
    /// Sequences to encode by a trained head.
    pub sequences_head: usize,
    /// Misinformation instances labelled not_enough_evidence that the ranking leaves out
    /// (unless `keep_not_enough_evidence`): counted before the run, and in its warnings.
    pub left_out_not_enough_evidence: usize,
    /// MCQA options whose text is empty (left out of the candidates unless
    /// `keep_empty_options`), in bundle order.
    pub empty_options: Vec<crate::model::evaluate::LeftOutOption>,
    pub warnings: Vec<Warning>,
}

pub fn plan_model_evaluation(req: &EvaluateRequest, model_options: &ModelOptions) -> Result<ModelRunPlan> {
    let prepared = prepare_model_bundle(req, model_options, |_, _| Ok(()))?;
    let bundle = &prepared.bundle;
    let empty = if model_options.keep_empty_options {
        crate::model::evaluate::EmptyOptions::Keep
    } else {
        crate::model::evaluate::EmptyOptions::LeaveOut
    };
    // The similarity evaluator judges MCQA only: a run leaves the other instances out.
    let mut mcqa = bundle.clone();
    mcqa.instances.retain(|i| i.problem.task() == data::Task::Mcqa);
    use crate::model::{evaluate::sequences_to_encode, EvaluatorKind};
    let mut warnings = prepared.warnings;
    let not_enough_evidence: Vec<&str> = bundle
        .instances
        .iter()
        .filter(|i| matches!(&i.problem, data::Problem::Misinformation { label, .. } if label == "not_enough_evidence"))
        .map(|i| i.id.as_str())
        .collect();
    let left_out = if req.options.drop_not_enough_evidence { not_enough_evidence } else { Vec::new() };
    if !left_out.is_empty() {
        warnings.push(crate::eval::proxy::not_enough_evidence_left_out(&left_out));
    }
    Ok(ModelRunPlan {
        instances: bundle.instances.len(),
        systems: prepared.full_bundle.systems.clone(),
        controls: bundle.controls_with(&req.options.controls),
        generated: prepared.controls_added.as_ref().map(|c| c.added.clone()).unwrap_or_default(),
        sequences_similarity: (!mcqa.instances.is_empty())
            .then(|| sequences_to_encode(&mcqa, EvaluatorKind::Similarity, empty)),
        sequences_head: sequences_to_encode(bundle, EvaluatorKind::Head, empty),
        left_out_not_enough_evidence: left_out.len(),
        empty_options: bundle
            .instances
            .iter()
            .flat_map(|i| match &i.problem {
                data::Problem::Mcqa { options, .. } => options
                    .iter()
                    .filter(|(_, text)| text.trim().is_empty())
                    .map(|(key, _)| crate::model::evaluate::LeftOutOption {
                        instance: i.id.clone(),
                        option: key.clone(),
                    })
                    .collect(),
                _ => Vec::new(),
            })
            .collect(),
        warnings,
    })
}
