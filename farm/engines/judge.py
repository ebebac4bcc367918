"""Judging a canonical command's parsed values against a host's policy: the checks every engine shares.

Each value is checked against its kind (farm.engines.argspec.ValueKind). JSON values are walked key by key:
keys that load code (`*_cls`, `*module_path`, `inductor_passes`, a logging `()` factory) are refused, and so is
any string shaped like a qualified Python name (`pkg.mod.Class`). Paths (options of kind PATH, JSON keys naming
a path, dir or file) must lie under the host's model and cache roots. Addresses (LOOPBACK options, JSON keys
naming an endpoint, host, address or URL) must be loopback: nothing listens or dials beyond the worker's host.
When remote code is trusted, every repository the engine will load (model, tokenizer, config path, draft model,
also inside JSON) must be on the host's trust list.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from farm.engines import trust
from farm.engines.argspec import CanonicalCommand, OptionSpec, ParsedOption, ValueKind, refuse

DEFAULT_PATH_ROOTS = ("~/.cache/huggingface", "~/.cache/bench-farm", "/models")
"""Where a recipe may name files when the host's profile names no roots: the usual model caches."""

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})

CODE_KEY = re.compile(
    r"(?:^|[_.])(?:cls|class|module|module_path|plugin|factory|inductor_passes|callable|import|cxx|library_path)$"
    r"|^\(\)$|^auto_map$",
    re.I,
)
"""JSON keys that name code to import or call (`auto_map` points transformers at another repository's code), or
to run or link: torch inductor's `cpp.cxx` and `cuda.cuda_cxx` name the compiler executable it runs, and
`aot_inductor.aoti_shim_library_path` a shared library it loads (vLLM's `compilation_config.inductor_compile_config`
hands its keys to inductor as they are)."""
REMOTE_CACHE_KEY = re.compile(r"remote_cache$", re.I)
"""Inductor's remote caches (`fx_graph_remote_cache`, `autotune_remote_cache`): compiled code shared through a
Redis (on TORCHINDUCTOR_REDIS_HOST, loopback by default, where the farm's own broker may listen) across jobs."""
ADDRESS_DEFAULTS: dict[str, dict[str, str]] = {
    "--kv-events-config": {"endpoint": "tcp://*:5557"},
}
LISTENING_CONNECTORS: dict[str, str] = {
    "MooncakeConnector": "starts a bootstrap server on 0.0.0.0 and a transfer engine on the host's network address",
    "MooncakeStoreConnector": "runs a transfer engine on the host's network address",
    "MoRIIOConnector": "binds its transfer engine and handshake sockets on the host's network address",
}
"""vLLM KV connectors (`kv_connector`, also nested in a MultiConnector's list) that listen beyond loopback whatever
the config says (vLLM 0.32.0 distributed/kv_transfer/kv_connector/v1)."""
"""JSON options whose unset keys default to an address beyond loopback: vLLM's KVEventsConfig publishes on
`tcp://*:5557` (every interface) unless `endpoint` says otherwise. They are judged with these defaults filled in."""

WRITE_KEY = re.compile(
    r"(?:^|_)(?:dump|save|output|export|profiler|profile|trace|traces|log|logs|crash|storage|offload|debug)_?"
    r"(?:path|dir|directory|file|filename|folder|root)$|^(?:cache_dir|local_cache_dir|output|save_to)$",
    re.I,
)
"""JSON keys naming where the engine writes (vLLM's `compilation_config.debug_dump_path` and `cache_dir`,
`profiler_config.torch_profiler_dir`, inductor's `trace.debug_dir`): refused, like the options that write."""
WRITES = (
    "writes a file or directory: an engine writes nowhere the worker does not place it, and a write under the "
    "host's roots could replace a model (the worker keeps the engine's log itself)"
)
PATH_KEY = re.compile(r"(?:^|_)(?:path|dir|directory|file|filename|root)$", re.I)
ADDRESS_KEY = re.compile(r"(?:^|_)(?:endpoint|host|hostname|addr|address|url|uri|ip)$", re.I)
REPO_KEY = re.compile(r"^(?:model|tokenizer|draft_model|draft_tokenizer|hf_config_path|target_model)$", re.I)
TRUST_KEY = "trust_remote_code"

