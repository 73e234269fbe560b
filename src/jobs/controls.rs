//! Control cases added to a bundle as systems of their own (`medrank controls`, the page's
//! Controls job): the bundle with them, to score elsewhere, and what each one holds.

use super::kept::Progress;
use super::spec::{between, defaults_of, json, page_tables, JobRequest, JobSpec, ReportPart, View};
use super::{file_stem, fingerprint_all, read_bundle, tables, NamedText};
use crate::data;
use crate::eval::controls::{self, Control, ControlsReport};
use crate::report::Table;
use crate::{Error, Result, Warning};
use serde::{Deserialize, Serialize};

/// `medrank controls`' options, named as its flags (the page's Options send the same
/// names); `Default` is the one home of each default.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub struct ControlsOptions {
    /// Which control cases to add (`--which`): `all` (those the inputs allow, each one left
    /// out said) or names.
    pub which: ControlChoice,
    /// Seed of the noise derangement (`--seed`).
    pub seed: u64,
}

impl Default for ControlsOptions {
    fn default() -> Self {
        ControlsOptions { which: ControlChoice::All, seed: 0 }
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ControlsRequest {
    pub bundle: NamedText,
    #[serde(default)]
    pub corpus: Option<NamedText>,
    #[serde(flatten)]
    pub options: ControlsOptions,
}

#[derive(Debug, Clone, Serialize)]
pub struct ControlsOutcome {
    /// The bundle with the control systems added, as JSONL.
    pub bundle_jsonl: String,
    pub report: ControlsReport,
    pub tables: Vec<Table>,
}

/// Which control cases a model evaluation adds and scores, read the same way from the
/// CLI's `--controls [LIST]` and the page's Controls field: `all` (the CLI's bare
/// `--controls`) is every control the inputs allow; otherwise the comma-separated names,
/// none when empty. [`ControlChoice::resolve`] decides against the bundle.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(from = "String", into = "String")]
pub enum ControlChoice {
    All,
    Named(Vec<String>),
}

impl Default for ControlChoice {
    fn default() -> Self {
        ControlChoice::Named(Vec::new())
    }
}

impl From<String> for ControlChoice {
    fn from(text: String) -> Self {
        ControlChoice::parse(&text)
    }
}

impl From<ControlChoice> for String {
    fn from(choice: ControlChoice) -> Self {
        match choice {
            ControlChoice::All => "all".into(),
            ControlChoice::Named(names) => names.join(","),
        }
    }
}

/// What [`ControlChoice::resolve`] decided: the controls to generate, and a warning for
/// each default left out (the reports of both front ends carry it).
#[derive(Debug, Clone, PartialEq)]
pub struct ControlPlan {
    pub add: Vec<Control>,
    pub left_out: Vec<Warning>,
}

impl ControlChoice {
    pub fn parse(text: &str) -> ControlChoice {
        let text = text.trim();
        if text.eq_ignore_ascii_case("all") {
            return ControlChoice::All;
        }
        ControlChoice::Named(text.split(',').map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect())
    }

    /// The controls to generate for `bundle`. `All` takes every control except those the
    /// inputs rule out, each stated: `ir_passages` without a corpus, and any control that a
    /// system of the bundle already is (same kind, any spelling: the published
    /// `Label_Only` file is the label_only control, so generating another would rank two
    /// near-duplicates). A named list is taken as given, and a name the bundle already has
    /// in another spelling is an error, as an exact clash is.
    pub fn resolve(&self, bundle: &data::Bundle, have_corpus: bool) -> Result<ControlPlan> {
        let already = |control: Control| bundle.systems.iter().find(|s| Control::of_name(s) == Some(control));
        match self {
            ControlChoice::All => {
                let mut plan = ControlPlan { add: Vec::new(), left_out: Vec::new() };
                for control in Control::ALL {
                    let name = control.system_name();
                    if let Some(system) = already(control) {
                        let marked =
                            if bundle.controls.contains(system) { "a control case from a file" } else { "a system" };
                        plan.left_out.push(Warning::new(format!(
                            "the {name} control was not generated: the bundle already has {marked}, `{system}`, of that kind"
                        )));
                    } else if control == Control::IrPassages && !have_corpus {
                        plan.left_out.push(Warning::new(
                            "the ir_passages control was not added: it needs a corpus to retrieve passages from (the CLI's --corpus; in the page, a file of kind \"Corpus (IR passages)\")",
                        ));
                    } else {
                        plan.add.push(control);
                    }
                }
                Ok(plan)
            }
            ControlChoice::Named(names) => {
                if names.is_empty() {
                    return Ok(ControlPlan { add: Vec::new(), left_out: Vec::new() });
                }
                let add = named_controls(names)?;
                for &control in &add {
                    match already(control) {
                        Some(system) if system != control.system_name() => {
                            return Err(Error::invalid(format!(
                                "the controls ask for {}, but the bundle already has `{system}`, the same control case: leave {} out of the controls to use the file's",
                                control.system_name(),
                                control.system_name()
                            )))
                        }
                        _ => {}
                    }
                }
                Ok(ControlPlan { add, left_out: Vec::new() })
            }
        }
    }

    /// The systems the ranking treats as control cases: for `All`, every known control.
    pub fn systems(&self) -> Vec<String> {
        match self {
            ControlChoice::All => Control::all_names(),
            ControlChoice::Named(names) => names.clone(),
        }
    }
}

/// The controls a list names (`ControlChoice::resolve` decides `all`).
fn named_controls(which: &[String]) -> Result<Vec<Control>> {
    which
        .iter()
        .map(|name| {
            Control::parse(name).ok_or_else(|| {
                let known: Vec<&str> = Control::ALL.iter().map(|c| c.system_name()).collect();
                Error::invalid(format!("unknown control case `{name}` (known: {})", known.join(", ")))
            })
        })
        .collect()
}

pub fn add_controls(req: &ControlsRequest) -> Result<ControlsOutcome> {
    let mut warnings = Vec::new();
    let mut bundle = read_bundle(&req.bundle, &mut warnings)?;
    let corpus = match &req.corpus {
        Some(c) => {
            let (docs, w) = data::parse_documents(&c.name, &c.text)?;
            warnings.extend(w);
            Some(docs)
        }
        None => None,
    };
    // The one decision of which controls to add, a model ranking's too: `all` leaves out,
    // saying so, what the inputs rule out.
    let plan = req.options.which.resolve(&bundle, corpus.is_some())?;
    warnings.extend(plan.left_out);
    let mut report = controls::add_controls(&mut bundle, &plan.add, corpus.as_deref(), req.options.seed)?;
    let mut inputs = vec![&req.bundle];
    inputs.extend(req.corpus.as_ref());
    fingerprint_all(&mut report.provenance, &inputs);
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    let tables = tables::controls(&report);
    Ok(ControlsOutcome { bundle_jsonl: data::write_bundle_jsonl(&bundle), report, tables })
}

// ------------------------------------------------------------------ the job ----------------

/// The job: the control cases added to a bundle, the bundle to download.
pub const JOB: JobSpec = JobSpec::new("controls", "Controls", "control cases added to a bundle", "controls")
    .reads(&["bundle", "corpus"], &[&["bundle"]])
    .views(&[View::tab("controls_view", "Control cases")])
    .defaults(defaults_of::<ControlsOptions>)
    .runs(run);

/// The Control cases tab: the systems added to every instance and the bundle with them
/// (what `medrank controls --out` writes).
#[derive(Serialize)]
struct ControlsView<'a> {
    added: Vec<&'static str>,
    instances: usize,
    noise_source: Option<&'a str>,
    bundle_name: String,
    bundle_jsonl: &'a str,
}

/// Control cases added to the page's bundle (`medrank controls --bundle --corpus --which
/// --seed --out`).
fn run(request: &JobRequest, progress: Progress) -> Result<String> {
    #[derive(Serialize)]
    struct Views<'a> {
        controls_view: ControlsView<'a>,
    }
    let bundle = request.required("bundle", "an argument bundle")?.named();
    let req = ControlsRequest { corpus: request.optional("corpus", "corpus")?, options: request.options()?, bundle };
    between(progress, "Adding the control cases", || {
        let o = add_controls(&req)?;
        let view = ControlsView {
            added: o.report.added.iter().map(|c| c.system_name()).collect(),
            instances: o.bundle_jsonl.lines().filter(|l| !l.trim().is_empty()).count(),
            noise_source: o.report.noise_source.as_deref(),
            bundle_name: format!("{}.with_controls.jsonl", file_stem(&req.bundle.name)),
            bundle_jsonl: &o.bundle_jsonl,
        };
        json(&ReportPart { report: &o.report, tables: page_tables(&o.tables), views: Views { controls_view: view } })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One MCQA line with systems `gpt` and `Label_Only`, the latter marked as a control
    /// file's (what importing the published Label_Only file gives).
    fn bundle_with_label_only_file() -> data::Bundle {
        let line = r#"{"id": "q1", "task": "mcqa", "question": "Which?", "options": {"1": "A", "2": "B"}, "answer": "2", "arguments": {"gpt": "B because.", "Label_Only": "The correct answer is 2."}, "controls": ["Label_Only"]}"#;
        data::parse_bundle("imported.jsonl", line).unwrap().0
    }

    #[test]
    fn all_leaves_out_what_a_file_already_is_and_what_needs_a_corpus_saying_so() {
        let bundle = bundle_with_label_only_file();
        let plan = ControlChoice::All.resolve(&bundle, false).unwrap();
        assert_eq!(plan.add, [Control::NoArgument, Control::Noise]);
        let said: Vec<String> = plan.left_out.iter().map(|w| w.to_string()).collect();
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(
            said[0].contains("label_only control was not generated") && said[0].contains("`Label_Only`"),
            "{said:?}"
        );
        assert!(said[0].contains("a control case from a file"), "{said:?}");
        assert!(said[1].contains("ir_passages control was not added: it needs a corpus"), "{said:?}");
        // With a corpus, ir_passages is added; label_only still comes from the file.
        let plan = ControlChoice::All.resolve(&bundle, true).unwrap();
        assert_eq!(plan.add, [Control::NoArgument, Control::Noise, Control::IrPassages]);
        assert_eq!(plan.left_out.len(), 1);
    }

    #[test]
    fn a_named_control_the_bundle_has_in_another_spelling_is_refused() {
        let bundle = bundle_with_label_only_file();
        let e = ControlChoice::parse("noise, label_only").resolve(&bundle, false).unwrap_err().to_string();
        assert!(e.contains("the bundle already has `Label_Only`, the same control case"), "{e}");
        let plan = ControlChoice::parse("noise").resolve(&bundle, false).unwrap();
        assert_eq!((plan.add, plan.left_out), (vec![Control::Noise], vec![]));
        assert_eq!(ControlChoice::parse("").resolve(&bundle, true).unwrap().add, []);
        let e = ControlChoice::parse("nosie").resolve(&bundle, false).unwrap_err().to_string();
        assert!(e.contains("unknown control case `nosie`"), "{e}");
    }

    #[test]
    fn the_pages_controls_job_is_medrank_controls_with_its_bundle_to_download() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
        let read = |name: &str| NamedText::new(name, std::fs::read_to_string(root.join(name)).unwrap());
        let (bundle, corpus) = (read("bundle.jsonl"), read("corpus.jsonl"));
        // The page's request: the example bundle and corpus, the Options' seed; `which` left
        // to its default, every control the inputs allow, as `medrank controls` without --which.
        let file = |f: &NamedText, kind: &str| crate::jobs::InputFile {
            name: f.name.clone(),
            text: f.text.clone(),
            kind: kind.into(),
            ..Default::default()
        };
        let request = JobRequest {
            files: vec![file(&bundle, "bundle"), file(&corpus, "corpus")],
            options: serde_json::json!({"seed": 7, "resamples": 1000}),
        };
        let mut stages = Vec::new();
        let reply = run(&request, &mut |stage, _, _| {
            stages.push(stage.to_string());
            Ok(())
        })
        .unwrap();
        let reply: serde_json::Value = serde_json::from_str(&reply).unwrap();
        let cli = add_controls(&ControlsRequest {
            bundle,
            corpus: Some(corpus),
            options: ControlsOptions { which: ControlChoice::All, seed: 7 },
        })
        .unwrap();
        // The same report and CSVs as the CLI's --json and --csv, and its --out to download
        // (both through JSON text: serde_json reads some floats back one bit apart).
        let cli_report: serde_json::Value = serde_json::from_str(&serde_json::to_string(&cli.report).unwrap()).unwrap();
        assert_eq!(reply["report"], cli_report);
        let csv: Vec<&str> = reply["tables"].as_array().unwrap().iter().map(|t| t["csv"].as_str().unwrap()).collect();
        assert_eq!(csv, cli.tables.iter().map(|t| t.to_csv()).collect::<Vec<_>>());
        let view = &reply["controls_view"];
        assert_eq!(view["bundle_jsonl"], cli.bundle_jsonl.as_str());
        assert_eq!(view["bundle_name"], "bundle.with_controls.jsonl");
        // By hand: the example has 20 instances; with a corpus all four controls are added,
        // the noise control from the first system in the bundle's order.
        assert_eq!(view["added"], serde_json::json!(["no_argument", "label_only", "noise", "ir_passages"]));
        assert_eq!(view["instances"], 20);
        assert_eq!(view["noise_source"], "expert");
        assert_eq!(stages, ["Adding the control cases", "Adding the control cases"]);
        // Without the corpus, `all` leaves ir_passages out and says so (no silent drop).
        let request = JobRequest { files: vec![file(&read("bundle.jsonl"), "bundle")], options: serde_json::json!({}) };
        let reply: serde_json::Value = serde_json::from_str(&run(&request, &mut |_, _, _| Ok(())).unwrap()).unwrap();
        assert_eq!(reply["controls_view"]["added"], serde_json::json!(["no_argument", "label_only", "noise"]));
        let warnings = reply["report"]["warnings"].to_string();
        assert!(warnings.contains("the ir_passages control was not added: it needs a corpus"), "{warnings}");
    }
}
