"""Ollama's argument spec (`OLLAMA`).

It is an allowlist written from the engine's own CLI source (named in `ArgSpec.source`): the options a
benchmark recipe uses, each with the kind its value is judged as. An option missing here is refused unless a
host's profile allows it, so a list that is short errs on the side of refusing.
"""

from __future__ import annotations

from farm.engines.argspec import ArgSpec, ValueKind, declared

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
