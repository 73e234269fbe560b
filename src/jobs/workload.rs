//! The workload benchmark: one whole `evaluate` with a model, timed end to end (reading the
//! bundle, control cases, tokenising, encoding, ranking, the bootstrap), the same in
//! `medrank bench --parts workload` and on the benchmark page, so the two figures compare
//! the page with the command line on real work rather than on an encoder grid alone.
//!
//! The bundle comes from the CasiMedicos dev file (`data/casimedicos/dev.jsonl`, HiTZ
//! format): one MCQA instance per line. Its `question` already carries one LLM's argument
//! (appended to the clinical case, as published), so the instance's question is that whole
//! text and system `casimedicos_llm` adds nothing to it; the `no_argument` control is scored
//! beside it, as `evaluate --controls no_argument` does. The encoder's work is that of a
//! two-system bundle: per line, two contexts (up to the model's limit) and five options.

use super::controls::ControlChoice;
use super::evaluate::{EvaluateReport, EvaluateRequest, ModelOptions, RankWithModel};
use super::kept::{EncodeProgress, KeptModel};
use super::NamedText;
use crate::data;
use crate::eval::proxy::ProxyOptions;
use crate::Result;
use serde::Serialize;

/// The system whose argument the dev file's questions carry.
pub const WORKLOAD_SYSTEM: &str = "casimedicos_llm";

/// The workload's argument bundle (JSONL) made from the CasiMedicos dev file's text.
pub fn workload_bundle(dev: &NamedText) -> Result<NamedText> {
    let (items, _) = data::parse_hitz(&dev.name, &dev.text)?;
    let mut out = String::with_capacity(dev.text.len() + items.len() * 64);
    for (n, item) in items.iter().enumerate() {
        let options: serde_json::Map<String, serde_json::Value> =
            item.options.iter().map(|(k, t)| (k.clone(), serde_json::Value::String(t.clone()))).collect();
        let record = serde_json::json!({
            "id": format!("dev-{}", n + 1),
            "task": "mcqa",
            "question": item.question,
            "options": options,
            "answer": item.correct_option,
            "arguments": { WORKLOAD_SYSTEM: "" },
        });
        out.push_str(&record.to_string());
        out.push('\n');
    }
    Ok(NamedText::new("casimedicos_dev_workload.jsonl", out))
}

/// One timed run of the workload.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadResult {
    pub instances: usize,
    /// Sequences the encoder ran (contexts and options).
    pub sequences: usize,
    pub seconds: f64,
    pub sequences_per_s: f64,
    /// "cpu" or "gpu".
    pub backend: String,
    /// The adapter (GPU) or what runs the CPU path.
    pub device: String,
    /// Threads of the CPU path (0 on the GPU).
    pub threads: usize,
    /// The encoder's arithmetic: "f32" or "int8" (the GPU runs f32).
    pub precision: String,
    /// Dev accuracy of the evaluator with the argument (a check that the run did real work).
    pub accuracy: Option<f64>,
}

/// The evaluator's accuracy with the dev file's arguments (system [`WORKLOAD_SYSTEM`]) in
/// an evaluation of the workload bundle, when it is defined.
pub fn workload_accuracy(report: &EvaluateReport) -> Option<f64> {
    let e = report.evaluators.first()?;
    let system = e.report.tasks.iter().flat_map(|t| t.systems.iter()).find(|s| s.system == WORKLOAD_SYSTEM)?;
    match system.score {
        crate::stats::Stat::Defined(x) => Some(x),
        crate::stats::Stat::Undefined(_) => None,
    }
}

/// Runs the workload once on `model` with the backend `choice`; `now()` is the front end's
/// clock in seconds (`Instant` natively, `performance.now()` in the page).
pub async fn run_workload(
    model: &mut KeptModel,
    dev: &NamedText,
    choice: crate::gpu::BackendChoice,
    now: &dyn Fn() -> f64,
    progress: &mut dyn FnMut(usize, usize) -> bool,
) -> Result<WorkloadResult> {
    let ranking = ProxyOptions { controls: vec!["no_argument".into()], ..Default::default() };
    let req = EvaluateRequest::of_bundle(workload_bundle(dev)?, ranking);
    let options = ModelOptions { controls: ControlChoice::Named(vec!["no_argument".into()]), ..Default::default() };
    let mut sequences = 0;
    let mut counting = |p: &EncodeProgress| {
        sequences = p.sequences;
        progress(p.sequences_done, p.sequences)
    };
    let started = now();
    let ((outcome, _), backend) =
        model.run(&RankWithModel { request: &req, options: &options }, choice, &mut counting).await?;
    let seconds = now() - started;
    let report = &outcome.report;
    let accuracy = workload_accuracy(report);
    let threads = if backend.backend == "gpu" { 0 } else { crate::model::cpu::worker_threads() };
    Ok(WorkloadResult {
        instances: report.evaluators.first().map_or(0, |e| e.report.tasks.iter().map(|t| t.n_instances).sum()),
        sequences,
        seconds,
        sequences_per_s: if seconds > 0.0 { sequences as f64 / seconds } else { 0.0 },
        backend: backend.backend.clone(),
        device: backend.device.trim().to_string(),
        threads,
        precision: if backend.backend == "gpu" { "f32" } else { model.model.encoder.model.precision.name() }.into(),
        accuracy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bundle made from the vendored dev file reads back with the bundle reader: one MCQA
    /// instance per record (280: Python's `json.loads` per line, as in the HiTZ reader's
    /// test), the HiTZ question as the instance's text, the system with an empty argument,
    /// and the answers of the file (`correct_option` 1..5, 56 times each).
    #[test]
    fn the_workload_bundle_is_the_dev_file_as_a_bundle() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/data/casimedicos/dev.jsonl");
        let dev = NamedText::new("dev.jsonl", std::fs::read_to_string(path).unwrap());
        let bundle = workload_bundle(&dev).unwrap();
        let (parsed, _) = data::parse_bundle(&bundle.name, &bundle.text).unwrap();
        assert_eq!(parsed.instances.len(), 280);
        assert_eq!(parsed.systems, vec![WORKLOAD_SYSTEM.to_string()]);
        let (items, _) = data::parse_hitz("dev.jsonl", &dev.text).unwrap();
        for (inst, item) in parsed.instances.iter().zip(&items) {
            match &inst.problem {
                data::Problem::Mcqa { question, options, answer } => {
                    assert_eq!(question, &item.question);
                    assert_eq!(options, &item.options);
                    assert_eq!(answer, &item.correct_option);
                }
                other => panic!("not MCQA: {other:?}"),
            }
            assert_eq!(inst.arguments, vec![(WORKLOAD_SYSTEM.to_string(), String::new())]);
        }
        for key in ["1", "2", "3", "4", "5"] {
            assert_eq!(parsed.instances.iter().filter(|i| i.problem.gold() == key).count(), 56);
        }
    }
}
