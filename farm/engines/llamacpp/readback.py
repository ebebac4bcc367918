"""llama-server's own parser, to read a rendered command back (farm.engines.readback): `common_params_parse_ex`
with the declarations of common/arg.cpp of each release (llama_server_decls_<release>.json)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from farm.engines.argspec import ArgSpec
from farm.engines.reparse import (
    Declaration,
    Mirror,
    Occurrence,
    ReadBack,
    cached_parser,
    load_declarations,
    refuse,
    spec_declarations,
)


class LlamaServerParser:
    """llama-server's `common_params_parse_ex`: every token an option (a `--` token with `_` read as `-`), its
    values the next tokens whatever they are; llama.cpp has no `--opt=value` form and no positional argument."""

    def __init__(self, declarations: Iterable[Declaration], *, source: str) -> None:
        self.source = source
        self._by_spelling: dict[str, Declaration] = {}
        for decl in declarations:
            for spelling in (*decl.strings, *decl.negatives):
                self._by_spelling[spelling] = decl

    def declaration(self, spelling: str) -> Declaration | None:
        return self._by_spelling.get(spelling)

    def read(self, tokens: Sequence[str]) -> ReadBack:
        occurrences: dict[str, list[Occurrence]] = {}
        i = 0
        while i < len(tokens):
            arg = tokens[i]
            if arg.startswith("--"):
                arg = arg.replace("_", "-")
            decl = self._by_spelling.get(arg)
            if decl is None:
                raise refuse(arg, "llama-server would stop here: error: invalid argument")
            count = int(decl.nargs or 0) if decl.nargs is not None else 1
            values = tuple(tokens[i + 1 : i + 1 + count])
            if len(values) != count:
                raise refuse(arg, "llama-server would stop here: expected value for argument")
            occurrences.setdefault(decl.dest, []).append(Occurrence(arg, values, arg in decl.negatives))
            i += 1 + count
        return ReadBack((), {k: tuple(v) for k, v in occurrences.items()})


LLAMA_DECLS_FILES = {"0.3.16": "llama_server_decls_0.3.16.json", "0.3.36": "llama_server_decls_0.3.36.json"}
"""common/arg.cpp's declarations of the llama.cpp each llama-cpp-python release vendors (the spec's release)."""
LLAMA_DECLS_FILE = LLAMA_DECLS_FILES["0.3.36"]


def read_back(spec: ArgSpec) -> Mirror:
    """llama-server's own parser for `spec` (its table line's `read_back`)."""
    return Mirror(llama_server_parser(spec))


def llama_server_parser(spec: ArgSpec) -> LlamaServerParser:
    return cached_parser(spec, _llama_server_parser)


def _llama_server_parser(spec: ArgSpec) -> LlamaServerParser:
    # The shipped lists are llama_server_args_<release>.json (farm.engines.llamacpp.spec.SPEC_FILES, not
    # imported: the adapter imports this module).
    if not spec.source.startswith(tuple(f"llama_server_args_{release}.json" for release in LLAMA_DECLS_FILES)):
        # A host's own list (profile llamacpp_args_file), from its llama-server's --help: how many values each
        # option takes is that build's (a newer build's `-fa` takes on/off/auto, the shipped 0.3.16's is a switch).
        return LlamaServerParser(spec_declarations(spec), source=f"{spec.source} (this host's llama-server)")
    name = LLAMA_DECLS_FILES.get(spec.version.split(" ")[0], LLAMA_DECLS_FILE)  # the release's arg.cpp
    data = load_declarations(__package__ or "", name)
    real = [
        Declaration(
            strings=tuple(raw["spellings"]),
            dest=str(raw["spellings"][-1]),
            nargs=0 if raw["values"] == 0 else (None if raw["values"] == 1 else int(raw["values"])),
            negatives=tuple(raw["negatives"]),
        )
        for raw in data["options"]
    ]
    known = {s for d in real for s in (*d.strings, *d.negatives)}
    older = spec_declarations(spec, skip=known)
    return LlamaServerParser([*real, *older], source=f"{name} ({data['version']} common/arg.cpp)")
