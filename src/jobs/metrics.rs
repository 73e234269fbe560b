//! Reference-based metrics (with BERTScore when a model is given) and rubric grading:
//! the methods read their own single input.

use super::{fingerprint_all, tables, NamedText, Outcome};
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
        ))?;
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

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct RubricRequest {
    pub file: NamedText,
    #[serde(default)]
    pub options: crate::eval::rubric::RubricOptions,
}

pub fn rubric(req: &RubricRequest) -> Result<Outcome<crate::eval::rubric::RubricReport>> {
    let report = crate::eval::rubric::grade(&req.file.name, &req.file.text, &req.options)?;
    let tables = tables::rubric(&report);
    Ok(Outcome { report, tables })
}

/// Agreement of a rubric grader with people, and of people with each other
/// (`medrank rubric-agreement`).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct RubricAgreementRequest {
    /// Criteria with human judgements (FORMATS.md §7: `met_by`, or `met`).
    pub file: NamedText,
    /// The grader's graded file: the same responses and criteria, with `met`.
    #[serde(default)]
    pub grader_file: Option<NamedText>,
}

pub fn rubric_agreement(
    req: &RubricAgreementRequest,
) -> Result<Outcome<crate::eval::rubric_agreement::RubricAgreementReport>> {
    let grader = req.grader_file.as_ref().map(|f| (f.name.as_str(), f.text.as_str()));
    let mut report = crate::eval::rubric_agreement::agreement((&req.file.name, &req.file.text), grader)?;
    let inputs: Vec<&NamedText> = std::iter::once(&req.file).chain(&req.grader_file).collect();
    fingerprint_all(&mut report.provenance, &inputs);
    let tables = tables::rubric_agreement(&report);
    Ok(Outcome { report, tables })
}
