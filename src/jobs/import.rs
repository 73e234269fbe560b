//! Import of the public Ranking-Over-Scoring (HiTZ) MCQA files into a bundle.

use super::*;

#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ImportRequest {
    pub no_argument: NamedText,
    /// (system, file) per source; control-case files import the same way.
    pub sources: Vec<(String, NamedText)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImportReport {
    pub provenance: Provenance,
    pub instances: usize,
    pub systems: Vec<String>,
    /// Per source: records whose options were listed in another order (aligned by text).
    pub reordered: Vec<Reordered>,
    pub warnings: Vec<Warning>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Reordered {
    pub system: String,
    pub records: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ImportOutcome {
    pub bundle_jsonl: String,
    pub report: ImportReport,
    pub tables: Vec<Table>,
}

pub fn import_ranking_over_scoring(req: &ImportRequest) -> Result<ImportOutcome> {
    let sources: Vec<(&str, &str, &str)> =
        req.sources.iter().map(|(s, f)| (s.as_str(), f.name.as_str(), f.text.as_str())).collect();
    let data::ros_import::Imported { bundle, warnings, reordered } =
        data::ros_import::import_aligned((&req.no_argument.name, &req.no_argument.text), &sources)?;
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
        &["system", "file", "arguments", "options reordered to the no-argument order"],
    );
    for ((system, file), (_, moved)) in req.sources.iter().zip(&reordered) {
        let n = bundle.instances.iter().filter(|i| i.argument(system).is_some_and(|a| !a.is_empty())).count();
        table.push(vec![system.clone(), file.name.clone(), n.to_string(), moved.to_string()]);
    }
    let report = ImportReport {
        provenance,
        instances: bundle.instances.len(),
        systems: bundle.systems.clone(),
        reordered: reordered.into_iter().map(|(system, records)| Reordered { system, records }).collect(),
        warnings,
    };
    Ok(ImportOutcome { bundle_jsonl: data::write_bundle_jsonl(&bundle), report, tables: vec![table] })
}
