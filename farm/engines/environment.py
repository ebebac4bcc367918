"""The environment a recipe may give its engine: an allowlist by exact name, in one place.

A recipe's environment (`tokenized.environment`, leading `VAR=value` words, a container's `environment`) tunes
the engine; it never reaches the worker's own tools (the docker client), never carries a secret (tokens come from
the worker's environment), and never sets what the argument policy judges (an engine option by environment,
a listening address, a plugin, a path). A name passes only where farm.engines.environment_names (or an engine's
table generated from its package) knows it as tuning, and its value only where it is of that name's kind (a
switch, a number, a plain word): names that load libraries, redirect downloads, switch off checksums or name
files are refused with their reason, and so is every name the farm does not know.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from farm.engines.environment_names import (
    LIBRARIES,
    LIBRARY_TUNING,
    NUMBER,
    REFUSED,
    REFUSED_PREFIXES,
    RUNTIME,
    SWITCH,
    TOKEN,
    EngineEnvironment,
)
from farm.errors import ArgumentPolicyError

_CACHE_PATH = (
    "a cache directory on the recipe author's machine: the worker's own cache (under its roots) applies, and "
    "what the command loads is the same"
)
DROPPED_NAMES = {
    **{
        name: _CACHE_PATH
        for name in (
            "LLAMA_CACHE",
            "HF_HOME",
            "HF_HUB_CACHE",
            "HUGGINGFACE_HUB_CACHE",
            "TRANSFORMERS_CACHE",
            "VLLM_CACHE_ROOT",
            "SGLANG_CACHE_DIR",
            "TRITON_CACHE_DIR",
            "TORCHINDUCTOR_CACHE_DIR",
            "FLASHINFER_WORKSPACE_BASE",
            "XDG_CACHE_HOME",
        )
    },
    "HF_HUB_OFFLINE": "the worker's profile decides whether downloads happen",
    "TRANSFORMERS_OFFLINE": "the worker's profile decides whether downloads happen",
    **{
        name: "the author's choice of devices: the worker assigns the job's devices itself (their count is the "
        "recipe's hardware_count, which the command's parallelism must match)"
        for name in (
            "CUDA_VISIBLE_DEVICES",
            "NVIDIA_VISIBLE_DEVICES",
            "HIP_VISIBLE_DEVICES",
            "ROCR_VISIBLE_DEVICES",
            "ONEAPI_DEVICE_SELECTOR",
            "ZE_AFFINITY_MASK",
            "GGML_VK_VISIBLE_DEVICES",
        )
    },
}
"""Variables a recipe may carry that are dropped, not refused: they name where the author's machine keeps files,
which says nothing about what runs. Credentials (is_secret_name) are dropped the same way."""

_NAMES_A_PATH = "names a path on the worker"
_SECRET = re.compile(r"(TOKEN(?!S|IZ)|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
_REFUSED_PARTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (_SECRET, "a secret: tokens come from the worker's own environment, never from a recipe"),
    (re.compile(r"PLUGIN|LOGGING_CONFIG|INSECURE_SERIALIZATION|RUNTIME_LORA|CUSTOM_OP|EXTENSION"), "loads code"),
    (
        re.compile(r"(^|_)(HOST|HOST_IP|IP|ADDR|ADDRESS|PORT|URL|URI|ENDPOINT|SERVER|ORIGINS|PROXY)(_|$)"),
        "sets where the engine listens or connects",
    ),
    (re.compile(r"(^|_)(DIR|PATH|ROOT|HOME|CACHE|FILE|PREFIX)(_|$)"), _NAMES_A_PATH),
    (re.compile(r"USE_MODELSCOPE|USAGE_STATS|TRACE|OTEL|OTLP"), "sends data or downloads beyond the farm's checks"),
    (
        re.compile(r"(^|_)(REPO|REPOSITORY|MIRROR|BUCKET|REGION|S3|GCS)(_|$)"),
        "changes where or how downloads come from, past the farm's checks of what the engine loads",
    ),
    (re.compile(r"DUMP"), "writes dumps of the process or its tensors to disk"),
    (re.compile(r"(^|_)(TEST|CI)(_|$)"), "a test hook of the engine, not a setting of a benchmark"),
    (re.compile(r"^HF_HUB_OFFLINE$|^TRANSFORMERS_OFFLINE$"), "the worker's profile decides whether downloads happen"),
)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VALUE = re.compile(r"^[\w.,:+=@/ -]*$")

ENV_LIMIT = 64
"""At most this many variables: more is not tuning."""


def refused_reason(name: str, engine: str) -> str | None:
    """Why a recipe may not give `engine` the variable `name`, whatever its value; None when the farm knows the
    name as plain tuning (its value is judged by check_recipe_environment)."""
    verdict = _judged_name(name, engine)
    return verdict if isinstance(verdict, str) else None


def value_refused_reason(name: str, value: str, engine: str) -> str | None:
    """Why `name=value` may not reach `engine`: the name's reason, or the value not of the name's kind."""
    verdict = _judged_name(name, engine)
    if verdict == _NAMES_A_PATH and (_KIND_VALUE[SWITCH].match(value) or value.isdigit()):
        return (
            f"its name reads as a path's, but its value {value!r} is no path: a switch or number the farm does not "
            f"know {engine} to read as plain tuning (exact names: farm/engines/environment_names.py and the engine's "
            "environment.py)"
        )
    if isinstance(verdict, str):
        return verdict
    kind, choices = verdict
    if choices:
        return None if value in choices else f"not one of {', '.join(choices)}"
    if not _KIND_VALUE[kind].match(value):
        return f"the value must be {_KIND_WORDS[kind]}"
    return None


def _judged_name(name: str, engine: str) -> str | tuple[str, tuple[str, ...]]:
    """A refusal's reason, or the kind of value the name takes (with its choices where the engine lists them)."""
    if not _NAME.match(name):
        return "not a valid variable name"
    from farm.engines.registry import canonical_engine_name

    own = canonical_engine_name(engine)
    home = engine_environment(own)
    read_as = name
    for old, new in home.rewrites:
        if name.startswith(old):
            read_as = new + name[len(old) :]
    candidates = tuple(dict.fromkeys((name, read_as)))
    for candidate in candidates:
        why = _refused(candidate, home)
        if why == _NAMES_A_PATH and isinstance(declared := _known_kind(candidate, home), tuple):
            # `VLLM_DISABLE_COMPILE_CACHE=0`: the name has a path's word, but the engine declares a switch or a
            # number, which names no path; still refused (it turns a cache of the worker's on or off), for that.
            return (
                f"{_KIND_WORDS[declared[0]].split(' (')[0]} of {own}'s, not a path: its name says it sets how a "
                "cache or file of the worker's is used, which the worker's profile decides, not a recipe"
            )
        if why is not None:
            return why
    for candidate in reversed(candidates):
        known = _known_kind(candidate, home)
        if known is not None:
            return known
    return (
        f"not on the farm's list of variables {own} or its runtime read as plain tuning (exact names: "
        "farm/engines/environment_names.py, the engine's environment.py and the tables generated from its package)"
    )


