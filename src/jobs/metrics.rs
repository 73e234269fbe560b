//! Reference-based metrics (with BERTScore when a model is given): the method reads its own
//! single input.

use super::kept::Progress;
use super::spec::{between, defaults_of, reply, JobRequest, JobSpec};
use super::{tables, NamedText, Outcome};
use crate::eval::metrics::MetricsOptions;
use crate::report::Fingerprint;
use crate::Result;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct MetricsRequest {
    pub file: NamedText,
    #[serde(default)]
    pub options: crate::eval::metrics::MetricsOptions,
}

pub fn metrics(req: &MetricsRequest) -> Result<Outcome<crate::eval::metrics::MetricsReport>> {
    metrics_with_bertscore(req, None)
}

/// BERTScore settings: the model and its files' fingerprints come from the front end.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct BertScoreRequest {
    /// Hidden layer (1-based); default: the last.
    #[serde(default)]
    pub layer: Option<usize>,
    #[serde(default)]
    pub idf: bool,
    /// (b_P, b_R, b_F) for the baseline rescale (x - b) / (1 - b).
    #[serde(default)]
    pub baseline: Option<(f64, f64, f64)>,
}

/// Reference-based metrics, plus BERTScore with `model` when given.
pub fn metrics_with_bertscore(
    req: &MetricsRequest,
    bertscore: Option<(&crate::model::TextModel, Vec<Fingerprint>, &BertScoreRequest)>,
) -> Result<Outcome<crate::eval::metrics::MetricsReport>> {
    let mut report = crate::eval::metrics::evaluate(&req.file.name, &req.file.text, &req.options)?;
    if let Some((model, fingerprints, b)) = bertscore {
        let (candidates, _) = crate::data::candidates::parse_candidates(&req.file.name, &req.file.text)?;
        let texts: Vec<&str> = candidates.iter().map(|c| c.candidate.as_str()).collect();
        let references: Vec<Vec<&str>> =
            candidates.iter().map(|c| c.references.iter().map(String::as_str).collect()).collect();
        let layer = b.layer.unwrap_or(model.encoder.model.config.num_layers);
        let options = crate::model::bertscore::BertScoreOptions { layer, idf: b.idf, baseline: b.baseline };
        let scores = crate::model::run_ready(crate::model::bertscore::bertscore(
            &model.encoder,
            &model.tokenizer,
            &texts,
            &references,
            &options,
        ))
        .map_err(|e| {
            e.naming_input(&model.name, |i| {
                let c = &candidates[i];
                format!(
                    "{}:{}: the candidate of system `{}` for `{}` or its references",
                    req.file.name, c.line, c.system, c.id
                )
            })
        })?;
        let system_means = report
            .systems
            .iter()
            .map(|sys| {
                let mine: Vec<&crate::model::bertscore::PrfScore> =
                    candidates.iter().zip(&scores).filter(|(c, _)| &c.system == sys).map(|(_, s)| s).collect();
                let n = mine.len().max(1) as f64;
                let mean =
                    |f: fn(&crate::model::bertscore::PrfScore) -> f64| mine.iter().map(|s| f(s)).sum::<f64>() / n;
                (sys.clone(), mean(|s| s.precision), mean(|s| s.recall), mean(|s| s.f1))
            })
            .collect();
        report.provenance.inputs.extend(fingerprints);
        report
            .provenance
            .conventions
            .push(("precision".into(), crate::model::describe_precision(model.encoder.model.precision)));
        report.provenance.conventions.push((
            "bertscore".into(),
            format!(
                "greedy max-cosine token matching on hidden layer {layer} of {}; special tokens excluded; {}; best F over references{}",
                model.name,
                if b.idf { "idf weights log((M+1)/(df+1)) from the references" } else { "uniform weights" },
                if b.baseline.is_some() { "; baseline rescale (x-b)/(1-b) on P, R, F separately (may be negative)" } else { "" }
            ),
        ));
        report.bertscore = Some(crate::eval::metrics::BertScoreSection {
            model: model.name.clone(),
            layer,
            idf: b.idf,
            baseline: b.baseline,
            candidates: scores,
            system_means,
        });
    }
    let tables = tables::metrics(&report);
    Ok(Outcome { report, tables })
}

/// The job: reference-based metrics over one candidates file.
pub const JOB: JobSpec = JobSpec::new("metrics", "Metrics", "reference-based metrics", "metrics")
    .reads(&["metrics"], &[&["metrics"]])
    .defaults(defaults_of::<MetricsOptions>)
    .runs(run);

/// Reference-based metrics over one candidates file (`medrank metrics`; BERTScore is the
/// CLI's, with a model folder).
fn run(request: &JobRequest, progress: Progress) -> Result<String> {
    let req = MetricsRequest {
        file: request.required("metrics", "a candidates file (JSONL with candidate and references)")?.named(),
        options: request.options()?,
    };
    between(progress, "Scoring candidates", || reply(&metrics(&req)?, ()))
}
