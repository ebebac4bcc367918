"""The AMD probe: what Radeon / Instinct GPUs a host has, from `rocm-smi --json`, matched to the catalogue.

rocm-smi prints one object per card (`card0`, `card1`, ...) and a `system` object; key spellings changed
between ROCm releases (`Card series` / `Card Series`), so keys are compared without regard to case. Memory
values are byte counts written as strings. Decisions mirror the NVML probe:
- rocm-smi not installed or failing: ProfileError (the profile asked for the AMD probe).
- no card: a `cpu` report with the reason in `extra["amd"]`.
- a card the catalogue does not know, or cards of different kinds: ProfileError naming them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from farm import hardware
from farm.errors import ProfileError
from farm.hardware.commands import CommandRunner, run_tool
from farm.hardware.probe import GPU, HardwareReport

CPU_HARDWARE_ID = "cpu"
ROCM_SMI_INFO = (
    "rocm-smi",
    "--showproductname",
    "--showmeminfo",
    "vram",
    "--showuniqueid",
    "--showdriverversion",
    "--json",
)
ROCM_SMI_MEMORY = ("rocm-smi", "--showmeminfo", "vram", "--json")
_NAME_KEYS = ("card series", "marketing name", "card sku", "card model", "product name")
_MIB = 1024 * 1024


def _field(fields: Mapping[str, Any], *names: str) -> str | None:
    lowered = {str(key).lower(): value for key, value in fields.items()}
    for name in names:
        value = lowered.get(name)
        if value not in (None, "", "N/A"):
            return str(value)
    return None


def parse_rocm_smi(text: str) -> list[tuple[int, dict[str, Any]]]:
    """rocm-smi's JSON: the cards in index order with their fields."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise ProfileError(f"rocm-smi printed something that is not JSON: {exc}", field="hardware") from exc
    if not isinstance(document, dict):
        raise ProfileError("rocm-smi printed JSON that is not an object", field="hardware")
    cards = []
    for key, fields in document.items():
        if isinstance(key, str) and key.startswith("card") and key[4:].isdigit() and isinstance(fields, dict):
            cards.append((int(key[4:]), fields))
    return sorted(cards, key=lambda card: card[0])


class AmdProbe:
    """HardwareProbe over rocm-smi."""

    def __init__(self, run: CommandRunner = run_tool, *, restrict_to: Sequence[int | str] = ()) -> None:
        self._run = run
        self._restrict_to = tuple(int(index) for index in restrict_to if str(index).isdigit())
        self._system_driver: str | None = None

    def _cards(self, argv: Sequence[str]) -> list[tuple[int, dict[str, Any]]]:
        text = self._run(argv)
        cards = parse_rocm_smi(text)
        system = json.loads(text).get("system")
        if isinstance(system, dict):
            self._system_driver = _field(system, "driver version")
        if self._restrict_to:
            chosen = dict(cards)
            missing = [index for index in self._restrict_to if index not in chosen]
            if missing:
                raise ProfileError(
                    f"GPU index {missing[0]} does not exist (rocm-smi sees {sorted(chosen)})", field="restrict_to"
                )
            cards = [(index, chosen[index]) for index in self._restrict_to]
        return cards

    def report(self) -> HardwareReport:
        cards = self._cards(ROCM_SMI_INFO)
        if not cards:
            return HardwareReport(
                hardware_id=CPU_HARDWARE_ID, count=1, declared=False, extra={"amd": "rocm-smi sees no GPU"}
            )
        gpus = []
        ids: dict[str, str | None] = {}
        for index, fields in cards:
            name = _field(fields, *_NAME_KEYS) or f"card{index}"
            total = _bytes(_field(fields, "vram total memory (b)"))
            gpus.append(
                GPU(
                    index=index,
                    name=name,
                    uuid=_field(fields, "unique id", "guid") or f"card{index}",
                    memory_total_mib=total // _MIB if total is not None else 0,
                )
            )
            memory_gib = total / 1024**3 if total is not None else None
            ids[name] = hardware.id_for_device_name(name, vendor="amd", memory_gib=memory_gib)
        unknown = sorted(name for name, hw_id in ids.items() if hw_id is None)
        if unknown:
            raise ProfileError(
                f"AMD GPU {', '.join(map(repr, unknown))} is not in the hardware catalogue "
                "(farm catalogue --vendor amd lists the known ones; add its name to farm/hardware/catalogue.toml)",
                field="hardware",
            )
        kinds = sorted({hw_id for hw_id in ids.values() if hw_id is not None})
        if len(kinds) > 1:
            raise ProfileError(f"this host mixes GPU kinds ({', '.join(kinds)}); set restrict_to", field="restrict_to")
        driver = next(
            (_field(fields, "driver version") for _, fields in cards if _field(fields, "driver version")), None
        )
        return HardwareReport(
            hardware_id=kinds[0],
            count=len(gpus),
            gpus=tuple(gpus),
            driver_version=driver or self._system_driver,
            declared=False,
            extra={"backend": "rocm"},
        )

    def memory_used_mib(self) -> tuple[int, ...]:
        used = []
        for _, fields in self._cards(ROCM_SMI_MEMORY):
            value = _bytes(_field(fields, "vram total used memory (b)"))
            used.append(value // _MIB if value is not None else 0)
        return tuple(used)

    def compute_processes(self) -> tuple[int, ...]:
        """rocm-smi's process list is per host, not per card; the AMD probe does not claim to see it."""
        return ()


def _bytes(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip()
    return int(text) if text.isdigit() and len(text) <= 20 else None
