"""vLLM's process: the failure classes of its log, and the process the worker supervises (its argv and
environment: farm.engines.vllm.adapter). Imports no policy, so the container adapter can reuse it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from farm.domain import FailureClass
from farm.engines.process import GPU_FREE_DEADLINE_S, GPU_FREE_THRESHOLD_MIB, EngineProcess

if TYPE_CHECKING:
    from farm.hardware.probe import HardwareProbe

# --- failure classes ---

_VLLM_PATTERNS: tuple[tuple[FailureClass, re.Pattern[str], bool], ...] = (
    # (class, pattern, only before the engine was ready)
    (
        FailureClass.OUT_OF_MEMORY,
        re.compile(
            r"CUDA out of memory|OutOfMemoryError|No available memory for the cache blocks"
            r"|larger than the maximum number of tokens that can be stored in KV cache"
            r"|CUDA error: out of memory|Error.*\bout of memory\b",
        ),
        False,
    ),
    (
        FailureClass.PORT_IN_USE,
        re.compile(r"[Aa]ddress already in use|error while attempting to bind on address|port is already allocated"),
        False,
    ),
    (
        FailureClass.BAD_ARGUMENT,
        re.compile(
            r"error: unrecognized arguments|error: argument |invalid choice|error: the following arguments are"
            r" required|error: ambiguous option"
        ),
        False,
    ),
    (
        FailureClass.CUDA_ERROR,
        re.compile(r"CUDA error|cudaError|NCCL error|CUBLAS_STATUS|no CUDA-capable device|No CUDA GPUs are available"),
        False,
    ),
    # vLLM checks its configuration after parsing: pydantic ValidationError or a ValueError before it serves.
    (FailureClass.BAD_ARGUMENT, re.compile(r"validation errors? for \w+Config|^\s*ValueError: ", re.M), True),
)


def classify_vllm_log(text: str, *, started: bool) -> FailureClass:
    """A failure class from a vLLM log: the first known pattern wins; otherwise a crash (it had served) or a
    failed start. Stricter than farm.engines.process.classify_log about memory, and it knows vLLM's config
    errors."""
    for failure_class, pattern, only_at_start in _VLLM_PATTERNS:
        if only_at_start and started:
            continue
        if pattern.search(text):
            return failure_class
    return FailureClass.ENGINE_CRASHED if started else FailureClass.ENGINE_START_FAILED


class VllmEngineProcess(EngineProcess):
    """An EngineProcess that classifies failures from vLLM's log (given a probe, EngineProcess.stop checks the
    cards are free again: vLLM's engine core can outlive its API server, vLLM issue 55510)."""

    metric_names: Mapping[str, str] | None = {}  # vLLM's own names are the farm's

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        log_path: Path,
        base_url: str,
        served_model: str,
        stop_grace_s: float = 30.0,
        probe: HardwareProbe | None = None,
        gpu_free_threshold_mib: int = GPU_FREE_THRESHOLD_MIB,
        gpu_free_deadline_s: float = GPU_FREE_DEADLINE_S,
        cwd: Path | None = None,
    ) -> None:
        super().__init__(
            argv,
            env=env,
            log_path=log_path,
            base_url=base_url,
            served_model=served_model,
            simulated=False,
            stop_grace_s=stop_grace_s,
            cwd=cwd,
            probe=probe,
            gpu_free_threshold_mib=gpu_free_threshold_mib,
            gpu_free_deadline_s=gpu_free_deadline_s,
        )

    def classify(self, *, started: bool) -> FailureClass:
        """The failure class of this engine from its log; `started`: it had been ready (a crash mid-run)."""
        return classify_vllm_log(self.log_text(), started=started)
