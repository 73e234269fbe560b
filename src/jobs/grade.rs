//! Grading rubric criteria with a model (`medrank grade`, the page's Grade job):
//! an ungraded (or graded) §7 rubric file with each response's text, a criterion grader
//! (`model::grade`: a model trained with `--task criterion`, or an NLI model zero-shot),
//! and out come P(met) per criterion, the HealthBench scores with met = P(met) >= 0.5,
//! intervals that carry the grader's uncertainty (`eval::rubric::grade_with_probabilities`)
//! and the graded file (met and p_met per criterion), which `medrank rubric` scores to the
//! same means and `medrank rubric-agreement --grader-file` sets beside people.

use super::kept::{check_classification_head, Encoding, ModelJob, ProgressEncoder, RunOptions};
use super::rubric_agreement::{rubric_agreement, AgreementViews, RubricAgreementRequest};
use super::spec::{options_value, reply, JobRequest, JobSpec, LocalFuture, ModelRun, ReportPart, RunViews, View};
use super::views::{rubric_view, value, RubricView};
use super::{tables, NamedText, Outcome};
use crate::data::graded::{parse_rubric, Criterion, GradedResponse, RubricResponse};
use crate::eval::rubric::{grade_with_probabilities, ResponseScore, RubricOptions, SystemScore};
use crate::eval::rubric_agreement::RubricAgreementReport;
use crate::model::grade::{conversation_text, encode_pair, grade_inputs, GradeInput, GraderKind};
use crate::report::{Provenance, Table};
use crate::{Error, Result, Warning};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The title of the table of pairs a model cut (Grade's and Statements').
pub const CUT: &str = "Pairs cut to the model's token limit";

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
    /// The grader's measured quality, when it was trained by medrank (`jobs::quality`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_quality: Option<super::quality::ModelQuality>,
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

impl ModelJob for GradeRequest {
    type Output = GradeOutcome;
    const STAGE: &'static str = "Grading with the model";

    /// One sequence per (response, criterion) pair.
    fn planning(sequences: usize) -> Option<String> {
        Some(format!("{} (response, criterion) pairs", crate::report::thousands(sequences)))
    }

    /// Grades `req.rubric` with `model` run by `encoder`. `progress` is called before the first
    /// batch and after each; `false` cancels.
    async fn run_on<E: crate::model::Encoder>(&self, on: Encoding<'_, E>) -> Result<GradeOutcome> {
        let Encoding { model, encoder, model_inputs, progress } = on;
        let req = self;
        let loaded = &model.encoder.model;
        let needs = "a grader is a model trained with `medrank train --task criterion`, or an NLI model (its labels name `entailment`)";
        check_classification_head(model, needs)?;
        let kind = GraderKind::of_labels(&loaded.config.labels)?;
        let mut warnings = Vec::new();
        let responses = read_rubric(&req.rubric, &mut warnings)?;

        // Every (response, criterion) pair, encoded, and which pair each input is.
        let mut inputs: Vec<GradeInput> = Vec::new();
        let mut pairs: Vec<(usize, usize)> = Vec::new();
        for (n, r) in responses.iter().enumerate() {
            pairs.extend((0..r.criteria.len()).map(|i| (n, i)));
            let conversation = conversation_text(r.prompt.as_ref());
            let text = r.response.as_deref().expect("checked by read_rubric");
            for (i, c) in r.criteria.iter().enumerate() {
                let input = encode_pair(&model.tokenizer, &conversation, text, &c.criterion).map_err(|e| {
                    Error::input(&req.rubric.name, r.line, &format!("criteria[{i}].criterion"), e.to_string())
                })?;
                inputs.push(input);
            }
        }
        let counted = ProgressEncoder::start(encoder, inputs.len(), progress)?;
        let encoded: Vec<&crate::model::Encoded> = inputs.iter().map(|i| &i.encoded).collect();
        let p_flat = grade_inputs(
            &counted,
            kind,
            &model.tokenizer,
            &encoded,
            req.options.batch_size.clamp(1, crate::bounds::MAX_BATCH),
        )
        .await
        .map_err(|e| {
            e.naming_input(&model.name, |i| {
                let (n, c) = pairs[i];
                let r = &responses[n];
                format!("{}:{}: response `{}` of system `{}`, criteria[{c}]", req.rubric.name, r.line, r.id, r.system)
            })
        })?;

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
                model.tokenizer.max_tokens,
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
            model_quality: None,
            warnings,
        };
        let tables = grade_tables(&report);
        Ok(GradeOutcome {
            outcome: Outcome { report, tables },
            graded_jsonl: crate::data::graded::write_rubric_jsonl(&written),
        })
    }

    fn provenance(output: &mut GradeOutcome) -> &mut Provenance {
        &mut output.outcome.report.provenance
    }

    fn trust(output: &mut GradeOutcome) -> (&mut Option<super::quality::ModelQuality>, &mut Vec<Warning>) {
        let report = &mut output.outcome.report;
        (&mut report.model_quality, &mut report.warnings)
    }
}

