"""MLX's adapter: `mlx_lm.server` on loopback (Apple hosts), supervised as a process group.

The judged command after the host's executable: `--model` (the host's own copy when it maps one), the recipe's
options re-rendered, the host's extra arguments, the worker's `--host`/`--port`. mlx_lm.server serves the model
under the name it was given (a request naming another model makes it load that one), so the served name is the
model argument itself. It answers `/health` and the OpenAI API, and has no /version and no /metrics.
"""

from __future__ import annotations

from farm.engines.base import LaunchRequest
from farm.engines.judge import is_repository_or_name
from farm.engines.process import EngineProcess
from farm.errors import ArgumentPolicyError


def mlx_process_argv(request: LaunchRequest) -> tuple[str, ...]:
    if not request.executable:
        raise ArgumentPolicyError("the worker's executable is empty")
    model = request.model_path or request.command.model or request.served_model
    # the recipe's model_id, which no judge saw, is a repository to fetch, never a path of this host
    if not request.model_path and not request.command.model and not is_repository_or_name(model):
        raise ArgumentPolicyError(
            f"model_id {model!r}: the command names no --model, and the recipe's model_id is no repository id: "
            "a path mlx_lm.server loads comes from the host's model_paths or a judged --model (under the roots)",
            field="model_id",
        )
    kept = request.command.without("--host", "--port", "--model")
    return (
        *request.executable,
        "--model",
        model,
        *kept.render_options(),
        *request.extra_args,
        "--host",
        request.host,
        "--port",
        str(request.port),
    )


def launch(request: LaunchRequest) -> EngineProcess:
    argv = mlx_process_argv(request)
    return EngineProcess.launched(argv, request, served_model=argv[argv.index("--model") + 1])
