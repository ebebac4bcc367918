"""The NVML probe: what GPUs a host has (for claims and provenance), their memory in use, their compute processes.

`pynvml` (the nvidia-ml-py package) is imported lazily, and the constructor takes the module, so tests hand in
a fake. Decisions:
- nvidia-ml-py not installed: ProfileError (the profile asked for NVML; the operator must install it). A host
  silently reported as `cpu` would claim the wrong jobs.
- nvmlInit fails (no driver) or no device: a `cpu` report with count 1 and the reason in `extra["nvml"]`:
  that host has no GPU the farm can use.
- A GPU name the catalogue does not know, or cards of different kinds among those used: ProfileError naming
  them (add the name to catalogue.toml, or set `restrict_to`).
`restrict_to` (indices or UUIDs from the profile) limits every answer to those cards, in that order.

Power: each card's total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`, mJ since the driver loaded;
Volta and later) and its power draw (`nvmlDeviceGetPowerUsage`, mW); a card that answers NOT_SUPPORTED for one
reports None for it, and farm.bench.energy integrates the power samples where no counter is read. On recent
GPUs and drivers the power reading is an average over about a second, so peaks from it are smoothed; the energy
comes from the counter wherever the card has one.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from farm import hardware
from farm.errors import ProfileError
from farm.hardware.probe import GPU, HardwareReport, PowerReading, PowerSnapshot

NVML_POWER_SOURCE = "nvml"
CPU_HARDWARE_ID = "cpu"
"""The catalogue id of a host without a usable GPU."""

NVLINK_MAX_LINKS = 18
"""NVML_NVLINK_MAX_LINKS in current drivers (Hopper and Blackwell have 18 links); used when the module lacks it."""


def _text(value: Any) -> str:
    """NVML strings are bytes in old bindings, str in new ones."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def cuda_version_text(version: int) -> str:
    """NVML's CUDA driver version (12080) as text (12.8)."""
    return f"{version // 1000}.{(version % 1000) // 10}"


