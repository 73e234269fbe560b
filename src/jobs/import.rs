//! Import of the public Ranking-Over-Scoring (HiTZ) MCQA files into a bundle.

use super::{fingerprint_all, NamedText};
use crate::data;
use crate::data::controls::Control;
use crate::report::{Provenance, Table};
use crate::{Error, Result, Warning};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ImportRequest {
    pub no_argument: NamedText,
    /// (system, file) per source; control-case files import the same way.
    pub sources: Vec<(String, NamedText)>,
    /// The sources (by system name) that are control cases (the paper's Label_Only, Noise,
    /// IR_Passages files): the bundle marks them, and the robustness verdict counts them.
    #[serde(default)]
    pub controls: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    pub provenance: Provenance,
    /// The no-argument file: the bundle's questions, each instance id its line there.
    pub no_argument_file: String,
    pub instances: usize,
    pub systems: Vec<String>,
    /// Per source: records whose options were listed in another order (aligned by text).
    pub reordered: Vec<Reordered>,
    /// Per source: of those, records whose argument names an option by its number ("The
    /// correct answer is 4."), renumbered to the no-argument order.
    pub relabelled: Vec<Reordered>,
    /// The sources marked as control cases.
    pub controls: Vec<String>,
    /// Records with an empty option text: in the no-argument file, and per source. The
    /// evaluators leave empty options out (FORMATS.md, "Empty options").
    pub empty_options: EmptyOptionRecords,
    pub warnings: Vec<Warning>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Reordered {
    pub system: String,
    pub records: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct EmptyOptionRecords {
    pub no_argument: usize,
    pub sources: Vec<Reordered>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImportOutcome {
    pub bundle_jsonl: String,
    pub report: ImportReport,
    pub tables: Vec<Table>,
}

/// One Ranking-Over-Scoring file as the page gives it: the system it holds and whether it
/// is a control case (`medrank import --control-source`).
#[derive(Debug, Clone)]
pub struct RosFile {
    pub system: String,
    pub control: bool,
    pub file: NamedText,
}

/// The bundle of a ranking job: the one given, or one imported from the public
/// Ranking-Over-Scoring files as `medrank import` writes it (the file of system
/// `no_argument` is the base), with the import's outcome. Exactly one of the two is needed.
pub fn bundle_or_import(bundle: Option<NamedText>, ros: Vec<RosFile>) -> Result<(NamedText, Option<ImportOutcome>)> {
    match (bundle, ros.is_empty()) {
        (Some(bundle), true) => Ok((bundle, None)),
        (Some(bundle), false) => Err(Error::invalid(format!(
            "give either an argument bundle ({}) or Ranking-Over-Scoring files, not both",
            bundle.name
        ))),
        (None, true) => Err(Error::invalid("add an argument bundle (or the Ranking-Over-Scoring files)")),
        (None, false) => {
            let mut no_argument: Option<NamedText> = None;
            let mut sources = Vec::new();
            let mut controls = Vec::new();
            let names: Vec<String> = ros.iter().map(|f| f.file.name.clone()).collect();
            for f in ros {
                // The base is the file of system no_argument, in any spelling (`No_Argument`).
                if Control::of_name(&f.system) == Some(Control::NoArgument) && !f.control {
                    if let Some(first) = &no_argument {
                        return Err(Error::invalid(format!(
                            "two Ranking-Over-Scoring files have the system no_argument ({} and {}): the import takes one no-argument file",
                            first.name, f.file.name
                        )));
                    }
                    no_argument = Some(f.file);
                } else {
                    if f.control {
                        controls.push(f.system.clone());
                    }
                    sources.push((f.system, f.file));
                }
            }
            let no_argument = no_argument.ok_or_else(|| {
                Error::invalid(format!(
                    "the Ranking-Over-Scoring import needs the no-argument file (published as \
                     en.test_casimedicos_No_Argument.jsonl, the questions without arguments), and none of \
                     {} has the system no_argument: add that file, or set the system of the one you have to no_argument",
                    names.join(", ")
                ))
            })?;
            let outcome = import_ranking_over_scoring(&ImportRequest { no_argument, sources, controls })?;
            Ok((NamedText::new("imported_bundle.jsonl", outcome.bundle_jsonl.clone()), Some(outcome)))
        }
    }
}

pub fn import_ranking_over_scoring(req: &ImportRequest) -> Result<ImportOutcome> {
    let sources: Vec<(&str, &str, &str)> =
        req.sources.iter().map(|(s, f)| (s.as_str(), f.name.as_str(), f.text.as_str())).collect();
    for (i, control) in req.controls.iter().enumerate() {
        if !req.sources.iter().any(|(s, _)| s == control) {
            return Err(Error::invalid(format!("control case `{control}` is not one of the source files' systems")));
        }
        if req.controls[..i].contains(control) {
            return Err(Error::invalid(format!("control case `{control}` is given twice")));
        }
    }
    let data::ros_import::Imported { mut bundle, warnings, reordered, relabelled, empty_options, base_empty_options } =
        data::ros_import::import_aligned((&req.no_argument.name, &req.no_argument.text), &sources)?;
    // In the order of the sources, as the bundle's systems.
    bundle.controls = req.sources.iter().map(|(s, _)| s).filter(|s| req.controls.contains(s)).cloned().collect();
    let mut provenance = Provenance::new(0).convention(
        "instance ids",
        "1-based line number in the no-argument file; the argument is the source question's suffix after the no-argument question",
    );
    let mut inputs = vec![&req.no_argument];
    inputs.extend(req.sources.iter().map(|(_, f)| f));
    fingerprint_all(&mut provenance, &inputs);
    let mut table = Table::new(
        "import",
        "Imported Ranking-Over-Scoring files",
        &[
            "system",
            "file",
            "control case",
            "arguments",
            "options reordered to the no-argument order",
            "records with an empty option",
        ],
    );
    table.push(vec![
        "(no-argument file)".into(),
        req.no_argument.name.clone(),
        "no".into(),
        "0".into(),
        "0".into(),
        base_empty_options.to_string(),
    ]);
    for (((system, file), (_, moved)), (_, empty)) in req.sources.iter().zip(&reordered).zip(&empty_options) {
        let n = bundle.instances.iter().filter(|i| i.argument(system).is_some_and(|a| !a.is_empty())).count();
        let control = if bundle.controls.contains(system) { "yes" } else { "no" };
        table.push(vec![
            system.clone(),
            file.name.clone(),
            control.into(),
            n.to_string(),
            moved.to_string(),
            empty.to_string(),
        ]);
    }
    let report = ImportReport {
        provenance,
        no_argument_file: req.no_argument.name.clone(),
        instances: bundle.instances.len(),
        systems: bundle.systems.clone(),
        reordered: reordered.into_iter().map(|(system, records)| Reordered { system, records }).collect(),
        relabelled: relabelled.into_iter().map(|(system, records)| Reordered { system, records }).collect(),
        controls: bundle.controls.clone(),
        empty_options: EmptyOptionRecords {
            no_argument: base_empty_options,
            sources: empty_options.into_iter().map(|(system, records)| Reordered { system, records }).collect(),
        },
        warnings,
    };
    Ok(ImportOutcome { bundle_jsonl: data::write_bundle_jsonl(&bundle), report, tables: vec![table] })
}

/// `medrank import healthbench`: a HealthBench eval file with completions, or its
/// meta-evaluation file, as a §7 rubric file (FORMATS.md §10).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct HealthBenchImportRequest {
    pub input: NamedText,
    #[serde(default)]
    pub completions: Option<NamedText>,
}

#[derive(Debug, Clone, Serialize)]
pub struct HealthBenchImportReport {
    pub provenance: Provenance,
    pub kind: data::healthbench::FileKind,
    /// Lines read from the HealthBench file (prompts, or labelled pairs).
    pub records: usize,
    pub responses: usize,
    pub criteria: usize,
    /// Per system: responses written.
    pub systems: Vec<SystemResponses>,
    /// Human judgements written (`met_by` entries).
    pub human_judgements: usize,
    pub warnings: Vec<Warning>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SystemResponses {
    pub system: String,
    pub responses: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct HealthBenchImportOutcome {
    pub rubric_jsonl: String,
    pub report: HealthBenchImportReport,
    pub tables: Vec<Table>,
}

pub fn import_healthbench(req: &HealthBenchImportRequest) -> Result<HealthBenchImportOutcome> {
    let completions = req.completions.as_ref().map(|c| (c.name.as_str(), c.text.as_str()));
    let imported = data::healthbench::import_healthbench((&req.input.name, &req.input.text), completions)?;
    let mut provenance = Provenance::new(0)
        .convention(
            "eval file",
            "one ungraded response per completion (id = prompt_id), carrying its prompt's conversation, example tags and rubric",
        )
        .convention(
            "meta-evaluation file",
            format!(
                "one response per completion_id (system `{}`), one criterion per labelled line: rubric text, tag cluster:NAME from the category, physicians' labels in met_by, no points; theme:NAME where the cluster's name starts with a HealthBench theme",
                data::healthbench::META_EVAL_SYSTEM
            ),
        );
    let inputs: Vec<&NamedText> = std::iter::once(&req.input).chain(&req.completions).collect();
    fingerprint_all(&mut provenance, &inputs);
    let systems = crate::data::common::first_appearance(imported.responses.iter().map(|r| r.system.clone()));
    let per_system: Vec<SystemResponses> = systems
        .iter()
        .map(|s| SystemResponses {
            system: s.clone(),
            responses: imported.responses.iter().filter(|r| &r.system == s).count(),
        })
        .collect();
    let criteria: usize = imported.responses.iter().map(|r| r.criteria.len()).sum();
    let human_judgements: usize = imported.responses.iter().flat_map(|r| &r.criteria).map(|c| c.met_by.len()).sum();
    let mut table = Table::new(
        "import_healthbench",
        "Imported HealthBench responses",
        &["system", "responses", "criteria", "human judgements"],
    );
    for s in &per_system {
        let mine = || imported.responses.iter().filter(|r| r.system == s.system);
        table.push(vec![
            s.system.clone(),
            s.responses.to_string(),
            mine().map(|r| r.criteria.len()).sum::<usize>().to_string(),
            mine().flat_map(|r| &r.criteria).map(|c| c.met_by.len()).sum::<usize>().to_string(),
        ]);
    }
    let report = HealthBenchImportReport {
        provenance,
        kind: imported.kind,
        records: imported.records,
        responses: imported.responses.len(),
        criteria,
        systems: per_system,
        human_judgements,
        warnings: imported.warnings,
    };
    Ok(HealthBenchImportOutcome {
        rubric_jsonl: data::graded::write_rubric_jsonl(&imported.responses),
        report,
        tables: vec![table],
    })
}
