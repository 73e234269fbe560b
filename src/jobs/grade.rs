//! Grading rubric criteria with a model (`medrank grade`, the page's Grade job):
//! an ungraded (or graded) §7 rubric file with each response's text, a criterion grader
//! (`model::grade`: a model trained with `--task criterion`, or an NLI model zero-shot),
//! and out come P(met) per criterion, the HealthBench scores with met = P(met) >= 0.5,
//! intervals that carry the grader's uncertainty (`eval::rubric::grade_with_probabilities`)
//! and the graded file (met and p_met per criterion), which `medrank rubric` scores to the
//! same means and `medrank rubric-agreement --grader-file` sets beside people.

use super::kept::{EncodeProgress, ModelJob, ProgressEncoder};
use super::{tables, NamedText, Outcome};
use crate::data::graded::{parse_rubric, Criterion, GradedResponse, RubricResponse};
use crate::eval::rubric::{grade_with_probabilities, ResponseScore, RubricOptions, SystemScore};
use crate::model::grade::{conversation_text, encode_pair, grade_inputs, GradeInput, GraderKind};
use crate::report::{Fingerprint, Provenance, Table};
use crate::{Error, Result, Warning};
use serde::{Deserialize, Serialize};

/// The threshold that turns P(met) into `met`.
pub const MET_THRESHOLD: f64 = 0.5;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct GradeOptions {
    /// The bootstrap of the per-system intervals.
    #[serde(flatten)]
    pub rubric: RubricOptions,
    /// Pairs per forward pass.
    pub batch_size: usize,
}

