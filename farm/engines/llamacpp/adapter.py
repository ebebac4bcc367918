"""llama.cpp's `llama-server` as an engine: its canonical argv on a worker, readiness, version and metrics (its
argument spec is spec.py's, re-exported here).

A spec per release: `llama_server_args_<release>.json`, dumped from the server's own `--help` by
deploy/gen_llama_server_args.py (llama.cpp declares its options in C++, common/arg.cpp) for the llama.cpp vendored
in that llama-cpp-python release (`SPEC_FILES`; the newest, `DEFAULT_RELEASE`, is what the farm's workers run
unless their profile says otherwise). The 0.3.16 dump predates options recipes use, so the newer options of
farm.engines.llamacpp.supplement are merged into it (`with_supplement`); a command written for an older server is
rewritten into the spellings of a newer one (farm.engines.llamacpp.spellings: `-fa 1` is `--flash-attn on`).
llama.cpp's parser takes no abbreviations and reads dashes literally; every option except a few list-valued ones
is single-valued (it would keep the last).

On a worker the model is the host's own GGUF file (the profile's `model_paths`), served under the recipe's model
id (`--alias`); a recipe's `-m`/`-hf` name what to load, never where the host keeps it. The server's own
environment variables (`LLAMA_ARG_*`) set options too, so no recipe may set them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from farm.domain import FailureClass
from farm.engines.argspec import CanonicalCommand, option_value
from farm.engines.base import LaunchRequest
from farm.engines.llamacpp.counters import METRICS
from farm.engines.llamacpp.spec import MODEL_OPTIONS
from farm.engines.llamacpp.spec import SPEC_FILES as SPEC_FILES
from farm.engines.llamacpp.spec import llama_bench_to_server as llama_bench_to_server
from farm.engines.llamacpp.spec import llama_cli_to_server as llama_cli_to_server
from farm.engines.llamacpp.spec import load_llamacpp_spec as load_llamacpp_spec
from farm.engines.llamacpp.spec import release_of_build as release_of_build
from farm.engines.llamacpp.spec import shipped_llamacpp_spec as shipped_llamacpp_spec
from farm.engines.llamacpp.spec import spec_from_dump as spec_from_dump
from farm.engines.llamacpp.spec import tool_to_server as tool_to_server
from farm.engines.process import EngineProcess
from farm.engines.readback import check_launch
from farm.errors import ArgumentPolicyError


def llamacpp_process_argv(
    command: CanonicalCommand,
    *,
    executable: Sequence[str],
    host: str,
    port: int,
    served_model: str,
    model_path: str | None,
    extra_args: Sequence[str] = (),
    draft_paths: Mapping[str, str] = {},
) -> tuple[str, ...]:
    """The judged command on this host: the host's executable, its model file (when it maps the model), the
    recipe's options re-rendered, the host's extra arguments, `--alias` and the worker's listen address. A draft
    model named by its file name alone is the host's file for that name (profile `draft_paths`), or no command."""
    if not executable:
        raise ArgumentPolicyError("the worker's executable is empty")
    spec = command.spec
    kept = command.without("--host", "--port", "--alias")
    if model_path is not None:
        kept = kept.without(*MODEL_OPTIONS)
        kept = kept.with_options(option_value(spec.option("--model"), model_path))
    elif not os.path.isabs(os.path.expanduser(kept.value("--model") or "")) and kept.get("--hf-repo") is None:
        raise ArgumentPolicyError(
            f"this host keeps no file for {served_model!r} (profile model_paths), and the recipe names no file by "
            f"an absolute path ({kept.value('--model')!r})",
            field="argv",
        )
    draft_option = spec.option("--model-draft").name  # `--spec-draft-model` in newer dumps
    draft = kept.value(draft_option)
    if draft is not None and not os.path.isabs(os.path.expanduser(draft)):
        draft_path = draft_paths.get(draft)
        if draft_path is None:
            raise ArgumentPolicyError(
                f"this host keeps no file for the draft model {draft!r} (profile draft_paths)", field="argv"
            )
        kept = kept.with_options(option_value(spec.option(draft_option), os.path.expanduser(draft_path)))
    worker = (*extra_args, "--alias", served_model, "--host", host, "--port", str(port))
    tokens = (*kept.render_options(), *worker)
    check_launch(kept, tokens, model=None, worker_tokens=worker)
    return (*executable, *tokens)


_LLAMA_PATTERNS: tuple[tuple[FailureClass, re.Pattern[str]], ...] = (
    (FailureClass.PORT_IN_USE, re.compile(r"couldn't bind HTTP server socket|[Aa]ddress already in use")),
    (FailureClass.OUT_OF_MEMORY, re.compile(r"failed to allocate|out of memory|ggml_backend_cpu_buffer_type_alloc")),
    (
        FailureClass.BAD_ARGUMENT,
        re.compile(r"error: (invalid argument|unknown argument)|error while handling argument"),
    ),
    (FailureClass.ENGINE_START_FAILED, re.compile(r"failed to load model|error loading model")),
)


def classify_llamacpp_log(text: str, *, started: bool) -> FailureClass:
    for failure_class, pattern in _LLAMA_PATTERNS:
        if pattern.search(text):
            return failure_class
    return FailureClass.ENGINE_CRASHED if started else FailureClass.ENGINE_START_FAILED


class LlamaServerProcess(EngineProcess):
    """llama-server as a supervised process: `/health` then a tiny completion, `/props` for the version."""

    metric_names: Mapping[str, str] = METRICS

    def version(self) -> str | None:
        """llama-server has no `/version`: its `/props` carries `build_info` (`b<number>-<commit>`)."""
        body = self._http_json("GET", "/props", None, 5.0)
        if isinstance(body, dict) and body.get("build_info"):
            return str(body["build_info"])
        return None

    def classify(self, *, started: bool) -> FailureClass:
        return classify_llamacpp_log(self.log_text(), started=started)


def launch(request: LaunchRequest) -> LlamaServerProcess:
    """llama-server for one job attempt (the table's adapter entry point)."""
    argv = llamacpp_process_argv(
        request.command,
        executable=request.executable,
        host=request.host,
        port=request.port,
        served_model=request.served_model,
        model_path=request.model_path,
        extra_args=request.extra_args,
        draft_paths=request.draft_paths,
    )
    return LlamaServerProcess.launched(argv, request)
