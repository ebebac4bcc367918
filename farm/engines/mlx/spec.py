"""MLX's argument specs (mlx-lm's server), per release: `MLX` is 0.32.2's, read from mlx_lm/server.py's
argparse in the `mlx-lm==0.32.2` wheel (`pip download --no-deps`); `MLX_0_28` the older list it extends.

Each is an allowlist written from the engine's own CLI source (named in `ArgSpec.source`): the options a
benchmark recipe uses, each with the kind its value is judged as. An option missing here is refused unless a
host's profile allows it, so a list that is short errs on the side of refusing.
"""

from __future__ import annotations

from dataclasses import replace

from farm.engines.argspec import ArgSpec, ValueKind, declared

K = ValueKind
_o = declared

MLX_0_28 = ArgSpec(
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

MLX = replace(
    MLX_0_28,
    version="0.32.2",
    source="ml-explore/mlx-lm 0.32.2 mlx_lm/server.py (main's argparse), from the mlx-lm==0.32.2 wheel",
    options=(
        *(o for o in MLX_0_28.options if o.name not in ("--log-level", "--prompt-cache-bytes")),
        _o("--log-level", K.CHOICE, choices=("CRITICAL", "DEBUG", "ERROR", "INFO", "WARNING")),
        _o("--prompt-cache-bytes", K.WORD),  # a size: `8GB`, `500M` or bytes (mlx_lm.utils._parse_size)
        _o("--allowed-origins", K.REFUSED, reason="CORS origins let web pages reach the API; the worker is its client"),
        _o("--kv-bits", K.INT),
        _o("--kv-group-size", K.INT),
        _o("--quantized-kv-start", K.INT),
    ),
)
"""mlx-lm 0.32.2's server: 0.28's options, with KV-cache quantization and CORS origins (refused)."""