def _refused(name: str, home: EngineEnvironment) -> str | None:
    refused = {**REFUSED, **home.refused}
    if name in refused:
        return refused[name]
    for prefix, why in {**REFUSED_PREFIXES, **home.refused_prefixes}.items():
        if name.startswith(prefix):
            return why
    if name in RUNTIME or name in LIBRARY_TUNING or name in home.tuning:
        return None  # listed by hand: read and judged
    # a name from a generated table, or an unknown one, is screened by its words
    for pattern, why in _REFUSED_PARTS:
        if pattern.search(name):
            return why
    return None


def _known_kind(name: str, home: EngineEnvironment) -> tuple[str, tuple[str, ...]] | str | None:
    for table in (RUNTIME, home.tuning, LIBRARY_TUNING if home.libraries else {}):
        if name in table:
            return table[name][0], ()
    sources = [(home.own_prefixes, home.declared)] if home.declared is not None else []
    sources += [(LIBRARIES[library][0], Path(__file__).parent / LIBRARIES[library][1]) for library in home.libraries]
    for prefixes, path in sources:
        declared = _generated(str(path)).get(name) if name.startswith(prefixes) else None
        if declared is None:
            continue
        kind = declared["kind"]
        if kind == "choice":
            return TOKEN, tuple(declared["choices"])
        if kind in _DECLARED_KINDS:
            return _DECLARED_KINDS[kind], ()
        return (
            f"{path.parent.name}/{path.name} declares it a {kind} (a path, a URL or a module name can be one); "
            "not on the farm's list of plain words"
        )
    return None


