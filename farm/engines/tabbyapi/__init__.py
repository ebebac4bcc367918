"""TabbyAPI: its line of the table (`ENGINE`), its argument spec and config schema (spec.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.engines.base import EngineDemo, EngineImages, EngineKind
from farm.engines.versions import version_reader

if TYPE_CHECKING:
    from farm.engines.argspec import ArgSpec


def _spec() -> ArgSpec:
    from farm.engines.tabbyapi.spec import TABBYAPI

    return TABBYAPI


ENGINE = EngineKind(
    name="tabbyapi",
    spec=_spec,
    spec_source="theroyallab/tabbyAPI common/args.py",
    launcher=("python", "main.py"),
    aliases=("tabby-api", "tabby"),
    model_flags=("--model-name",),
    adapter="farm.engines.tabbyapi.adapter",
    # Its images (theroyallab/tabbyAPI docker/Dockerfile) run `python3` from their venv; the arguments start with
    # `main.py`. A container of it is judged at submit only: a launcher for it must write the judged config
    # document to a file it mounts, with its own listen address in it (TabbyAPI ignores its command line then).
    title="TabbyAPI",
    config_option="--config",
    images=EngineImages(
        repositories=("ghcr.io/theroyallab/tabbyapi",),
        entrypoints=(None, "python3", "/opt/venv/bin/python3"),
        runs=("python",),
    ),
    demo=EngineDemo(
        spec="demo-tabbyapi.toml",
        profile="demo-tabbyapi.toml",
        what="simulated: the simulator standing in for TabbyAPI behind its adapter",
    ),
    read_version=version_reader(command=("--version",), checkout_script="main.py"),
)
