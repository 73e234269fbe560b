#!/usr/bin/env bash
# The page's benchmarks in headless Chromium (a benchmark: figures, never a pass/fail on speed).
#
#   scripts/bench-page.sh [OUT_DIR] [--grid full|small] [--no-gpu]
#
# 1. `medrank bench --parts encoder,workload,profile` natively (release build) -> OUT_DIR/native.json
# 2. bench.html's encoder grid (with onnxruntime-web, the peer, at the same thread count) and
#    workload on the threaded build the page picks (N threads, relaxed SIMD in Chromium), on
#    the threaded build without relaxed SIMD and on the single-threaded build, plus WebGPU
#    on SwiftShader (smallest cell, correctness only) -> OUT_DIR/page.json, with the page /
#    native and page / ONNX Runtime Web ratios per cell and on the workload.
# Default OUT_DIR: dist/bench. Compare at the same thread count: the native run uses every
# core (rayon's default), as the page does by default.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/env.sh
OUT="dist/bench"
if [ $# -gt 0 ] && [[ "$1" != --* ]]; then OUT="$1"; shift; fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
scripts/setup.sh all
cargo build --release --bin medrank
# A bench build of the site (with onnxruntime-web as the peer) beside the app's own dist/site.
scripts/build-web.sh --out dist/bench-site --bench-peer
export MEDRANK_SITE="$ROOT/dist/bench-site"
REL="$CARGO_TARGET_DIR/release/medrank"
GRID_ARGS=()
if [[ " $* " == *" --grid small "* ]]; then GRID_ARGS=(--lengths 128 --batches 1); fi
echo "== native: medrank bench --parts encoder,workload,profile (release)" >&2
"$REL" bench --parts encoder,workload,profile "${GRID_ARGS[@]}" --json "$OUT/native.json"
echo "== the page in headless Chromium" >&2
cd tests/browser
MEDRANK_BIN="$REL" node bench-page.mjs "$OUT/page.json" "$OUT/native.json" "$@"
node -e '
const r = require(process.argv[1]);
for (const [name, run] of [["threaded", r.threaded], ["threaded, no relaxed SIMD", r.threaded_plain], ["single", r.single]]) {
  if (!run) continue;
  const v = run.vs_native; if (!v) continue;
  console.log(`${name}: ${run.engine}`);
  for (const c of v.cells) {
    console.log(`  ${c.seq_len} x ${c.batch}: page ${c.page_tokens_per_s.toFixed(0)} tokens/s, native ${c.native_tokens_per_s?.toFixed(0)} (${v.native_threads} threads) -> ${c.ratio?.toFixed(2)}; ONNX Runtime Web ${c.ort_web_tokens_per_s?.toFixed(0)} -> ${c.ratio_to_ort_web?.toFixed(2)}`);
    const steps = (c.steps || []).filter((s) => s.page_over_native !== null);
    if (steps.length) console.log(`    page / native time per step: ${steps.map((s) => `${s.step} ${s.page_over_native.toFixed(1)}`).join(", ")}`);
  }
  if (v.workload) console.log(`  workload: page ${v.workload.page_sequences_per_s.toFixed(1)} seq/s, native ${v.workload.native_sequences_per_s.toFixed(1)} (${v.workload.native_threads} threads) -> ${v.workload.ratio.toFixed(2)}`);
}' "$OUT/page.json"