class NvmlProbe:
    """HardwareProbe over NVML. Call `close()` (or use it as a context manager) to shut NVML down."""

    def __init__(self, module: ModuleType | Any | None = None, *, restrict_to: Sequence[int | str] = ()) -> None:
        if module is None:
            try:
                import pynvml

                module = pynvml
            except ImportError as exc:
                raise ProfileError(
                    "hardware detection by NVML needs nvidia-ml-py (pip install nvidia-ml-py)",
                    field="hardware.source",
                ) from exc
        self._nvml: Any = module
        self._restrict_to = tuple(restrict_to)
        self._lock = threading.Lock()
        self._initialized = False
        self._init_error: str | None = None
        self._handles: tuple[Any, ...] | None = None
        self._indices: tuple[int, ...] = ()

    # --- lifecycle ---

    def _init(self) -> bool:
        """NVML started and the cards chosen; False when this host has no usable GPU."""
        with self._lock:
            if self._handles is not None:
                return True
            if self._init_error is not None:
                return False
            try:
                self._nvml.nvmlInit()
                self._initialized = True
                count = int(self._nvml.nvmlDeviceGetCount())
            except self._nvml.NVMLError as exc:
                self._init_error = f"NVML unavailable: {exc}"
                return False
            if count == 0:
                self._init_error = "NVML sees no GPU"
                return False
            self._indices = self._choose(count)
            self._handles = tuple(self._nvml.nvmlDeviceGetHandleByIndex(i) for i in self._indices)
            return True

    def _choose(self, count: int) -> tuple[int, ...]:
        if not self._restrict_to:
            return tuple(range(count))
        uuids = {_text(self._nvml.nvmlDeviceGetUUID(self._nvml.nvmlDeviceGetHandleByIndex(i))): i for i in range(count)}
        chosen: list[int] = []
        for wanted in self._restrict_to:
            if isinstance(wanted, int) or (isinstance(wanted, str) and wanted.isdigit()):
                index = int(wanted)
                if not 0 <= index < count:
                    raise ProfileError(f"GPU index {index} does not exist (this host has {count})", field="restrict_to")
            elif wanted in uuids:
                index = uuids[wanted]
            else:
                raise ProfileError(f"no GPU with UUID {wanted!r} on this host", field="restrict_to")
            if index not in chosen:
                chosen.append(index)
        return tuple(chosen)

    def close(self) -> None:
        with self._lock:
            if self._initialized:
                with contextlib.suppress(self._nvml.NVMLError):
                    self._nvml.nvmlShutdown()
                self._initialized = False
            self._handles = None

    def __enter__(self) -> NvmlProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- HardwareProbe ---

    @property
    def indices(self) -> tuple[int, ...]:
        """NVML indices of the cards this probe answers for (empty on a host without GPU)."""
        self._init()
        return self._indices

    def report(self) -> HardwareReport:
        if not self._init():
            return HardwareReport(
                hardware_id=CPU_HARDWARE_ID, count=1, declared=False, extra={"nvml": self._init_error or ""}
            )
        assert self._handles is not None
        gpus = tuple(self._gpu(index, handle) for index, handle in zip(self._indices, self._handles, strict=True))
        ids = {gpu.name: hardware.id_for_nvml_name(gpu.name) for gpu in gpus}
        unknown = sorted(name for name, hw_id in ids.items() if hw_id is None)
        if unknown:
            raise ProfileError(
                f"GPU {', '.join(map(repr, unknown))} is not in the hardware catalogue "
                "(add its NVML name to farm/hardware/catalogue.toml)",
                field="hardware",
            )
        kinds = sorted({hw_id for hw_id in ids.values() if hw_id is not None})
        if len(kinds) > 1:
            raise ProfileError(
                f"this host mixes GPU kinds ({', '.join(kinds)}); set restrict_to to the cards of one kind",
                field="restrict_to",
            )
        return HardwareReport(
            hardware_id=kinds[0],
            count=len(gpus),
            gpus=gpus,
            driver_version=self._optional(lambda: _text(self._nvml.nvmlSystemGetDriverVersion())),
            cuda_version=self._optional(lambda: cuda_version_text(int(self._nvml.nvmlSystemGetCudaDriverVersion()))),
            interconnect=self._interconnect(),
            declared=False,
        )

    def memory_used_mib(self) -> tuple[int, ...]:
        if not self._init():
            return ()
        assert self._handles is not None
        return tuple(int(self._nvml.nvmlDeviceGetMemoryInfo(h).used) // (1024 * 1024) for h in self._handles)

    def compute_processes(self) -> tuple[int, ...]:
        if not self._init():
            return ()
        assert self._handles is not None
        pids: list[int] = []
        for handle in self._handles:
            for process in self._nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if int(process.pid) not in pids:
                    pids.append(int(process.pid))
        return tuple(pids)

    def power(self) -> PowerSnapshot:
        if not self._init():
            return PowerSnapshot(unavailable=self._init_error or "NVML unavailable")
        assert self._handles is not None
        cards = tuple(
            PowerReading(
                energy_mj=self._optional(lambda h=handle: float(self._nvml.nvmlDeviceGetTotalEnergyConsumption(h))),
                power_mw=self._optional(lambda h=handle: float(self._nvml.nvmlDeviceGetPowerUsage(h))),
            )
            for handle in self._handles
        )
        return PowerSnapshot(cards=cards, source=NVML_POWER_SOURCE)

    # --- details ---

    def _gpu(self, index: int, handle: Any) -> GPU:
        power_mw = self._optional(lambda: int(self._nvml.nvmlDeviceGetPowerManagementLimit(handle)))
        return GPU(
            index=index,
            name=_text(self._nvml.nvmlDeviceGetName(handle)),
            uuid=_text(self._nvml.nvmlDeviceGetUUID(handle)),
            memory_total_mib=int(self._nvml.nvmlDeviceGetMemoryInfo(handle).total) // (1024 * 1024),
            power_limit_w=power_mw / 1000 if power_mw is not None else None,
        )

    def _optional(self, read: Any) -> Any:
        """A detail some GPUs or drivers do not report (NVML_ERROR_NOT_SUPPORTED): None then."""
        try:
            return read()
        except self._nvml.NVMLError:
            return None

    def _interconnect(self) -> str | None:
        """NVLink when any card has an active link, else the PCIe link of the first card (e.g. 'PCIe Gen5 x16')."""
        assert self._handles is not None
        max_links = int(getattr(self._nvml, "NVML_NVLINK_MAX_LINKS", NVLINK_MAX_LINKS))
        enabled = int(getattr(self._nvml, "NVML_FEATURE_ENABLED", 1))
        active = 0
        for handle in self._handles:
            for link in range(max_links):
                try:
                    if int(self._nvml.nvmlDeviceGetNvLinkState(handle, link)) == enabled:
                        active += 1
                except self._nvml.NVMLError:
                    break
        if active:
            return f"NVLink ({active} active links over {len(self._handles)} GPUs)"
        handle = self._handles[0]
        gen = self._optional(lambda: int(self._nvml.nvmlDeviceGetMaxPcieLinkGeneration(handle)))
        width = self._optional(lambda: int(self._nvml.nvmlDeviceGetMaxPcieLinkWidth(handle)))
        if gen is None:
            return None
        return f"PCIe Gen{gen}" + (f" x{width}" if width else "")
