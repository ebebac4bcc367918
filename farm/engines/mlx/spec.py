"""MLX's argument spec (`MLX`, mlx-lm's server).

It is an allowlist written from the engine's own CLI source (named in `ArgSpec.source`): the options a
benchmark recipe uses, each with the kind its value is judged as. An option missing here is refused unless a
host's profile allows it, so a list that is short errs on the side of refusing.
"""

from __future__ import annotations

from farm.engines.argspec import ArgSpec, ValueKind, declared

K = ValueKind
_o = declared

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