QUALIFIED_NAME = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?::\w+)?$")
"""`pkg.module.Class` or `pkg.module:func`: what importlib and logging's `()` factories load."""
WORD = re.compile(r"^[\w.:+@/,=*-]*$")
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(?::[\w.-]+)?$")
INT = re.compile(r"^-?\d+$")
HUMAN_INT = re.compile(r"^\d+(\.\d+)?[kKmMgGtT]?$")
FLOAT = re.compile(r"^-?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$")
TELEMETRY_OPTIONS = frozenset({"--otlp-traces-endpoint"})


@dataclass(frozen=True)
class Judgement:
    """What a host allows beyond the engine's defaults (from its profile)."""

    trusted_models: frozenset[str] = frozenset()
    """`repository@revision` pairs that may run with remote code trusted (farm.engines.trust)."""
    path_roots: tuple[str, ...] = DEFAULT_PATH_ROOTS
    allowed_code_options: frozenset[str] = frozenset()
    allow_local_media: bool = False
    device_count: int | None = None
    """The job's device count; the engine's parallel sizes must multiply to it. None: not checked."""
    resolve_links: bool = False
    """At the worker: resolve symbolic links before checking a path is under the roots."""


def judge(command: CanonicalCommand, judgement: Judgement) -> None:
    """Refuse the command unless every parsed value passes (ArgumentPolicyError naming the option and why)."""
    repositories: list[tuple[str, str]] = []
    trusted = False
    if command.model is not None:
        _check_repo_or_path("model", command.model, judgement)
        repositories.append(("model", command.model))
    for option in command.options:
        if option.spec.kind == ValueKind.CONFIG:
            _judge_config(command, option, judgement, repositories)
            continue
        trusted |= _judge_option(option, judgement, repositories)
    if trusted and command.model is None and (command.spec.positional_model or command.spec.model_option):
        raise refuse(
            "--trust-remote-code",
            "remote code is trusted, and the command names no model: the engine would load one the judge never saw "
            "(every repository the engine loads must be on this host's trust list)",
        )
    pinning = {name for names in command.spec.revisions.values() for name in names}
    for option in command.options:
        if option.name in pinning:
            for value in option.values:
                trust.refuse_pull_request(option.name, value)
    if trusted:
        trust.check_pinned(_loaded(command, repositories), judgement.trusted_models)
    _check_devices(command, judgement)


def _loaded(command: CanonicalCommand, repositories: list[tuple[str, str]]) -> list[trust.Loaded]:
    """Each repository the engine loads, with what pins its revision: the spec's revision options for the model and
    the repository options, the revision keys beside a repository inside JSON, nothing for the others."""
    spec = command.spec
    values = {name: command.value(name) for names in spec.revisions.values() for name in names}
    in_json: dict[str, trust.Loaded] = {}
    for option in command.options:
        if option.json_value is not None:
            for item in trust.json_loaded(option.name, option.json_value, REPO_KEY):
                in_json[item.where] = item
    loaded: list[trust.Loaded] = []
    for where, repo in repositories:
        if where in in_json:
            loaded.append(in_json[where])
            continue
        names = spec.revisions.get(where, ())
        loaded.append(trust.Loaded(where, repo, trust.option_revisions(names, values)))
    return loaded


def _judge_option(option: ParsedOption, judgement: Judgement, repositories: list[tuple[str, str]]) -> bool:
    """Judge one option; True when it turns on remote code."""
    spec = option.spec
    what = " ".join([option.written_as[0] if option.written_as else spec.name, *option.values])[:200]
    kind = spec.kind
    if kind == ValueKind.REFUSED:
        raise refuse(what, spec.reason or "the farm never allows this option")
    if spec.name in TELEMETRY_OPTIONS:
        raise refuse(what, "sends telemetry to an outside endpoint; the farm allows no outbound telemetry")
    if kind == ValueKind.CODE and spec.name not in judgement.allowed_code_options:
        raise refuse(what, f"{spec.reason or 'loads code by name or path'}; this host's profile does not allow it")
    if spec.name == "--allowed-local-media-path" and not judgement.allow_local_media:
        raise refuse(what, "this host does not let the engine read local media files")
    if spec.name == "--trust-remote-code":
        return option.enabled
    if option.json_value is not None:
        value = option.json_value
        if spec.name in ADDRESS_DEFAULTS and isinstance(value, dict):
            value = {**ADDRESS_DEFAULTS[spec.name], **value}
        return _judge_json(spec.name, value, judgement, repositories)
    values = option.values
    if kind == ValueKind.PATH and isinstance(spec.nargs, int) and spec.nargs > 1:
        for extra in values[1:]:
            _judge_value(spec.name, ValueKind.TEXT, extra, None, judgement, repositories, what)
        values = values[:1]
    for value in values:
        _judge_value(spec.name, kind, value, spec.choices, judgement, repositories, what, spec.reason)
    return False


