//! A rubric grader's agreement with people, and the people's with each other (`medrank
//! rubric-agreement`, the page's Agreement job): HealthBench's meta-evaluation.

use serde::{Deserialize, Serialize};

use super::kept::Progress;
use super::quality::PeopleAgreement;
use super::spec::{between, reply, JobRequest, JobSpec, View};
use super::views::{rubric_agreement_view, RubricAgreementView};
use super::{fingerprint_all, tables, NamedText, Outcome};
use crate::eval::rubric_agreement::RubricAgreementReport;
use crate::Result;

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

pub fn rubric_agreement(req: &RubricAgreementRequest) -> Result<Outcome<RubricAgreementReport>> {
    let grader = req.grader_file.as_ref().map(|f| (f.name.as_str(), f.text.as_str()));
    let mut report = crate::eval::rubric_agreement::agreement((&req.file.name, &req.file.text), grader)?;
    // A grader no better than chance is said in the warnings, as the Criteria and Agreement
    // tabs say it beside its figures.
    let at_chance = PeopleAgreement::of_grader(&report).and_then(|a| a.warning("the grader's verdicts are"));
    report.warnings.extend(at_chance);
    let inputs: Vec<&NamedText> = std::iter::once(&req.file).chain(&req.grader_file).collect();
    fingerprint_all(&mut report.provenance, &inputs);
    let tables = tables::rubric_agreement(&report);
    Ok(Outcome { report, tables })
}

/// The job: a grader's judgements of rubric criteria against several people's.
// People's judgements against each other, and against a grader's file when one is given.
pub const JOB: JobSpec =
    JobSpec::new("rubric_agreement", "Agreement", "a rubric grader\u{2019}s agreement with people", "rubric-agreement")
        .reads(&["rubric_judged", "rubric_grader"], &[&["rubric_judged"]])
        .views(&[View::tab("rubric_agreement_view", "Agreement")])
        .runs(run);

/// The Agreement tab of a report (the Agreement job's, and Grade's grader against people).
#[derive(Serialize)]
pub struct AgreementViews<'a> {
    pub rubric_agreement_view: RubricAgreementView<'a>,
}

impl<'a> AgreementViews<'a> {
    pub fn of(report: &'a RubricAgreementReport) -> Self {
        AgreementViews { rubric_agreement_view: rubric_agreement_view(report) }
    }
}

/// The page's request read as `medrank rubric-agreement`'s: the people's file, and the
/// grader's when there is one.
fn agreement_request(request: &JobRequest) -> Result<RubricAgreementRequest> {
    Ok(RubricAgreementRequest {
        file: request.required("rubric_judged", "a rubric file judged by people (criteria with met_by)")?.named(),
        grader_file: request.optional("rubric_grader", "grader\u{2019}s graded rubric file")?,
    })
}

/// A grader's agreement with people, and each person's with the others (`medrank
/// rubric-agreement --input --grader-file`): the report, its two tables and the Agreement tab.
fn run(request: &JobRequest, progress: Progress) -> Result<String> {
    let req = agreement_request(request)?;
    between(progress, "Comparing the judgements", || {
        let outcome = rubric_agreement(&req)?;
        reply(&outcome, AgreementViews::of(&outcome.report))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::spec::testing::{file, request};

    #[test]
    fn agreement_reads_the_judged_file_and_the_grader_file_and_rubric_keeps_its_graded_file() {
        let judged = file("judged.jsonl", "rubric_judged", &[]);
        let grader = file("grader.jsonl", "rubric_grader", &[]);
        let graded = file("graded.jsonl", "rubric", &[]);
        let r = request(vec![graded.clone(), judged.clone(), grader.clone()], serde_json::json!({}));
        let req = agreement_request(&r).unwrap();
        assert_eq!(req.file.name, "judged.jsonl");
        assert_eq!(req.grader_file.map(|f| f.name).as_deref(), Some("grader.jsonl"));
        let rubric = |r: &JobRequest| crate::jobs::rubric::rubric_request(r).map(|req| req.file.name);
        assert_eq!(rubric(&r).unwrap(), "graded.jsonl", "Rubric scores the graded file, not the grader's");
        // People only: no grader file is fine.
        let r = request(vec![judged.clone()], serde_json::json!({}));
        assert!(agreement_request(&r).unwrap().grader_file.is_none());
        // A grader's file alone is still a graded file for Rubric.
        let r = request(vec![grader.clone()], serde_json::json!({}));
        assert_eq!(rubric(&r).unwrap(), "grader.jsonl");
        let e = agreement_request(&r).unwrap_err().to_string();
        assert_eq!(e, "add a rubric file judged by people (criteria with met_by)");
        let r = request(vec![judged, grader.clone(), file("g2.jsonl", "rubric_grader", &[])], serde_json::json!({}));
        let e = agreement_request(&r).unwrap_err().to_string();
        assert!(e.contains("not several (grader.jsonl and g2.jsonl)"), "{e}");
    }
}
