"""The probe that detects a host's hardware, by a worker profile's `hardware.source`. Apart from
farm.hardware.probe, which the detecting probes build on (NVML's module loads its library only when asked)."""

from __future__ import annotations

from farm.errors import ProfileError
from farm.hardware.amd import AmdProbe
from farm.hardware.apple import AppleProbe
from farm.hardware.nvml import NvmlProbe
from farm.hardware.probe import PROBE_SOURCES, HardwareProbe


def probe_from_source(source: str, *, restrict_to: tuple[int | str, ...] = ()) -> HardwareProbe:
    """The probe that detects hardware for a profile's `hardware.source`: NVML, AMD (rocm-smi) or Apple
    (sysctl / system_profiler). `declared` needs no probe; the caller builds a DeclaredProbe itself."""
    if source == "nvml":
        return NvmlProbe(restrict_to=restrict_to)
    if source == "amd":
        return AmdProbe(restrict_to=restrict_to)
    if source == "apple":
        return AppleProbe()
    raise ProfileError(
        f"unknown hardware source {source!r} (known: {', '.join(PROBE_SOURCES)})", field="hardware.source"
    )
