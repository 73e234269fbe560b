//! Statement checks (`medrank statements`): an NLI model checks each answer against the
//! expert statements of its question (K-QA's comprehensiveness and hallucination,
//! `eval::statements`); the answer (after its question or conversation) is the premise,
//! each statement the hypothesis (`model::grade::encode_pair`, the grader's input).

use super::kept::{check_classification_head, Encoding, ModelJob, ProgressEncoder, RunOptions};
use super::spec::{options_value, reply, JobSpec, LocalFuture, ModelRun, RunViews, View};
use super::{NamedText, Outcome};
use crate::data::statements::parse_statements;
use crate::eval::statements::{answer_checks, system_checks, AnswerChecks, SystemChecks};
use crate::model::grade::{conversation_text, encode_pair, head_logits, GradeInput, NliJudgement, NliLabels};
use crate::report::{fmt_num, fmt_stat, Provenance, Table};
use crate::stats::bootstrap::Bootstrap;
use crate::stats::Stat;
use crate::{Error, Result, Warning};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default)]
pub struct StatementOptions {
    #[serde(flatten)]
    pub bootstrap: Bootstrap,
    /// Pairs per forward pass.
    pub batch_size: usize,
}

impl Default for StatementOptions {
    fn default() -> Self {
        StatementOptions { bootstrap: Bootstrap::default(), batch_size: crate::model::embed::DEFAULT_BATCH }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct StatementRequest {
    /// Answers with statements (FORMATS.md §11).
    pub answers: NamedText,
    #[serde(default)]
    pub options: StatementOptions,
}

/// One (answer, statement) judgement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatementJudgement {
    pub id: String,
    pub system: String,
    pub line: usize,
    pub statement: String,
    pub must_have: bool,
    #[serde(flatten)]
    pub judgement: NliJudgement,
}

/// A pair cut to the model's limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CutStatement {
    pub id: String,
    pub system: String,
    pub line: usize,
    pub statement: String,
    pub prompt_tokens_cut: usize,
    pub response_tokens_cut: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct StatementReport {
    pub provenance: Provenance,
    pub model: String,
    pub labels: NliLabels,
    pub judgements: Vec<StatementJudgement>,
    pub answers: Vec<AnswerChecks>,
    pub systems: Vec<SystemChecks>,
    pub truncated: Vec<CutStatement>,
    /// The NLI model's measured quality, when it was trained by medrank (`jobs::quality`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_quality: Option<super::quality::ModelQuality>,
    pub warnings: Vec<Warning>,
}

impl ModelJob for StatementRequest {
    type Output = Outcome<StatementReport>;
    const STAGE: &'static str = "Checking statements with the model";

