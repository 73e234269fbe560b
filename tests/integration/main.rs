//! The integration tests, as one test binary: each file of this folder is a module, so candle
//! and wgpu are linked once instead of once per file (issue 46). Run one file's tests with
//! `cargo test --test integration FILE::` (e.g. `cli::`), one test with its full path.
//! `common` is what the files share: running the binary, the GPU policy, model folders.

mod common;

mod architecture;
mod cli;
mod cli_draft;
mod cli_grade;
mod cli_precision;
mod encoder_minilm;
mod encoder_tiny;
mod families;
mod fuzz_readers;
mod gpu_backward;
mod gpu_dropout;
mod gpu_encoder;
mod gpu_ops;
mod gpu_train;
mod gpu_train_cli;
mod hub;
mod model_backend;
mod model_folders;
mod nrp_public_code;
mod nrp_rankers;
mod option_space;
mod quantize;
mod readme_commands;
mod reference_memo;
mod ros_controls;
mod serve;
mod train_reference;
mod train_scores;
mod train_selection;
mod train_steps;
mod train_top_layers;
mod www_learns_jobs;
