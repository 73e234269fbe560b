#!/usr/bin/env bash
# Build the browser app into a self-contained static folder (relative paths only): copy it to
# any static host or serve it locally.
#
#   scripts/build-web.sh [--out DIR] [--no-opt] [--serve [PORT]]
#
#   --out DIR      where to assemble the site (default dist/site)
#   --no-opt       skip wasm-opt (used only when binaryen >= 116 is installed)
#   --lint         lint the crate with clippy (warnings are errors) as each build compiles it:
#                  scripts/test.sh's wasm lint, sharing the builds' standard library and
#                  dependencies instead of checking them again in folders of its own
#   --builds LIST  which of the three wasm builds to compile and ship (comma-separated, default
#                  single,threads,relaxed; below). scripts/demo.sh ships `single` first on a
#                  cold machine: every browser runs it, and the page is up two builds sooner.
#   --bench-peer   a bench build: also serve onnxruntime-web and the model's ONNX graph in peer/
#                  (bench.html's peer; the main page never loads them). Needs scripts/setup.sh
#                  browser bench (the npm package, Python's onnx).
#   --serve PORT   afterwards run `medrank serve DIR --port PORT` (default port 8080)
#
#   MEDRANK_HUB=off  a site that never opens a connection: no "Hugging Face Hub" model choice
#                  (www/hub.js's HUB_ACCESS false, so the worker refuses one too) and the
#                  page's connect-src 'self' alone. Default on: the page may download a model
#                  by its Hub id from huggingface.co and the storage hosts it redirects to.
#
# Toolchain routes (scripts/setup.sh wasm installs route 2):
#   1. rustup has the wasm32-unknown-unknown target  -> plain cargo build
#   2. Debian's rustc-web + rust-web-src + wasm-ld     -> build std ourselves (-Z build-std)
# WASM_TARGET_DIR (default target/wasm) keeps wasm artefacts apart from native ones: route 2
# uses a different compiler, and sharing a folder would rebuild everything each time.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '\033[1;34m[build-web]\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31m[build-web]\033[0m %s\n' "$*" >&2; exit 1; }

OUT="$ROOT/dist/site"
OPT=1
PEER=0
SERVE_PORT=""
BUILDS="single,threads,relaxed"
LINT=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT="$(mkdir -p "$2" && cd "$2" && pwd)"; shift 2 ;;
    --no-opt) OPT=0; shift ;;
    --builds) BUILDS="$2"; shift 2 ;;
    --lint) LINT=1; shift ;;
    --bench-peer) PEER=1; shift ;;
    --serve)
      if [ $# -gt 1 ] && [[ "$2" =~ ^[0-9]+$ ]]; then SERVE_PORT="$2"; shift 2; else SERVE_PORT=8080; shift; fi ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
for b in ${BUILDS//,/ }; do
  case "$b" in single|threads|relaxed) ;; *) die "--builds: unknown build $b (single, threads, relaxed)" ;; esac
done
wanted() { [[ ",$BUILDS," == *",$1,"* ]]; }

