#!/usr/bin/env bash
# The int8 copy of the default model (issue 26: the page's 8-bit choice downloads it, about
# a quarter of the f32 weights), written by `medrank quantize` with its accuracy measured
# against the f32 model and kept in models/all-MiniLM-L6-v2-int8/quantization.json.
# Idempotent: skipped while that folder is newer than both the f32 weights and the binary.
#   scripts/quantize-model.sh           (the demo: also the CasiMedicos dev accuracy, ~2 min)
#   scripts/quantize-model.sh --quick   (the tests: texts and the example bundle only)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/env.sh
SRC="models/all-MiniLM-L6-v2"
OUT="models/all-MiniLM-L6-v2-int8"
[ -f "$SRC/model.safetensors" ] || { echo "no $SRC: run scripts/setup.sh model" >&2; exit 1; }
[ -x "$MEDRANK_BIN" ] || { echo "no $MEDRANK_BIN: cargo build --bin medrank" >&2; exit 1; }
CHECKS=(--texts examples/sentences.txt --bundle examples/bundle.jsonl)
[ "${1:-}" = "--quick" ] || CHECKS+=(--dev data/casimedicos/dev.jsonl)
if [ -f "$OUT/quantization.json" ] && [ "$OUT/quantization.json" -nt "$SRC/model.safetensors" ] \
  && [ "$OUT/quantization.json" -nt "$MEDRANK_BIN" ] \
  && { [ "${1:-}" = "--quick" ] || grep -q '"f32_accuracy"' "$OUT/quantization.json"; }; then
  exit 0
fi
rm -rf "$OUT"
echo "== quantizing $SRC to int8 ($OUT)"
"$MEDRANK_BIN" quantize --model "$SRC" --out "$OUT" "${CHECKS[@]}"
