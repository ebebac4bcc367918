"""Ollama's adapter: `ollama serve` on the worker's loopback port (`OLLAMA_HOST`), then the model created from
the host's GGUF file with `ollama create NAME -f Modelfile`, the Modelfile in the run's own directory.

The Modelfile carries the recipe's options that Ollama reads per model: the context (`num_ctx`, from the
recipe's `serving.max_context_tokens`); the server's own settings come from the recipe's environment
(`OLLAMA_FLASH_ATTENTION`, `OLLAMA_KV_CACHE_TYPE`, ..., judged by farm.engines.environment) and
`OLLAMA_NUM_PARALLEL` from the recipe's `serving.max_concurrency` unless its environment sets it. Ollama answers
`/api/version` (its readiness and version) and the OpenAI API under the created name; it has no /health and no
/metrics.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from farm.domain import FailureClass
from farm.engines.base import LaunchRequest
from farm.engines.process import EngineProcess
from farm.errors import ArgumentPolicyError, EngineError
from farm.private_files import open_private

MODELFILE = "Modelfile"
"""The Modelfile's name in the run's directory."""

CREATE_TIMEOUT_S = 1800.0
"""`ollama create` copies the GGUF into Ollama's store: minutes for the largest files."""


def modelfile(request: LaunchRequest) -> str:
    """The Modelfile for the host's GGUF file and the recipe's per-model options."""
    if request.model_path is None:
        raise EngineError(
            f"this host maps no GGUF file for {request.served_model!r} ([engine.ollama] model_paths)",
            failure_class=FailureClass.BAD_RECIPE,
        )
    lines = [f"FROM {request.model_path}"]
    if request.recipe.serving.max_context_tokens:
        lines.append(f"PARAMETER num_ctx {request.recipe.serving.max_context_tokens}")
    return "\n".join(lines) + "\n"


def ollama_env(request: LaunchRequest) -> dict[str, str]:
    env = dict(request.env)
    env["OLLAMA_HOST"] = f"{request.host}:{request.port}"
    if "OLLAMA_NUM_PARALLEL" not in env and request.recipe.serving.max_concurrency:
        env["OLLAMA_NUM_PARALLEL"] = str(request.recipe.serving.max_concurrency)
    return env


def ollama_process_argv(request: LaunchRequest) -> tuple[str, ...]:
    if not request.executable:
        raise ArgumentPolicyError("the worker's executable is empty")
    if request.command.options or request.command.model:
        raise ArgumentPolicyError("ollama serve takes no options or model: its settings are the environment's")
    return (*request.executable, "serve", *request.extra_args)


class OllamaProcess(EngineProcess):
    """`ollama serve`, ready once `/api/version` answers and the model is created; the version from there."""

    ready_path = "/api/version"

    def __init__(self, argv: tuple[str, ...], *, request: LaunchRequest, modelfile_path: Path) -> None:
        super().__init__(
            argv,
            env=ollama_env(request),
            log_path=request.log_path,
            base_url=f"http://{request.host}:{request.port}",
            served_model=request.served_model,
            simulated=request.simulated,
            stop_grace_s=request.stop_grace_s,
            probe=request.probe,
            gpu_free_deadline_s=request.gpu_free_deadline_s,
        )
        self.create_argv = (*request.executable, "create", request.served_model, "-f", str(modelfile_path))

    def when_serving(self) -> None:
        """`ollama create` against this server, its output in the engine's log; EngineError if it fails."""
        with open_private(self.log_path) as log_file:
            try:
                done = subprocess.run(
                    self.create_argv,
                    env=self.environment,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=subprocess.STDOUT,
                    timeout=CREATE_TIMEOUT_S,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise EngineError(
                    f"ollama create did not finish: {exc}", failure_class=FailureClass.ENGINE_START_FAILED
                ) from exc
        if done.returncode != 0:
            raise EngineError(
                f"ollama create exited with status {done.returncode}",
                failure_class=FailureClass.ENGINE_START_FAILED,
                log_tail=self.log_tail(),
            )

    def version(self) -> str | None:
        body = self._http_json("GET", "/api/version", None, 5.0)
        version = body.get("version") if isinstance(body, dict) else None
        return str(version) if version else None


def launch(request: LaunchRequest) -> OllamaProcess:
    text = modelfile(request)
    request.run_dir.mkdir(parents=True, exist_ok=True)
    path = request.run_dir / MODELFILE
    path.write_text(text, encoding="utf-8")
    return OllamaProcess(ollama_process_argv(request), request=request, modelfile_path=path)
