"""Ollama: its line of the table (`ENGINE`), its argument spec (spec.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.engines.base import EngineKind

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec


def _spec() -> ArgSpec:
    from farm.engines.ollama.spec import OLLAMA

    return OLLAMA


ENGINE = EngineKind(
    name="ollama",
    spec=_spec,
    spec_source="ollama cmd/cmd.go (serve, run, pull)",
    launcher=("ollama", "serve"),
    model_steps=("pull", "run"),
    model_name=r"^(?:hf\.co/[A-Za-z0-9][\w.-]*/[\w.-]+|[a-z0-9][\w.-]*(?:/[\w.-]+)?)(?::[\w.-]+)?$",
    artifact="gguf",
    adapter="farm.engines.ollama.adapter",
)
