"""The recipe environment's exact-name tables: every refused name is refused for every engine, every name of the
engines' generated tables gets a verdict, and a value is judged by the kind its name takes."""

from __future__ import annotations

from pathlib import Path

import pytest

import farm.engines
from farm.engines.environment import (
    _generated,
    check_recipe_environment,
    engine_environment,
    refused_reason,
    value_refused_reason,
)
from farm.engines.environment_names import LIBRARIES, REFUSED, RUNTIME
from farm.errors import ArgumentPolicyError

ENGINES = ("vllm", "sglang", "llama.cpp", "ollama", "tabbyapi")
ENGINES_DIR = Path(farm.engines.__file__).parent


@pytest.mark.parametrize("engine", ENGINES)
def test_every_refused_name_is_refused_with_its_reason(engine: str) -> None:
    """A name on the shared refused list or the engine's own never passes for that engine, and says why."""
    for name, why in {**REFUSED, **engine_environment(engine).refused}.items():
        assert refused_reason(name, engine) == why, name


def test_runtime_names_pass_for_every_engine() -> None:
    """The runtime's tuning variables (NCCL, CUDA, OpenMP, ...) pass for any engine."""
    for name in RUNTIME:
        for engine in ENGINES:
            assert refused_reason(name, engine) is None, (name, engine)


@pytest.mark.parametrize("engine", ["vllm", "sglang", "llama.cpp"])
def test_every_generated_name_gets_a_verdict(engine: str) -> None:
    """Each name an engine's package (and FlashInfer's, for the engines that load it) reads is refused with a reason
    or passes with a kind of value; a declared string passes only where a hand list names it."""
    home = engine_environment(engine)
    assert home.declared is not None
    tables = [(home.own_prefixes, _generated(str(home.declared)))]
    tables += [(LIBRARIES[lib][0], _generated(str(ENGINES_DIR / LIBRARIES[lib][1]))) for lib in home.libraries]
    passed = 0
    for prefixes, table in tables:
        for name, declared in table.items():
            if name.startswith(prefixes) and refused_reason(name, engine) is None:
                passed += 1
                assert declared["kind"] not in ("str", "json", "list") or name in home.tuning or "_ARCH" in name, name
    assert passed > 100


def test_sglang_reads_sgl_names_as_sglang_names() -> None:
    """SGLang rewrites SGL_X to SGLANG_X at start: SGL_PLUGINS is SGLANG_PLUGINS and refused as such; for vLLM an
    SGL_ name is simply unknown."""
    assert "loads code" in (refused_reason("SGL_PLUGINS", "sglang") or "")
    assert "loads code" in (refused_reason("SGL_EXTERNAL_MODEL_PACKAGE", "sglang") or "")
    assert refused_reason("SGL_ENABLE_JIT_DEEPGEMM", "sglang") is None
    assert "not on the farm's list" in (refused_reason("SGL_ENABLE_JIT_DEEPGEMM", "vllm") or "")


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [
        ("VLLM_CPU_KVCACHE_SPACE", "/etc/passwd", "a number"),
        ("NCCL_P2P_DISABLE", "maybe", "a switch"),
        ("NCCL_PROTO", "../../x", "no path"),
        ("VLLM_WORKER_MULTIPROC_METHOD", "forkserver", "not one of fork, spawn"),
        ("TORCH_CUDA_ARCH_LIST", "http:x", None),
    ],
)
def test_values_are_judged_by_their_kind(name: str, value: str, why: str | None) -> None:
    """A switch takes a switch, a number a number, a plain word no path; a choice one of the engine's choices."""
    reason = value_refused_reason(name, value, "vllm")
    if why is None:
        assert reason is None
    else:
        assert reason is not None
        assert why in reason


@pytest.mark.parametrize(
    "name",
    [
        "VLLM_TEST_FORCE_LOAD_FORMAT",
        "SGLANG_PRECISION_HF_REPO",
        "FLASHINFER_DUMP_INCLUDE",
        "B12X_PROBE_SOURCE_WORKTREE",
    ],
)
def test_engine_names_read_by_bare_lookups_are_screened(name: str) -> None:
    """Names the packages read without a declared kind pass the danger screen first: test hooks, repositories,
    dumps and probes are refused."""
    engine = "sglang" if name.startswith("SGLANG") else "vllm"
    with pytest.raises(ArgumentPolicyError):
        check_recipe_environment({name: "1"}, engine)
