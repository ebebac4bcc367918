"""Engine argument policy: which `vllm serve` arguments a recipe may carry, checked at submit and at the worker.

Two lists decide. The engine's own list (`vllm_serve_args.json`, dumped from vLLM's argument parser by
`deploy/gen_vllm_serve_args.py`, with the vLLM version it came from) says which flags exist, which take a
value, and which are JSON-valued (so `--kernel-config.moe_backend X` dotted access is allowed). The host's
policy (`EnginePolicy`, from the worker profile) says which of the risky ones this host allows.

Decisions, each named in the error when it refuses:
- Only exact option strings count (underscores read as dashes, as vLLM does). argparse would accept an
  abbreviation (`--trust-remote` means `--trust-remote-code`), so abbreviations are refused.
- A flag missing from the list is refused, unless the profile names it in `allowed_extra_flags`: that is how a
  host runs a recipe for a newer vLLM than the shipped list (or it ships its own list, `serve_args`). An
  extra flag that is a prefix of a known flag is still refused: the older parser would read it as that flag.
- `--host` and `--port` may appear (the worker replaces them with its own); every other way to change where
  or how the server listens (`--uds`, gRPC, TLS, headless) is refused, as are `--config` (arguments from a
  file, past these checks) and secrets (`--api-key`, a `--hf-token` value, token-shaped values).
- `--trust-remote-code` (also as a JSON key) only for models the profile lists; `--allowed-local-media-path`
  only when the profile allows local media; flags that load code by name or path only when listed.
- No shell is ever used, but tokens still must not look like shell (`;`, `$(`, backticks, `&&`, a leading `|`,
  newlines, NULs), and no value may smuggle a flag (`--model "x --trust-remote-code"`, `--foo=--bar`).
  JSON values are parsed and their strings checked the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from farm.errors import ArgumentPolicyError
from farm.recipes.model import Recipe

SERVE_ARGS_FILE = "vllm_serve_args.json"
"""The shipped list of `vllm serve` options, beside this module."""

LISTEN_FLAGS = frozenset({"--host", "--port"})
"""Flags a recipe may carry but never decides: the worker always puts in its own."""

REFUSED_FLAGS: Mapping[str, str] = {
    "--uds": "the worker reaches the engine on its own loopback TCP port, never a Unix socket",
    "--grpc": "the worker speaks HTTP to the engine",
    "--grpc-port": "the worker speaks HTTP to the engine and opens no other listener",
    "--headless": "a headless engine serves no API the worker could measure",
    "--ssl-keyfile": "the worker speaks plain HTTP on loopback",
    "--ssl-certfile": "the worker speaks plain HTTP on loopback",
    "--ssl-ca-certs": "the worker speaks plain HTTP on loopback",
    "--ssl-cert-reqs": "the worker speaks plain HTTP on loopback",
    "--ssl-ciphers": "the worker speaks plain HTTP on loopback",
    "--enable-ssl-refresh": "the worker speaks plain HTTP on loopback",
    "--api-key": "secrets never go in argv (they would be stored and logged)",
    "--config": "it reads more arguments from a file on the worker, past every check",
}
"""Flags no host policy allows, with the reason quoted in the error."""

CODE_LOADING_FLAGS: Mapping[str, str] = {
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
"""Flags that load code other than the model's: refused unless the profile lists them in `allowed_risky_flags`."""

TRUST_REMOTE_CODE = "--trust-remote-code"
LOCAL_MEDIA = "--allowed-local-media-path"
HF_TOKEN_FLAG = "--hf-token"  # noqa: S105 - a flag name, not a secret

_SHELL_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"[\x00]"), "a NUL byte"),
    (re.compile(r"[\r\n]"), "a newline"),
    (re.compile(r";"), "a ';' (command separator)"),
    (re.compile(r"\$\("), "a '$(' (command substitution)"),
    (re.compile(r"`"), "a backtick (command substitution)"),
    (re.compile(r"&&"), "'&&' (command chaining)"),
    (re.compile(r"^\s*\|"), "a leading '|' (a pipe)"),
)
_SMUGGLED_FLAG = re.compile(r"(?:^|\s)--?[A-Za-z][\w.-]*")
_SMUGGLED_LONG_FLAG = re.compile(r"(?:^|\s)--[A-Za-z][\w.-]*")
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
_SECRET_VALUE = re.compile(r"\b(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|ghp_[A-Za-z0-9]{20,})\b")
_DOTTED_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\+?$")
_JSON_TRUST_KEY = "trust_remote_code"
_OPTIMIZATION_LEVEL = re.compile(r"^-O=?(\w+)$")


