#!/usr/bin/env bash
# Run the real-browser tests: build what is missing (the site, the medrank binary), install
# playwright-core if needed, then `node --test` over tests/browser/*.test.mjs.
#
#   tests/browser/run.sh [--rebuild] [test files...]
#
# Needs scripts/setup.sh wasm browser (Debian's Chromium, wasm toolchain) once.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
cd "$ROOT"
REBUILD=0
if [ "${1:-}" = "--rebuild" ]; then REBUILD=1; shift; fi

SITE="${MEDRANK_SITE:-$ROOT/dist/site}"
if [ $REBUILD = 1 ] || [ ! -f "$SITE/pkg/medrank_bg.wasm" ]; then
  scripts/build-web.sh --out "$SITE"
fi
if [ -z "${MEDRANK_BIN:-}" ]; then
  # The dev profile (dependencies are optimised anyway; see Cargo.toml) shares the build
  # the Rust tests already made.
  cargo build --quiet --bin medrank
  MEDRANK_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/medrank"
fi
[ -d "$HERE/node_modules/playwright-core" ] || (cd "$HERE" && npm ci --silent --no-audit --no-fund)

export MEDRANK_SITE="$SITE" MEDRANK_BIN
cd "$HERE"
# One file at a time. Two at a time (MEDRANK_BROWSER_CONCURRENCY=2) ran the suite in 16.9 min
# instead of 23.0 on 2 cores, but in the next run a ranking in evaluate.test.mjs that takes
# 4 s alone did not finish in 120 s beside the families file (BENCHMARKS.md, 2026-11-28
# night): not safe until that is understood.
CONCURRENCY="${MEDRANK_BROWSER_CONCURRENCY:-1}"
if [ $# -gt 0 ]; then
  exec node --test --test-concurrency="$CONCURRENCY" "$@"
fi
exec node --test --test-concurrency="$CONCURRENCY" ./*.test.mjs
