"""LM Studio's adapter: `lms server start` on the worker's loopback port, then `lms load` with the recipe's
context, parallel slots and GPU offload (the recipe's `start && load` steps), measured through its
OpenAI-compatible API under the recipe's model id (`--identifier`).

`lms server start` does not serve in the process the worker starts: it asks LM Studio's daemon to start the
server and exits. So the supervised process is that command: it must exit 0 before the start-up deadline, and
from then on the server is supervised by its port (`/v1/models` answers, the model loaded under the worker's
identifier). `lms load` runs once the port answers; at stop, `lms unload --all` and `lms server stop`, then the
GPU-free check like every adapter. Every `lms` command runs in the run's own directory with the worker's
environment, its output in the engine's log.

The model `lms load` is given is the host's own (profile `model_paths`: an LM Studio model key or path on this
host), else the recipe's model key (`lms load` loads only what LM Studio already has; it downloads nothing).
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Sequence

from farm.domain import FailureClass
from farm.engines.base import LaunchRequest
from farm.engines.process import EngineProcess
from farm.errors import ArgumentPolicyError, EngineError

LMS_TIMEOUT_S = 60.0
"""`lms server start`, `unload` and `server stop` answer in seconds."""

LOAD_TIMEOUT_S = 1800.0
"""`lms load` reads the whole model into memory: minutes for the largest."""

WORKER_OPTIONS = ("--port", "--bind", "--identifier")
"""Set by the worker: where the server listens and the name it serves the model under."""


def lmstudio_argvs(request: LaunchRequest) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(`lms server start` on the worker's address, `lms load` of the host's model with the recipe's options)."""
    if not request.executable:
        raise ArgumentPolicyError("the worker's executable is empty")
    model = request.model_path or request.command.model
    if not model:
        raise EngineError(
            f"the recipe names no model to load, and this host maps none for {request.served_model!r} "
            "([engine.lmstudio] model_paths)",
            failure_class=FailureClass.BAD_RECIPE,
        )
    start = (*request.executable, "server", "start", "--port", str(request.port), "--bind", request.host)
    options = request.command.without(*WORKER_OPTIONS)
    said_yes = options.get("--yes") is not None
    load = (
        *request.executable,
        "load",
        model,
        *options.render_options(),
        *request.extra_args,
        "--identifier",
        request.served_model,
        # stdin is closed: a confirmation prompt would wait for an answer that never comes
        *(() if said_yes else ("--yes",)),
    )
    return start, load


class LmStudioProcess(EngineProcess):
    """`lms server start` (which exits once LM Studio's daemon serves), then the server by its port."""

    ready_path = "/v1/models"

    def __init__(self, request: LaunchRequest) -> None:
        start, load = lmstudio_argvs(request)
        super().__init__(
            start,
            env=request.env,
            log_path=request.log_path,
            base_url=f"http://{request.host}:{request.port}",
            served_model=request.served_model,
            simulated=request.simulated,
            stop_grace_s=request.stop_grace_s,
            cwd=request.run_dir,
            probe=request.probe,
            gpu_free_deadline_s=request.gpu_free_deadline_s,
        )
        self.load_argv = load
        self._executable = request.executable
        self._started = False

    def wait_ready(self, timeout_s: float) -> None:
        """`lms server start` exits 0, the port answers, `lms load` loads the model, one tiny completion works."""
        if self._proc is None:
            raise EngineError("wait_ready before start", failure_class=FailureClass.ENGINE_START_FAILED)
        deadline = time.monotonic() + timeout_s
        try:
            status = self._proc.wait(timeout=max(0.1, timeout_s))
        except subprocess.TimeoutExpired as exc:
            raise EngineError(
                f"lms server start did not return within {timeout_s:.0f} s",
                failure_class=FailureClass.STARTUP_TIMEOUT,
                log_tail=self.log_tail(),
            ) from exc
        if status != 0:
            raise EngineError(
                f"lms server start exited with status {status}",
                failure_class=self.classify_exit(),
                log_tail=self.log_tail(),
            )
        self._started = True
        self._wait(lambda t: self._http_status("GET", "/v1/models", None, t) == 200, deadline, "the server")
        self._lms(self.load_argv, timeout_s=max(1.0, min(LOAD_TIMEOUT_S, deadline - time.monotonic())))
        self._wait(self._tiny_completion, deadline, "the loaded model")

    def _wait(self, ready: Callable[[float], bool], deadline: float, what: str) -> None:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EngineError(
                    f"{what} not ready by the start-up deadline",
                    failure_class=FailureClass.STARTUP_TIMEOUT,
                    log_tail=self.log_tail(),
                )
            if ready(max(0.1, min(5.0, remaining))):
                return
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def _lms(self, argv: Sequence[str], *, timeout_s: float = LMS_TIMEOUT_S, check: bool = True) -> int | None:
        """One `lms` command, its output in the engine's log; EngineError if `check` and it fails."""
        with self.log_path.open("ab") as log_file:
            try:
                done = subprocess.run(
                    argv,
                    env=self.environment,
                    cwd=self._cwd,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    timeout=timeout_s,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                if not check:
                    return None
                raise EngineError(
                    f"{' '.join(argv[-3:])} did not finish: {exc}", failure_class=FailureClass.ENGINE_START_FAILED
                ) from exc
        if check and done.returncode != 0:
            raise EngineError(
                f"lms {argv[len(self._executable)]} exited with status {done.returncode}",
                failure_class=self.classify(started=False),
                log_tail=self.log_tail(),
            )
        return done.returncode

    def alive(self) -> bool:
        """The server answers on its port (the process the worker started has exited by design)."""
        return self._started and self._http_status("GET", "/v1/models", None, 5.0) == 200

    def _before_group_stop(self) -> None:
        """Unload every model and stop the server (LM Studio's daemon keeps both otherwise)."""
        if not self._started:
            return
        self._lms((*self._executable, "unload", "--all"), check=False)
        self._lms((*self._executable, "server", "stop"), check=False)

    def version(self) -> str | None:
        """LM Studio serves no version: `lms version` prints the CLI's."""
        try:
            done = subprocess.run(
                (*self._executable, "version"),
                env=self.environment,
                capture_output=True,
                text=True,
                timeout=LMS_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        found = re.search(r"\d+\.\d+[\w.+-]*", done.stdout)
        return found.group(0) if done.returncode == 0 and found else None

    def classify(self, *, started: bool) -> FailureClass:
        text = self.log_text()
        if re.search(r"[Pp]ort \d+ is (already )?in use|EADDRINUSE|address already in use", text):
            return FailureClass.PORT_IN_USE
        if re.search(r"[Nn]o model found|[Mm]odel not found|Cannot find model", text):
            return FailureClass.BAD_RECIPE
        if re.search(r"out of memory|[Ii]nsufficient (system resources|memory)", text):
            return FailureClass.OUT_OF_MEMORY
        if re.search(r"[Uu]nknown option|error: unknown|[Ii]nvalid value", text):
            return FailureClass.BAD_ARGUMENT
        return FailureClass.ENGINE_CRASHED if started else FailureClass.ENGINE_START_FAILED


def launch(request: LaunchRequest) -> LmStudioProcess:
    """LM Studio for one job attempt (the table's adapter entry point)."""
    request.run_dir.mkdir(parents=True, exist_ok=True)
    return LmStudioProcess(request)
