"""SGLang's own parser, to read a rendered command back (farm.engines.readback): argparse with the declarations
dumped from its release (sglang_server_args.json)."""

from __future__ import annotations

from farm.engines.argspec import ArgSpec
from farm.engines.reparse import (
    ArgparseParser,
    Mirror,
    argparse_declarations,
    cached_parser,
    load_declarations,
    spec_declarations,
)

SGLANG_ARGS_FILE = "sglang_server_args.json"


def read_back(spec: ArgSpec) -> Mirror:
    """SGLang's own parser for `spec` (its table line's `read_back`): the model is `--model-path`."""
    return Mirror(sglang_parser(spec), model_dest="model_path")


def sglang_parser(spec: ArgSpec) -> ArgparseParser:
    return cached_parser(spec, _sglang_parser)


def _sglang_parser(spec: ArgSpec) -> ArgparseParser:
    data = load_declarations(__package__ or "", SGLANG_ARGS_FILE)
    real = argparse_declarations(data)
    known = {s for d in real for s in (*d.strings, *d.negatives)}
    older = spec_declarations(spec, skip=known)
    return ArgparseParser(
        [*real, *older],
        source=f"{SGLANG_ARGS_FILE} (SGLang {data['version']}'s parser; older spellings from {spec.source[:60]})",
        config_option="--config",
    )
