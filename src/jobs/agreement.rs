//! Agreement among human annotators (an evaluator's agreement with them is part of
//! `evaluate`).

use super::{fingerprint_all, read_bundle, read_rankings, tables, NamedText, Outcome};
use crate::eval::proxy;
use crate::report::Provenance;
use crate::{Result, Warning};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct AgreementRequest {
    pub rankings: NamedText,
    /// With a bundle, names are checked and the statistics are computed per task.
    #[serde(default)]
    pub bundle: Option<NamedText>,
    #[serde(default)]
    pub controls: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScopedAgreement {
    /// The task, or "all" without a bundle.
    pub scope: String,
    pub agreement: proxy::HumanAgreement,
}

#[derive(Debug, Clone, Serialize)]
pub struct AgreementReport {
    pub provenance: Provenance,
    pub scopes: Vec<ScopedAgreement>,
    pub warnings: Vec<Warning>,
}

/// Average human ranks, Friedman and Krippendorff's alpha, per task when a bundle says
/// which instance belongs to which task (an evaluator's agreement with the humans is part
/// of `evaluate`).
pub fn agreement(req: &AgreementRequest) -> Result<Outcome<AgreementReport>> {
    use std::collections::HashSet;
    let mut warnings = Vec::new();
    let bundle = match &req.bundle {
        Some(b) => Some(read_bundle(b, &mut warnings)?),
        None => None,
    };
    // Humans do not rank control cases: those named and the control files the bundle marks.
    let controls = bundle.as_ref().map(|b| b.controls_with(&req.controls)).unwrap_or_else(|| req.controls.clone());
    let rankings = read_rankings(&req.rankings, bundle.as_ref(), &controls, &mut warnings)?;
    let mut groups: Vec<(String, HashSet<&str>)> = Vec::new();
    match &bundle {
        Some(b) => {
            for inst in &b.instances {
                let task = inst.problem.task().name();
                match groups.iter_mut().find(|(t, _)| t == task) {
                    Some((_, ids)) => {
                        ids.insert(&inst.id);
                    }
                    None => groups.push((task.to_string(), HashSet::from([inst.id.as_str()]))),
                }
            }
        }
        None => groups.push(("all".into(), rankings.instances.iter().map(String::as_str).collect())),
    }
    let scopes: Vec<ScopedAgreement> = groups
        .iter()
        .filter_map(|(scope, ids)| {
            proxy::human_agreement(&rankings, ids, ids, None)
                .map(|agreement| ScopedAgreement { scope: scope.clone(), agreement })
        })
        .collect();
    let mut provenance = Provenance::new(0)
        .convention("average human rank", "mean over instances and annotators, 1 = best")
        .convention("Friedman", "blocks = (instance, annotator) with every system ranked; tie-corrected; chi-square p")
        .convention("Krippendorff's alpha", "ordinal; coders = annotators, units = (instance, system)");
    let mut inputs = vec![&req.rankings];
    inputs.extend(req.bundle.as_ref());
    fingerprint_all(&mut provenance, &inputs);
    let tables = scopes.iter().flat_map(|s| tables::human(&s.scope, &s.agreement)).collect();
    Ok(Outcome { report: AgreementReport { provenance, scopes, warnings }, tables })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUNDLE: &str = r#"{"id": "q1", "task": "mcqa", "question": "Q?", "options": {"1": "A", "2": "B"}, "answer": "1", "arguments": {"x": "because", "y": "since", "noise_file": "zzz"}, "controls": ["noise_file"]}
{"id": "q2", "task": "mcqa", "question": "Q?", "options": {"1": "A", "2": "B"}, "answer": "2", "arguments": {"x": "because", "y": "since", "noise_file": "zzz"}, "controls": ["noise_file"]}
"#;

    fn request(rankings: &str) -> AgreementRequest {
        AgreementRequest {
            rankings: NamedText::new("r.csv", rankings),
            bundle: Some(NamedText::new("b.jsonl", BUNDLE)),
            controls: Vec::new(),
        }
    }

    #[test]
    fn a_control_file_the_bundle_marks_is_not_expected_from_humans_and_refused_from_them() {
        // Humans rank x and y only: no warning that they skipped the control file.
        let ranked = "instance,annotator,system,rank\nq1,a,x,1\nq1,a,y,2\nq2,a,x,2\nq2,a,y,1\n";
        let outcome = agreement(&request(ranked)).unwrap();
        assert!(outcome.report.warnings.is_empty(), "{:?}", outcome.report.warnings);
        // A human rank for the control file is refused, as for a named control.
        let err = agreement(&request(&format!("{ranked}q1,a,noise_file,3\n"))).unwrap_err().to_string();
        assert!(err.starts_with("r.csv:6: field `system`"), "{err}");
        assert!(err.contains("noise_file"), "{err}");
    }
}
