//! Control cases added to a bundle as systems of their own.

use super::*;
use crate::eval::controls::{self, Control, ControlsReport};

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ControlsRequest {
    pub bundle: NamedText,
    /// Control names (`no_argument`, `label_only`, `noise`, `ir_passages`); empty = all
    /// that the inputs allow (ir_passages only with a corpus).
    #[serde(default)]
    pub which: Vec<String>,
    #[serde(default)]
    pub corpus: Option<NamedText>,
    #[serde(default)]
    pub seed: u64,
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
/// `--controls`) is every control the inputs allow, `ir_passages` only with a corpus;
/// otherwise the comma-separated names, none when empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlChoice {
    All,
    Named(Vec<String>),
}

impl ControlChoice {
    pub fn parse(text: &str) -> ControlChoice {
        let text = text.trim();
        if text.eq_ignore_ascii_case("all") {
            return ControlChoice::All;
        }
        ControlChoice::Named(text.split(',').map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect())
    }

    /// The controls to add: for `All`, those the inputs allow.
    pub fn to_add(&self, have_corpus: bool) -> Result<Vec<String>> {
        match self {
            ControlChoice::All => {
                Ok(parse_controls(&[], have_corpus)?.iter().map(|c| c.system_name().to_string()).collect())
            }
            ControlChoice::Named(names) => Ok(names.clone()),
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

/// The controls a request names, or the default set.
pub fn parse_controls(which: &[String], have_corpus: bool) -> Result<Vec<Control>> {
    if which.is_empty() {
        return Ok(Control::ALL.iter().copied().filter(|c| have_corpus || *c != Control::IrPassages).collect());
    }
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
    let which = parse_controls(&req.which, corpus.is_some())?;
    let mut report = controls::add_controls(&mut bundle, &which, corpus.as_deref(), req.seed)?;
    let mut inputs = vec![&req.bundle];
    inputs.extend(req.corpus.as_ref());
    fingerprint_all(&mut report.provenance, &inputs);
    warnings.append(&mut report.warnings);
    report.warnings = warnings;
    let tables = tables::controls(&report);
    Ok(ControlsOutcome { bundle_jsonl: data::write_bundle_jsonl(&bundle), report, tables })
}
