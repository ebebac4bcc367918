"""Ollama: its line of the table (`ENGINE`), its argument spec (spec.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.engines.base import EngineDemo, EngineImages, EngineKind
from farm.engines.ollama.timings import OWN_TIMING
from farm.engines.versions import version_reader

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec
    from farm.engines.environment_names import EngineEnvironment


def _spec() -> ArgSpec:
    from farm.engines.ollama.spec import OLLAMA

    return OLLAMA


def _environment() -> EngineEnvironment:
    from farm.engines.ollama.environment import ENVIRONMENT

    return ENVIRONMENT


ENGINE = EngineKind(
    name="ollama",
    spec=_spec,
    spec_source="ollama cmd/cmd.go (serve, run, pull)",
    launcher=("ollama", "serve"),
    model_steps=("pull", "run"),
    model_name=r"^(?:hf\.co/[A-Za-z0-9][\w.-]*/[\w.-]+|[a-z0-9][\w.-]*(?:/[\w.-]+)?)(?::[\w.-]+)?$",
    artifact="gguf",
    hub_model_prefix="hf.co/",
    title="Ollama",
    step_context="OLLAMA_CONTEXT_LENGTH or num_ctx",
    adapter="farm.engines.ollama.adapter",
    environment=_environment,
    images=EngineImages(repositories=("ollama/ollama",)),
    demo=EngineDemo(
        spec="demo-ollama.toml",
        profile="demo-ollama.toml",
        what="simulated: the simulator standing in for Ollama behind its adapter",
    ),
    read_version=version_reader(command=("--version",), drop=("serve",)),
    own_timing=OWN_TIMING,
)
