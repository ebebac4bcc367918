# The two commands a newcomer needs: `make demo` (set up, run the demo sweep) and `make check` (set up, run
# every check). Both install what they need: uv (from PyPI, when missing) and the locked environment.
SHELL := /bin/bash
UV ?= $(shell command -v uv 2>/dev/null || echo "$(HOME)/.local/bin/uv")

.PHONY: setup demo check lint typecheck test services

$(UV):
	python3 -m pip install --quiet --user uv || python3 -m pip install --quiet uv

setup: $(UV)
	$(UV) sync --frozen --quiet

demo: setup
	$(UV) run farm demo

services:
	bash deploy/ensure-services.sh

lint: setup
	$(UV) run ruff check farm tests bench
	$(UV) run ruff format --check farm tests bench

typecheck: setup
	$(UV) run mypy

test: setup services
	$(UV) run pytest

check: lint typecheck test
