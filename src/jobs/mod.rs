//! Jobs: the one entry point per method that both front ends call. A job takes the user's
//! files as (name, text) pairs plus plain options, parses and cross-checks them, runs the
//! method, fingerprints every input, and returns the report together with its tables.
//! The CLI only reads files and prints; the browser's worker only posts messages. So the
//! same inputs give the same numbers in both, by construction.

//!
//! One file per method: `evaluate` (ranking over scoring, from predictions or a model),
//! `agreement`, `controls`, `draft` (rubrics drafted from evidence, extractively), `grade` (a model grades rubric criteria), `statements` (answers against expert statements), `nrp` (with `rankers` for neural rankers), `import`, `metrics`
//! (and rubric); `tables` turns every report into the tables all front ends show;
//! `train` trains an evaluator (step-wise, so the page can show progress and stop);
//! `quantize` makes an int8 model folder and measures it against the f32 one;
//! `workload` is the end-to-end benchmark both front ends time. What only the page needs
//! (the kinds of input file, its requests and views) is the page's front end, `crate::page`.

pub mod agreement;
pub mod controls;
pub mod draft;
pub mod evaluate;
pub mod grade;
pub mod import;
pub mod kept;
pub mod metrics;
pub mod nrp;
pub mod quality;
pub mod quantize;
pub mod rankers;
pub mod rubric;
pub mod rubric_agreement;
pub mod spec;
pub mod statements;
pub mod tables;
pub mod train;
pub mod views;
pub mod workload;

/// Every job of the page, in the order of its Run buttons: each described once, in its file.
#[rustfmt::skip]
pub const JOBS: &[&JobSpec] = &[
    &evaluate::JOB,
    &nrp::JOB,
    &metrics::JOB,
    &rubric::JOB,
    &rubric_agreement::JOB,
    &draft::JOB,
    &grade::JOB,
    &statements::JOB,
    &controls::JOB,
];

/// The job called `name`.
pub fn job(name: &str) -> Result<&'static JobSpec> {
    JOBS.iter().copied().find(|j| j.name == name).ok_or_else(|| {
        let known: Vec<&str> = JOBS.iter().map(|j| j.name).collect();
        crate::Error::invalid(format!("unknown job `{name}` (known: {})", known.join(", ")))
    })
}

// What the front ends call, by name (a glob would hide which file a name comes from, and
// let one file add to another's types unseen).
pub use agreement::{agreement, AgreementReport, AgreementRequest, ScopedAgreement};
pub use controls::{add_controls, ControlChoice, ControlPlan, ControlsOptions, ControlsOutcome, ControlsRequest};
pub use evaluate::{
    evaluate_predictions, evaluate_tables, evaluate_with_model, plan_model_evaluation, rank_check, tasks_of_model,
    EmptyOptionsReport, EvaluateReport, EvaluateRequest, EvaluatorPredictions, EvaluatorReport, ModelOptions,
    ModelOutcome, ModelRunPlan, ProxyOptions, RankCell, RankCheck, RankMatrix, RankOptions, RankWithModel,
};
pub use grade::{
    grade_tables, read_rubric, CriterionGrade, CutPair, GradeJobOptions, GradeOptions, GradeOutcome, GradeReport,
    GradeRequest, GraderSummary, MET_THRESHOLD,
};
pub use import::{
    bundle_or_import, import_healthbench, import_ranking_over_scoring, EmptyOptionRecords, HealthBenchImportOutcome,
    HealthBenchImportReport, HealthBenchImportRequest, ImportOutcome, ImportReport, ImportRequest, Reordered, RosFile,
    SystemResponses,
};
pub use kept::{
    describe_backend, describe_precision, model_quality, parse_backend, progress_parts, run_on_backend, EncodeProgress,
    Encoding, KeptModel, ModelJob, Progress, RunOptions, TimeEstimate,
};
pub use metrics::{metrics, metrics_with, BertScoreRequest, MetricModels, MetricsRequest};
pub use nrp::{
    nrp, nrp_with_models, pair_precomputed, parse_denominator, parse_not_judgeable, parse_ties, parse_unscored,
    AnswerFile, NrpRequest, NrpRequestOptions, PrecomputedRanker, QrelsFile,
};
pub use quantize::{
    int8_safetensors, quantize_model, DevCheck, EmbeddingCheck, FolderFiles, OrderCheck, QuantizeReport,
    QuantizeRequest,
};
pub use rubric::{rubric, RubricRequest};
pub use rubric_agreement::{rubric_agreement, RubricAgreementRequest};
pub use spec::{json, InputFile, JobDescription, JobRequest, JobSpec, ModelRun};
pub use statements::{
    statement_tables, CutStatement, StatementJobOptions, StatementJudgement, StatementOptions, StatementReport,
    StatementRequest,
};
pub use train::{
    argument_choices, freeze_name, gpu_of, head_of, input_lengths, parse_arguments, parse_freeze, recipe_choices,
    training_choices, ArgumentChoice, DevData, Note, RecipeChoice, TrainForm, TrainRequest, TrainTask,
    TrainedEvaluator, TrainingChoices, TrainingJob, TrainingSummary,
};
#[cfg(not(target_arch = "wasm32"))]
pub use train::{open_training_encoder, train};
pub use workload::{run_workload, workload_accuracy, workload_bundle, WorkloadResult, WORKLOAD_SYSTEM};

