#!/usr/bin/env bash
# The README's run command: set up, build, evaluate the bundled example on the command
# line, build the browser app and serve it on 127.0.0.1 (prints the URL; Ctrl+C stops).
#   PORT=8080 scripts/demo.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
source scripts/env.sh
scripts/setup.sh all

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
scripts/build-web.sh
echo "== reports of this run are in $OUT; the page computes the same numbers in the browser"
exec "$MEDRANK_BIN" serve dist/site --port "${PORT:-8080}"
