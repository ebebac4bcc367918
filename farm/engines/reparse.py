"""The rendered command read back as the engine's own parser reads it, and compared with what was judged.

The farm judges a recipe's command on the values its own parser (farm.engines.argspec) found, then launches an
argv rendered from them. That is only safe if the engine reads the rendered argv as exactly those values: a value
`--trust-remote-code` judged as a plain word, rendered as its own token after an option that takes an optional
value, is a switch to the engine. So the rendered argv is parsed again here with the engine's real option
declarations, generated from its released package (vLLM's and SGLang's argparse actions with their `nargs`,
llama.cpp's `common_arg` handlers from common/arg.cpp), by the engine's own rules: argparse for vLLM (after
FlexibleArgumentParser's rewriting of the tokens) and SGLang, llama.cpp's `common_params_parse_ex` loop for
llama-server. Every option read back must be one the judge saw, with the values it judged; anything else refuses
the command (`check_parses_back`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Protocol, TypeVar

from farm.engines.argspec import ArgSpec, CanonicalCommand, OptionSpec, ParsedOption, ValueKind, negations_of
from farm.errors import ArgumentPolicyError


@dataclass(frozen=True)
class Declaration:
    """One option as the engine declares it: its spellings, where it is stored, and how many tokens it reads."""

    strings: tuple[str, ...]
    dest: str
    nargs: str | int | None
    """argparse's: None one value, 0 none, '?' one if present, '+' / '*' a list, N exactly N."""
    negatives: tuple[str, ...] = ()
    """Spellings that turn a switch off (argparse's BooleanOptionalAction `--no-x`, llama.cpp's `args_neg`)."""


@dataclass(frozen=True)
class Occurrence:
    """One option read from the argv: the spelling the engine matched and the values it handed the option."""

    spelling: str
    values: tuple[str, ...]
    negative: bool = False


@dataclass(frozen=True)
class ReadBack:
    positional: tuple[str, ...]
    occurrences: Mapping[str, tuple[Occurrence, ...]]
    """dest -> every occurrence, in order."""


class EngineParser(Protocol):
    source: str

    def declaration(self, spelling: str) -> Declaration | None: ...

    def read(self, tokens: Sequence[str]) -> ReadBack: ...


ParserT = TypeVar("ParserT", bound="EngineParser")


def refuse(what: str, why: str) -> ArgumentPolicyError:
    return ArgumentPolicyError(f"{what!r}: {why}", field="argv")


_ABSENT = object()
"""argparse hands an option with `nargs='?'` its `const` when no value follows: this marks that case."""


class _Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print and exit
        raise _Refused(message)


