#!/usr/bin/env bash
# The README's test command: set up everything, then run every test suite.
#   1. Rust unit + integration tests (statistics, readers, methods, encoder parity against
#      an independent NumPy forward pass, training step by step against an independent
#      PyTorch fine-tune, GPU kernels on the software Vulkan adapter)
#      and the CLI on every example file (tests/integration/cli.rs); the integration tests
#      are one binary (tests/integration/main.rs), so candle and wgpu are linked once
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
# At the end, passed or not, a table of every phase's minutes (BENCHMARKS.md keeps them).
PHASE_NAMES=()
PHASE_STARTS=()
phase() {
  PHASE_NAMES+=("$*")
  PHASE_STARTS+=("$(date +%s)")
  echo "== $* ($(date -u +%H:%M:%S); $(df -h --output=avail "${TMPDIR:-/tmp}" | tail -1 | tr -d ' ') free)"
}
phase_table() {
  local end i next
  end="$(date +%s)"
  echo "== time per phase (minutes)"
  for i in "${!PHASE_NAMES[@]}"; do
    next="${PHASE_STARTS[$((i + 1))]:-$end}"
    awk -v n="${PHASE_NAMES[$i]}" -v s=$((next - PHASE_STARTS[i])) 'BEGIN { printf "   %-58s %6.1f\n", n, s / 60 }'
  done
  awk -v s=$((end - ${PHASE_STARTS[0]:-$end})) 'BEGIN { printf "   %-58s %6.1f\n", "total", s / 60 }'
}
# The PyTorch and transformers references replay a run whose script, libraries and inputs
# they have seen before (tests/reference/memo.py; the cache is outside the clone, like the
# build folder): the log says how many of this run's reference runs were computed.
reference_summary() {
  [ -s "${MEDRANK_REFERENCE_LOG:-}" ] || return 0
  echo "== reference runs (PyTorch, transformers): $(grep -c '^computed' "$MEDRANK_REFERENCE_LOG") computed, $(grep -c '^replayed' "$MEDRANK_REFERENCE_LOG") replayed from ${MEDRANK_REFERENCE_CACHE:-~/.cache/medrank/reference}"
}
TEST_TMPDIR=""
trap 'status=$?; phase_table; reference_summary; [ -z "$TEST_TMPDIR" ] || rm -rf "$TEST_TMPDIR"; exit $status' EXIT

phase "setup"
scripts/setup.sh all

# Every test's scratch files (model folders, CLI outputs, browser profiles) go to one
# folder of this run, removed when it ends however it ends: runs leave nothing behind.
TEST_TMPDIR="$(mktemp -d -t medrank-test.XXXXXX)"
export TMPDIR="$TEST_TMPDIR"
export MEDRANK_REFERENCE_LOG="$TEST_TMPDIR/reference-runs.log"

phase "format and lint (native)"
cargo fmt --check
cargo clippy --all-targets -- -D warnings
tests/browser/node_modules/.bin/prettier --check "www/**/*.{js,css,html}"

# The wasm builds before the native tests, so that a wasm-only error shows within minutes.
# They lint as they compile (--lint: clippy with warnings as errors, Debian's rustc-web and
# its clippy): the wasm build's own code (src/wasm.rs, the SIMD128 kernels, the threaded
# build's pool) compiles only for wasm32, and linting it inside the builds shares their
# standard library and dependencies instead of checking them again in folders of its own.
phase "the binary, the int8 model, the three wasm builds (linted)"
cargo build --bin medrank
scripts/quantize-model.sh --quick
scripts/build-web.sh --lint

phase "cargo test (native)"
# GPU tests must find the software adapter here, and the training tests the PyTorch
# reference (setup installs both): fail instead of skipping.
MEDRANK_REQUIRE_GPU=1 MEDRANK_REQUIRE_REFERENCE=1 cargo test --all-targets --no-fail-fast 2>&1

phase "browser tests (Debian's Chromium, headless)"
MEDRANK_BIN="$MEDRANK_BIN" tests/browser/run.sh
phase "done"
