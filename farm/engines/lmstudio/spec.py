"""LM Studio's argument spec (`LMSTUDIO`).

It is an allowlist written from the engine's own CLI source (named in `ArgSpec.source`): the options a
benchmark recipe uses, each with the kind its value is judged as. An option missing here is refused unless a
host's profile allows it, so a list that is short errs on the side of refusing.
"""

from __future__ import annotations

from farm.engines.argspec import ArgSpec, ValueKind, declared

K = ValueKind
_o = declared

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
