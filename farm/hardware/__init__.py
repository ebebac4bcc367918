"""Hardware: the catalogue of local-ai-registry hardware ids and the probe seam (declared now, NVML later)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources


@dataclass(frozen=True)
class HardwareKind:
    """One catalogue entry."""

    id: str
    name: str
    memory_gib: int
    nvml_names: tuple[str, ...]
    labels: tuple[str, ...]


@cache
def catalogue() -> dict[str, HardwareKind]:
    """Every hardware id the farm knows, from catalogue.toml beside this module."""
    text = resources.files(__package__).joinpath("catalogue.toml").read_text(encoding="utf-8")
    entries = tomllib.loads(text)["hardware"]
    return {
        e["id"]: HardwareKind(
            id=e["id"],
            name=e["name"],
            memory_gib=int(e["memory_gib"]),
            nvml_names=tuple(e["nvml_names"]),
            labels=tuple(e["labels"]),
        )
        for e in entries
    }


def is_known(hardware_id: str) -> bool:
    return hardware_id in catalogue()


def id_for_label(label: str) -> str | None:
    """The hardware id whose label matches `label` (case-insensitive, longest label wins), or None."""
    wanted = label.strip().lower()
    best: tuple[int, str] | None = None
    for kind in catalogue().values():
        for known in kind.labels:
            if known.lower() == wanted or known.lower() in wanted:
                score = len(known)
                if best is None or score > best[0]:
                    best = (score, kind.id)
    return best[1] if best else None


def id_for_nvml_name(name: str) -> str | None:
    """The hardware id for a name reported by NVML, or None when the catalogue has no match."""
    wanted = name.lower()
    best: tuple[int, str] | None = None
    for kind in catalogue().values():
        for known in kind.nvml_names:
            if known.lower() in wanted and (best is None or len(known) > best[0]):
                best = (len(known), kind.id)
    return best[1] if best else None