class _Record(argparse.Action):
    """Keeps what argparse hands each option, and the spelling it matched, instead of acting on it."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        seen: list[tuple[str, str, Any]] = namespace.__dict__.setdefault("_seen", [])
        seen.append((self.dest, option_string or "", values))


class ArgparseParser:
    """An engine whose server command is an argparse parser (vLLM, SGLang), rebuilt from its dumped actions."""

    def __init__(
        self,
        declarations: Iterable[Declaration],
        *,
        source: str,
        positional: str | None = None,
        rewrite: Any = None,
        config_option: str | None = None,
    ) -> None:
        self.source = source
        self._rewrite = rewrite
        self._config_option = config_option
        self._positional = positional
        self._by_spelling: dict[str, Declaration] = {}
        self._parser = _Parser(prog="engine", add_help=False, allow_abbrev=True)
        for decl in declarations:
            strings = tuple(s for s in (*decl.strings, *decl.negatives) if s not in self._by_spelling)
            if not strings:
                continue
            for spelling in strings:
                self._by_spelling[spelling] = decl
            nargs = 0 if decl.nargs == 0 else decl.nargs
            kwargs: dict[str, Any] = {"dest": decl.dest, "action": _Record, "nargs": nargs}
            if nargs == "?":
                kwargs["const"] = _ABSENT
            self._parser.add_argument(*strings, **kwargs)
        if positional is not None:
            self._parser.add_argument(positional, nargs="?", action=_Record)

    def declaration(self, spelling: str) -> Declaration | None:
        return self._by_spelling.get(spelling)

    def read(self, tokens: Sequence[str]) -> ReadBack:
        args = list(tokens)
        if self._config_option is not None and self._config_option in args:
            raise refuse(self._config_option, "the engine would read more arguments from a file")
        if self._rewrite is not None:
            args = self._rewrite(args)
        try:
            namespace = self._parser.parse_args(args)
        except (_Refused, argparse.ArgumentError) as exc:
            raise refuse(
                " ".join(tokens)[:200], f"the engine's parser would not read this argv as judged ({exc})"
            ) from exc
        positional: list[str] = []
        occurrences: dict[str, list[Occurrence]] = {}
        for dest, spelling, values in namespace.__dict__.get("_seen", []):
            if not spelling:
                if values is not None:
                    positional.append(str(values))
                continue
            decl = self._by_spelling[spelling]
            if values is _ABSENT or values is None:
                got: tuple[str, ...] = ()
            elif isinstance(values, list):
                got = tuple(str(v) for v in values)
            else:
                got = (str(values),)
            occurrences.setdefault(dest, []).append(Occurrence(spelling, got, spelling in decl.negatives))
        return ReadBack(tuple(positional), {k: tuple(v) for k, v in occurrences.items()})


# --- comparing what was read with what was judged ---


def check_parses_back(
    command: CanonicalCommand,
    tokens: Sequence[str],
    parser: EngineParser,
    *,
    model: str | None = None,
    model_dest: str | None = None,
    worker_dests: Iterable[str] = (),
) -> None:
    """Refuse unless `tokens` (the argv after the executable) read back with the engine's parser as exactly the
    judged options of `command`: each judged option read once-per-value with its values (JSON as the same object),
    each switch on or off as judged, the model where `model` says, and nothing else but the options the worker
    itself added (`worker_dests`)."""
    read = parser.read(tokens)
    expected: dict[str, ParsedOption] = {}
    for option in command.options:
        decl = _declaration_of(option.spec, parser)
        if decl is None:
            raise refuse(
                option.written_as[0] if option.written_as else option.name,
                f"not an option the engine declares ({parser.source})",
            )
        if decl.dest in expected:
            raise refuse(option.name, f"the engine reads it and {expected[decl.dest].name} as one option")
        expected[decl.dest] = option
    allowed = set(worker_dests)
    if model_dest is not None:
        allowed.add(model_dest)
    for dest, occurrences in read.occurrences.items():
        if dest not in expected and dest not in allowed:
            spelled = occurrences[0].spelling
            raise refuse(
                " ".join([spelled, *occurrences[0].values]),
                "the engine would read this option from the rendered command, and the farm never judged it",
            )
    for dest, option in expected.items():
        if dest in allowed:
            continue
        got = read.occurrences.get(dest)
        if option.spec.kind == ValueKind.FLAG and not option.enabled:
            if got:
                raise refuse(option.name, "judged off, but the engine would read it on")
            continue
        if not got:
            raise refuse(option.name, "judged, but the engine would not read it from the rendered command")
        _compare(option, got)
    if model is not None:
        if model_dest is not None:
            said = read.occurrences.get(model_dest, ())
            values = [v for o in said for v in o.values]
            if values[-1:] != [model]:
                raise refuse(model, f"the engine would load {values[-1:] or 'no model'}, not the judged model")
        elif read.positional != (model,):
            raise refuse(model, f"the engine would read the positional model as {list(read.positional)}")
    elif read.positional:
        raise refuse(read.positional[0], "the engine would read a positional argument the farm never judged")


def _declaration_of(spec: OptionSpec, parser: EngineParser) -> Declaration | None:
    for spelling in (spec.name, *spec.aliases):
        decl = parser.declaration(spelling)
        if decl is not None:
            return decl
    if spec.name.startswith("--no-"):
        return parser.declaration("--" + spec.name.removeprefix("--no-"))
    return None


def _compare(option: ParsedOption, got: Sequence[Occurrence]) -> None:
    spec = option.spec
    what = option.written_as[0] if option.written_as else option.name
    if not spec.takes_value:
        last = got[-1]
        if last.values:
            raise refuse(what, f"the engine would read {last.values[0]!r} as this switch's value")
        if (not last.negative) != option.enabled:
            raise refuse(what, "the engine would read this switch the other way")
        return
    values = tuple(v for o in got for v in o.values)
    if len(got) > 1 and not spec.repeatable:
        raise refuse(what, "the engine would read this option more than once")
    if option.json_value is not None:
        try:
            same = len(values) == 1 and json.loads(values[0]) == option.json_value
        except ValueError:
            same = False
        if not same:
            raise refuse(what, f"the engine would read {values!r}, not the judged JSON")
        return
    if values != option.values:
        raise refuse(what, f"the engine would read {values!r}, not the judged {option.values!r}")


# --- the engines' declarations ---


def argparse_declarations(data: Mapping[str, Any]) -> list[Declaration]:
    out: list[Declaration] = []
    for raw in data["options"]:
        strings = tuple(raw["option_strings"])
        action = str(raw.get("action") or "")
        nargs = raw["nargs"]
        negatives: tuple[str, ...] = ()
        if action == "BooleanOptionalAction":
            negatives = tuple(s for s in strings if s.startswith("--no-"))
            strings = tuple(s for s in strings if s not in negatives)
            nargs = 0
        elif action == "EnableDisableAction":  # vLLM 0.33: `--enable-x` / `--disable-x` (`--no-enable-x` hidden)
            negatives = negations_of(strings)
            hidden = tuple(f"--no-{s.removeprefix('--')}" for s in strings if s not in negatives)
            strings = tuple(s for s in strings if s not in negatives)
            negatives = (*negatives, *hidden)
            nargs = 0
        elif action in ("_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction", "_CountAction", "_HelpAction"):
            nargs = 0
        dest = str(raw.get("dest") or strings[0].lstrip("-").replace("-", "_"))
        out.append(Declaration(strings=strings, dest=dest, nargs=nargs, negatives=negatives))
    return out


def spec_declarations(spec: ArgSpec, *, skip: Iterable[str] = ()) -> list[Declaration]:
    """The farm spec's own declarations (for options an engine's dump lacks: an older spelling SGLang's source
    at the spec's commit declared, an option a host's profile allows for its newer engine)."""
    skipped = set(skip)
    out: list[Declaration] = []
    for option in spec.options:
        if option.name in skipped or any(a in skipped for a in option.aliases):
            continue
        negatives = (
            (option.negations or ("--no-" + option.name.removeprefix("--"),)) if option.kind == ValueKind.BOOL else ()
        )
        nargs: str | int | None = 0 if not option.takes_value else option.nargs
        dest = option.name.lstrip("-").replace("-", "_")
        out.append(Declaration((option.name, *option.aliases), dest, nargs, negatives))
    return out


def load_declarations(package: str, name: str) -> Any:
    """A declarations file in its engine's folder (`package`, the folder's package)."""
    return json.loads(resources.files(package).joinpath(name).read_text(encoding="utf-8"))


_PARSERS: dict[tuple[str, ...], Any] = {}
"""Parsers built for a spec, by engine, version, source and option names (a spec holds mappings, so it is not
hashable; the options a host's profile allows are added to it by `with_extras`)."""


def cached_parser(spec: ArgSpec, build: Callable[[ArgSpec], ParserT]) -> ParserT:
    """The parser `build` makes for `spec`, built once per spec."""
    key = (spec.engine, spec.version, spec.source, *(o.name for o in spec.options))
    if key not in _PARSERS:
        _PARSERS[key] = build(spec)
    parser: ParserT = _PARSERS[key]
    return parser


@dataclass(frozen=True)
class Mirror:
    """How one engine's rendered command is read back: its parser, and where the model goes."""

    parser: EngineParser
    model_dest: str | None = None
    """The dest of the option that names the model; None: the positional argument."""


def with_extras(spec: ArgSpec, command: CanonicalCommand) -> ArgSpec:
    """The spec with the options of `command` it lacks: those a host's profile allows for its newer engine, which
    the farm declares as taking one value (farm.engines.argspec.parse_command), and so does the parser here."""
    extra = tuple(o.spec for o in command.options if spec.lookup(o.name) is None)
    if not extra:
        return spec
    from dataclasses import replace

    return replace(spec, options=(*spec.options, *sorted(extra, key=lambda o: o.name)))
