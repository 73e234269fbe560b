//! Jobs: the one entry point per method that both front ends call. A job takes the user's
//! files as (name, text) pairs plus plain options, parses and cross-checks them, runs the
//! method, fingerprints every input, and returns the report together with its tables.
//! The CLI only reads files and prints; the browser's worker only posts messages. So the
//! same inputs give the same numbers in both, by construction.

//!
//! One file per method: `evaluate` (ranking over scoring, from predictions or a model),
//! `agreement`, `controls`, `grade` (a model grades rubric criteria), `statements` (answers against expert statements), `nrp` (with `rankers` for neural rankers), `import`, `metrics`
//! (and rubric); `tables` turns every report into the tables all front ends show;
//! `train` trains an evaluator (step-wise, so the page can show progress and stop);
//! `quantize` makes an int8 model folder and measures it against the f32 one;
//! `workload` is the end-to-end benchmark both front ends time. What only the page needs
//! (the kinds of input file, its requests and views) is the page's front end, `crate::page`.

mod agreement;
mod controls;
mod evaluate;
mod grade;
mod import;
mod metrics;
mod nrp;
mod quantize;
pub mod rankers;
mod statements;
pub mod tables;
mod train;
mod workload;

pub use agreement::*;
pub use controls::*;
pub use evaluate::*;
pub use grade::*;
pub use import::*;
pub use metrics::*;
pub use nrp::*;
pub use quantize::*;
pub use statements::*;
pub use train::*;
pub use workload::*;

use crate::data::{self, Bundle, HumanRankings};
use crate::report::{Fingerprint, Provenance, Table};
use crate::{Error, Result, Warning};
use serde::{Deserialize, Serialize};

/// A user file: the name they know it by (path or browser file name) and its text.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub struct NamedText {
    pub name: String,
    pub text: String,
}

impl NamedText {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        NamedText { name: name.into(), text: text.into() }
    }
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint::of(&self.name, self.text.as_bytes())
    }
}

/// A report with its tables (what the CLI prints and `--csv` writes, what the page shows
/// and exports).
#[derive(Debug, Clone, Serialize)]
pub struct Outcome<R> {
    pub report: R,
    pub tables: Vec<Table>,
}

/// Adds the fingerprints of `inputs` to a report's provenance (methods do not see files).
fn fingerprint_all(provenance: &mut Provenance, inputs: &[&NamedText]) {
    provenance.inputs.extend(inputs.iter().map(|t| t.fingerprint()));
}

/// Parses a bundle and folds its reader warnings into `warnings`.
pub fn read_bundle(file: &NamedText, warnings: &mut Vec<Warning>) -> Result<Bundle> {
    let (bundle, w) = data::parse_bundle(&file.name, &file.text)?;
    warnings.extend(w);
    Ok(bundle)
}

/// Parses human rankings and checks them against the bundle. Humans do not rank control
/// cases, so systems named in `controls` are not expected in the rankings.
fn read_rankings(
    file: &NamedText,
    bundle: Option<&Bundle>,
    controls: &[String],
    warnings: &mut Vec<Warning>,
) -> Result<HumanRankings> {
    let (rankings, w) = data::parse_rankings(&file.name, &file.text)?;
    warnings.extend(w);
    data::check_no_control_rows(&rankings, controls)?;
    if let Some(bundle) = bundle {
        warnings.extend(data::check_rankings_against_except(&rankings, bundle, controls)?);
    }
    Ok(rankings)
}

/// sha256 of every file of a model, so reports say exactly which weights produced them.
pub fn model_fingerprints(files: &crate::model::ModelFiles) -> Vec<Fingerprint> {
    let mut out = vec![
        Fingerprint::of(format!("{}/config.json", files.name), &files.config_json),
        match &files.tokenizer_source {
            Some(spm) => spm.clone(),
            None => Fingerprint::of(format!("{}/tokenizer.json", files.name), &files.tokenizer_json),
        },
    ];
    out.push(match &files.weights_source {
        Some(original) => original.clone(),
        None => Fingerprint::of(format!("{}/model.safetensors", files.name), &files.weights),
    });
    if let Some(p) = &files.pooling_json {
        out.push(Fingerprint::of(format!("{}/1_Pooling/config.json", files.name), p));
    }
    if let Some(m) = &files.modules_json {
        out.push(Fingerprint::of(format!("{}/modules.json", files.name), m));
    }
    out
}
