//! `medrank quantize`: an int8 copy of a model folder, and what it costs in accuracy.

use super::args::*;
use super::output::{OutputArgs, Outputs};
use crate::jobs;
use crate::Result;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct QuantizeArgs {
    /// The f32 model folder (config.json, tokenizer.json, model.safetensors).
    /// Or a Hugging Face Hub id, ORG/NAME[@REVISION] (README, "Models").
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// The int8 folder to write (FORMATS.md §8): the same files, model.safetensors with
    /// int8 weights and their scales, and quantization.json with the checks below.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Texts, one per line, whose int8 and f32 embeddings are compared by cosine (repeat).
    #[arg(long, value_name = "FILE")]
    pub texts: Vec<PathBuf>,
    /// A dev file in the HiTZ MCQA format (data/casimedicos/dev.jsonl) evaluated with both
    /// precisions: the accuracy of each.
    #[arg(long, value_name = "FILE")]
    pub dev: Option<PathBuf>,
    /// Argument bundles whose order of systems is compared (repeat).
    #[arg(long, value_name = "FILE")]
    pub bundle: Vec<PathBuf>,
    /// Print the report as JSON instead of the summary.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn quantize(a: QuantizeArgs) -> Result<()> {
    let mut inputs: Vec<&Path> = vec![&a.model];
    inputs.extend(a.texts.iter().map(PathBuf::as_path));
    inputs.extend(a.dev.as_deref());
    inputs.extend(a.bundle.iter().map(PathBuf::as_path));
    let mut outputs = Outputs::plan(&inputs, &OutputArgs::default(), &[], &[a.out.as_path()])?;
    let files = super::hub::model_files(&a.model, false)?;
    let req = jobs::QuantizeRequest {
        model: &files,
        texts: a.texts.iter().map(|p| named(p)).collect::<Result<_>>()?,
        dev: named_opt(&a.dev)?,
        bundles: a.bundle.iter().map(|p| named(p)).collect::<Result<_>>()?,
    };
    let (written, report) = jobs::quantize_model(&req)?;
    for (name, bytes) in &written {
        outputs.file(&a.out.join(name), bytes)?;
    }
    outputs.commit()?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report).expect("serialisable"));
        return Ok(());
    }
    let mb = |b: usize| b as f64 / 1e6;
    println!(
        "int8 model in {}: model.safetensors {:.1} MB (f32 {:.1} MB, {:.2}x smaller)",
        a.out.display(),
        mb(report.int8_bytes),
        mb(report.f32_bytes),
        report.f32_bytes as f64 / report.int8_bytes as f64
    );
    match &report.embeddings {
        Some(e) => println!(
            "embeddings, int8 vs f32, {} texts: cosine worst {:.4} ({}), mean {:.4}",
            e.texts, e.worst_cosine, e.worst_text, e.mean_cosine
        ),
        None => println!("embeddings: not compared (no --texts)"),
    }
    match &report.dev {
        Some(d) => println!(
            "dev accuracy on {} ({} instances): f32 {:.4}, int8 {:.4} (difference {:+.4})",
            d.file,
            d.instances,
            d.f32_accuracy,
            d.int8_accuracy,
            d.int8_accuracy - d.f32_accuracy
        ),
        None => println!("dev accuracy: not measured (no --dev)"),
    }
    for o in &report.system_order {
        let order = |v: &[String]| v.join(" > ");
        let pairs = |v: &[(String, String)]| v.iter().map(|(a, b)| format!("{a} / {b}")).collect::<Vec<_>>().join(", ");
        let what = if o.same {
            format!("the same under both ({})", order(&o.f32_order))
        } else {
            let mut parts = vec![format!("f32 {} | int8 {}", order(&o.f32_order), order(&o.int8_order))];
            parts.push(match o.reversed.len() {
                0 => "no pair reversed".into(),
                _ => format!("REVERSED: {}", pairs(&o.reversed)),
            });
            if !o.f32_ties_broken.is_empty() {
                parts.push(format!("tied under f32, apart under int8: {}", pairs(&o.f32_ties_broken)));
            }
            if !o.int8_ties_made.is_empty() {
                parts.push(format!("apart under f32, tied under int8: {}", pairs(&o.int8_ties_made)));
            }
            parts.join("; ")
        };
        println!("system order, {} {}: {what}", o.bundle, o.task);
    }
    if report.system_order.is_empty() {
        println!("system order: not compared (no --bundle)");
    }
    Ok(())
}