use crate::data::{self, Bundle, HumanRankings};
use crate::report::{Fingerprint, Provenance, Table};
use crate::{Result, Warning};
use serde::{Deserialize, Serialize};

/// A user file: the name they know it by (path or browser file name) and its text.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct NamedText {
    pub name: String,
    pub text: String,
}

impl NamedText {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        NamedText { name: name.into(), text: text.into() }
    }
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.name, self.text.as_bytes())
    }
}

/// A report with its tables (what the CLI prints and `--csv` writes, what the page shows
/// and exports).
#[derive(Debug, Clone, Serialize)]
pub struct Outcome<R> {
    pub report: R,
    pub tables: Vec<Table>,
}

/// The file name without folders and extension.
pub fn file_stem(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    base.rsplit_once('.').map(|(s, _)| s).unwrap_or(base).to_string()
}

/// Adds the fingerprints of `inputs` to a report's provenance (methods do not see files).
fn fingerprint_all(provenance: &mut Provenance, inputs: &[&NamedText]) {
    provenance.inputs.extend(inputs.iter().map(|t| t.fingerprint()));
}

/// Parses a bundle and folds its reader warnings into `warnings`.
pub fn read_bundle(file: &NamedText, warnings: &mut Vec<Warning>) -> Result<Bundle> {
    let (bundle, w) = data::parse_bundle(&file.name, &file.text)?;
    warnings.extend(w);
    Ok(bundle)
}

/// Parses human rankings and checks them against the bundle. Humans do not rank control
/// cases, so systems named in `controls` are not expected in the rankings.
fn read_rankings(
    file: &NamedText,
    bundle: Option<&Bundle>,
    controls: &[String],
    warnings: &mut Vec<Warning>,
) -> Result<HumanRankings> {
    let (rankings, w) = data::parse_rankings(&file.name, &file.text)?;
    warnings.extend(w);
    data::check_no_control_rows(&rankings, controls)?;
    if let Some(bundle) = bundle {
        warnings.extend(data::check_rankings_against_except(&rankings, bundle, controls)?);
    }
    Ok(rankings)
}

/// sha256 of every file of a model, so reports say exactly which weights produced them.
pub fn model_fingerprints(files: &crate::model::ModelFiles) -> Vec<Fingerprint> {
    let mut out = vec![
        Fingerprint::of(format!("{}/config.json", files.name), &files.config_json),
        match &files.tokenizer_source {
            Some(spm) => spm.clone(),
            None => Fingerprint::of(format!("{}/tokenizer.json", files.name), &files.tokenizer_json),
        },
    ];
    out.push(match &files.weights_source {
        Some(original) => original.clone(),
        None => Fingerprint::of(format!("{}/model.safetensors", files.name), &files.weights),
    });
    if let Some(p) = &files.pooling_json {
        out.push(Fingerprint::of(format!("{}/1_Pooling/config.json", files.name), p));
    }
    if let Some(m) = &files.modules_json {
        out.push(Fingerprint::of(format!("{}/modules.json", files.name), m));
    }
    out
}
