"""The registry's config assets: what a TabbyAPI recipe's `--config /app/config.yml` mount holds.

A registry TabbyAPI recipe runs `python main.py --config /app/config.yml` in a container, with the registry
asset `asset/NAME-tabbyapi-config.yml` mounted at that path. The config is the whole command (the model folder,
context, cache, batch, speculative mode), so the farm reads it: the assets ship as data
(`registry_assets.json`, made by deploy/refresh-assets.py from a registry checkout, each with the sha256 of the
file's bytes), already parsed from YAML, and a recipe's `--config` gets the asset's document itself, which the
engine's config schema then judges key by key (farm.engines.judge). An asset the snapshot lacks is refused,
naming it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

DATA_FILE = "registry_assets.json"
PREFIX = "asset/"
"""How a registry launch's mount names an asset (`asset/NAME.yml`, a path in the registry's own tree)."""


@dataclass(frozen=True)
class Asset:
    name: str
    sha256: str
    document: Mapping[str, Any]


@cache
def _shipped() -> dict[str, Asset]:
    data = json.loads(resources.files(__package__).joinpath(DATA_FILE).read_text(encoding="utf-8"))
    return {
        name: Asset(name, row["sha256"], row["document"])
        for name, row in data["assets"].items()
        if isinstance(row.get("document"), dict)
    }


def is_asset(source: str) -> bool:
    """Whether a mount source names a registry asset (`asset/NAME`, one file, no climbing out)."""
    name = source.removeprefix(PREFIX)
    return source.startswith(PREFIX) and bool(name) and "/" not in name and not name.startswith(".")


def lookup(source: str) -> Asset | None:
    """The shipped asset a mount source (`asset/NAME`) names, if the farm's snapshot has it."""
    return _shipped().get(source.removeprefix(PREFIX)) if is_asset(source) else None


def snapshot_size() -> int:
    return len(_shipped())


LISTEN_KEYS = ("host", "port")
"""The `network` keys that say where TabbyAPI listens: the worker's to set, left out of a recipe's config."""


def without_listen(document: Mapping[str, Any]) -> dict[str, Any]:
    """The config document less `network.host` and `network.port`."""
    copy = json.loads(json.dumps(document))
    network = copy.get("network")
    if isinstance(network, dict):
        for key in LISTEN_KEYS:
            network.pop(key, None)
    return copy  # type: ignore[no-any-return]


def shipped_documents() -> tuple[dict[str, Any], ...]:
    """Every shipped asset's document as a recipe's --config carries it (without the listen address)."""
    return tuple(without_listen(asset.document) for asset in _shipped().values())