@dataclass(frozen=True)
class ServeOption:
    """One option of `vllm serve`, as vLLM's parser declares it."""

    option_strings: tuple[str, ...]
    nargs: str | int | None
    choices: tuple[str, ...] | None
    json_valued: bool

    @property
    def takes_value(self) -> bool:
        """Whether a value follows (None: exactly one; '?': one if present; '+'/'*': several)."""
        return self.nargs != 0


@dataclass(frozen=True)
class ServeArgs:
    """Every option one engine version's `vllm serve` accepts, by option string."""

    engine_version: str
    options: Mapping[str, ServeOption]

    @classmethod
    def from_json(cls, data: Mapping[str, Any], *, source: str) -> ServeArgs:
        try:
            options: dict[str, ServeOption] = {}
            for raw in data["options"]:
                option = ServeOption(
                    option_strings=tuple(raw["option_strings"]),
                    nargs=raw["nargs"],
                    choices=tuple(raw["choices"]) if raw.get("choices") else None,
                    json_valued=bool(raw.get("json", False)),
                )
                for name in option.option_strings:
                    options[name] = option
            return cls(engine_version=str(data["vllm_version"]), options=options)
        except (KeyError, TypeError) as exc:
            raise ArgumentPolicyError(f"not a vllm serve argument list: {exc!r}", source=source) from exc

    @classmethod
    def load(cls, path: Path) -> ServeArgs:
        """A list made by deploy/gen_vllm_serve_args.py (for example from the vLLM a host runs)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ArgumentPolicyError(f"cannot read the argument list: {exc}", source=path) from exc
        return cls.from_json(data, source=str(path))

    def lookup(self, flag: str) -> ServeOption | None:
        return self.options.get(flag)

    def abbreviated_by(self, prefix: str) -> tuple[str, ...]:
        """The long options argparse would accept `prefix` as an abbreviation of."""
        if not prefix.startswith("--"):
            return ()
        return tuple(sorted(name for name in self.options if name.startswith(prefix) and name != prefix))


@cache
def shipped_serve_args() -> ServeArgs:
    """The list generated from the vLLM the farm ships against (its version is `engine_version`)."""
    text = resources.files(__package__).joinpath(SERVE_ARGS_FILE).read_text(encoding="utf-8")
    return ServeArgs.from_json(json.loads(text), source=SERVE_ARGS_FILE)


@dataclass(frozen=True)
class EnginePolicy:
    """What one host allows beyond the engine's own list. The default allows nothing risky."""

    allow_trust_remote_code_models: frozenset[str] = frozenset()
    """Model ids (as the recipe names them) that may run with --trust-remote-code."""
    allow_local_media: bool = False
    """Whether --allowed-local-media-path (the engine reads files of the host) is allowed."""
    allowed_extra_flags: frozenset[str] = frozenset()
    """Flags not in the engine's list that this host accepts (a newer vLLM); they are assumed to take a value
    when the next token is not a flag."""
    allowed_risky_flags: frozenset[str] = frozenset()
    """Code-loading flags (CODE_LOADING_FLAGS) this host accepts."""
    allow_image_tags: bool = False
    """Container images: whether an image pinned by tag, not digest, may run."""
    allowed_mount_sources: frozenset[str] = frozenset()
    """Container mounts: host paths (after `~` expansion) a recipe may mount besides the model cache."""
    serve_args: ServeArgs | None = field(default=None, compare=False)
    """The engine's list; None: the shipped one."""

    @property
    def engine_args(self) -> ServeArgs:
        return self.serve_args or shipped_serve_args()


DEFAULT_POLICY = EnginePolicy()
"""The strictest policy: the engine's list and nothing risky."""


def normalize_flag(flag: str) -> str:
    """A flag as vLLM reads it: underscores become dashes in the name up to the first '.' (not in sub-keys)."""
    if not flag.startswith("--"):
        return flag
    head, dot, rest = flag[2:].partition(".")
    return "--" + head.replace("_", "-") + dot + rest


def _refuse(token: str, why: str) -> ArgumentPolicyError:
    return ArgumentPolicyError(f"{token!r}: {why}", field="argv")


def check_token(token: str) -> None:
    """Refuse a token that carries shell syntax or a secret, whatever its place."""
    for pattern, what in _SHELL_PATTERNS:
        if pattern.search(token):
            raise _refuse(token, f"contains {what}; engine arguments are never given to a shell")
    if _SECRET_VALUE.search(token):
        raise _refuse("<redacted>", "looks like a secret token; secrets come from the worker's environment")


