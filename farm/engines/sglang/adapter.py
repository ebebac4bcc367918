"""SGLang (`python -m sglang.launch_server`) as an engine: its canonical argv on a worker, readiness, version and
metrics. The argument spec is farm.engines.sglang.spec.SGLANG (written from SGLang's server_args.py).

SGLang serves the OpenAI API (`/v1/completions`, `/v1/chat/completions`) and `/health`; its version is in
`/get_server_info`, and with `--enable-metrics` its Prometheus counters are `sglang:*`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from farm.engines.argspec import CanonicalCommand
from farm.engines.base import LaunchRequest
from farm.engines.process import EngineProcess
from farm.engines.readback import check_launch
from farm.engines.sglang.counters import METRICS
from farm.errors import ArgumentPolicyError


def sglang_process_argv(
    command: CanonicalCommand,
    *,
    executable: Sequence[str],
    host: str,
    port: int,
    served_model: str,
    model_path: str | None,
    extra_args: Sequence[str] = (),
) -> tuple[str, ...]:
    """The judged command after the host's executable: the model (the host's own copy when it maps one), the
    recipe's options re-rendered, the host's extra arguments, the served name and the worker's address."""
    if not executable:
        raise ArgumentPolicyError("the worker's executable is empty")
    model = model_path or command.model or served_model
    kept = command.without("--host", "--port", "--served-model-name")
    worker = (*extra_args, "--served-model-name", served_model, "--host", host, "--port", str(port))
    tokens = ("--model-path", model, *kept.render_options(), *worker)
    check_launch(kept, tokens, model=model, worker_tokens=worker)
    return (*executable, *tokens)


class SglangServerProcess(EngineProcess):
    """SGLang as a supervised process: `/health` then a tiny completion; the version from `/get_server_info`."""

    metric_names: Mapping[str, str] = METRICS

    def version(self) -> str | None:
        body = self._http_json("GET", "/get_server_info", None, 5.0)
        version = body.get("version") if isinstance(body, dict) else None
        return str(version) if version else super().version()


def launch(request: LaunchRequest) -> SglangServerProcess:
    """SGLang for one job attempt (the table's adapter entry point)."""
    argv = sglang_process_argv(
        request.command,
        executable=request.executable,
        host=request.host,
        port=request.port,
        served_model=request.served_model,
        model_path=request.model_path,
        extra_args=request.extra_args,
    )
    return SglangServerProcess.launched(argv, request)
