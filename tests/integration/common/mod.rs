//! What the test binaries share: `cli`, running the binary; and one policy for a machine
//! without a GPU adapter: without one a test says so loudly and returns; with MEDRANK_REQUIRE_GPU=1 (which
//! scripts/test.sh sets, so CI on lavapipe must find one) it fails instead.
#![allow(dead_code)] // each test binary uses part of it

pub mod cli;
pub mod families;
pub mod hub;

use medrank::gpu::context::GpuContext;
use medrank::gpu::ops::{record, Dispatch};
use medrank::model::embed::TextModel;
use medrank::model::{CpuEncoder, EncoderConfig, LoadedModel, Pooling, TextTokenizer};
use rand::{Rng, SeedableRng};
use std::path::PathBuf;

/// The default model's folder (`scripts/setup.sh model` puts it there).
pub fn minilm_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2");
    assert!(dir.join("model.safetensors").exists(), "{} is missing: run `scripts/setup.sh model` first", dir.display());
    dir
}

/// The default model, all-MiniLM-L6-v2.
pub fn minilm() -> TextModel {
    TextModel::read_dir(&minilm_dir()).unwrap()
}

/// MiniLM's tokenizer for a model of config `cfg` (its length and padding id): the tiny
/// random models read MiniLM's vocabulary.
pub fn minilm_tokenizer(cfg: &EncoderConfig) -> TextTokenizer {
    let bytes = std::fs::read(minilm_dir().join("tokenizer.json")).unwrap();
    TextTokenizer::from_bytes("tokenizer.json", &bytes, cfg.max_tokens(), cfg.pad_token_id).unwrap()
}

/// A tiny loaded model as a text model named "tiny", with `tokenizer` and the default pooling.
pub fn tiny_text_model(model: LoadedModel, tokenizer: TextTokenizer) -> TextModel {
    TextModel { name: "tiny".into(), tokenizer, encoder: CpuEncoder::new(model), pooling: Pooling::default() }
}

/// True when the run must not skip GPU work (MEDRANK_REQUIRE_GPU=1).
pub fn gpu_required() -> bool {
    std::env::var("MEDRANK_REQUIRE_GPU").as_deref() == Ok("1")
}

/// A test cannot run its GPU part because of `why`: fail under MEDRANK_REQUIRE_GPU=1,
/// otherwise print a loud SKIPPED line (the caller then returns).
pub fn skip_or_fail(why: &str) {
    if gpu_required() {
        panic!("MEDRANK_REQUIRE_GPU=1 but {why}");
    }
    eprintln!("\n!!!!! SKIPPED: {why}; set MEDRANK_REQUIRE_GPU=1 to fail instead !!!!!\n");
}

/// The GPU context, or `None` after [`skip_or_fail`].
pub fn context() -> Option<GpuContext> {
    match GpuContext::new_blocking() {
        Ok(ctx) => {
            eprintln!("gpu tests on {}", ctx.adapter);
            Some(ctx)
        }
        Err(e) => {
            skip_or_fail(&format!("no GPU adapter ({e})"));
            None
        }
    }
}

/// Whether PyTorch and transformers are here for the tests that compare with them
/// (`scripts/setup.sh reference`). Where they are missing the test says so and passes,
/// unless MEDRANK_REQUIRE_REFERENCE=1 (set by scripts/test.sh), which makes that a failure.
pub fn reference_available() -> bool {
    // Asked once per test binary: importing torch and transformers takes seconds of CPU,
    // and ten tests ask.
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ok = *AVAILABLE.get_or_init(|| {
        std::process::Command::new("python3")
            .args(["-c", "import torch, transformers"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if !ok {
        assert!(
            std::env::var("MEDRANK_REQUIRE_REFERENCE").as_deref() != Ok("1"),
            "PyTorch and transformers are required here (scripts/setup.sh reference)"
        );
        eprintln!("skipped: the PyTorch reference needs torch and transformers (scripts/setup.sh reference)");
    }
    ok
}

/// `n` seeded values in [-1, 1): the GPU tests' random inputs.
pub fn random(n: usize, seed: u64) -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.gen_range(-1.0f32..1.0)).collect()
}

/// Records prepared dispatches into one command encoder and submits it.
pub fn run(ctx: &GpuContext, dispatches: Vec<Dispatch>) {
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    record(&mut encoder, &dispatches);
    ctx.queue.submit([encoder.finish()]);
}
