"""SGLang (`python -m sglang.launch_server`) as an engine: its canonical argv on a worker, readiness, version and
metrics. The argument spec is farm.engines.sglang.spec.SGLANG (written from SGLang's server_args.py).

SGLang serves the OpenAI API (`/v1/completions`, `/v1/chat/completions`) and `/health`; its version is in
`/get_server_info`, and with `--enable-metrics` its Prometheus counters are `sglang:*`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from farm.engines.argspec import CanonicalCommand
from farm.engines.process import EngineProcess
from farm.errors import ArgumentPolicyError

METRICS: Mapping[str, str] = {
    "vllm:prompt_tokens": "sglang:prompt_tokens_total",
    "vllm:generation_tokens": "sglang:generation_tokens_total",
    "vllm:prefix_cache_hits": "sglang:cached_tokens_total",
    "vllm:prefix_cache_queries": "sglang:prompt_tokens_total",
}
"""The farm's counters (named as vLLM's) and SGLang's counters for the same thing. SGLang counts prompt tokens
served from its radix cache in `cached_tokens_total` (labelled by cache_source) and has no queries counter:
every prompt token is a query, so the hit rate is cached over prompt tokens."""

PREFIX_CACHE_RESET = "/flush_cache"
"""SGLang empties its radix cache at POST /flush_cache (refused while requests run)."""


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
    return (
        *executable,
        "--model-path",
        model,
        *kept.render_options(),
        *extra_args,
        "--served-model-name",
        served_model,
        "--host",
        host,
        "--port",
        str(port),
    )


class SglangServerProcess(EngineProcess):
    """SGLang as a supervised process: `/health` then a tiny completion; the version from `/get_server_info`."""

    metric_names: Mapping[str, str] = METRICS

    def version(self) -> str | None:
        body = self._http_json("GET", "/get_server_info", None, 5.0)
        version = body.get("version") if isinstance(body, dict) else None
        return str(version) if version else super().version()


def sglang_engine(
    command: CanonicalCommand,
    *,
    executable: Sequence[str],
    host: str,
    port: int,
    served_model: str,
    model_path: str | None,
    log_path: Path,
    env: Mapping[str, str],
    extra_args: Sequence[str] = (),
    stop_grace_s: float = 30.0,
) -> SglangServerProcess:
    argv = sglang_process_argv(
        command,
        executable=executable,
        host=host,
        port=port,
        served_model=served_model,
        model_path=model_path,
        extra_args=extra_args,
    )
    return SglangServerProcess(
        argv,
        env=env,
        log_path=log_path,
        base_url=f"http://{host}:{port}",
        served_model=served_model,
        simulated=False,
        stop_grace_s=stop_grace_s,
    )
