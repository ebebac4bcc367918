"""Argument specs of the engines whose parsers the farm cannot run here: Ollama, LM Studio, TabbyAPI, MLX, and
SGLang's (farm.engines.sglang_args), all by engine name in `SPECS`.

Each is an allowlist written from the engine's own CLI source (named in `ArgSpec.source`): the options a
benchmark recipe uses, each with the kind its value is judged as. An option missing here is refused unless a
host's profile allows it, so a list that is short errs on the side of refusing.
"""

from __future__ import annotations

from farm.engines.argspec import ArgSpec, ValueKind, declared
from farm.engines.sglang_args import SGLANG

K = ValueKind
_o = declared

OLLAMA = ArgSpec(
    engine="ollama",
    version="0.12",
    source="ollama/ollama cmd/cmd.go (serve, run)",
    prefixes=(("ollama", "serve"), ("ollama", "run")),
    positional_model=True,
    underscores=False,
    abbreviations=False,
    options=(
        _o("--verbose", K.FLAG),
        _o("--nowordwrap", K.FLAG),
        _o("--format", K.WORD),
        _o("--keepalive", K.WORD),
        _o("--think", K.WORD, nargs="?"),
        _o("--hidethinking", K.FLAG),
        _o("--insecure", K.REFUSED, reason="pulls over an unverified connection"),
    ),
)

LMSTUDIO = ArgSpec(
    engine="lmstudio",
    version="0.3",
    source="lmstudio-ai/lms src/subcommands (server start, load)",
    prefixes=(("lms", "server", "start"), ("lms", "load")),
    positional_model=True,
    underscores=False,
    abbreviations=False,
    options=(
        _o("--port", K.LISTEN),
        _o("--bind", K.LOOPBACK),
        _o("--cors", K.REFUSED, reason="opens the API to every web origin"),
        _o("--context-length", K.INT),
        _o("--parallel", K.INT),
        _o("--gpu", K.WORD),
        _o("--identifier", K.WORD),
        _o("--ttl", K.INT),
        _o("--yes", K.FLAG, "-y"),
        _o("--exact", K.FLAG),
        _o("--quiet", K.FLAG),
    ),
)

TABBYAPI = ArgSpec(
    engine="tabbyapi",
    version="2025",
    source="theroyallab/tabbyAPI common/args.py (from the config model)",
    prefixes=(("python", "main.py"), ("python", "start.py"), ("./start.sh",)),
    underscores=False,
    options=(
        _o("--host", K.LISTEN),
        _o("--port", K.LISTEN),
        _o("--model-name", K.REPO),
        _o("--model-dir", K.PATH),
        _o("--max-seq-len", K.INT),
        _o("--cache-mode", K.WORD),
        _o("--cache-size", K.INT),
        _o("--chunk-size", K.INT),
        _o("--max-batch-size", K.INT),
        _o("--gpu-split-auto", K.WORD),
        _o("--gpu-split", K.NUMBER, nargs="+"),
        _o("--tensor-parallel", K.WORD),
        _o("--rope-scale", K.FLOAT),
        _o("--rope-alpha", K.FLOAT),
        _o("--backend", K.WORD),
        _o("--prompt-template", K.WORD),
        _o("--draft-model-name", K.REPO),
        _o("--draft-model-dir", K.PATH),
        _o("--disable-auth", K.WORD),
        _o("--config", K.REFUSED, reason="reads more arguments from a file on the worker, past every check"),
        _o("--api-servers", K.WORD, nargs="+"),
    ),
)

MLX = ArgSpec(
    engine="mlx",
    version="0.28",
    source="ml-explore/mlx-lm mlx_lm/server.py (main's argparse)",
    prefixes=(("mlx_lm.server",), ("python", "-m", "mlx_lm.server"), ("mlx_lm", "server")),
    model_option="--model",
    underscores=False,
    options=(
        _o("--model", K.REPO),
        _o("--adapter-path", K.PATH),
        _o("--host", K.LISTEN),
        _o("--port", K.LISTEN),
        _o("--draft-model", K.REPO),
        _o("--num-draft-tokens", K.INT),
        _o("--trust-remote-code", K.FLAG),
        _o("--log-level", K.WORD),
        _o("--chat-template", K.TEMPLATE),
        _o("--use-default-chat-template", K.FLAG),
        _o("--temp", K.FLOAT),
        _o("--top-p", K.FLOAT),
        _o("--top-k", K.INT),
        _o("--min-p", K.FLOAT),
        _o("--max-tokens", K.INT),
        _o("--chat-template-args", K.JSON),
        _o("--decode-concurrency", K.INT),
        _o("--prompt-concurrency", K.INT),
        _o("--prefill-step-size", K.INT),
        _o("--prompt-cache-size", K.INT),
        _o("--prompt-cache-bytes", K.INT),
        _o("--pipeline", K.FLAG),
    ),
)

SPECS: dict[str, ArgSpec] = {s.engine: s for s in (SGLANG, OLLAMA, LMSTUDIO, TABBYAPI, MLX)}