impl Default for GradeOptions {
    fn default() -> Self {
        GradeOptions { rubric: RubricOptions::default(), batch_size: crate::model::embed::DEFAULT_BATCH }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct GradeRequest {
    /// Rubric responses with their text (FORMATS.md §7).
    pub rubric: NamedText,
    #[serde(default)]
    pub options: GradeOptions,
}

/// Which model graded and how its logits became P(met).
#[derive(Debug, Clone, Serialize)]
pub struct GraderSummary {
    pub model: String,
    #[serde(flatten)]
    pub kind: GraderKind,
    pub labels: Vec<String>,
    pub description: &'static str,
}

/// One criterion of one response as the grader judged it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriterionGrade {
    pub id: String,
    pub system: String,
    /// The response's line in the rubric file.
    pub line: usize,
    /// The criterion's position in the response's `criteria` (0-based, as `criteria[i]`).
    pub index: usize,
    pub criterion: String,
    pub points: f64,
    pub p_met: f64,
    pub met: bool,
}

/// A pair that lost tokens to the model's limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CutPair {
    pub id: String,
    pub system: String,
    pub line: usize,
    pub index: usize,
    /// Tokens of the conversation left out (its earliest turns first).
    pub conversation_tokens_cut: usize,
    /// Tokens cut from the response's end (only when it alone did not fit).
    pub response_tokens_cut: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct GradeReport {
    pub provenance: Provenance,
    pub grader: GraderSummary,
    pub criteria: Vec<CriterionGrade>,
    pub truncated: Vec<CutPair>,
    // The HealthBench scores of the grader's `met` (as in `medrank rubric`'s report), with
    // expected means and intervals that draw `met` from P(met).
    pub systems: Vec<String>,
    pub tags: Vec<String>,
    pub responses: Vec<ResponseScore>,
    pub system_scores: Vec<SystemScore>,
    pub warnings: Vec<Warning>,
}

/// The report and tables, and the graded file (§7 JSONL, `met` and `p_met` per criterion).
pub struct GradeOutcome {
    pub outcome: Outcome<GradeReport>,
    pub graded_jsonl: String,
}

/// The rubric's responses, checked for what grading needs: every response's text, every
/// criterion's points (the page's check of a file to grade reads it so too).
pub fn read_rubric(file: &NamedText, warnings: &mut Vec<Warning>) -> Result<Vec<RubricResponse>> {
    let (responses, w) = parse_rubric(&file.name, &file.text)?;
    warnings.extend(w);
    for r in &responses {
        if r.response.is_none() {
            return Err(Error::input(
                &file.name,
                r.line,
                "response",
                "missing field `response`: the grader reads the response's text",
            ));
        }
        if let Some(i) = r.criteria.iter().position(|c| c.points.is_none()) {
            return Err(Error::input(
                &file.name,
                r.line,
                &format!("criteria[{i}].points"),
                "missing field `points`: grading scores the criteria",
            ));
        }
    }
    let judged = responses.iter().flat_map(|r| &r.criteria).filter(|c| c.met.is_some()).count();
    if judged > 0 {
        warnings.push(Warning::new(format!(
            "{}: {judged} criteria already carry `met`; the grader's judgement replaces it in the graded file \
             (`medrank rubric-agreement --input {} --grader-file GRADED` sets the two side by side)",
            file.name, file.name
        )));
    }
    Ok(responses)
}

/// Grades `req.rubric` with `model` run by `encoder`. `progress` is called before the first
/// batch and after each; `false` cancels.
pub async fn grade_with_encoder<E: crate::model::Encoder>(
    req: &GradeRequest,
    model: &crate::model::TextModel,
    encoder: &E,
    model_inputs: Vec<Fingerprint>,
    progress: &mut dyn FnMut(&EncodeProgress) -> bool,
) -> Result<GradeOutcome> {
    let loaded = &model.encoder.model;
    let head = match (&loaded.head, loaded.config.head) {
        (Some(head), crate::model::HeadKind::SequenceClassification) => head,
        _ => {
            return Err(Error::invalid(format!(
                "{} has no sequence-classification head: a grader is a model trained with `medrank train --task \
                 criterion`, or an NLI model (its labels name `entailment`)",
                model.name
            )))
        }
    };
    let kind = GraderKind::of_labels(&loaded.config.labels)?;
    let mut warnings = Vec::new();
    let responses = read_rubric(&req.rubric, &mut warnings)?;

    // Every (response, criterion) pair, encoded.
    let mut inputs: Vec<GradeInput> = Vec::new();
    for r in &responses {
        let conversation = conversation_text(r.prompt.as_ref());
        let text = r.response.as_deref().expect("checked by read_rubric");
        for (i, c) in r.criteria.iter().enumerate() {
            let input = encode_pair(&model.tokenizer, &conversation, text, &c.criterion).map_err(|e| {
                Error::input(&req.rubric.name, r.line, &format!("criteria[{i}].criterion"), e.to_string())
            })?;
            inputs.push(input);
        }
    }
    let start = EncodeProgress { sequences: inputs.len(), ..EncodeProgress::default() };
    if !progress(&start) {
        return Err(Error::Cancelled);
    }
    let counted = ProgressEncoder::new(encoder, start, progress);
    let encoded: Vec<&crate::model::Encoded> = inputs.iter().map(|i| &i.encoded).collect();
    let p_flat = grade_inputs(
        &counted,
        &loaded.weights,
        head,
        kind,
        &model.tokenizer,
        &encoded,
        req.options.batch_size.clamp(1, crate::bounds::MAX_BATCH),
    )
    .await?;

    // Back per response, in file order.
    let mut p_met: Vec<Vec<f64>> = Vec::with_capacity(responses.len());
    let mut criteria = Vec::new();
    let mut truncated = Vec::new();
    let mut graded = Vec::with_capacity(responses.len());
    let mut written = Vec::with_capacity(responses.len());
    let mut next = 0;
    for r in &responses {
        let ps = p_flat[next..next + r.criteria.len()].to_vec();
        for (i, (c, &p)) in r.criteria.iter().zip(&ps).enumerate() {
            let input = &inputs[next + i];
            if input.conversation_cut + input.response_cut > 0 {
                truncated.push(CutPair {
                    id: r.id.clone(),
                    system: r.system.clone(),
                    line: r.line,
                    index: i,
                    conversation_tokens_cut: input.conversation_cut,
                    response_tokens_cut: input.response_cut,
                });
            }
            criteria.push(CriterionGrade {
                id: r.id.clone(),
                system: r.system.clone(),
                line: r.line,
                index: i,
                criterion: c.criterion.clone(),
                points: c.points.expect("checked by read_rubric"),
                p_met: p,
                met: p >= MET_THRESHOLD,
            });
        }
        next += r.criteria.len();
        graded.push(GradedResponse {
            id: r.id.clone(),
            system: r.system.clone(),
            prompt_id: r.prompt_id.clone(),
            tags: r.tags.clone(),
            criteria: r
                .criteria
                .iter()
                .zip(&ps)
                .map(|(c, &p)| Criterion {
                    criterion: c.criterion.clone(),
                    points: c.points.expect("checked by read_rubric"),
                    tags: c.tags.clone(),
                    met: p >= MET_THRESHOLD,
                })
                .collect(),
            line: r.line,
        });
        let mut out = r.clone();
        for (c, &p) in out.criteria.iter_mut().zip(&ps) {
            c.met = Some(p >= MET_THRESHOLD);
            c.p_met = Some(p);
        }
        written.push(out);
        p_met.push(ps);
    }
    if let Some(first) = truncated.first() {
        warnings.push(Warning::new(format!(
            "{} of {} (response, criterion) pairs were longer than the model's {}-token limit and were cut: \
             the conversation's earliest turns first, the response's end only when it alone did not fit, the \
             criterion never (first: response `{}` of system `{}`, line {}, criteria[{}]; all are listed in the \
             table grade_truncated and the JSON report)",
            truncated.len(),
            inputs.len(),
            loaded.config.max_tokens(),
            first.id,
            first.system,
            first.line,
            first.index
        )));
    }

    let scores = grade_with_probabilities(&graded, &p_met, &req.options.rubric)?;
    warnings.extend(scores.warnings);
    let mut provenance = scores.provenance;
    provenance.inputs.push(req.rubric.fingerprint());
    provenance.inputs.extend(model_inputs);
    provenance.conventions.push(("grader".into(), kind.describe().into()));
    provenance.conventions.push((
        "grader input".into(),
        "first segment: the conversation before the response (`role: content` lines) and the response; second: \
         the criterion, never cut"
            .into(),
    ));
    let report = GradeReport {
        provenance,
        grader: GraderSummary {
            model: model.name.clone(),
            kind,
            labels: loaded.config.labels.clone(),
            description: kind.describe(),
        },
        criteria,
        truncated,
        systems: scores.systems,
        tags: scores.tags,
        responses: scores.responses,
        system_scores: scores.system_scores,
        warnings,
    };
    let tables = grade_tables(&report);
    Ok(GradeOutcome {
        outcome: Outcome { report, tables },
        graded_jsonl: crate::data::graded::write_rubric_jsonl(&written),
    })
}

impl ModelJob for GradeRequest {
    type Output = GradeOutcome;
    const STAGE: &'static str = "Grading with the model";