def _json_value(token: str) -> Any | None:
    stripped = token.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def _json_strings(value: Any, path: str = "") -> Iterable[tuple[str, Any]]:
    """Every (key path, leaf) of a JSON value, keys included as leaves so a smuggled key is seen too."""
    if isinstance(value, dict):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            yield sub, str(key)
            yield from _json_strings(item, sub)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _json_strings(item, f"{path}[{i}]")
    else:
        yield path, value


def _check_value(flag: str, value: str, policy: EnginePolicy, model: str | None) -> None:
    """A value of `flag`: no shell, no smuggled flag, JSON strings checked the same way."""
    check_token(value)
    parsed = _json_value(value)
    if parsed is not None:
        for path, leaf in _json_strings(parsed):
            if path.split(".")[-1] == _JSON_TRUST_KEY and leaf is True and not _trusted(model, policy):
                raise _refuse(f"{flag} {value}", f"sets {_JSON_TRUST_KEY} for a model this host does not trust")
            # vLLM's custom_ops use '-op' and '+op': only a double-dash flag inside a JSON string is smuggled.
            if isinstance(leaf, str) and _SMUGGLED_LONG_FLAG.search(leaf):
                raise _refuse(f"{flag} {value}", f"the JSON string {leaf!r} carries a flag")
        return
    if _NUMBER.match(value):
        return
    if _SMUGGLED_FLAG.search(value):
        raise _refuse(f"{flag} {value}", "the value carries a flag vLLM could parse; pass each flag on its own")


def _trusted(model: str | None, policy: EnginePolicy) -> bool:
    return model is not None and model in policy.allow_trust_remote_code_models


def _is_flag(token: str) -> bool:
    return token.startswith("-") and not _NUMBER.match(token)


def split_serve_argv(argv: Sequence[str]) -> tuple[str | None, tuple[str, ...]]:
    """(model, engine arguments) of a `vllm serve MODEL ...` argv; the model is None when not positional."""
    args = list(argv)
    if args[:1] == ["vllm"]:
        args = args[1:]
    if args[:1] == ["serve"]:
        args = args[1:]
    if args and not _is_flag(args[0]):
        return args[0], tuple(args[1:])
    return None, tuple(args)


def check_argv(argv: Sequence[str], policy: EnginePolicy = DEFAULT_POLICY) -> None:
    """Refuse a recipe argv (`vllm serve MODEL --flag value ...`) that the engine or this host would not accept.

    Raises ArgumentPolicyError naming the token and why; returns None when every token passes.
    """
    if not argv:
        raise ArgumentPolicyError("the argv is empty", field="argv")
    for token in argv:
        check_token(token)
    model, args = split_serve_argv(argv)
    if model is not None:
        _check_value("model", model, policy, model)
    model = model_option(args) or model
    engine = policy.engine_args
    i = 0
    while i < len(args):
        token = args[i]
        i += 1
        if not _is_flag(token):
            raise _refuse(token, "a stray value: vLLM would read it as the model or reject it")
        name, eq, inline = token.partition("=")
        if level := _OPTIMIZATION_LEVEL.match(token):  # vLLM reads -O3 and -O=3 as --optimization-level 3
            name, eq, inline = "--optimization-level", "=", level.group(1)
        name = normalize_flag(name)
        option = _option_for(name, engine, policy)
        if option is None:  # an allowed extra flag (newer vLLM): a value follows unless a flag does
            if eq:
                _check_value(name, inline, policy, model)
            elif i < len(args) and not _is_flag(args[i]):
                _check_value(name, args[i], policy, model)
                i += 1
            continue
        values: list[str] = []
        if eq:
            if not option.takes_value:
                raise _refuse(token, f"{name} takes no value")
            values.append(inline)
        elif option.nargs is None or isinstance(option.nargs, int):
            count = 1 if option.nargs is None else int(option.nargs)
            for _ in range(count):
                if i >= len(args) or _is_flag(args[i]):
                    raise _refuse(token, f"{name} needs a value, and the next token is a flag or missing")
                values.append(args[i])
                i += 1
        elif option.nargs in ("?", "+", "*"):
            while i < len(args) and not _is_flag(args[i]):
                values.append(args[i])
                i += 1
                if option.nargs == "?":
                    break
            if option.nargs == "+" and not values:
                raise _refuse(token, f"{name} needs at least one value")
        for value in values:
            _check_value(name, value, policy, model)
            if option.choices is not None and "." not in name and value not in option.choices:
                raise _refuse(f"{name} {value}", f"not one of vLLM's choices: {', '.join(option.choices)}")
        _check_host_policy(name, values, policy, model)