/// The Grade job's Criteria tab: which model graded and how, each response's criteria
/// with P(met), the pairs cut to the model's limit, and the graded file to download.
#[derive(Debug, Serialize)]
pub struct GradeView<'a> {
    pub grader: &'a GraderSummary,
    pub responses: Vec<GradedResponseView<'a>>,
    /// "3 of 46 (response, criterion) pairs ... were cut": only when some were.
    pub truncation: Option<String>,
    pub truncated: &'a [CutPair],
    /// The graded file: the rubric with `met` and `p_met` per criterion (the CLI's `--out`).
    pub graded_name: String,
    pub graded_jsonl: &'a str,
}

#[derive(Debug, Serialize)]
pub struct GradedResponseView<'a> {
    pub id: &'a str,
    pub system: &'a str,
    pub line: usize,
    /// The response's score with met = P(met) >= 0.5 (unclipped).
    pub score: Option<f64>,
    pub achieved: f64,
    pub possible: f64,
    pub criteria: Vec<&'a CriterionGrade>,
}

/// The Criteria tab of a grade outcome; `rubric_name` is the graded rubric file's name and
/// `max_tokens` the grader's token limit.
pub fn grade_view<'a>(
    report: &'a GradeReport,
    graded_jsonl: &'a str,
    rubric_name: &str,
    max_tokens: usize,
) -> GradeView<'a> {
    // The criteria of each response (its line in the file identifies it).
    let mut by_line: BTreeMap<usize, Vec<&CriterionGrade>> = BTreeMap::new();
    for c in &report.criteria {
        by_line.entry(c.line).or_default().push(c);
    }
    let responses = report
        .responses
        .iter()
        .map(|r| GradedResponseView {
            id: &r.id,
            system: &r.system,
            line: r.line,
            score: value(&r.overall.score),
            achieved: r.overall.achieved,
            possible: r.overall.possible,
            criteria: by_line.remove(&r.line).unwrap_or_default(),
        })
        .collect();
    let truncation = (!report.truncated.is_empty()).then(|| {
        format!(
            "{} of {} (response, criterion) pairs were longer than the grader\u{2019}s {max_tokens}-token limit and were cut \
             (the conversation\u{2019}s earliest turns first, the response\u{2019}s end only when it alone did not fit, \
             the criterion never): P(met) of those pairs was judged on what was left. The table grade_truncated \
             lists every cut pair.",
            report.truncated.len(),
            report.criteria.len()
        )
    });
    GradeView {
        grader: &report.grader,
        responses,
        truncation,
        truncated: &report.truncated,
        graded_name: format!("{}.graded.jsonl", super::file_stem(rubric_name)),
        graded_jsonl,
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
        let headers = ["id", "system", "line", "criterion #", "conversation tokens cut", "response tokens cut"];
        let keys = ["id", "system", "line", "index", "conversation_tokens_cut", "response_tokens_cut"];
        out.push(tables::table_of("grade_truncated", CUT, &headers, &keys, &report.truncated));
    }
    out
}

// ------------------------------------------------------------------ the job ----------------

/// `medrank grade`'s options with the run's (`--backend`, `--precision`), named as the
/// flags; the page's Options send the same names.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct GradeJobOptions {
    #[serde(flatten)]
    pub grade: GradeOptions,
    #[serde(flatten)]
    pub run: RunOptions,
}

/// The job: the chosen model grades every criterion of a rubric file, then the scores.
// A graded file scores as it is (Rubric); a file with the responses' text and no `met` is
// graded by the model first (a graded file with texts is graded again when given this kind).
pub const JOB: JobSpec = JobSpec::new("grade", "Grade", "rubric grading with a model", "grade")
    .reads(&["rubric_responses"], &[&["rubric_responses"]])
    .views(&[View::tab("grade_view", "Criteria"), View::tab("rubric_view", "Scores"), View::optional("grader_agreement", "Agreement")])
    .defaults(|| options_value(&GradeJobOptions { run: RunOptions::page(), ..Default::default() }))
    .runs_on_model(run_on_model, &[], "Needs a grader: choose a model under Model (an NLI model or a criterion grader, from this computer or trained here).");

