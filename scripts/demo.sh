#!/usr/bin/env bash
# The README's run command: set up, build, evaluate the bundled example on the command
# line, build the browser app and serve it on 127.0.0.1 (prints the URL; Ctrl+C stops).
#   PORT=8080 scripts/demo.sh
#
# It sets up only what the demo uses (the native build, the default model, the wasm
# toolchain): the PyTorch reference, ONNX Runtime and Chromium are the tests' and the
# bench's (scripts/test.sh installs them). On a machine where a wasm build has never run,
# the page is served as soon as the single-threaded build (the one every browser runs) is
# there; the two threaded builds follow in the background and replace the site when done,
# and the page uses them from its next load on (it says which build it runs, in Options).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/env.sh

# What this run has to do from nothing, said before it starts (the wasm builds' ~10 minutes
# are build-web.sh's own figure; BENCHMARKS.md has the demo's measured times, so far a
# second run's).
TARGET=wasm32-unknown-unknown
todo=()
[ -f models/all-MiniLM-L6-v2/model.safetensors ] && command -v wasm-bindgen >/dev/null 2>&1 \
  || todo+=("setup: Debian packages, the default model (88 MB), wasm-bindgen-cli (compiled once)")
[ -x "$MEDRANK_BIN" ] || todo+=("the native build (candle and wgpu compiled once)")
COLD_WASM=0
[ -f "$WASM_TARGET_DIR/$TARGET/release/medrank.wasm" ] || COLD_WASM=1
[ $COLD_WASM = 0 ] || todo+=("the single-threaded wasm build (~10 min), then the page is served")
if [ ${#todo[@]} -gt 0 ]; then
  echo "== a first run: before the page is served, this machine will do"
  printf '   - %s\n' "${todo[@]}"
  [ $COLD_WASM = 0 ] || echo "   and, while the page is up, the two threaded wasm builds (~10 min each)"
fi

scripts/setup.sh native model wasm

echo "== building medrank"
cargo build --bin medrank
OUT="$ROOT/dist/demo"
mkdir -p "$OUT"

echo "== ranking over scoring on examples/ (predictions of an evaluator, human rankings)"
"$MEDRANK_BIN" evaluate --bundle examples/bundle.jsonl --corpus examples/corpus.jsonl \
  --predictions examples/predictions.csv --rankings examples/rankings.csv \
  --json "$OUT/evaluate.json" --csv "$OUT/evaluate"

echo "== the same bundle scored by the default encoder (all-MiniLM-L6-v2, zero-training similarity: a weak baseline)"
"$MEDRANK_BIN" evaluate --bundle examples/bundle.jsonl --corpus examples/corpus.jsonl \
  --model models/all-MiniLM-L6-v2 --controls --rankings examples/rankings.csv \
  --json "$OUT/evaluate_model.json" --csv "$OUT/evaluate_model"

echo "== NRP of generated answers (BM25 and a precomputed ranker)"
"$MEDRANK_BIN" nrp --topics examples/nrp/topics.xml --qrels-combined examples/nrp/qrels.combined.txt \
  --not-judgeable credibility=3 --docs examples/nrp/docs.tsv --answers examples/nrp/answers.jsonl \
  --ranker published=examples/nrp/run.bm25.txt,examples/nrp/answer_scores.csv \
  --expert-rankings examples/nrp/expert_rankings.csv --json "$OUT/nrp.json" --csv "$OUT/nrp" --quiet
echo "   full NRP report: $OUT/nrp.json"

echo "== the 8-bit copy of the default model (the page's int8 choice), measured against f32"
scripts/quantize-model.sh

echo "== building the browser app"
BACKGROUND=""
if [ $COLD_WASM = 1 ]; then
  scripts/build-web.sh --builds single
  # The full site (all three builds) into a folder beside it, swapped in when complete: the
  # server reads files by path, so the next page load gets the new site whole.
  LOG="$OUT/build-web-threads.log"
  # In its own process group (setsid), so that Ctrl+C's stop below ends it and its cargo.
  setsid bash -c '
    scripts/build-web.sh --out dist/site-next > "$1" 2>&1 \
      && rm -rf dist/site-old && mv dist/site dist/site-old && mv dist/site-next dist/site \
      && rm -rf dist/site-old && echo "== the threaded builds are in the site: reload the page to use them" \
      || echo "== the threaded builds failed (the page stays single-threaded): see $1"' _ "$LOG" &
  BACKGROUND=$!
  echo "== the threaded builds go on in the background (log: $LOG)"
else
  scripts/build-web.sh
fi
echo "== reports of this run are in $OUT; the page computes the same numbers in the browser"
if [ -n "$BACKGROUND" ]; then
  # Ctrl+C stops the server and the background builds with it.
  trap 'kill -- -"$BACKGROUND" 2>/dev/null; exit 0' INT TERM
  "$MEDRANK_BIN" serve dist/site --port "${PORT:-8080}"
else
  exec "$MEDRANK_BIN" serve dist/site --port "${PORT:-8080}"
fi
