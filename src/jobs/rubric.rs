//! Rubric grading (`medrank rubric`, the page's Rubric job): HealthBench's scores of a file
//! of graded responses (the method reads its own single input).

use serde::{Deserialize, Serialize};

use super::kept::Progress;
use super::spec::{between, defaults_of, reply, JobRequest, JobSpec, View};
use super::views::{rubric_view, RubricView};
use super::{tables, NamedText, Outcome};
use crate::eval::rubric::{RubricOptions, RubricReport};
use crate::Result;

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct RubricRequest {
    pub file: NamedText,
    #[serde(default)]
    pub options: RubricOptions,
}

pub fn rubric(req: &RubricRequest) -> Result<Outcome<RubricReport>> {
    let report = crate::eval::rubric::grade(&req.file.name, &req.file.text, &req.options)?;
    let tables = tables::rubric(&report);
    Ok(Outcome { report, tables })
}

/// The job: the HealthBench scores of a file of graded responses.
// A grader's graded file is a graded file too: Rubric scores it when no other graded file is
// given.
pub const JOB: JobSpec = JobSpec::new("rubric", "Rubric", "rubric grading", "rubric")
    .reads(&["rubric", "rubric_grader"], &[&["rubric", "rubric_grader"]])
    .views(&[View::tab("rubric_view", "Scores")])
    .defaults(defaults_of::<RubricOptions>)
    .runs(run);

/// The Scores tab, for the Rubric and the Grade job.
#[derive(Serialize)]
pub struct RubricViews<'a> {
    pub rubric_view: RubricView<'a>,
}

/// The page's request read as `medrank rubric`'s: the graded file, or, without one, the
/// grader's graded file (Agreement's, a graded file too).
pub fn rubric_request(request: &JobRequest) -> Result<RubricRequest> {
    let what = "a file of graded responses";
    let file = match request.one_file("rubric", what)? {
        Some(f) => f,
        None => request.required("rubric_grader", what)?,
    };
    Ok(RubricRequest { file: file.named(), options: request.options()? })
}

/// Rubric grading over one file of graded responses (`medrank rubric`).
fn run(request: &JobRequest, progress: Progress) -> Result<String> {
    let req = rubric_request(request)?;
    between(progress, "Scoring the graded responses", || {
        let outcome = rubric(&req)?;
        let confidence = req.options.bootstrap.confidence;
        reply(&outcome, RubricViews { rubric_view: rubric_view(&outcome.report.system_scores, confidence) })
    })
}
