"""The Apple probe: which Apple silicon chip and how much unified memory, from `sysctl` and `system_profiler`.

`sysctl -n machdep.cpu.brand_string` names the chip (`Apple M3 Max`), `sysctl -n hw.memsize` gives the unified
memory in bytes, and `system_profiler SPDisplaysDataType -json` confirms the GPU (its `sppci_model`) and its
core count. The catalogue id is the chip's family with that memory (`apple-m3-max-64gb`). A chip or memory
size the catalogue does not list is a ProfileError naming both. The GPU is one device; Metal reports neither
per-process memory nor compute processes to a command-line tool, so those answers are empty; its power is read
only by `powermetrics`, as root, so energy is absent on Apple silicon with that reason.
"""

from __future__ import annotations

import json

from farm import hardware
from farm.errors import ProfileError
from farm.hardware.commands import CommandRunner, run_tool
from farm.hardware.probe import GPU, HardwareReport, PowerSnapshot

SYSCTL_CHIP = ("sysctl", "-n", "machdep.cpu.brand_string")
SYSCTL_MEMORY = ("sysctl", "-n", "hw.memsize")
SYSTEM_PROFILER = ("system_profiler", "SPDisplaysDataType", "-json")
APPLE_POWER_BLIND = (
    "macOS reports GPU power only through powermetrics, which needs root; the worker does not run as root, so "
    "energy is not measured on Apple silicon"
)


class AppleProbe:
    """HardwareProbe for Apple silicon."""

    def __init__(self, run: CommandRunner = run_tool) -> None:
        self._run = run

    def report(self) -> HardwareReport:
        chip = self._run(SYSCTL_CHIP).strip()
        if not chip.startswith("Apple "):
            raise ProfileError(f"sysctl names the CPU {chip!r}, not Apple silicon", field="hardware.source")
        memory_text = self._run(SYSCTL_MEMORY).strip()
        if not memory_text.isdigit() or len(memory_text) > 20:
            raise ProfileError(f"sysctl hw.memsize printed {memory_text[:40]!r}, not a byte count", field="hardware")
        memory_bytes = int(memory_text)
        memory_gib = memory_bytes / 1024**3
        gpu_name, cores = self._display(chip)
        hardware_id = hardware.id_for_apple_chip(chip, memory_gib)
        if hardware_id is None:
            raise ProfileError(
                f"{chip} with {memory_gib:.0f} GB is not in the hardware catalogue "
                "(farm catalogue --vendor apple lists the known ones)",
                field="hardware",
            )
        extra = {"backend": "metal"}
        if cores:
            extra["gpu_cores"] = cores
        return HardwareReport(
            hardware_id=hardware_id,
            count=1,
            gpus=(
                GPU(index=0, name=gpu_name, uuid=f"{hardware_id}-0", memory_total_mib=memory_bytes // (1024 * 1024)),
            ),
            declared=False,
            extra=extra,
        )

    def _display(self, chip: str) -> tuple[str, str | None]:
        """The GPU's model and core count from system_profiler; it must be the chip sysctl named."""
        text = self._run(SYSTEM_PROFILER)
        try:
            document = json.loads(text)
        except ValueError as exc:
            raise ProfileError(f"system_profiler printed something that is not JSON: {exc}", field="hardware") from exc
        displays = document.get("SPDisplaysDataType") if isinstance(document, dict) else None
        if not isinstance(displays, list) or not displays:
            raise ProfileError("system_profiler lists no GPU", field="hardware")
        for display in displays:
            if not isinstance(display, dict):
                continue
            model = str(display.get("sppci_model") or display.get("_name") or "")
            if model == chip:
                cores = display.get("sppci_cores")
                return model, str(cores) if cores is not None else None
        models = ", ".join(str(d.get("sppci_model")) for d in displays if isinstance(d, dict))
        raise ProfileError(f"system_profiler lists {models}, not the {chip} GPU", field="hardware")

    def memory_used_mib(self) -> tuple[int, ...]:
        return ()

    def compute_processes(self) -> tuple[int, ...]:
        return ()

    def power(self) -> PowerSnapshot:
        return PowerSnapshot(unavailable=APPLE_POWER_BLIND)
