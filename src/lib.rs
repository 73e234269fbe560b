//! medrank: evaluate LLM-generated medical arguments and answers by ranking.
//!
//! Data flow (the same for the CLI and the browser):
//! files --`data`--> typed inputs --`eval::controls`--> scoring jobs --`model`/`gpu`-->
//! predictions --`eval`--> scores, rankings, NRP --`stats`--> reports (`report`).
//! `train` makes the evaluators `model` runs (on the CPU with `model`, on a GPU with `gpu`).

// LLVM's `fmuladd` (fused where the target does it faster) is an intrinsic only. Only the
// relaxed-SIMD wasm build uses it (src/model/cpu/math.rs, `Contracted`), and that build
// compiles std itself (-Z build-std) with a nightly-enabled compiler anyway; every other
// build stays on stable Rust.
#![cfg_attr(
    all(target_arch = "wasm32", target_feature = "relaxed-simd"),
    feature(core_intrinsics),
    allow(internal_features)
)]

pub mod bounds;
pub mod data;
pub mod error;
pub mod eval;
pub mod gpu;
pub mod hub;
pub mod jobs;
pub mod model;
pub mod page;
pub mod report;
pub mod stats;
pub mod train;

#[cfg(feature = "cli")]
pub mod cli;

#[cfg(target_arch = "wasm32")]
pub mod wasm;

pub use error::{Error, Location, Result, Warning};

/// The program version written into every report.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