    /// One sequence per (response, criterion) pair.
    fn planning(sequences: usize) -> Option<String> {
        Some(format!("{} (response, criterion) pairs", crate::report::thousands(sequences)))
    }

    async fn run_on(
        &self,
        model: &crate::model::TextModel,
        encoder: &crate::gpu::AnyEncoder,
        model_inputs: Vec<Fingerprint>,
        progress: &mut dyn FnMut(&EncodeProgress) -> bool,
    ) -> Result<GradeOutcome> {
        grade_with_encoder(self, model, encoder, model_inputs, progress).await
    }

    fn provenance(output: &mut GradeOutcome) -> &mut Provenance {
        &mut output.outcome.report.provenance
    }
}

/// The criteria's P(met), the rubric's tables (responses, systems) and the cut pairs.
pub fn grade_tables(report: &GradeReport) -> Vec<Table> {
    let mut criteria = Table::new(
        "grade_criteria",
        "The grader's P(met) per criterion (met = P(met) >= 0.5)",
        &["id", "system", "line", "criterion #", "criterion", "points", "P(met)", "met"],
    );
    for c in &report.criteria {
        criteria.push(vec![
            c.id.clone(),
            c.system.clone(),
            c.line.to_string(),
            c.index.to_string(),
            c.criterion.clone(),
            crate::report::fmt_num(c.points, 2),
            crate::report::fmt_num(c.p_met, 4),
            if c.met { "yes" } else { "no" }.into(),
        ]);
    }
    let mut out = vec![criteria];
    out.extend(tables::rubric_scores(&report.responses, &report.system_scores));
    if !report.truncated.is_empty() {
        let mut cut = Table::new(
            "grade_truncated",
            "Pairs cut to the model's token limit",
            &["id", "system", "line", "criterion #", "conversation tokens cut", "response tokens cut"],
        );
        for c in &report.truncated {
            cut.push(vec![
                c.id.clone(),
                c.system.clone(),
                c.line.to_string(),
                c.index.to_string(),
                c.conversation_tokens_cut.to_string(),
                c.response_tokens_cut.to_string(),
            ]);
        }
        out.push(cut);
    }
    out
}
