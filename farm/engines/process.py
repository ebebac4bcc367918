"""Supervision of one engine process group: start, readiness with a deadline, stop (TERM, grace, KILL), log.

The engine runs in its own session, so stopping it stops every process it started (vLLM's API server leaves
its engine core and tensor-parallel workers behind when only it is killed). The parent-death signal makes an
engine die with a worker that was killed outright.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from farm.domain import FailureClass
from farm.errors import EngineError
from farm.logs import get_logger
from farm.private_files import open_private

if TYPE_CHECKING:
    from farm.engines.base import LaunchRequest
    from farm.hardware.probe import HardwareProbe

log = get_logger(__name__)

READY_POLL_S = 0.2
"""How often readiness is polled: short next to any engine's start-up, long next to a request."""

LOG_TAIL_LINES = 40

ALWAYS_PASSED = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
"""Passed whenever the worker has them: they only forbid downloads, so a host that set them is obeyed."""


def _allowed(name: str, allowlist: Sequence[str]) -> bool:
    return any(name == entry or (entry.endswith("*") and name.startswith(entry[:-1])) for entry in allowlist)


def host_env(
    base_env: Mapping[str, str],
    allowlist: Sequence[str],
    gpus: Sequence[int] | None,
    extra: Mapping[str, str],
) -> dict[str, str]:
    """An engine's environment from the worker's: allowlisted names of the worker's own environment (an entry
    ending in `*` is a prefix), the profile's `extra`, and CUDA_VISIBLE_DEVICES from the assigned GPUs (None: left
    as it is; empty: no GPU visible)."""
    env = {name: value for name, value in base_env.items() if _allowed(name, allowlist) or name in ALWAYS_PASSED}
    env.update(extra)
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(index) for index in gpus)
    return env


GPU_FREE_THRESHOLD_MIB = 1024
"""A card counts as free under this much memory in use: the driver and a display hold a few hundred MiB."""

GPU_FREE_DEADLINE_S = 30.0
"""How long the memory of a stopped engine may take to be released before the cards count as busy."""
"""Lines of the engine log quoted in every failure message."""

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:
        pass