WASM_TARGET_DIR="${WASM_TARGET_DIR:-$ROOT/target/wasm}"
TARGET=wasm32-unknown-unknown
# Three builds of the same crate (the worker picks one at run time, www/worker.js):
#   pkg/          single-threaded, SIMD128: runs everywhere
#   pkg-threads/  atomics + shared memory + SIMD128, rayon's pool on Web Workers
#                 (wasm-bindgen-rayon): used when the page is cross-origin isolated
#   pkg-threads-relaxed/  the threaded build plus relaxed SIMD (fused multiply-add in the
#                 products' microkernel, src/model/cpu/panel_kernel.rs): used when the
#                 browser validates a relaxed-SIMD module (Chromium; not Safari)
# Each gets its own target folder: their flags differ, and sharing one would rebuild all.
# The threaded build needs std rebuilt with atomics (-Z build-std), so only route 2 (or a
# rustup toolchain with rust-src) makes it; without it the site runs on one thread.
# The shared memory's maximum is fixed at link time: 4 GiB, the most wasm32 can address,
# so a BERT-base model (12 layers, hidden 768: ~440 MB of weights, held twice while loading)
# fits; the browser reserves the address space, not the memory.
SIMD_FLAGS="-C target-feature=+simd128"
# The linker flags make the memory shared and imported (the pool's workers share it) and
# export the thread-local storage symbols wasm-bindgen's thread support sets up per thread;
# current rustc no longer adds them for wasm32-unknown-unknown by itself.
THREAD_FLAGS="-C target-feature=+simd128,+atomics,+bulk-memory,+mutable-globals \
-C link-arg=--shared-memory -C link-arg=--import-memory -C link-arg=--max-memory=4294967296 \
-C link-arg=--export=__wasm_init_tls -C link-arg=--export=__tls_size \
-C link-arg=--export=__tls_align -C link-arg=--export=__tls_base"
RELAXED_FLAGS="${THREAD_FLAGS/+simd128,/+simd128,+relaxed-simd,}"
if command -v rustup >/dev/null 2>&1 && rustup target list --installed 2>/dev/null | grep -qx "$TARGET"; then
  ROUTE=1
elif [ -x /usr/bin/rustc ] && [ -d /usr/lib/rustlib/src/rust/library ] && command -v wasm-ld >/dev/null 2>&1; then
  ROUTE=2
else
  die "no wasm toolchain: run scripts/setup.sh wasm (or: rustup target add $TARGET)"
fi

