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
# Two files at a time: on 2 cores the suite took 23.0 min one at a time and 16.9 two at a
# time (BENCHMARKS.md, 2026-11-28 night; a quarter of the CPU sat idle one at a time, most
# of it while SwiftShader ran). One such run had a time-out: the harness's wait for the
# uploaded files ended on the old rows still on screen, and the Run click landed while the
# page had disabled the button for the files being read (harness.mjs, waitForChecks, fixed).
# MEDRANK_BROWSER_CONCURRENCY=1 runs one file at a time.
CONCURRENCY="${MEDRANK_BROWSER_CONCURRENCY:-2}"
if [ $# -gt 0 ]; then
  exec node --test --test-concurrency="$CONCURRENCY" "$@"
fi
# In name order. Longest first (families, train, gradients, ...) was tried and was no faster
# (21.0 against 20.6 min, BENCHMARKS.md 2026-11-29 later): both cores stay busy either way.
exec node --test --test-concurrency="$CONCURRENCY" ./*.test.mjs
