//! Random-weight DeBERTa-v2/v3 and ModernBERT folders written by Hugging Face transformers
//! (`tests/reference/families_reference.py make`), for the tests that compare medrank with
//! it (tests/integration/families.rs, tests/integration/train_reference.rs).

use super::cli::{root, s, tmp};
use std::path::PathBuf;
use std::process::Command;

/// The vendored SentencePiece model (tests/fixtures/deberta-v3-spm/make.py).
pub const SPM: &str = "tests/fixtures/deberta-v3-spm/spm.model";
/// Its pieces: the DeBERTa configs' vocabulary.
pub const SPM_PIECES: usize = 6000;
/// A DeBERTa folder's tokenizer: the SentencePiece model alone (the loader converts it).
pub const DEBERTA_TOKENIZER: [(&str, &str); 1] = [(SPM, "spm.model")];
/// A ModernBERT folder's tokenizer: any real one does for random weights (all-MiniLM-L6-v2's
/// WordPiece, 30,522 ids).
pub const MODERNBERT_TOKENIZER: [(&str, &str); 1] = [("models/all-MiniLM-L6-v2/tokenizer.json", "tokenizer.json")];
pub const MODERNBERT_VOCAB: usize = 30522;

/// Runs python3 from the repository root; fails the test with its output unless it succeeds.
pub fn python(args: &[&str]) {
    let out = Command::new("python3").current_dir(root()).args(args).output().expect("run python3");
    assert!(
        out.status.success(),
        "python3 {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A model folder `name` in the test's scratch folder, written by transformers (`config`
/// of families_reference.py's CONFIGS, `head` seq|mc|none, comma-separated `labels`), with
/// the `tokenizer` files (from, to) copied in.
#[track_caller]
pub fn make(name: &str, config: &str, head: &str, labels: &str, vocab: usize, tokenizer: &[(&str, &str)]) -> PathBuf {
    let dir = tmp(name);
    let _ = std::fs::remove_dir_all(&dir);
    let vocab = vocab.to_string();
    let mut args = vec!["tests/reference/families_reference.py", "make", "--config", config, "--head", head];
    args.extend(["--vocab", &vocab, "--out", s(&dir), "--seed", "7"]);
    if !labels.is_empty() {
        args.extend(["--labels", labels]);
    }
    python(&args);
    for (from, to) in tokenizer {
        std::fs::copy(root().join(from), dir.join(to)).unwrap();
    }
    dir
}