    /// Checks every answer of `req.answers` against its statements with `model` on `encoder`.
    async fn run_on<E: crate::model::Encoder>(&self, on: Encoding<'_, E>) -> Result<Outcome<StatementReport>> {
        let Encoding { model, encoder, model_inputs, progress } = on;
        let req = self;
        crate::stats::bootstrap::check_settings(req.options.bootstrap.resamples, req.options.bootstrap.confidence)
            .map_err(Error::invalid)?;
        let loaded = &model.encoder.model;
        check_classification_head(model, "statement checks need an NLI model")?;
        let labels = NliLabels::of_labels(&loaded.config.labels)?;
        let (answers, mut warnings) = parse_statements(&req.answers.name, &req.answers.text)?;
        let mut inputs: Vec<GradeInput> = Vec::new();
        // The answer and the statement's field of each input.
        let mut fields: Vec<(usize, String)> = Vec::new();
        for (n, a) in answers.iter().enumerate() {
            let prompt = conversation_text(a.prompt.as_ref());
            for (i, (statement, must)) in a.statements().enumerate() {
                let field =
                    if must { format!("must_have[{i}]") } else { format!("nice_to_have[{}]", i - a.must_have.len()) };
                fields.push((n, field.clone()));
                inputs.push(
                    encode_pair(&model.tokenizer, &prompt, &a.response, statement)
                        .map_err(|e| Error::input(&req.answers.name, a.line, &field, e.to_string()))?,
                );
            }
        }
        let counted = ProgressEncoder::start(encoder, inputs.len(), progress)?;
        let encoded: Vec<&crate::model::Encoded> = inputs.iter().map(|i| &i.encoded).collect();
        let batch = req.options.batch_size.clamp(1, crate::bounds::MAX_BATCH);
        let logits = head_logits(&counted, &model.tokenizer, &encoded, batch).await.map_err(|e| {
            e.naming_input(&model.name, |i| {
                let (n, field) = &fields[i];
                let a = &answers[*n];
                format!("{}:{}: answer `{}` of system `{}`, {field}", req.answers.name, a.line, a.id, a.system)
            })
        })?;

        let (mut judged, mut judgements, mut truncated) = (Vec::new(), Vec::new(), Vec::new());
        let mut next = 0;
        for a in &answers {
            let mut of_answer = Vec::new();
            for (statement, must) in a.statements() {
                let j = labels.judge(&logits[next]);
                let input = &inputs[next];
                if input.conversation_cut + input.response_cut > 0 {
                    truncated.push(CutStatement {
                        id: a.id.clone(),
                        system: a.system.clone(),
                        line: a.line,
                        statement: statement.to_string(),
                        prompt_tokens_cut: input.conversation_cut,
                        response_tokens_cut: input.response_cut,
                    });
                }
                judgements.push(StatementJudgement {
                    id: a.id.clone(),
                    system: a.system.clone(),
                    line: a.line,
                    statement: statement.to_string(),
                    must_have: must,
                    judgement: j,
                });
                of_answer.push(j);
                next += 1;
            }
            judged.push(of_answer);
        }
        if !truncated.is_empty() {
            warnings.push(Warning::new(format!(
                "{} of {} (answer, statement) pairs were longer than the model's {}-token limit and were cut: the \
                 question first, the answer's end only when it alone did not fit, the statement never (all listed in \
                 the table statement_truncated)",
                truncated.len(),
                inputs.len(),
                model.tokenizer.max_tokens
            )));
        }
        let checks = answer_checks(&answers, &judged);
        let systems = system_checks(&answers, &checks, req.options.bootstrap);
        let b = req.options.bootstrap;
        let mut provenance = Provenance::new(b.seed)
            .convention("judgement", "NLI with the answer (after its question) as premise and the statement as hypothesis; the label with the largest logit")
            .convention("comprehensiveness", "must-have statements entailed / must-have statements (K-QA's Comp)")
            .convention("contradicted", "statements (must-have and nice-to-have) contradicted, counted (K-QA's Hall)")
            .convention("hallucination", "statements contradicted / statements")
            .convention(
                "interval",
                format!(
                    "percentile bootstrap of the mean per system, over the prompts (prompt_id, else id), {} resamples, {}% confidence",
                    b.resamples,
                    b.confidence * 100.0
                ),
            );
        provenance.inputs.push(req.answers.fingerprint());
        provenance.inputs.extend(model_inputs);
        let report = StatementReport {
            provenance,
            model: model.name.clone(),
            labels,
            judgements,
            answers: checks,
            systems,
            truncated,
            model_quality: None,
            warnings,
        };
        let tables = statement_tables(&report);
        Ok(Outcome { report, tables })
    }

    fn provenance(output: &mut Outcome<StatementReport>) -> &mut Provenance {
        &mut output.report.provenance
    }

    fn trust(output: &mut Outcome<StatementReport>) -> (&mut Option<super::quality::ModelQuality>, &mut Vec<Warning>) {
        (&mut output.report.model_quality, &mut output.report.warnings)
    }
}

// ------------------------------------------------------------------ the job ----------------

/// `medrank statements`' options with the run's (`--backend`, `--precision`), named as the
/// flags; the page's Options send the same names.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct StatementJobOptions {
    #[serde(flatten)]
    pub statements: StatementOptions,
    #[serde(flatten)]
    pub run: RunOptions,
}