# build_wasm DIR RUSTFLAGS BUILD_STD FEATURES [LINKER]: compile the crate to wasm into DIR.
build_wasm() {
  local dir="$1" flags="$2" build_std="$3" features="$4" linker="${5:-wasm-ld}"
  local std_args=() feature_args=() lint_env=()
  [ "$build_std" = 1 ] && std_args=(-Z build-std=std,panic_abort)
  [ -n "$features" ] && feature_args=(--features "$features")
  # --lint: clippy-driver compiles our crate (only it: cargo gives the workspace wrapper to
  # workspace members), linting as it compiles; CLIPPY_ARGS is how `cargo clippy` passes it
  # `-D warnings`. The driver must be the compiler's own (Debian's rust-web-clippy on route 2).
  if [ $LINT = 1 ]; then
    local driver
    driver="$( [ $ROUTE = 2 ] && echo /usr/bin/clippy-driver || command -v clippy-driver || true)"
    [ -x "$driver" ] || die "--lint: no clippy-driver for this compiler (scripts/setup.sh wasm)"
    lint_env=(RUSTC_WORKSPACE_WRAPPER="$driver" CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__")
    # Linting happens only when the crate compiles, and cargo does not count the wrapper as
    # a change: a crate last compiled by a build without --lint (the demo's, on the same
    # target folder) was taken as up to date and never linted. The marker, touched after
    # each linted build, is older than the wasm when a plain build compiled it since: then
    # our crate alone is cleaned (the standard library and dependencies stay) and compiles
    # again under clippy.
    local wasm="$dir/$TARGET/release/medrank.wasm" marker="$dir/$TARGET/release/.medrank-linted"
    if [ -f "$wasm" ] && { [ ! -f "$marker" ] || [ "$wasm" -nt "$marker" ]; }; then
      log "our crate was last compiled without --lint: compiling it again, linted"
      CARGO_TARGET_DIR="$dir" cargo clean --quiet -p medrank --release --target "$TARGET"
    fi
  fi
  if [ $ROUTE = 1 ]; then
    env "${lint_env[@]}" RUSTC_BOOTSTRAP=1 CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="$flags" CARGO_TARGET_DIR="$dir" \
      cargo build --release --lib --target "$TARGET" --no-default-features "${feature_args[@]}" "${std_args[@]}"
  else
    env "${lint_env[@]}" PATH="/usr/bin:$PATH" RUSTC_BOOTSTRAP=1 \
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER="$linker" \
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="$flags" CARGO_TARGET_DIR="$dir" \
      cargo build --release --lib --target "$TARGET" -Z build-std=std,panic_abort --no-default-features "${feature_args[@]}"
  fi
  [ -f "$dir/$TARGET/release/medrank.wasm" ] || die "expected $dir/$TARGET/release/medrank.wasm after the build"
  if [ $LINT = 1 ]; then touch "$dir/$TARGET/release/.medrank-linted"; fi
}

# ---- 1. compile the crate to wasm, once per build wanted -----------------------------------
BUILT=()
if wanted single; then
  log "route $ROUTE: single-threaded build (a cold build takes ~10 minutes)"
  build_wasm "$WASM_TARGET_DIR" "$SIMD_FLAGS" 0 ""
  BUILT+=("pkg:$WASM_TARGET_DIR")
fi
if ! wanted threads && ! wanted relaxed; then
  :
elif [ $ROUTE = 2 ] || [ -d "$(rustc --print sysroot 2>/dev/null)/lib/rustlib/src/rust/library" ]; then
  # Shared memory and thread-local storage: Debian's lld 19 (scripts/setup.sh installs it)
  # rather than the default wasm-ld 14.
  THREAD_LINKER="$(command -v wasm-ld-19 || echo wasm-ld)"
  if wanted threads; then
    log "threaded build (atomics, std rebuilt; a cold build takes ~10 minutes)"
    build_wasm "$WASM_TARGET_DIR-threads" "$THREAD_FLAGS" 1 threads "$THREAD_LINKER"
    BUILT+=("pkg-threads:$WASM_TARGET_DIR-threads")
  fi
  if wanted relaxed; then
    log "threaded build with relaxed SIMD (a cold build takes ~10 minutes)"
    build_wasm "$WASM_TARGET_DIR-relaxed" "$RELAXED_FLAGS" 1 threads "$THREAD_LINKER"
    BUILT+=("pkg-threads-relaxed:$WASM_TARGET_DIR-relaxed")
  fi
else
  log "no std sources for the threaded build (rustup component add rust-src): the site runs on one thread"
fi
[ ${#BUILT[@]} -gt 0 ] || die "no wasm build to ship (--builds $BUILDS)"

# ---- 2. JS bindings ----------------------------------------------------------------------
command -v wasm-bindgen >/dev/null 2>&1 || die "wasm-bindgen not found: run scripts/setup.sh wasm"
want="$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' Cargo.lock)"
have="$(wasm-bindgen --version | awk '{print $2}')"
[ "$want" = "$have" ] || die "wasm-bindgen $have does not match Cargo.lock's $want: run scripts/setup.sh wasm"

STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
# bindgen PKG WASM: --target web, an ES module, loaded by the module worker (worker.js).
bindgen() {
  local pkg="$1" wasm="$2"
  wasm-bindgen --target web --no-typescript --out-dir "$STAGE/$pkg" "$wasm"
  # wasm-opt shrinks the module by a third, but binaryen before 116 (Debian bookworm ships
  # 108) breaks wasm-bindgen's externref table ("WebAssembly.Table.set(): Argument 1 is
  # invalid"): use it only when it is new enough.
  if [ $OPT = 1 ] && [ -n "$binaryen_version" ] && [ "$binaryen_version" -ge 116 ]; then
    log "wasm-opt -O2 $pkg (binaryen $binaryen_version)"
    wasm-opt -O2 --all-features "$STAGE/$pkg/medrank_bg.wasm" -o "$STAGE/$pkg/medrank_bg.opt.wasm"
    mv "$STAGE/$pkg/medrank_bg.opt.wasm" "$STAGE/$pkg/medrank_bg.wasm"
  fi
  # wasm-bindgen's glue (and the pool's helper) document themselves with links in line
  # comments; drop those comment lines so that no served file names another origin (the
  # check below enforces it).
  find "$STAGE/$pkg" -name '*.js' -exec sed -i -E '/^[[:space:]]*\/\/.*https?:\/\//d' {} +
}
binaryen_version="$(wasm-opt --version 2>/dev/null | grep -oE '[0-9]+' | head -1 || true)"
if [ $OPT = 1 ] && ! { [ -n "$binaryen_version" ] && [ "$binaryen_version" -ge 116 ]; }; then
  log "skipping wasm-opt (binaryen ${binaryen_version:-missing}; 116 or newer needed)"
fi
for built in "${BUILT[@]}"; do
  bindgen "${built%%:*}" "${built#*:}/$TARGET/release/medrank.wasm"
done

# ---- 3. assemble the site ------------------------------------------------------------------
log "assembling $OUT"
rm -rf "$OUT"
mkdir -p "$OUT"
cp -R www/. "$OUT/"
case "${MEDRANK_HUB:-on}" in
  on) ;;
  off)
    log "MEDRANK_HUB=off: no Hub choice, connect-src 'self' alone"
    sed -i -E "s|connect-src 'self'[^;]*;|connect-src 'self';|" "$OUT/index.html"
    sed -i 's/^export const HUB_ACCESS = true;/export const HUB_ACCESS = false;/' "$OUT/hub.js"
    grep -q "connect-src 'self';" "$OUT/index.html" && grep -q '^export const HUB_ACCESS = false;' "$OUT/hub.js" \
      || die "MEDRANK_HUB=off: could not turn the Hub off in index.html and hub.js"
    ;;
  *) die "MEDRANK_HUB is on or off, not ${MEDRANK_HUB}" ;;