class EngineProcess:
    """One engine process group and its log file. Given a probe, the first `stop` also waits until the cards are
    free again and raises EngineError (gpu_busy) if they are not: every adapter gets the check (an engine's
    workers can outlive its server, vLLM issue 55510; llama.cpp and SGLang hold the cards until they exit)."""

    ready_path = "/health"
    """What answers 200 once the engine serves (Ollama's `/api/version`, LM Studio's `/v1/models`)."""

    metric_names: Mapping[str, str] | None = None
    """The farm's counters (named as vLLM's) to this engine's /metrics names, handed to the sweep; None: the
    sweep learns them from the server's /metrics page (the simulator, which speaks any dialect)."""

    argument_spec: str | None = None
    """Which spec judged its command, and why that one (set by the worker; its provenance says it)."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str],
        log_path: Path,
        base_url: str,
        served_model: str,
        simulated: bool,
        stop_grace_s: float = 30.0,
        cwd: Path | None = None,
        probe: HardwareProbe | None = None,
        gpu_free_threshold_mib: int = GPU_FREE_THRESHOLD_MIB,
        gpu_free_deadline_s: float = GPU_FREE_DEADLINE_S,
    ) -> None:
        self._probe = probe
        self._gpu_free_threshold_mib = gpu_free_threshold_mib
        self._gpu_free_deadline_s = gpu_free_deadline_s
        self._stopped = False
        self._argv = tuple(argv)
        self._env = dict(env)
        self._log_path = log_path
        self._base_url = base_url.rstrip("/")
        self._served_model = served_model
        self._simulated = simulated
        self._stop_grace_s = stop_grace_s
        self._cwd = cwd
        self._proc: subprocess.Popen[bytes] | None = None
        self._exit_status: int | None = None

    @classmethod
    def launched(cls, argv: Sequence[str], request: LaunchRequest, *, served_model: str | None = None) -> Self:
        """The process of an adapter's launch: `argv`, and the request's environment, log, the worker's address,
        the served name (unless the engine serves another), simulation mark, stop grace, probe and GPU deadline."""
        return cls(
            argv,
            env=request.env,
            log_path=request.log_path,
            base_url=f"http://{request.host}:{request.port}",
            served_model=served_model if served_model is not None else request.served_model,
            simulated=request.simulated,
            stop_grace_s=request.stop_grace_s,
            probe=request.probe,
            gpu_free_deadline_s=request.gpu_free_deadline_s,
        )

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def served_model(self) -> str:
        return self._served_model

    @property
    def argv(self) -> tuple[str, ...]:
        return self._argv

    @property
    def simulated(self) -> bool:
        return self._simulated

    @property
    def log_path(self) -> Path:
        return self._log_path

    @property
    def environment(self) -> dict[str, str]:
        return dict(self._env)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        with open_private(self._log_path) as log_file:
            try:
                self._proc = subprocess.Popen(
                    self._argv,
                    env=self._env,
                    cwd=self._cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_die_with_parent,
                )
            except OSError as exc:
                raise EngineError(
                    f"could not start {self._argv[0]!r}: {exc}", failure_class=FailureClass.ENGINE_START_FAILED
                ) from exc
        log.info("engine.started", pid=self._proc.pid, argv=list(self._argv), log=str(self._log_path))

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_status(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def wait_ready(self, timeout_s: float) -> None:
        """`ready_path` (`/health`) answers 200, then one tiny completion succeeds. Ends at once if the process
        exits."""
        if self._proc is None:
            raise EngineError("wait_ready before start", failure_class=FailureClass.ENGINE_START_FAILED)
        deadline = time.monotonic() + timeout_s
        healthy = False
        while True:
            status = self._proc.poll()
            if status is not None:
                raise EngineError(
                    f"engine exited with status {status} before it was ready",
                    failure_class=self.classify_exit(),
                    log_tail=self.log_tail(),
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EngineError(
                    f"engine not ready after {timeout_s:.0f} s",
                    failure_class=FailureClass.STARTUP_TIMEOUT,
                    log_tail=self.log_tail(),
                )
            probe_timeout = max(0.1, min(5.0, remaining))
            if not healthy:
                healthy = self._http_status("GET", self.ready_path, None, probe_timeout) == 200
                if healthy:
                    self.when_serving()
            if healthy and self._tiny_completion(probe_timeout):
                log.info("engine.ready", pid=self._proc.pid)
                return
            time.sleep(min(READY_POLL_S, max(0.0, deadline - time.monotonic())))

    def when_serving(self) -> None:
        """Hook: once the server answers and before the first completion (Ollama creates its model here)."""

    def version(self) -> str | None:
        body = self._http_json("GET", "/version", None, 5.0)
        version = body.get("version") if isinstance(body, dict) else None
        return str(version) if version is not None else None

    def _before_group_stop(self) -> None:
        """Hook for engines that must be asked to stop another way first (a container, `lms server stop`)."""

    def stop(self) -> int | None:
        """Stop the group (`_before_group_stop`, then SIGTERM, a grace period, SIGKILL); the first time, then wait
        for the GPUs to be free (given a probe) and raise EngineError (gpu_busy) if they are not. Later calls
        return the exit status."""
        if self._proc is None:
            return None
        if self._stopped:
            return self._stop_group()
        self._stopped = True
        try:
            self._before_group_stop()
        finally:
            status = self._stop_group()
        if self._probe is not None:
            wait_gpus_free(
                self._probe, threshold_mib=self._gpu_free_threshold_mib, deadline_s=self._gpu_free_deadline_s
            )
        return status

    def _stop_group(self) -> int | None:
        """SIGTERM to the group, a grace period, then SIGKILL. Safe to call again."""
        if self._proc is None:
            return None
        if self._exit_status is not None:
            return self._exit_status
        pgid = self._proc.pid
        _signal_group(pgid, signal.SIGTERM)
        try:
            self._proc.wait(timeout=self._stop_grace_s)
        except subprocess.TimeoutExpired:
            log.warning("engine.kill", pid=pgid, grace_s=self._stop_grace_s)
        # The leader may be gone while children of the group live on: always finish the group off.
        _signal_group(pgid, signal.SIGKILL)
        self._exit_status = self._proc.wait()
        _wait_group_gone(pgid, timeout_s=5.0)
        log.info("engine.stopped", pid=pgid, status=self._exit_status)
        return self._exit_status

    def log_text(self) -> str:
        try:
            return self._log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def classify_exit(self) -> FailureClass:
        """The failure class of an engine that exited before it was ready, from its log."""
        return self.classify(started=False)

    def classify(self, *, started: bool) -> FailureClass:
        """The failure class of an engine that exited, from its log; `started`: it had served."""
        return classify_log(self.log_text(), started=started)

    # --- HTTP probes (plain urllib: untimed, no event loop needed) ---

    def _tiny_completion(self, timeout_s: float) -> bool:
        body = {"model": self._served_model, "prompt": "Hello", "max_tokens": 1, "temperature": 0}
        return self._http_status("POST", "/v1/completions", body, timeout_s) == 200

    def _http_status(self, method: str, path: str, body: Any, timeout_s: float) -> int | None:
        try:
            with self._open(method, path, body, timeout_s) as resp:
                resp.read()
                return int(resp.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except (urllib.error.URLError, OSError, TimeoutError):
            return None

    def _http_json(self, method: str, path: str, body: Any, timeout_s: float) -> Any:
        try:
            with self._open(method, path, body, timeout_s) as resp:
                return json.loads(resp.read())
        except (urllib.error.URLError, OSError, TimeoutError, ValueError):
            return None

    def _open(self, method: str, path: str, body: Any, timeout_s: float) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(  # noqa: S310 - the URL is the engine's loopback address
            self._base_url + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        return urllib.request.urlopen(request, timeout=timeout_s)  # noqa: S310 - same


_LOG_PATTERNS: tuple[tuple[FailureClass, tuple[str, ...]], ...] = (
    (FailureClass.OUT_OF_MEMORY, ("CUDA out of memory", "OutOfMemoryError", "out of memory")),
    (FailureClass.PORT_IN_USE, ("Address already in use", "address already in use", "port is already")),
    (FailureClass.BAD_ARGUMENT, ("error: unrecognized arguments", "error: argument", "invalid choice")),
    (FailureClass.CUDA_ERROR, ("CUDA error", "cudaError", "NCCL error")),
)


def classify_log(text: str, *, started: bool) -> FailureClass:
    """A failure class from an engine log: the first known pattern wins; otherwise a crash or a failed start."""
    for failure_class, needles in _LOG_PATTERNS:
        if any(needle in text for needle in needles):
            return failure_class
    return FailureClass.ENGINE_CRASHED if started else FailureClass.ENGINE_START_FAILED


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass
    except PermissionError as exc:  # pragma: no cover - a reused pgid of another user
        if exc.errno != errno.EPERM:
            raise


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is still there."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover
        return True
    return True


def _wait_group_gone(pgid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


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
