//! `medrank embed`: one sentence embedding per input line.

use super::args::*;
use super::output::{OutputArgs, Outputs};
use crate::Result;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct EmbedArgs {
    /// Model folder (config.json, tokenizer.json, model.safetensors, optional pooling files).
    /// Or a Hugging Face Hub id, ORG/NAME[@REVISION] (README, "Models").
    #[arg(long, value_name = "DIR")]
    pub model: PathBuf,
    /// Text file, one input per line.
    #[arg(long, value_name = "FILE")]
    pub input: PathBuf,
    /// Output JSONL: `{"line": N, "tokens_cut": K, "embedding": [..]}` per input line.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// Sequences per forward pass (1 to 1,024).
    #[arg(long, default_value_t = crate::model::embed::DEFAULT_BATCH, value_parser = count(1, crate::bounds::MAX_BATCH))]
    pub batch_size: usize,
    /// The encoder's arithmetic: f32, or int8 (weights int8 per output channel, activations
    /// 7-bit per token, exact integer sums). Default: the folder's own (int8 for a folder
    /// written by `medrank quantize`, else f32). Printed on stderr.
    #[arg(long, value_parser = ["f32", "int8"])]
    pub precision: Option<String>,
}

pub(super) fn embed(a: EmbedArgs) -> Result<()> {
    let mut outputs = Outputs::plan(&[&a.model, &a.input], &OutputArgs::default(), &[&a.out], &[])?;
    let model = with_precision(super::hub::text_model(&a.model, false)?, a.precision.as_deref())?;
    let input = named(&a.input)?;
    let lines: Vec<&str> = input.text.lines().collect();
    let (vectors, cut) = crate::model::run_ready(crate::model::embed_texts(
        &model.encoder,
        &model.tokenizer,
        &model.pooling,
        &lines,
        a.batch_size,
    ))
    .map_err(|e| e.naming_input(&model.name, |i| format!("line {} of {}", i + 1, input.name)))?;
    let mut out = String::new();
    for (i, (v, c)) in vectors.iter().zip(&cut).enumerate() {
        let row = serde_json::json!({ "line": i + 1, "tokens_cut": c, "embedding": v });
        out.push_str(&row.to_string());
        out.push('\n');
    }
    outputs.file(&a.out, out.as_bytes())?;
    outputs.commit()?;
    eprintln!("encoder precision: {}", crate::model::describe_precision(model.encoder.model.precision));
    let truncated: Vec<String> =
        cut.iter().enumerate().filter(|(_, c)| **c > 0).map(|(i, _)| (i + 1).to_string()).collect();
    if !truncated.is_empty() {
        eprintln!(
            "warning: {}: {} lines were longer than the model's {}-token limit and lost their end (lines {})",
            input.name,
            truncated.len(),
            model.tokenizer.max_tokens,
            truncated.join(", ")
        );
    }
    println!(
        "wrote {} embeddings of dimension {} to {}",
        vectors.len(),
        vectors.first().map_or(0, Vec::len),
        a.out.display()
    );
    Ok(())
}