esac
for built in "${BUILT[@]}"; do
  cp -R "$STAGE/${built%%:*}" "$OUT/${built%%:*}"
done
# The one-click example: the repo's examples/ (one source of truth), listed for the page.
if [ -d examples ]; then
  mkdir -p "$OUT/examples"
  cp -R examples/. "$OUT/examples/"
fi
# The workload benchmark's data (bench.html): the vendored CasiMedicos dev file, with its licence.
mkdir -p "$OUT/data/casimedicos"
cp data/casimedicos/dev.jsonl data/casimedicos/LICENSE data/casimedicos/README.md "$OUT/data/casimedicos/"
# The bundled default model: only the files the encoder reads.
MODEL_SRC="models/all-MiniLM-L6-v2"
if [ -f "$MODEL_SRC/model.safetensors" ]; then
  mkdir -p "$OUT/models/all-MiniLM-L6-v2"
  for f in config.json tokenizer.json model.safetensors modules.json 1_Pooling/config.json sentence_bert_config.json; do
    [ -f "$MODEL_SRC/$f" ] || continue
    mkdir -p "$(dirname "$OUT/models/all-MiniLM-L6-v2/$f")"
    cp "$MODEL_SRC/$f" "$OUT/models/all-MiniLM-L6-v2/$f"
  done
else
  log "no $MODEL_SRC (run scripts/setup.sh model): the site ships without a bundled model"
fi
# Its 8-bit copy (scripts/quantize-model.sh), which the page loads when int8 is chosen;
# without it the page quantizes the f32 weights on load (the same numbers, a larger download).
INT8_SRC="models/all-MiniLM-L6-v2-int8"
if [ -f "$INT8_SRC/model.safetensors" ]; then
  for f in config.json tokenizer.json model.safetensors quantization.json modules.json 1_Pooling/config.json sentence_bert_config.json; do
    [ -f "$INT8_SRC/$f" ] || continue
    mkdir -p "$(dirname "$OUT/$INT8_SRC/$f")"
    cp "$INT8_SRC/$f" "$OUT/$INT8_SRC/$f"
  done
fi

