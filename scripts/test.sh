#!/usr/bin/env bash
# The README's test command: set up everything, then run every test suite.
#   1. Rust unit + integration tests (statistics, readers, methods, encoder parity against
#      an independent NumPy forward pass, training step by step against an independent
#      PyTorch fine-tune, GPU kernels on the software Vulkan adapter)
#      and the CLI on every example file (tests/cli.rs)
#   2. real-browser tests (Debian's Chromium via playwright-core): the page's numbers equal
#      the CLI's, exports, privacy (network requests), offline, keyboard
# First the gates: rustfmt (rustfmt.toml), clippy with warnings as errors, prettier for www/.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/env.sh
# Each phase says when it starts, so a slow CI run shows where its time went.
# ... and how much disk is left: the disk is shared, and a run that ran out of it (seen once
# in CI, writing the 440 MB base-size test model) should say so where it starts to fail.
phase() { echo "== $* ($(date -u +%H:%M:%S); $(df -h --output=avail "${TMPDIR:-/tmp}" | tail -1 | tr -d ' ') free)"; }

phase "setup"
scripts/setup.sh all

# Every test's scratch files (model folders, CLI outputs, browser profiles) go to one
# folder of this run, removed when it ends however it ends: runs leave nothing behind.
TEST_TMPDIR="$(mktemp -d -t medrank-test.XXXXXX)"
trap 'rm -rf "$TEST_TMPDIR"' EXIT
export TMPDIR="$TEST_TMPDIR"

phase "format and lint"
cargo fmt --check
cargo clippy --all-targets -- -D warnings
# The wasm build's own code (src/wasm.rs, the SIMD128 kernels, the threaded build's pool)
# compiles only for wasm32: lint both feature sets as scripts/build-web.sh builds them
# (Debian's rustc-web and its clippy, the same target features), each in its own folder.
WASM_SIMD="+simd128"
WASM_THREADS="+simd128,+atomics,+bulk-memory,+mutable-globals"
for build in "single:$WASM_SIMD:" "threads:$WASM_THREADS:threads"; do
  IFS=: read -r name target_features features <<<"$build"
  PATH="/usr/bin:$PATH" RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR="$WASM_TARGET_DIR-clippy-$name" \
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="-C target-feature=$target_features" \
    cargo clippy --lib --target wasm32-unknown-unknown -Z build-std=std,panic_abort \
    --no-default-features ${features:+--features "$features"} -- -D warnings
done
tests/browser/node_modules/.bin/prettier --check "www/**/*.{js,css,html}"

phase "cargo test (native)"
# GPU tests must find the software adapter here, and the training tests the PyTorch
# reference (setup installs both): fail instead of skipping.
MEDRANK_REQUIRE_GPU=1 MEDRANK_REQUIRE_REFERENCE=1 cargo test --all-targets --no-fail-fast 2>&1

phase "browser tests (Debian's Chromium, headless)"
cargo build --bin medrank
scripts/quantize-model.sh --quick
scripts/build-web.sh
MEDRANK_BIN="$MEDRANK_BIN" tests/browser/run.sh
phase "done"
