"""LM Studio: its line of the table (`ENGINE`), its argument spec (spec.py), its adapter (adapter.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.engines.base import EngineDemo, EngineKind
from farm.engines.versions import version_reader

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec


def _spec() -> ArgSpec:
    from farm.engines.lmstudio.spec import LMSTUDIO

    return LMSTUDIO


ENGINE = EngineKind(
    name="lmstudio",
    spec=_spec,
    spec_source="lmstudio-ai/lms (server start, load)",
    launcher=("lms", "server", "start"),
    optional_positional_model=True,
    # `lms load` names the model and how it is loaded (the server is the worker's); `lms server` alone starts it
    launcher_spellings=(("lms", "load"), ("lms", "server")),
    aliases=("lm-studio", "lm studio", "lms"),
    artifact="gguf",
    adapter="farm.engines.lmstudio.adapter",
    demo=EngineDemo(
        spec="demo-lmstudio.toml",
        profile="demo-lmstudio.toml",
        what="simulated: the simulator standing in for LM Studio behind its adapter",
    ),
    read_version=version_reader(command=("version",)),
)
