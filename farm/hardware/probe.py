"""The GPU probe seam. `DeclaredProbe` reports what a worker profile declares; NVML implements it later."""

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


class HardwareProbe(Protocol):
    """Reports the host's hardware and samples per-card memory in use."""

    def report(self) -> HardwareReport: ...

    def memory_used_mib(self) -> tuple[int, ...]:
        """Memory in use per card right now (empty when the probe cannot see it)."""
        ...

    def compute_processes(self) -> tuple[int, ...]:
        """PIDs of compute processes on the assigned cards (empty when none or when it cannot see)."""
        ...


class DeclaredProbe:
    """The hardware a worker profile declares. It cannot see memory or processes."""

    def __init__(self, report: HardwareReport) -> None:
        self._report = report

    def report(self) -> HardwareReport:
        return self._report

    def memory_used_mib(self) -> tuple[int, ...]:
        return ()

    def compute_processes(self) -> tuple[int, ...]:
        return ()


class SimulatedProbe(DeclaredProbe):
    """The declared hardware of a simulator worker; memory comes from the simulator's `/sim/gpu`."""

    def __init__(self, report: HardwareReport) -> None:
        super().__init__(report)
        self.base_url: str | None = None

    def memory_used_mib(self) -> tuple[int, ...]:
        if self.base_url is None:
            return ()
        import json
        import urllib.request

        with urllib.request.urlopen(self.base_url + "/sim/gpu", timeout=2) as resp:  # noqa: S310 - loopback
            cards = json.loads(resp.read())
        return tuple(int(card["memory_used_mib"]) for card in cards)


PROBE_SOURCES = ("declared", "nvml", "amd", "apple")
"""The `hardware.source` values a worker profile may name (farm.hardware.detect.probe_from_source)."""