# The bench build's peer: onnxruntime-web's wasm build and the same weights as an ONNX graph
# (built from the safetensors by the native bench's own script).
if [ $PEER = 1 ]; then
  ORT="tests/browser/node_modules/onnxruntime-web/dist"
  [ -f "$ORT/ort.wasm.min.mjs" ] || die "no onnxruntime-web: run scripts/setup.sh browser"
  [ -f "$MODEL_SRC/model.safetensors" ] || die "no $MODEL_SRC: run scripts/setup.sh model"
  mkdir -p "$OUT/peer/ort"
  cp "$ORT/ort.wasm.min.mjs" "$ORT/ort-wasm-simd-threaded.mjs" "$ORT/ort-wasm-simd-threaded.wasm" "$OUT/peer/ort/"
  cp tests/browser/node_modules/onnxruntime-web/LICENSE "$OUT/peer/ort/LICENSE" 2>/dev/null || true
  log "exporting the ONNX graph of $MODEL_SRC for the peer"
  python3 tests/reference/minilm_onnx.py "$MODEL_SRC" --export "$OUT/peer/minilm.onnx"
  # The int8 peer: ONNX Runtime's dynamic quantization of the same graph's linear layers.
  python3 tests/reference/minilm_onnx.py "$MODEL_SRC" --export "$OUT/peer/minilm-int8.onnx" --int8
fi

# Manifests the page and the service worker read (generated, so they never go stale):
#  - examples/index.json: every example file, relative to examples/
#  - precache.json: every app file the service worker stores for offline use (models are
#    cached when first used, not at install: 90 MB is too much to fetch unasked)
#  - the service worker's cache name carries a hash of the app, so a rebuild replaces it.
list_files() { (cd "$1" && find . -type f ! -name '.*' | sed 's|^\./||' | LC_ALL=C sort); }
json_array() { awk 'BEGIN{printf "["} {gsub(/\\/,"\\\\"); gsub(/"/,"\\\""); printf "%s\"%s\"", (NR>1?",":""), $0} END{print "]"}'; }
if [ -d "$OUT/examples" ]; then
  list_files "$OUT/examples" | grep -v '^index\.json$' | json_array > "$OUT/examples/index.json"
fi
list_files "$OUT" | grep -v '^models/' | grep -v '^data/' | grep -v '^peer/' | grep -v '^sw\.js$' | json_array > "$OUT/precache.json"
BUILD_ID="$(cd "$OUT" && list_files . | grep -v '^models/' | grep -v '^peer/' | xargs sha256sum | sha256sum | cut -c1-16)"
sed -i "s/__BUILD_ID__/$BUILD_ID/" "$OUT/sw.js"

# No served file may point at another origin (privacy by construction), but for the Hub's
# hosts in index.html's policy (connect-src: where a model may be downloaded from). XML
# namespace names (http://www.w3.org/2000/svg) are identifiers, never fetched, and the Apache
# licence links (the thread pool helper's licence header, the vendored data's LICENSE) are
# text: allowed. The bench build's peer (third-party code the main page never loads) is left
# out of the check.
external="$(grep -rIoE "(https?:)?//[a-zA-Z0-9.-]+\.[a-z]{2,}[^\"' )]*" "$OUT" --exclude-dir=models --exclude-dir=peer \
  | grep -vE '//www\.w3\.org/(2000/svg|1999/xhtml|1999/xlink|2000/xmlns)|//www\.apache\.org/licenses/' \
  | grep -vxE "$OUT/index\.html:https://(huggingface\.co|hf\.co);?" || true)"
if [ -n "$external" ]; then
  echo "$external" | head -10 >&2
  die "a served file mentions an external URL (listed above)"
fi

size="$(du -sh "$OUT" | cut -f1)"
sizes=()
for built in "${BUILT[@]}"; do
  sizes+=("${built%%:*} $(du -h "$OUT/${built%%:*}/medrank_bg.wasm" | cut -f1)")
done
log "site ready: $OUT ($size; wasm: $(IFS=,; echo "${sizes[*]}" | sed 's/,/, /g'); build $BUILD_ID)"

if [ -n "$SERVE_PORT" ]; then
  log "serving on http://127.0.0.1:$SERVE_PORT/"
  exec cargo run --quiet --bin medrank -- serve "$OUT" --port "$SERVE_PORT"
fi
