"""TabbyAPI: its line of the table (`ENGINE`), its argument spec and config schema (spec.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from farm.engines.base import EngineKind

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
)
