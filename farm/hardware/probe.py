"""The GPU probe seam: what a host has, its cards' memory in use, their compute processes, and their power.

`DeclaredProbe` reports what a worker profile declares (it sees nothing of the cards); `SimulatedProbe` reads
the simulator's cards; the detecting probes (NVML, AMD, Apple) read the real ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class GPU:
    index: int
    name: str
    uuid: str
    memory_total_mib: int
    power_limit_w: float | None = None


@dataclass(frozen=True)
class HardwareReport:
    """What a host has: the hardware id and count it can serve, and the detail for provenance."""

    hardware_id: str
    count: int
    gpus: tuple[GPU, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    interconnect: str | None = None
    declared: bool = True
    extra: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PowerReading:
    """One card right now: its cumulative energy counter (mJ, from some origin such as the driver's load) and its
    power draw (mW); None where the card or its tool does not report it."""

    energy_mj: float | None = None
    power_mw: float | None = None


@dataclass(frozen=True)
class PowerSnapshot:
    """Every assigned card's reading, the tool they came from, or why there are none (`unavailable`)."""

    cards: tuple[PowerReading, ...] = ()
    source: str = ""
    unavailable: str | None = None


class HardwareProbe(Protocol):
    """Reports the host's hardware and samples per-card memory in use and power."""

    def report(self) -> HardwareReport: ...

    def memory_used_mib(self) -> tuple[int, ...]:
        """Memory in use per card right now (empty when the probe cannot see it)."""
        ...

    def compute_processes(self) -> tuple[int, ...]:
        """PIDs of compute processes on the assigned cards (empty when none or when it cannot see)."""
        ...

    def power(self) -> PowerSnapshot:
        """Each assigned card's energy counter and power right now (no cards, with the reason, when blind)."""
        ...


DECLARED_BLIND = "declared hardware: nothing reads the cards' power (set hardware.source to nvml or amd)"


class DeclaredProbe:
    """The hardware a worker profile declares. It cannot see memory, processes or power."""

    def __init__(self, report: HardwareReport) -> None:
        self._report = report

    def report(self) -> HardwareReport:
        return self._report

    def memory_used_mib(self) -> tuple[int, ...]:
        return ()

    def compute_processes(self) -> tuple[int, ...]:
        return ()

    def power(self) -> PowerSnapshot:
        return PowerSnapshot(unavailable=DECLARED_BLIND)


SIM_POWER_SOURCE = "simulator (its power model's exact energy counter)"


class SimulatedProbe(DeclaredProbe):
    """The declared hardware of a simulator worker; memory and power come from the simulator's `/sim/gpu`."""

    def __init__(self, report: HardwareReport) -> None:
        super().__init__(report)
        self.base_url: str | None = None

    def _cards(self) -> list[dict[str, object]]:
        import json
        import urllib.request

        assert self.base_url is not None
        with urllib.request.urlopen(self.base_url + "/sim/gpu", timeout=2) as resp:  # noqa: S310 - loopback
            cards = json.loads(resp.read())
        return [card for card in cards if isinstance(card, dict)]

    def memory_used_mib(self) -> tuple[int, ...]:
        if self.base_url is None:
            return ()
        return tuple(int(str(card["memory_used_mib"])) for card in self._cards())

    def power(self) -> PowerSnapshot:
        if self.base_url is None:
            return PowerSnapshot(unavailable="the simulator is not running yet")
        cards = self._cards()
        if not cards or "energy_mj" not in cards[0]:
            return PowerSnapshot(unavailable="this simulator models no power")
        return PowerSnapshot(
            cards=tuple(
                PowerReading(energy_mj=float(str(card["energy_mj"])), power_mw=float(str(card["power_mw"])))
                for card in cards
            ),
            source=SIM_POWER_SOURCE,
        )


PROBE_SOURCES = ("declared", "nvml", "amd", "apple")
"""The `hardware.source` values a worker profile may name (farm.hardware.detect.probe_from_source)."""