/// A rubric file graded by the kept model (`medrank grade --rubric --grader --backend`):
/// P(met) for every (response, criterion) pair, then the HealthBench scores with met =
/// P(met) >= 0.5, expected means and intervals that draw met from P(met). On WebGPU when
/// the options allow it and the browser gives an adapter, else on the CPU, in the options'
/// precision; the reply says which, and carries the graded file (the CLI's `--out`) and,
/// when the file carries people's `met_by`, the grader set against them.
fn run_on_model(model: ModelRun<'_>) -> LocalFuture<'_, Result<String>> {
    Box::pin(async move {
        #[derive(Serialize)]
        struct GradeViews<'a> {
            grade_view: GradeView<'a>,
            rubric_view: RubricView<'a>,
            #[serde(flatten)]
            run: RunViews<'a>,
            /// When the file carries people's `met_by`: this grader against them (kept
            /// beside the Grade report, so its report and tables stay `medrank grade`'s).
            #[serde(skip_serializing_if = "Option::is_none")]
            grader_agreement: Option<ReportPart<'a, RubricAgreementReport, AgreementViews<'a>>>,
        }
        let (req, run) = grade_request(model.request)?;
        let (graded, backend, kept) = model.run(&req, &run, "Scoring the graded responses").await?;
        let outcome = &graded.outcome;
        let max_tokens = kept.model.tokenizer.max_tokens;
        let grade_view = grade_view(&outcome.report, &graded.graded_jsonl, &req.rubric.name, max_tokens);
        let agreement = grader_agreement(&req.rubric, &grade_view.graded_name, &graded.graded_jsonl)?;
        let confidence = req.options.rubric.bootstrap.confidence;
        let views = GradeViews {
            grader_agreement: agreement.as_ref().map(|a| ReportPart::new(a, AgreementViews::of(&a.report))),
            grade_view,
            rubric_view: rubric_view(&outcome.report.system_scores, confidence),
            run: RunViews::of(kept, &backend),
        };
        reply(outcome, views)
    })
}

/// The page's request read as `medrank grade`'s, and where the model runs.
fn grade_request(request: &JobRequest) -> Result<(GradeRequest, RunOptions)> {
    let options: GradeJobOptions = request.options()?;
    let rubric = request.required("rubric_responses", "a rubric file with the responses\u{2019} text to grade")?;
    Ok((GradeRequest { rubric: rubric.named(), options: options.grade }, options.run))
}

/// The grader just run against the people who judged the same criteria (`met_by`), when
/// the graded file carries any: `medrank rubric-agreement --input RUBRIC --grader-file
/// GRADED` on the graded file this reply carries (the same job).
fn grader_agreement(
    rubric: &NamedText,
    graded_name: &str,
    graded_jsonl: &str,
) -> Result<Option<Outcome<RubricAgreementReport>>> {
    let (responses, _) = parse_rubric(&rubric.name, &rubric.text)?;
    if !responses.iter().flat_map(|r| &r.criteria).any(|c| !c.met_by.is_empty()) {
        return Ok(None);
    }
    let request =
        RubricAgreementRequest { file: rubric.clone(), grader_file: Some(NamedText::new(graded_name, graded_jsonl)) };
    rubric_agreement(&request).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::spec::testing::{file, request};

    #[test]
    fn grade_reads_the_file_to_grade_and_the_bootstrap_and_backend_options() {
        let r = request(
            vec![file("graded.jsonl", "rubric", &[]), file("c.jsonl", "rubric_responses", &[])],
            serde_json::json!({"seed": 7, "resamples": 30, "confidence": 0.9, "backend": "cpu"}),
        );
        let (req, run) = grade_request(&r).unwrap();
        assert_eq!(req.rubric.name, "c.jsonl", "a graded file is the Rubric job's, not Grade's");
        let b = req.options.rubric.bootstrap;
        assert_eq!((b.seed, b.resamples, b.confidence), (7, 30, 0.9));
        assert_eq!(req.options.batch_size, GradeOptions::default().batch_size);
        assert_eq!(run.read().unwrap().1, crate::gpu::BackendChoice::Cpu);
        let r = request(vec![file("graded.jsonl", "rubric", &[])], serde_json::json!({}));
        let e = grade_request(&r).unwrap_err().to_string();
        assert_eq!(e, "add a rubric file with the responses\u{2019} text to grade");
        let r = request(vec![file("c.jsonl", "rubric_responses", &[])], serde_json::json!({"backend": "tpu"}));
        assert!(grade_request(&r).unwrap().1.read().unwrap_err().to_string().contains("unknown backend `tpu`"));
    }
}