def _judge_config(
    command: CanonicalCommand, option: ParsedOption, judgement: Judgement, repositories: list[tuple[str, str]]
) -> None:
    """An engine's config document (TabbyAPI's `--config`). It must be a registry config asset the farm ships
    (farm.recipes.assets), less the listen address the worker sets; the engine reads nothing but the config once it
    has one, so no other option may stand beside it. Then section by section and key by key: a section or key
    outside the engine's schema is refused, and each value is judged by its key's kind (a path under the roots, a
    file name inside the engine's folders, a number, a boolean; a nested mapping walked like any JSON value). A key
    the farm refuses passes only unset or false."""
    from farm.recipes.assets import shipped_documents

    document = option.json_value
    where = option.spec.name
    if not isinstance(document, dict):
        raise refuse(where, "expected the config's sections")
    beside = [
        other.written_as[0] if other.written_as else other.name for other in command.options if other is not option
    ]
    if beside:
        raise refuse(
            beside[0], f"{command.spec.engine} reads only its config when --config is given: it would ignore this"
        )
    schema = command.spec.config_keys
    for section, body in document.items():
        keys = schema.get(str(section))
        if keys is None:
            raise refuse(f"{where} {section}", f"not a section of the engine's config ({', '.join(schema)})")
        _judge_config_section(f"{where} {section}", keys, body, schema, judgement, repositories)
    if document not in shipped_documents():
        raise refuse(
            where,
            "an inline config: only a registry config asset the farm ships (deploy/refresh-assets.py) is read "
            "into --config",
        )


def _judge_config_section(
    where: str,
    keys: Mapping[str, OptionSpec],
    body: Any,
    schema: Mapping[str, Mapping[str, OptionSpec]],
    judgement: Judgement,
    repositories: list[tuple[str, str]],
) -> None:
    if body is None:
        return
    if not isinstance(body, dict):
        raise refuse(where, "expected a mapping of the section's keys")
    for key, value in body.items():
        _judge_config_value(f"{where}.{key}", keys.get(str(key)), value, schema, judgement, repositories)


_CONFIG_NUMBERS = {ValueKind.INT: (int,), ValueKind.FLOAT: (int, float), ValueKind.NUMBER: (int, float)}


def _judge_config_value(
    where: str,
    spec: OptionSpec | None,
    value: Any,
    schema: Mapping[str, Mapping[str, OptionSpec]],
    judgement: Judgement,
    repositories: list[tuple[str, str]],
) -> None:
    what = f"{where}={json.dumps(value, ensure_ascii=False)}"[:200]
    if spec is None:
        raise refuse(what, "not a key the farm knows in this section of the engine's config")
    if value is None:
        return
    if spec.kind == ValueKind.REFUSED:
        if value is False:
            return
        raise refuse(what, spec.reason or "the farm never allows this key")
    if spec.kind == ValueKind.CONFIG:
        _judge_config_section(where, schema.get(spec.name, {}), value, schema, judgement, repositories)
        return
    if spec.kind == ValueKind.JSON:
        if not isinstance(value, dict | list):
            raise refuse(what, "expected a mapping or a list")
        _judge_json(where, value, judgement, repositories)
        return
    if spec.kind in (ValueKind.FLAG, ValueKind.BOOL):
        if not isinstance(value, bool):
            raise refuse(what, "expected true or false")
        return
    if spec.nargs == "+" and not isinstance(value, list):
        raise refuse(what, "expected a list")
    for item in value if spec.nargs == "+" else [value]:
        numbers = _CONFIG_NUMBERS.get(spec.kind)
        if numbers is not None:
            if isinstance(item, bool) or not isinstance(item, numbers):
                raise refuse(what, "expected an integer" if spec.kind == ValueKind.INT else "expected a number")
            continue
        if not isinstance(item, str):
            raise refuse(what, "expected a plain value" + (" or a list of them" if spec.nargs == "+" else ""))
        _judge_value(where, spec.kind, item, spec.choices, judgement, repositories, what)


