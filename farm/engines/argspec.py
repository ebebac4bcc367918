"""An engine's argument spec, and the canonical command: a recipe's argv parsed with the engine's own option list
and rendered again from the parsed values.

The farm never launches the tokens a recipe wrote. It parses them here (every spelling of an option resolves to
one canonical name: dashes or underscores, `--opt=value`, short aliases, `--no-opt`; abbreviations and a
single-valued option given twice are refused), the values are judged (farm.engines.judge), and the argv that
runs is rendered from the parsed values by `CanonicalCommand.render`. What was judged is what runs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from farm.errors import ArgumentPolicyError


class ValueKind(StrEnum):
    """How an option's value is judged (farm.engines.judge)."""

    FLAG = "flag"
    """Takes no value (`--enforce-eager`)."""
    BOOL = "bool"
    """`--opt` / `--no-opt` (argparse's BooleanOptionalAction)."""
    INT = "int"
    FLOAT = "float"
    INT_OR_AUTO = "int_or_auto"
    NUMBER = "number"
    """An integer or a decimal number."""
    CHOICE = "choice"
    """One of the option's choices."""
    WORD = "word"
    """A plain name (letters, digits, `._-+:/@`); never a qualified Python name."""
    TEXT = "text"
    """Free text (a regex, a stop string): no shell syntax, never a qualified Python name."""
    JSON = "json"
    """A JSON object or list, judged key by key."""
    JSON_OR_WORD = "json_or_word"
    CONFIG = "config"
    """An engine's whole config document in place of its config file (TabbyAPI's `--config`): a JSON object of the
    sections and keys of the engine's config schema (ArgSpec.config_keys), each value judged by its key's kind. A
    path is refused: the file would carry options past every check."""
    REPO = "repo"
    """A model repository the engine loads (trust list) or a local path under the host's roots."""
    PATH = "path"
    """A file or directory the engine only reads, on the host: under the host's model and cache roots."""
    OUTPUT = "output"
    """A file or directory the engine writes (a log, a slot save, a crash dump, a scale file, downloads): refused
    but for the option's choices (`stdout`). The worker places no file for an engine to write and keeps the engine's
    log itself (an artifact of the run); a write under the host's roots could replace a model (the option's reason
    says what it writes)."""
    REPO_FILE = "repo_file"
    """A file inside the repository the engine downloads (`--hf-file`): a relative path that never climbs out."""
    TEMPLATE = "template"
    """A chat template: a path under the roots, or the template text itself."""
    LOOPBACK = "loopback"
    """An address the engine binds or dials: loopback only."""
    PORT = "port"
    """A port number for an engine-internal loopback connection."""
    LORA = "lora"
    """vLLM's `--lora-modules`: name=path or a JSON object; the path is judged like REPO."""
    LISTEN = "listen"
    """Where the server listens (`--host`, `--port`): the worker's own, dropped from the recipe."""
    CODE = "code"
    """Loads code by name or path: only when the host's profile lists the option."""
    REFUSED = "refused"
    """Never allowed (the reason is on the option)."""


@dataclass(frozen=True)
class OptionSpec:
    """One option of an engine's command line."""

    name: str
    """The canonical spelling (the first long option string)."""
    aliases: tuple[str, ...] = ()
    kind: ValueKind = ValueKind.WORD
    nargs: str | int | None = None
    """argparse's: None one value, 0 none, '?' one if present, '+' one or more, '*' any, N exactly N."""
    choices: tuple[str, ...] | None = None
    repeatable: bool = False
    """May appear more than once (argparse `append`); every other option is single-valued."""
    dotted: bool = False
    """JSON-valued and reachable by `--opt.key value` (vLLM)."""
    reason: str = ""
    """Why a REFUSED or CODE option is refused."""
    negations: tuple[str, ...] = ()
    """For a BOOL: the spellings that turn it off when they are not `--no-NAME` (vLLM 0.33's `--disable-x` for
    `--enable-x`); the first is how it renders off. Empty: `--no-NAME`."""

    @property
    def takes_value(self) -> bool:
        return self.kind not in (ValueKind.FLAG, ValueKind.BOOL) and self.nargs != 0