/// The job: the chosen NLI model checks each answer against its expert statements.
pub const JOB: JobSpec =
    JobSpec::new("statements", "Statements", "answers checked against expert statements", "statements")
        .reads(&["statement_answers"], &[&["statement_answers"]])
        .views(&[View::tab("statement_checks", "Statements")])
        .defaults(|| options_value(&StatementJobOptions { run: RunOptions::page(), ..Default::default() }))
        .runs_on_model(
            run_on_model,
            &[],
            "Needs an NLI model: choose one under Model (labels naming entailment and contradiction).",
        );

/// Statement checks with the kept model as the NLI model (`medrank statements --input --nli
/// --backend`): on WebGPU when the options allow it and the browser gives an adapter, else
/// on the CPU, in the options' precision; the reply says which.
fn run_on_model(model: ModelRun<'_>) -> LocalFuture<'_, Result<String>> {
    Box::pin(async move {
        let options: StatementJobOptions = model.request.options()?;
        let answers = model.request.required("statement_answers", "a file of answers with expert statements")?;
        let req = StatementRequest { answers: answers.named(), options: options.statements };
        let (outcome, backend, kept) = model.run(&req, &options.run, "Checking statements with the model").await?;
        // The Statements tab draws from the report itself.
        reply(&outcome, RunViews::of(kept, &backend))
    })
}

/// The judgements, the answers' figures, the systems' means, and the cut pairs.
pub fn statement_tables(report: &StatementReport) -> Vec<Table> {
    let mut judgements = Table::new(
        "statement_judgements",
        "Each (answer, statement): P(entailment), P(contradiction) and the NLI label",
        &["id", "system", "statement", "must_have", "P(entailment)", "P(contradiction)", "label"],
    );
    for j in &report.judgements {
        let label = match (j.judgement.entailed, j.judgement.contradicted) {
            (true, _) => "entailed",
            (_, true) => "contradicted",
            _ => "neither",
        };
        judgements.push(vec![
            j.id.clone(),
            j.system.clone(),
            j.statement.clone(),
            if j.must_have { "yes" } else { "no" }.into(),
            fmt_num(j.judgement.p_entailment, 4),
            fmt_num(j.judgement.p_contradiction, 4),
            label.into(),
        ]);
    }
    let mut answers = Table::new(
        "statement_answers",
        "Per answer: must-have statements entailed, statements contradicted",
        &[
            "id",
            "system",
            "line",
            "must_have",
            "entailed",
            "comprehensiveness",
            "statements",
            "contradicted",
            "hallucination",
        ],
    );
    for a in &report.answers {
        answers.push(vec![
            a.id.clone(),
            a.system.clone(),
            a.line.to_string(),
            a.must_have.to_string(),
            a.entailed_must_have.to_string(),
            fmt_stat(&a.comprehensiveness, 4),
            a.statements.to_string(),
            a.contradicted.to_string(),
            fmt_num(a.hallucination, 4),
        ]);
    }
    let mut systems = Table::new(
        "statement_systems",
        "Mean per system with bootstrap interval",
        &["system", "figure", "n", "mean", "low", "high"],
    );
    for s in &report.systems {
        for f in &s.figures {
            let (low, high) = match &f.interval {
                Stat::Defined(i) => (fmt_num(i.lo, 4), fmt_num(i.hi, 4)),
                Stat::Undefined(r) => (format!("undefined ({r})"), String::new()),
            };
            systems.push(vec![s.system.clone(), f.figure.into(), f.n.to_string(), fmt_stat(&f.mean, 4), low, high]);
        }
    }
    let mut out = vec![judgements, answers, systems];
    if !report.truncated.is_empty() {
        let headers = ["id", "system", "line", "statement", "question tokens cut", "answer tokens cut"];
        let keys = ["id", "system", "line", "statement", "prompt_tokens_cut", "response_tokens_cut"];
        out.push(super::tables::table_of("statement_truncated", super::grade::CUT, &headers, &keys, &report.truncated));
    }
    out
}