def _judge_value(
    name: str,
    kind: ValueKind,
    value: str,
    choices: tuple[str, ...] | None,
    judgement: Judgement,
    repositories: list[tuple[str, str]],
    what: str,
    reason: str = "",
) -> None:
    if kind == ValueKind.INT and not INT.match(value) and not HUMAN_INT.match(value):
        raise refuse(what, "expected an integer")
    elif (
        kind == ValueKind.INT_OR_AUTO
        and value not in (choices or ("auto",))
        and not INT.match(value)
        and not HUMAN_INT.match(value)
    ):
        raise refuse(what, f"expected an integer or {' or '.join(repr(word) for word in choices or ('auto',))}")
    elif kind in (ValueKind.FLOAT, ValueKind.NUMBER) and not FLOAT.match(value):
        raise refuse(what, "expected a number")
    elif kind == ValueKind.TEXT and QUALIFIED_NAME.match(value):
        raise refuse(what, f"{value!r} is a qualified Python name: the engine would import it as code")
    elif kind == ValueKind.CHOICE and choices is not None and value not in choices:
        raise refuse(what, f"not one of {', '.join(choices)}")
    elif kind in (ValueKind.WORD, ValueKind.JSON_OR_WORD):
        _check_word(what, value)
    elif kind == ValueKind.CODE and not WORD.match(value):  # allowed by the host: a name of code, by design
        raise refuse(what, "expected a plain name (letters, digits and ._-+:/@,=)")
    elif kind == ValueKind.REPO:
        if not _repo_or_name(value):
            _check_path(what, value, judgement)
        repositories.append((name, value))
    elif kind == ValueKind.REPO_FILE:
        parts = re.split(r"[\\/]", value)
        if not WORD.match(value) or value.startswith(("/", "~")) or ".." in parts or ":" in value:
            raise refuse(what, "a file inside the repository: a relative path without '..'")
    elif kind == ValueKind.PATH:
        if choices is None or value not in choices:
            _check_path(what, value, judgement)
    elif kind == ValueKind.OUTPUT:
        if choices is None or value not in choices:
            raise refuse(what, f"{WRITES}{': ' + reason if reason else ''}")
    elif kind == ValueKind.TEMPLATE:
        if "{{" not in value and "{%" not in value:
            _check_path(what, value, judgement)
    elif kind == ValueKind.LOOPBACK:
        _check_address(what, value)
    elif kind == ValueKind.PORT and not (INT.match(value) and 0 <= int(value) <= 65535):
        raise refuse(what, "expected a port number (0-65535)")
    elif kind == ValueKind.LORA and value.lstrip().startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError as exc:
            raise refuse(what, "not valid JSON") from exc
        if not isinstance(parsed, dict):
            raise refuse(what, "expected a JSON object")
        _judge_json(name, parsed, judgement, repositories)
        path = parsed.get("path")
        if isinstance(path, str):
            _check_repo_or_path(name, path, judgement)
    elif kind == ValueKind.LORA:
        module, eq, path = value.partition("=")
        if not eq:
            raise refuse(what, "expected name=path")
        _check_word(what, module)
        _check_repo_or_path(name, path, judgement)
        repositories.append((name, path))


def _check_word(what: str, value: str) -> None:
    if not WORD.match(value):
        raise refuse(what, "expected a plain name (letters, digits and ._-+:/@,=)")
    if QUALIFIED_NAME.match(value):
        raise refuse(what, f"{value!r} is a qualified Python name: the engine would import it as code")


def check_model_id(model_id: str, judgement: Judgement) -> None:
    """A recipe's `model_id` where the command names no model and an adapter hands the engine the model_id instead
    (vLLM's positional, SGLang's --model-path, MLX's --model): judged like a model on the command, a repository id
    or a bare name, or a path under the host's roots."""
    _check_repo_or_path("model_id", model_id, judgement)


def is_repository_or_name(value: str) -> bool:
    """A repository id or a bare name, no path (ArgumentPolicyError for a value beginning with '-'): what a recipe's
    `model_id` may be where an engine is handed it without a command's judged model."""
    return _repo_or_name(value)


def _repo_or_name(value: str) -> bool:
    """A repository id (`org/name`), or a bare name (an Ollama tag, a repository without an owner, a file name the
    host maps): no path at all."""
    if value.startswith("-"):
        raise refuse(value, "a repository or file name never begins with '-': the engine would read it as an option")
    if REPO_ID.match(value) and ".." not in value.split("/"):
        return True
    return "/" not in value and bool(WORD.match(value)) and not value.startswith((".", "~"))


def _check_repo_or_path(what: str, value: str, judgement: Judgement) -> None:
    if not _repo_or_name(value):
        _check_path(f"{what} {value}", value, judgement)