@dataclass(frozen=True)
class ArgSpec:
    """Every option one engine version's server command accepts, and how its command starts."""

    engine: str
    version: str
    source: str
    """Where the list came from (a generated file, or the engine's source file it was read from)."""
    options: tuple[OptionSpec, ...]
    prefixes: tuple[tuple[str, ...], ...]
    """How a recipe's command may start (`vllm serve`, `python -m vllm.entrypoints.openai.api_server`)."""
    positional_model: bool = False
    """Whether the model may be given as the first positional argument (`vllm serve MODEL`)."""
    model_option: str | None = None
    """The option that names the model (`--model`); reconciled with the positional one."""
    underscores: bool = True
    """Whether the engine reads `--opt_name` as `--opt-name` (vLLM, SGLang)."""
    abbreviations: bool = True
    """Whether the engine's parser would accept an abbreviation (argparse does): then they are refused."""
    compact_short: Mapping[str, str] = field(default_factory=dict)
    """Short options glued to their value (`-O3` is `--optimization-level 3` in vLLM): regex prefix -> option."""
    device_options: tuple[str, ...] = ()
    """Options whose product is the number of devices the engine uses (tensor x pipeline x data parallel)."""
    devices_shared_when: Mapping[str, str] = field(default_factory=dict)
    """Device option -> switch: with the switch on, that option's size adds no devices (SGLang's data-parallel
    attention runs its `--dp-size` ranks inside the tensor-parallel devices)."""
    config_keys: Mapping[str, Mapping[str, OptionSpec]] = field(default_factory=dict)
    """For a CONFIG option: the engine's config schema, section -> key -> how its value is judged (a FLAG is a
    boolean, `nargs="+"` a list, JSON a nested mapping judged key by key)."""
    revisions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Repository slot (`model`, or the option naming a repository) -> the options that pin its revision, the one
    that must be given first (farm.engines.trust: with remote code trusted, each must name a trusted revision)."""
    inline_values: bool = True
    """Whether the engine's parser reads `--opt=value` as the option and its value (argparse, cobra). Then a value
    beginning with '-' is rendered in that one-token form, which the parser never reads as an option of its own;
    a list of values cannot be, so a list with such a value is refused. llama.cpp has no `--opt=value`, and reads
    the token after an option as its value whatever it is: values are always rendered as their own tokens."""
    switch_values: Mapping[str, bool | None] = field(default_factory=dict)
    """Values a newer engine takes after an option this version reads as a bare switch (llama.cpp's `-fa on`):
    True sets the switch, False leaves it off, None leaves the engine's default (the option is dropped)."""
    current_spellings: Callable[[Sequence[str]], list[str]] | None = field(default=None, compare=False)
    """Rewrites a command written for an older version into this version's spellings before it is parsed
    (llama.cpp: a bare `--flash-attn` is `--flash-attn on`, `--no-mmap` is `--load-mode none`); None: none."""

    def __post_init__(self) -> None:
        index: dict[str, OptionSpec] = {}
        for option in self.options:
            for spelling in (option.name, *option.aliases):
                index[spelling] = option
        object.__setattr__(self, "_index", index)

    def lookup(self, spelling: str) -> OptionSpec | None:
        index: dict[str, OptionSpec] = self._index  # type: ignore[attr-defined]
        return index.get(spelling)

    def option(self, name: str) -> OptionSpec:
        found = self.lookup(name)
        if found is None:
            raise KeyError(name)
        return found

    def abbreviated_by(self, prefix: str) -> tuple[str, ...]:
        """The long options an argparse parser would accept `prefix` as an abbreviation of."""
        if not prefix.startswith("--") or not self.abbreviations:
            return ()
        index: dict[str, OptionSpec] = self._index  # type: ignore[attr-defined]
        return tuple(sorted(s for s in index if s.startswith(prefix) and s != prefix))


@dataclass(frozen=True)
class ParsedOption:
    """One option as the engine reads it: canonical name and its values (a bool for FLAG/BOOL options)."""

    spec: OptionSpec
    values: tuple[str, ...] = ()
    enabled: bool = True
    json_value: Any = None
    """For JSON options: the parsed object (dotted sub-keys merged in)."""
    written_as: tuple[str, ...] = ()
    """The spellings the recipe used (for error messages)."""

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class CanonicalCommand:
    """A recipe's command as its engine reads it, ready to be judged and rendered."""

    spec: ArgSpec
    model: str | None
    options: tuple[ParsedOption, ...]
    original: tuple[str, ...]

    def get(self, name: str) -> ParsedOption | None:
        for option in self.options:
            if option.name == name:
                return option
        return None

    def value(self, name: str) -> str | None:
        option = self.get(name)
        return option.values[0] if option is not None and option.values else None

    def enabled(self, name: str) -> bool:
        """Whether a switch is given and on."""
        option = self.get(name)
        return option is not None and option.enabled

    def without(self, *names: str) -> CanonicalCommand:
        kept = tuple(o for o in self.options if o.name not in names)
        return CanonicalCommand(self.spec, self.model, kept, self.original)

    def with_options(self, *extra: ParsedOption) -> CanonicalCommand:
        names = {o.name for o in extra}
        kept = tuple(o for o in self.options if o.name not in names)
        return CanonicalCommand(self.spec, self.model, (*kept, *extra), self.original)

    def render_options(self) -> tuple[str, ...]:
        """The options, each in its canonical spelling, values re-rendered from what was parsed."""
        out: list[str] = []
        for option in self.options:
            out += render_option(option, inline=self.spec.inline_values)
        return tuple(out)


def render_option(option: ParsedOption, *, inline: bool = True) -> list[str]:
    """One option's tokens. With `inline` (the engine reads `--opt=value`), a value beginning with '-' is written
    `--opt=value`, so the engine's parser keeps it as the value and never reads it as an option of its own."""
    spec = option.spec
    if spec.kind == ValueKind.FLAG:
        return [spec.name] if option.enabled else []
    if spec.kind == ValueKind.BOOL:
        off = spec.negations[0] if spec.negations else "--no-" + spec.name.removeprefix("--")
        return [spec.name if option.enabled else off]
    if option.json_value is not None:
        return [spec.name, json.dumps(option.json_value, separators=(",", ":"), ensure_ascii=False)]
    if spec.repeatable:
        out: list[str] = []
        for value in option.values:
            out += _one_value(spec.name, value, inline)
        return out
    if len(option.values) == 1:
        return _one_value(spec.name, option.values[0], inline)
    if inline and any(value.startswith("-") for value in option.values):
        raise refuse(f"{spec.name} {' '.join(option.values)}", DASH_IN_LIST)
    return [spec.name, *option.values]


DASH_IN_LIST = (
    "a value beginning with '-' in a list of values: the engine's parser would read it as an option, and a list "
    "has no one-token form that keeps it a value"
)


def _one_value(name: str, value: str, inline: bool) -> list[str]:
    if inline and value.startswith("-"):
        return [f"{name}={value}"]
    return [name, value]


def declared(name: str, kind: ValueKind, *aliases: str, nargs: str | int | None = None, **more: Any) -> OptionSpec:
    """An option as a hand-written spec declares it (SGLang's, Ollama's...): a FLAG or BOOL takes no value."""
    if kind in (ValueKind.FLAG, ValueKind.BOOL):
        nargs = 0
    return OptionSpec(name=name, aliases=aliases, kind=kind, nargs=nargs, **more)


def option_value(spec: OptionSpec, *values: str) -> ParsedOption:
    """A ParsedOption the farm itself adds (the worker's `--host`, a profile's extra arguments)."""
    return ParsedOption(spec=spec, values=tuple(values), written_as=(spec.name,))


_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
_DOTTED_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\+?$")


def is_flag(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _NUMBER.match(token)


def refuse(what: str, why: str) -> ArgumentPolicyError:
    return ArgumentPolicyError(f"{what!r}: {why}", field="argv")


def strip_prefix(argv: Sequence[str], spec: ArgSpec) -> tuple[str, ...]:
    """The argv after the engine's executable and subcommand; refuses any other start."""
    tokens = tuple(argv)
    for prefix in sorted(spec.prefixes, key=len, reverse=True):
        if _matches_prefix(tokens, prefix):
            return tokens[len(prefix) :]
    starts = " | ".join(" ".join(p) for p in spec.prefixes)
    raise ArgumentPolicyError(
        f"a {spec.engine} command starts with {starts}, not {' '.join(tokens[:3])!r}", field="argv"
    )


def _matches_prefix(tokens: Sequence[str], prefix: Sequence[str]) -> bool:
    if len(tokens) < len(prefix):
        return False
    for token, want in zip(tokens, prefix, strict=False):
        if want in ("python", "python3"):
            if re.fullmatch(r"(?:.*/)?python3?(?:\.\d+)?", token) is None:
                return False
        elif token != want and not (want and token.endswith("/" + want) and "/" not in want):
            return False
    return True


def _normalise(name: str, spec: ArgSpec) -> str:
    if not name.startswith("--") or not spec.underscores:
        return name
    head, dot, rest = name[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + rest


def parse_command(
    argv: Sequence[str],
    spec: ArgSpec,
    *,
    extra_options: Iterable[str] = (),
    value_check: Callable[[str], None] = lambda _token: None,
) -> CanonicalCommand:
    """Parse a recipe's command as the engine's parser would, refusing every spelling the farm will not judge.

    `extra_options`: options a host's profile allows beyond the spec (a newer engine); each takes one value.
    `value_check`: run on every raw token first (shell syntax, secrets)."""
    if not argv:
        raise ArgumentPolicyError("the command is empty", field="argv")
    for token in argv:
        value_check(token)
    args = strip_prefix(argv, spec)
    if spec.current_spellings is not None:
        args = tuple(spec.current_spellings(args))
    extras = {_normalise(e, spec): OptionSpec(name=_normalise(e, spec)) for e in extra_options}
    positional: str | None = None
    parsed: dict[str, ParsedOption] = {}
    dotted: dict[str, list[tuple[str, str, str]]] = {}
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if not is_flag(token):
            if spec.positional_model and positional is None:
                positional = token
                continue
            raise refuse(token, f"a stray value: {spec.engine} would read it as another argument or reject it")
        name, eq, inline = token.partition("=")
        for pattern, target in spec.compact_short.items():
            if match := re.fullmatch(pattern, token):
                name, eq, inline = target, "=", match.group(1)
                break
        name = _normalise(name, spec)
        base, dot, sub = name.partition(".")
        if dot and name.startswith("--"):
            parent = spec.lookup(base)
            if parent is None or not parent.dotted:
                raise refuse(token, f"{base} is not a JSON-valued option of {spec.engine} {spec.version}")
            if not _DOTTED_KEY.match(sub):
                raise refuse(token, "not a valid dotted sub-key")
            if eq:
                value = inline
            elif i < len(args):
                value = args[i]
                i += 1
            else:
                raise refuse(token, f"{name} needs a value")
            dotted.setdefault(parent.name, []).append((sub, value, token))
            continue
        option = spec.lookup(name)
        enabled = not (
            option is not None
            and option.kind == ValueKind.BOOL
            and ((name.startswith("--no-") and not option.name.startswith("--no-")) or name in option.negations)
        )
        if option is None and name.startswith("--no-"):
            negated = spec.lookup("--" + name.removeprefix("--no-"))
            if negated is not None and negated.kind == ValueKind.BOOL:
                option, enabled = negated, False
        if option is None:
            option = extras.get(name)
            if option is not None and spec.abbreviated_by(name):
                raise refuse(
                    token,
                    f"{spec.engine} {spec.version} would read it as an abbreviation of "
                    f"{', '.join(spec.abbreviated_by(name)[:5])}",
                )
        if option is None:
            if longer := spec.abbreviated_by(name):
                raise refuse(token, f"abbreviations are refused; write the full option ({', '.join(longer[:5])})")
            raise refuse(
                token,
                f"not an option of {spec.engine} {spec.version} (list: {spec.source}); a host running a newer "
                f"{spec.engine} can allow it in its profile",
            )
        if option.kind == ValueKind.REFUSED:
            raise refuse(token, option.reason or f"the farm never allows {option.name}")
        values: list[str] = []
        if option.kind == ValueKind.FLAG and spec.switch_values:
            said = inline if eq else (args[i] if i < len(args) and args[i].lower() in spec.switch_values else None)
            if said is not None:
                if said.lower() not in spec.switch_values:
                    raise refuse(token, f"{option.name} is a switch here: on or off, not {said!r}")
                i += 0 if eq else 1
                switch = spec.switch_values[said.lower()]
                if switch is None:
                    continue
                enabled, eq = switch, ""
        if not option.takes_value:
            if eq:
                raise refuse(token, f"{option.name} takes no value")
        elif eq:
            values.append(inline)
        elif option.nargs is None or isinstance(option.nargs, int):
            count = 1 if option.nargs is None else int(option.nargs)
            for _ in range(count):
                if i >= len(args) or (is_flag(args[i]) and option.kind != ValueKind.INT):
                    raise refuse(token, f"{option.name} needs a value, and the next token is an option or missing")
                values.append(args[i])
                i += 1
        else:
            while i < len(args) and not is_flag(args[i]):
                values.append(args[i])
                i += 1
                if option.nargs == "?":
                    break
            if option.nargs == "+" and not values:
                raise refuse(token, f"{option.name} needs at least one value")
        if spec.inline_values and len(values) > 1 and any(v.startswith("-") for v in values):
            raise refuse(token, DASH_IN_LIST)
        previous = parsed.get(option.name)
        if previous is not None:
            if not option.repeatable:
                raise refuse(
                    token,
                    f"{option.name} is given twice (as {previous.written_as[0]!r} and {token!r}); "
                    f"{spec.engine} would silently keep the last",
                )
            values = [*previous.values, *values]
            token_list = (*previous.written_as, token)
        else:
            token_list = (token,)
        json_value = None
        if option.kind == ValueKind.CONFIG:
            json_value = _config_of(option, values, token)
        elif option.kind == ValueKind.JSON or (
            option.kind == ValueKind.JSON_OR_WORD and values and values[0].lstrip().startswith(("{", "["))
        ):
            json_value = _json_of(option, values, token)
        parsed[option.name] = ParsedOption(
            spec=option, values=tuple(values), enabled=enabled, json_value=json_value, written_as=token_list
        )
    for parent_name, items in dotted.items():
        parent = spec.option(parent_name)
        merged = _merge_dotted(parsed.get(parent_name), items)
        written = (*(parsed[parent_name].written_as if parent_name in parsed else ()), *(t for _, _, t in items))
        parsed[parent_name] = ParsedOption(spec=parent, json_value=merged, written_as=written)
    model = _reconcile_model(positional, parsed, spec)
    return CanonicalCommand(spec=spec, model=model, options=tuple(parsed.values()), original=tuple(argv))


def _json_of(option: OptionSpec, values: Sequence[str], token: str) -> Any:
    if len(values) != 1:
        raise refuse(token, f"{option.name} takes one JSON value")
    try:
        value = json.loads(values[0])
    except json.JSONDecodeError as exc:
        raise refuse(f"{option.name} {values[0]}", f"not valid JSON ({exc.msg} at {exc.pos})") from exc
    except (RecursionError, ValueError) as exc:  # nested past the parser's depth, or an integer too long to read
        raise refuse(f"{option.name} {values[0][:80]}", f"not JSON the farm reads ({type(exc).__name__})") from exc
    if not isinstance(value, dict | list):
        raise refuse(f"{option.name} {values[0]}", "expected a JSON object or list")
    return value


def _config_of(option: OptionSpec, values: Sequence[str], token: str) -> Any:
    if len(values) == 1 and not values[0].lstrip().startswith("{"):
        raise refuse(
            f"{option.name} {values[0]}",
            "reads more arguments from a file on the worker, past every check (the farm reads only a registry config "
            "asset it ships, into the command itself)",
        )
    value = _json_of(option, values, token)
    if not isinstance(value, dict):
        raise refuse(f"{option.name} {values[0]}", "expected a JSON object (the config's sections)")
    return value


def _merge_dotted(base: ParsedOption | None, items: Sequence[tuple[str, str, str]]) -> Any:
    merged: dict[str, Any] = {}
    if base is not None:
        if not isinstance(base.json_value, dict):
            raise refuse(base.written_as[0], "dotted sub-keys need a JSON object")
        merged = json.loads(json.dumps(base.json_value))
    for sub, raw, token in items:
        append = sub.endswith("+")
        keys = sub.removesuffix("+").split(".")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        node = merged
        for key in keys[:-1]:
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise refuse(token, f"{key} is not an object")
            node = child
        last = keys[-1]
        if append:
            existing = node.setdefault(last, [])
            if not isinstance(existing, list):
                raise refuse(token, f"{last} is not a list")
            existing.append(value)
        else:
            if last in node and base is None:
                raise refuse(token, f"{sub} is given twice")
            node[last] = value
    return merged


def _reconcile_model(positional: str | None, parsed: dict[str, ParsedOption], spec: ArgSpec) -> str | None:
    option = parsed.get(spec.model_option) if spec.model_option else None
    named = option.values[0] if option is not None and option.values else None
    if positional is not None and named is not None and positional != named:
        raise refuse(
            f"{positional} {spec.model_option} {named}",
            f"the positional model and {spec.model_option} disagree; {spec.engine} would load {positional!r}",
        )
    if option is not None:
        del parsed[option.name]
    return positional or named


def spec_from_argparse_dump(
    data: Mapping[str, Any],
    *,
    engine: str,
    source: str,
    kinds: Mapping[str, ValueKind],
    reasons: Mapping[str, str],
    **settings: Any,
) -> ArgSpec:
    """An ArgSpec from a dump of an argparse parser (deploy/gen_vllm_serve_args.py's format): each option's kind
    is the farm's table entry when it has one, else derived from the parser's type, choices and action."""
    try:
        options: list[OptionSpec] = []
        for raw in data["options"]:
            strings = list(raw["option_strings"])
            longs = [s for s in strings if s.startswith("--")]
            name = (longs or strings)[0]
            aliases = tuple(s for s in strings if s != name)
            choices = tuple(str(c) for c in raw["choices"]) if raw.get("choices") else None
            action = str(raw.get("action") or "")
            kind = kinds.get(name) or _kind_of(raw.get("type"), choices, action, bool(raw.get("json")), raw["nargs"])
            negations = negations_of(strings) if action == "EnableDisableAction" else ()
            options.append(
                OptionSpec(
                    name=name,
                    aliases=aliases,
                    kind=kind,
                    nargs=raw["nargs"],
                    choices=choices,
                    repeatable=action == "_AppendAction",
                    dotted=bool(raw.get("json")),
                    reason=reasons.get(name, ""),
                    negations=negations if kind == ValueKind.BOOL else (),
                )
            )
        return ArgSpec(
            engine=engine,
            version=str(data.get("vllm_version") or data.get("version")),
            source=source,
            options=tuple(options),
            **settings,
        )
    except (KeyError, TypeError) as exc:
        raise ArgumentPolicyError(f"not an argument list: {exc!r}", source=source) from exc


def negations_of(strings: Sequence[str]) -> tuple[str, ...]:
    """The off spellings of a vLLM EnableDisableAction (`--enable-x` / `--disable-x`, else `--no-x`), in order."""

    def negates(spelling: str, positive: str) -> bool:
        stem = positive.removeprefix("--")
        inverse = {"enable-": "disable-", "disable-": "enable-"}
        swapped = next((inverse[p] + stem.removeprefix(p) for p in inverse if stem.startswith(p)), None)
        return spelling in (f"--no-{stem}", f"--{swapped}" if swapped else "")

    positives = [strings[0]]
    for spelling in strings[1:]:
        if not any(negates(spelling, p) for p in positives):
            positives.append(spelling)
    return tuple(s for s in strings if s not in positives)


def _kind_of(type_name: Any, choices: tuple[str, ...] | None, action: str, json_valued: bool, nargs: Any) -> ValueKind:
    if action in ("BooleanOptionalAction", "EnableDisableAction"):
        return ValueKind.BOOL
    if action in ("_StoreTrueAction", "_StoreFalseAction", "_HelpAction", "_StoreConstAction") or nargs == 0:
        return ValueKind.FLAG
    if choices:
        return ValueKind.CHOICE
    if type_name == "json" or (json_valued and type_name != "json_or_str"):
        return ValueKind.JSON
    if type_name == "json_or_str":
        return ValueKind.JSON_OR_WORD
    if type_name == "int":
        return ValueKind.INT
    if type_name == "float":
        return ValueKind.FLOAT
    if type_name == "int_or_auto":
        return ValueKind.INT_OR_AUTO
    return ValueKind.WORD
