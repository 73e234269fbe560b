//! The transformer encoder: config, weights, tokenizer, forward pass (CPU), pooling,
//! heads, evaluators, rankers and benchmarks (training is `crate::train`).
//!
//! Backend-neutral pieces (`TokenBatch`, `HiddenStates`, the `Encoder` trait,
//! `EncoderWeights`) are shared with the GPU backend in `crate::gpu`: it implements
//! `Encoder` for the same weights, and everything above the trait (pooling, heads,
//! evaluators, rankers, BERTScore) runs unchanged on either backend.
//!
//! Files, one concern each:
//! - `config.rs`   HF `config.json` -> [`EncoderConfig`] (BERT/MiniLM, RoBERTa/XLM-R, DistilBERT)
//! - `load.rs`     safetensors bytes -> [`LoadedModel`] (key mapping, missing/unexpected tensors)
//! - `tokenize.rs` tokenizer.json -> ids, longest-first truncation that never cuts kept parts
//! - `encoder.rs`  the `Encoder` trait and the CPU forward pass (candle)
//! - `pooling.rs`  sentence-transformers pooling and normalisation
//! - `batching.rs` inputs in batches of similar length, and a job's batch plan (progress)
//! - `embed.rs`    [`TextModel`] (a loaded folder) and `embed_lines` (`medrank embed`)
//! - `precision.rs` f32 or int8 products (`--precision`); `quant.rs` int8 weights per row
//! - `heads.rs`    classification / multiple-choice heads
//! - `finite.rs`   model outputs that are NaN or infinite, refused where jobs receive them
//! - `evaluate.rs` proxy-task evaluators -> `data::Prediction`s (and the zero-training one)
//! - `grade.rs`    the rubric criterion grader: P(met) per (response, criterion)
//! - `rankers.rs`, `monot5.rs`, `bertscore.rs`  NRP rankers and BERTScore
//! - `bench.rs`    throughput and the peer comparison (native only)

pub mod batching;
#[cfg(not(target_arch = "wasm32"))]
pub mod bench;
pub mod bertscore;
pub mod config;
pub mod cpu;
pub mod embed;
pub mod encoder;
pub mod evaluate;
pub mod finite;
pub mod grade;
pub mod heads;
pub mod load;
pub mod monot5;
pub mod names;
pub mod pooling;
pub mod precision;
pub mod quant;
pub mod rankers;
pub mod score;
pub mod spm;
pub mod states;
pub mod tokenize;

pub use batching::EncodingPlan;
pub use config::{Activation, Arch, EncoderConfig, HeadKind};
pub use embed::{embed_lines, embed_texts, encoder_outputs, run_ready, EncoderOutputs, TextModel};
pub use encoder::{describe_precision, CpuEncoder, Encoder, Readout};
pub use evaluate::{
    evaluate_bundle, evaluate_bundle_on, sequences_to_encode, EvalOutput, EvaluatorKind, TruncatedInput,
};
pub use load::{EncoderWeights, HeadWeights, LoadedModel, ModelFiles};
pub use pooling::{Pooling, PoolingMode};
pub use precision::Precision;
pub use states::{HiddenStates, TokenBatch};
pub use tokenize::{Cut, Encoded, Part, TextTokenizer};