def _check_path(what: str, value: str, judgement: Judgement) -> None:
    if "\x00" in value:
        raise refuse(what, "a NUL byte in a path")
    expanded = os.path.expanduser(value)
    if not os.path.isabs(expanded):
        raise refuse(what, "a relative path: paths must be absolute, under this host's model and cache roots")
    if ".." in expanded.split("/"):
        raise refuse(what, "a path with '..'")
    real = os.path.realpath(expanded) if judgement.resolve_links else os.path.normpath(expanded)
    for root in judgement.path_roots:
        root_path = os.path.normpath(os.path.expanduser(root))
        if judgement.resolve_links:
            root_path = os.path.realpath(root_path)
        if real == root_path or real.startswith(root_path.rstrip("/") + "/"):
            return
    raise refuse(what, f"outside this host's model and cache roots ({', '.join(judgement.path_roots)})")


def _check_address(what: str, value: str) -> None:
    host = value
    if "://" in value:
        host = urlsplit(value).hostname or ""
    elif value.count(":") == 1:
        host = value.partition(":")[0]
    if host.strip("[]") not in {h.strip("[]") for h in LOOPBACK_HOSTS}:
        raise refuse(what, "not loopback: nothing may listen or connect beyond the worker's own host")


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """(key path, last key, leaf) of every leaf; keys are also yielded as leaves of an empty key."""
    if isinstance(value, dict):
        for key, item in value.items():
            sub = f"{path}.{key}" if path else str(key)
            yield sub, str(key), None
            yield from _walk(item, sub)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _walk(item, f"{path}[{index}]")
    else:
        last = path.rpartition(".")[2].partition("[")[0]
        yield path, last, value


def _judge_json(name: str, value: Any, judgement: Judgement, repositories: list[tuple[str, str]]) -> bool:
    trusted = False
    for path, key, leaf in _walk(value):
        where = f"{name} {path}"
        if leaf is None and CODE_KEY.search(key):
            raise refuse(where, f"the key {key!r} names code to load; no recipe may set it")
        if leaf is None:
            continue
        if key == TRUST_KEY:
            trusted |= leaf is True or str(leaf).lower() in ("true", "1")
            continue
        if WRITE_KEY.search(key) and leaf not in (None, "", False):
            raise refuse(f"{where}={leaf}", WRITES)
        if key == "kv_connector" and isinstance(leaf, str) and leaf in LISTENING_CONNECTORS:
            raise refuse(f"{where}={leaf}", f"{LISTENING_CONNECTORS[leaf]}: nothing may listen beyond loopback")
        if REMOTE_CACHE_KEY.search(key) and leaf not in (None, "", False, 0):
            raise refuse(
                f"{where}={leaf}", "shares compiled code through a remote cache across jobs; no recipe may turn it on"
            )
        if not isinstance(leaf, str):
            continue
        if trust.REVISION_KEY.search(key):
            trust.refuse_pull_request(where, leaf)
        if leaf.startswith("--"):
            raise refuse(f"{where}={leaf}", "a JSON string that carries an option")
        if QUALIFIED_NAME.match(leaf):
            raise refuse(f"{where}={leaf}", "a qualified Python name: the engine would import it as code")
        if ADDRESS_KEY.search(key) or "://" in leaf:
            _check_address(f"{where}={leaf}", leaf)
        elif REPO_KEY.match(key):
            _check_repo_or_path(where, leaf, judgement)
            repositories.append((where, leaf))
        elif PATH_KEY.search(key) or leaf.startswith(("/", "~", "../")):
            _check_path(f"{where}={leaf}", leaf, judgement)
    return trusted


def _check_devices(command: CanonicalCommand, judgement: Judgement) -> None:
    if judgement.device_count is None or not command.spec.device_options:
        return
    product = 1
    spelled: list[str] = []
    for name in command.spec.device_options:
        value = command.value(name)
        if value is None:
            continue
        if not INT.match(value) or int(value) < 1:
            raise refuse(f"{name} {value}", "expected a positive integer")
        switch = command.spec.devices_shared_when.get(name)
        if switch is not None and command.enabled(switch):
            spelled.append(f"{name} {value} (within the others: {switch})")
            continue
        product *= int(value)
        spelled.append(f"{name} {value}")
    if product != judgement.device_count:
        said = " x ".join(spelled) if spelled else "no parallel size (1)"
        raise refuse(
            said,
            f"the engine would use {product} device(s); the job has {judgement.device_count}. Tensor x pipeline x "
            "data parallel must equal the job's device count",
        )