def model_option(args: Sequence[str]) -> str | None:
    """The model named by `--model X` / `--model=X`, which vLLM moves in front of the other arguments."""
    for i, arg in enumerate(args):
        if arg == "--model" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--model="):
            return arg.removeprefix("--model=")
    return None


def _option_for(name: str, engine: ServeArgs, policy: EnginePolicy) -> ServeOption | None:
    """The engine's option for a normalized flag; None for a profile-allowed extra flag; refuses the rest."""
    base, dot, sub = name.partition(".")
    if dot:
        parent = engine.lookup(base)
        if parent is None or not parent.json_valued:
            if base in policy.allowed_extra_flags:
                return None
            raise _refuse(name, f"{base} is not a JSON-valued option of vLLM {engine.engine_version}")
        if not _DOTTED_KEY.match(sub):
            raise _refuse(name, "not a valid dotted sub-key")
        _check_host_policy(base, [], policy, None)
        return ServeOption(option_strings=(name,), nargs=None, choices=None, json_valued=False)
    if name in REFUSED_FLAGS:
        raise _refuse(name, REFUSED_FLAGS[name])
    option = engine.lookup(name)
    if option is not None:
        if option.option_strings[0] in REFUSED_FLAGS:
            raise _refuse(name, REFUSED_FLAGS[option.option_strings[0]])
        return option
    if name in policy.allowed_extra_flags:
        if longer := engine.abbreviated_by(name):
            raise _refuse(name, f"vLLM {engine.engine_version} would read it as an abbreviation of {', '.join(longer)}")
        return None
    if name.startswith("--") and (longer := engine.abbreviated_by(name)):
        raise _refuse(name, f"abbreviations are refused; write the full flag ({', '.join(longer[:5])})")
    raise _refuse(
        name,
        f"not an option of vllm serve {engine.engine_version}; a host running a newer vLLM can list it in "
        "its profile's allowed_extra_flags",
    )


def _check_host_policy(name: str, values: Sequence[str], policy: EnginePolicy, model: str | None) -> None:
    dotted_trust = name.rpartition(".")[2] == _JSON_TRUST_KEY and "." in name
    if dotted_trust and values and values[0].lower() not in ("false", "0") and not _trusted(model, policy):
        raise _refuse(f"{name} {values[0]}", f"sets {_JSON_TRUST_KEY} for a model this host does not trust")
    if name == TRUST_REMOTE_CODE and not _trusted(model, policy):
        raise _refuse(name, f"this host allows --trust-remote-code only for {_listed(policy)}, not {model!r}")
    if name == LOCAL_MEDIA and not policy.allow_local_media:
        raise _refuse(name, "this host does not let the engine read local media files")
    if name in CODE_LOADING_FLAGS and name not in policy.allowed_risky_flags:
        raise _refuse(name, f"{CODE_LOADING_FLAGS[name]}; this host's profile does not allow it")
    if name == HF_TOKEN_FLAG and values and values[0] not in ("true", "True", "1"):
        raise _refuse(name, "a token value in argv; HF_TOKEN comes from the worker's own environment")


def _listed(policy: EnginePolicy) -> str:
    models = sorted(policy.allow_trust_remote_code_models)
    return ", ".join(repr(m) for m in models) if models else "no model"


def strip_listen_flags(args: Sequence[str]) -> tuple[str, ...]:
    """The arguments without --host/--port and their values (the worker puts in its own)."""
    kept: list[str] = []
    i = 0
    while i < len(args):
        token = args[i]
        name = normalize_flag(token.partition("=")[0])
        if name in LISTEN_FLAGS:
            i += 1 if "=" in token else 2
            continue
        kept.append(token)
        i += 1
    return tuple(kept)


def check_recipe_for_submit(recipe: Recipe) -> None:
    """The check at submit, before anything is stored: injection, and flags no vLLM host could accept.

    A host's own policy is not known at submit, so the check allows what some host may allow (remote code for
    this model, local media, code-loading flags); the worker checks again with its host's real policy.
    """
    if recipe.engine.name != "vllm":
        return
    permissive = EnginePolicy(
        allow_trust_remote_code_models=frozenset({recipe.model_id}),
        allow_local_media=True,
        allowed_risky_flags=frozenset(CODE_LOADING_FLAGS),
    )
    check_argv(recipe.argv, permissive)