def engine_environment(engine: str) -> EngineEnvironment:
    """What the engine's home says of its variables (its table line's `environment`, from
    farm/engines/<engine>/environment.py); an engine without one, or unknown, gets the runtime tables only."""
    from farm.engines.registry import ENGINES, canonical_engine_name

    kind = ENGINES.get(canonical_engine_name(engine))
    if kind is None or kind.environment is None:
        return EngineEnvironment()
    return kind.environment()


_DECLARED_KINDS = {"bool": SWITCH, "int": NUMBER, "float": NUMBER, "unknown": TOKEN}
_KIND_VALUE = {
    SWITCH: re.compile(r"^(?i:0|1|true|false|yes|no|on|off)$"),
    NUMBER: re.compile(r"^-?[0-9]+(\.[0-9]+)?$"),
    TOKEN: re.compile(r"^[A-Za-z0-9_.,:+^-]{0,128}$"),
}
_KIND_WORDS = {
    SWITCH: "a switch (0/1, true/false, yes/no, on/off)",
    NUMBER: "a number",
    TOKEN: "a plain word or list (letters, digits, _.,:+^-; no path, no URL), at most 128 characters",
}


@functools.cache
def _generated(path: str) -> dict[str, dict[str, Any]]:
    """A generated table (deploy/gen_engine_environment.py): name -> {"kind", "choices"}."""
    document = json.loads(Path(path).read_text())
    variables: dict[str, dict[str, Any]] = document["variables"]
    return variables


def dropped_names(environment: Mapping[str, str]) -> dict[str, str]:
    """The recipe's variables that the engine does not get, each with why: credentials and DROPPED_NAMES."""
    dropped: dict[str, str] = {}
    for name in environment:
        if not _NAME.match(name):
            continue
        if is_secret_name(name):
            dropped[name] = "a credential: the engine gets the worker's own, where its profile passes one"
        elif name in DROPPED_NAMES:
            dropped[name] = DROPPED_NAMES[name]
    return dropped


def is_secret_name(name: str) -> bool:
    """A variable that holds a credential (HF_TOKEN, HUGGING_FACE_HUB_TOKEN, *_API_KEY, *_PASSWORD, ...)."""
    return bool(_SECRET.search(name))


def check_recipe_environment(environment: Mapping[str, str], engine: str) -> dict[str, str]:
    """The recipe's environment to give the engine: every name allowed and every value plain, ArgumentPolicyError
    otherwise. Credentials are dropped, never passed: a recipe may name HF_TOKEN, but the engine gets the worker's
    own token, and only where the host's profile passes it."""
    if len(environment) > ENV_LIMIT:
        raise ArgumentPolicyError(f"{len(environment)} variables; at most {ENV_LIMIT}", field="environment")
    kept: dict[str, str] = {}
    for name, value in environment.items():
        if _NAME.match(name) and (is_secret_name(name) or name in DROPPED_NAMES):
            continue
        why = refused_reason(name, engine)
        if why is not None:
            raise ArgumentPolicyError(f"{name!r}: {why} ({engine} recipe)", field="environment")
        plain = _unquoted(value)
        if not isinstance(plain, str) or len(plain) > 1024 or not _VALUE.match(plain):
            raise ArgumentPolicyError(
                f"{name}: the value must be plain text (letters, digits, ._,:+=@/ -), at most 1024 characters",
                field="environment",
            )
        why = value_refused_reason(name, plain, engine)
        if why is not None:
            raise ArgumentPolicyError(f"{name}={plain!r}: {why} ({engine} recipe)", field="environment")
        kept[name] = plain
    return kept


def _unquoted(value: object) -> object:
    """A value without the one pair of matching quotes a shell would have removed (`-e MODE="mtp0"` as the
    registry copied it keeps them: `"mtp0"`); a value with other quotes inside stays as it is (and is refused)."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        if '"' not in inner and "'" not in inner:
            return inner
    return value


def recipe_environment(recipe: object, engine: str) -> dict[str, str]:
    """The judged environment of a recipe's process launch (the recipe's `environment`; empty when it has none)."""
    return check_recipe_environment(dict(getattr(recipe, "environment", None) or {}), engine)
