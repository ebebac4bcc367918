"""The AMD probe: what Radeon / Instinct GPUs a host has, from `rocm-smi --json`, matched to the catalogue.

rocm-smi prints one object per card (`card0`, `card1`, ...) and a `system` object; key spellings changed
between ROCm releases (`Card series` / `Card Series`), so keys are compared without regard to case. Memory
values are byte counts written as strings. Decisions mirror the NVML probe:
- rocm-smi not installed or failing: ProfileError (the profile asked for the AMD probe).
- no card: a `cpu` report with the reason in `extra["amd"]`.
- a card the catalogue does not know, or cards of different kinds: ProfileError naming them.

Power: through the `amdsmi` Python library where it loads (`amdsmi_get_energy_count`: the energy accumulator
times its resolution in µJ, spelled `energy_accumulator` in ROCm 6.1 and later and `power` before;
`amdsmi_get_power_info`: `socket_power` from ROCm 7, else `current_socket_power`, else `average_socket_power`,
in W), else from `rocm-smi --showpower --showenergycounter --json` (`Accumulated Energy (uJ)` and the package
power in W). rocm-smi takes a good part of a second per call, so its readings come that far apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from farm import hardware
from farm.errors import ProfileError
from farm.hardware.commands import CommandRunner, run_tool
from farm.hardware.probe import GPU, HardwareReport, PowerReading, PowerSnapshot

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
ROCM_SMI_POWER = ("rocm-smi", "--showpower", "--showenergycounter", "--json")
_ROCM_POWER_KEYS = (
    "current socket graphics package power (w)",
    "average graphics package power (w)",
    "socket graphics package power (w)",
)
_AMDSMI_POWER_KEYS = ("socket_power", "current_socket_power", "average_socket_power")
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

    def __init__(
        self,
        run: CommandRunner = run_tool,
        *,
        restrict_to: Sequence[int | str] = (),
        amdsmi: ModuleType | Any | None = None,
        use_amdsmi: bool = True,
    ) -> None:
        """`amdsmi` is the amdsmi module (tests hand in a fake); None imports it at the first power reading, and
        `use_amdsmi=False` reads power from rocm-smi only."""
        self._run = run
        self._restrict_to = tuple(int(index) for index in restrict_to if str(index).isdigit())
        self._system_driver: str | None = None
        self._amdsmi: Any = amdsmi
        self._use_amdsmi = use_amdsmi
        self._amdsmi_handles: list[Any] | None = None

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

    def power(self) -> PowerSnapshot:
        handles = self._amdsmi_cards()
        if handles is not None:
            return PowerSnapshot(cards=tuple(self._amdsmi_reading(h) for h in handles), source="amdsmi")
        try:
            cards = self._cards(ROCM_SMI_POWER)
        except ProfileError as exc:
            return PowerSnapshot(unavailable=f"rocm-smi gave no power reading: {exc}")
        readings = []
        for _, fields in cards:
            lowered = {str(key).lower(): value for key, value in fields.items()}
            energy_uj = _number(lowered.get("accumulated energy (uj)"))
            watts = next((w for key in _ROCM_POWER_KEYS if (w := _number(lowered.get(key))) is not None), None)
            readings.append(
                PowerReading(
                    energy_mj=energy_uj / 1000 if energy_uj is not None else None,
                    power_mw=watts * 1000 if watts is not None else None,
                )
            )
        return PowerSnapshot(cards=tuple(readings), source="rocm-smi")

    def _amdsmi_cards(self) -> list[Any] | None:
        """The amdsmi handles of the assigned cards; None where amdsmi is not used (not installed, or fails)."""
        if not self._use_amdsmi:
            return None
        if self._amdsmi_handles is not None:
            return self._amdsmi_handles
        if self._amdsmi is None:
            try:
                import amdsmi  # type: ignore[import-not-found,unused-ignore]  # only on ROCm hosts
            except Exception:
                self._use_amdsmi = False
                return None
            self._amdsmi = amdsmi
        try:
            self._amdsmi.amdsmi_init()
            handles = list(self._amdsmi.amdsmi_get_processor_handles())
        except Exception:
            self._use_amdsmi = False
            return None
        if self._restrict_to:
            handles = [handles[index] for index in self._restrict_to if 0 <= index < len(handles)]
        self._amdsmi_handles = handles
        return handles

    def _amdsmi_reading(self, handle: Any) -> PowerReading:
        energy_mj: float | None = None
        power_mw: float | None = None
        try:
            count = self._amdsmi.amdsmi_get_energy_count(handle)
            ticks = _number(count.get("energy_accumulator", count.get("power")))
            resolution_uj = _number(count.get("counter_resolution"))
            if ticks is not None and resolution_uj is not None:
                energy_mj = ticks * resolution_uj / 1000
        except Exception:
            energy_mj = None
        try:
            info = self._amdsmi.amdsmi_get_power_info(handle)
            watts = next((w for key in _AMDSMI_POWER_KEYS if (w := _number(info.get(key))) is not None), None)
            power_mw = watts * 1000 if watts is not None else None
        except Exception:
            power_mw = None
        return PowerReading(energy_mj=energy_mj, power_mw=power_mw)


def _bytes(value: str | None) -> int | None:
    if value is None:
        return None
    text = value.strip()
    return int(text) if text.isdigit() and len(text) <= 20 else None


def _number(value: Any) -> float | None:
    """A reading as a float: numbers and numeric strings; None for 'N/A', empty or anything else."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    return number if number == number and abs(number) != float("inf") else None
