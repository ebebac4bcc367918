"""Checks and field readers that both recipe formats share: the launch argv, parallel sizes, ids and counts."""

from __future__ import annotations

import difflib
import hashlib
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from farm import hardware
from farm.engines.registry import DEFAULT_ENGINE, ENGINES
from farm.errors import RecipeError
from farm.recipes.commands import canonical_engine
from farm.recipes.model import (
    ENGINE_LAUNCHERS,
    Engine,
    Recipe,
)

PARALLEL_FLAGS: Mapping[str, tuple[str, ...]] = ENGINES[DEFAULT_ENGINE].parallel_flags
"""The default engine's (vLLM's) parallelism flags: devices used = tensor × pipeline × data parallel
(decode-context parallel reuses the tensor-parallel devices, so it does not count)."""

DEVICE_COUNTING_ENGINES: dict[str, Mapping[str, tuple[str, ...]]] = {
    name: kind.parallel_flags for name, kind in ENGINES.items() if kind.parallel_flags
}
"""Engines whose argv says how many devices they use, with their spellings of the sizes (the table's
`parallel_flags`). The others (llama.cpp, MLX, ...) use every device they are given, so their recipe's
hardware_count stands on its own."""

CONTEXT_FLAGS: dict[str, tuple[str, ...]] = {
    name: kind.context_flags for name, kind in ENGINES.items() if kind.context_flags
}
"""The option that sets the context length, in every spelling each engine accepts."""


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- checks shared by both formats ----------------------------------------------------------------


def observed_tokens(value: object, source: str, field: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecipeError(f"expected a command line (a string), got {value!r}", source=source, field=field)
    try:
        tokens = shlex.split(value)
    except ValueError as exc:
        raise RecipeError(f"the command line does not parse: {exc}", source=source, field=field) from exc
    return tokens or None


def cross_check(argv: list[str], argv_field: str, observed: list[str], observed_field: str, source: str) -> None:
    if argv == observed:
        return
    for index, (listed, seen) in enumerate(zip(argv, observed, strict=False)):
        if listed != seen:
            detail = f"token {index} is {listed!r} here but {seen!r} there"
            break
    else:
        detail = f"{len(argv)} tokens here, {len(observed)} there"
    raise RecipeError(f"disagrees with {observed_field}: {detail}", source=source, field=argv_field)


def check_launch(argv: Sequence[str], engine: str, source: str, field: str) -> None:
    """A canonical argv: the engine's launcher first, no empty token."""
    if not argv:
        raise RecipeError("empty: the launch command has no tokens", source=source, field=field)
    if any(not token for token in argv):
        raise RecipeError(f"token {list(argv).index('')} is empty", source=source, field=field)
    launcher = ENGINE_LAUNCHERS[engine]
    if tuple(argv[: len(launcher)]) != launcher:
        raise RecipeError(
            f"expected {' '.join(launcher)!r} first, got {' '.join(argv[: len(launcher)])!r}",
            source=source,
            field=field,
        )


def model_from_argv(argv: Sequence[str], source: str, field: str) -> str:
    if len(argv) > 2 and not argv[2].startswith("-"):
        return argv[2]
    model = flag_value(argv, ("--model",))
    if model:
        return model
    raise RecipeError("names no model (no positional model and no --model)", source=source, field=field)


def parallel_sizes(
    argv: Sequence[str], *, source: str = "<argv>", field: str = "argv", engine: str = DEFAULT_ENGINE
) -> dict[str, int]:
    """The tensor, pipeline and data parallel sizes an argv asks for (1 where a flag is absent)."""
    sizes = {}
    for kind, names in DEVICE_COUNTING_ENGINES.get(engine, PARALLEL_FLAGS).items():
        value = flag_value(argv, names)
        if value is None:
            sizes[kind] = 1
        elif value.isdigit() and len(value) <= 6 and int(value) >= 1:
            sizes[kind] = int(value)
        else:
            raise RecipeError(f"{names[0]} expects a positive integer, got {value!r}", source=source, field=field)
    attention_data_parallel = ENGINES[engine].attention_data_parallel if engine in ENGINES else None
    if attention_data_parallel is not None and attention_data_parallel in argv:
        sizes["data"] = 1  # data-parallel attention runs its ranks inside the tensor-parallel devices
    return sizes


_SIZE_SUFFIXES = {"k": 1_000, "m": 1_000_000, "g": 1_000_000_000, "K": 1024, "M": 1024**2, "G": 1024**3}


def context_tokens(value: str) -> int | None:
    """A context length as engines accept it: `262144`, or vLLM's `128k` (×1000) and `128K` (×1024)."""
    text = value.strip().replace("_", "")
    if text[-1:] in _SIZE_SUFFIXES and text[:-1].isdigit() and len(text) <= 12:
        return int(text[:-1]) * _SIZE_SUFFIXES[text[-1]]
    if text.isdigit() and len(text) <= 12:
        return int(text)
    return None


def max_model_len(argv: Sequence[str], engine: str = DEFAULT_ENGINE) -> int | None:
    """The context length the argv sets (`--max-model-len 262144`, `--max_model_len=128k`, llama.cpp's `-c`,
    SGLang's `--context-length`), when it is a number; None when the argv leaves it to the model."""
    value = flag_value(argv, CONTEXT_FLAGS.get(engine, CONTEXT_FLAGS[DEFAULT_ENGINE]))
    if value is None:
        return None
    tokens = context_tokens(value)
    return tokens if tokens else None


def describe_parallel(sizes: Mapping[str, int]) -> str:
    return " × ".join(f"{PARALLEL_FLAGS[kind][0]} {size}" for kind, size in sizes.items())


def flag_value(argv: Sequence[str], names: Sequence[str]) -> str | None:
    """The value of the last occurrence of a flag (`--flag value` or `--flag=value`), as argparse reads it."""
    found = None
    for index, token in enumerate(argv):
        for name in names:
            if token == name and index + 1 < len(argv):
                found = argv[index + 1]
            elif token.startswith(name + "="):
                found = token[len(name) + 1 :]
    return found


def pop_flag(arguments: Sequence[str], name: str) -> tuple[str | None, list[str]]:
    """A flag's value and the arguments without it."""
    value = None
    rest: list[str] = []
    skip = False
    for index, token in enumerate(arguments):
        if skip:
            skip = False
        elif token == name and index + 1 < len(arguments):
            value, skip = arguments[index + 1], True
        elif token.startswith(name + "="):
            value = token[len(name) + 1 :]
        else:
            rest.append(token)
    return value, rest


# --- small field readers --------------------------------------------------------------------------


def dig(data: Mapping[str, Any], dotted: str) -> object:
    value: object = data
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def mapping(value: object, source: str, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RecipeError(f"expected an object, got {value!r}", source=source, field=field)
    return value


def string_list(value: object, source: str, field: str, *, allow_empty: bool = False) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RecipeError(f"expected a list of strings, got {value!r}", source=source, field=field)
    if not value and not allow_empty:
        raise RecipeError("empty: the launch command has no tokens", source=source, field=field)
    return list(value)


def read_recipe_id(value: object, source: str, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RecipeError(f"expected a non-empty string, got {value!r}", source=source, field=field)
    if any(char.isspace() for char in value):
        raise RecipeError(f"an id has no spaces, got {value!r}", source=source, field=field)
    return value


HARDWARE_ID = re.compile(r"^[a-z0-9][a-z0-9.-]{0,79}$")
"""A well-formed hardware id (the registry's spelling: `rtx-3060-12gb`, `apple-m5-max-128gb`)."""


def read_hardware_id(value: object, source: str, field: str) -> str:
    """The recipe's hardware id, kept as the recipe spells it. An id the catalogue lacks is accepted when it is
    well formed: the recipe is still valid, and a job for it is refused at submit (no worker can declare a
    hardware id outside the catalogue; farm.engines.admission.check_runnable says so), not at parse."""
    if value is None or value == "":
        raise RecipeError("missing: every recipe names the hardware it runs on", source=source, field=field)
    if not isinstance(value, str):
        raise RecipeError(f"expected a string, got {value!r}", source=source, field=field)
    if not hardware.is_known(value) and not HARDWARE_ID.match(value):
        close = difflib.get_close_matches(value, list(hardware.catalogue()), n=3, cutoff=0.75)
        hint = f"; close: {', '.join(close)}" if close else ""
        raise RecipeError(
            f"malformed hardware id {value!r}: a registry hardware id is lowercase letters, digits, '.' and '-' "
            f"(`farm catalogue` lists the {len(hardware.catalogue())} the farm knows{hint})",
            source=source,
            field=field,
        )
    return value


def read_hardware_count(value: object, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RecipeError(f"expected a positive integer, got {value!r}", source=source, field="hardware_count")
    return value


def read_engine(value: object, source: str) -> Engine:
    """The engine, its name made canonical (`vLLM` is vllm, `llama-cpp` is llama.cpp)."""
    if value is None:
        raise RecipeError("missing: every recipe names its engine", source=source, field="engine")
    fields = mapping(value, source, "engine")
    name = canonical_engine(fields.get("name"), source, "engine.name")
    version = fields.get("version")
    if version is not None and not isinstance(version, str):
        raise RecipeError(f"expected a string, got {version!r}", source=source, field="engine.version")
    return Engine(name=name, version=version)


_SECRET_NAME = re.compile(r"(TOKEN(?!S|IZ)|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)", re.I)
"""A variable that holds a credential (the same test as farm.engines.environment.is_secret_name)."""
REDACTED = "<redacted>"


def without_credentials(fields: dict[str, Any]) -> dict[str, Any]:
    """The recipe's fields with no credential in them: a variable like HUGGING_FACE_HUB_TOKEN is dropped from the
    environment and the container's environment (its name is kept in provenance.dropped_environment), and its
    value is redacted in the source command provenance keeps. A recipe is stored with the job; a credential
    never is, and the engine gets the worker's own."""
    out = dict(fields)
    dropped: list[str] = []
    environment = out.get("environment")
    if isinstance(environment, Mapping):
        dropped += [name for name in environment if _SECRET_NAME.search(str(name))]
        out["environment"] = {k: v for k, v in environment.items() if not _SECRET_NAME.search(str(k))}
    container = out.get("container")
    if container is not None and getattr(container, "environment", None):
        secret = [name for name in container.environment if _SECRET_NAME.search(name)]
        if secret:
            dropped += secret
            kept = {k: v for k, v in container.environment.items() if k not in secret}
            out["container"] = container.model_copy(update={"environment": kept})
    provenance = out.get("provenance")
    if isinstance(provenance, dict):
        provenance = dict(provenance)
        tokens = list(provenance.get("source_command") or ())
        provenance["source_command"] = tuple(_redact_command(tokens))
        if dropped:
            provenance["dropped_environment"] = tuple(sorted(set(dropped)))
        out["provenance"] = provenance
    return out


CREDENTIAL_VALUE = r"(hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|ghp_[A-Za-z0-9]{20,})"
"""A credential-shaped value: Hugging Face, OpenAI-style and GitHub tokens (farm.engines.policy refuses a token
that holds one as a word)."""
_SECRET_VALUE = re.compile(CREDENTIAL_VALUE)
"""Redacted wherever it appears."""


def _redact(token: str) -> str:
    """`NAME=secret`, `--env=NAME=secret` and `-e=NAME=secret` with a credential's name, and any credential-shaped
    value, redacted."""
    option, has_option, rest = token.partition("=")
    if has_option and option in ("-e", "--env"):
        return f"{option}={_redact(rest)}"
    name, equals, _value = token.partition("=")
    if equals and not name.startswith("-") and name.isidentifier() and _SECRET_NAME.search(name):
        return f"{name}={REDACTED}"
    return _SECRET_VALUE.sub(REDACTED, token)


def _redact_command(tokens: list[str]) -> list[str]:
    """A command's tokens with every credential redacted, including the value of a flattened `env:` list entry
    whose name is a credential's (`name:`, `HF_TOKEN`, `value:`, `hf_...`)."""
    out = [_redact(token) for token in tokens]
    for index in range(len(out) - 3):
        if out[index] == "name:" and _SECRET_NAME.search(out[index + 1]) and out[index + 2] == "value:":
            out[index + 3] = REDACTED
    return out


def build(source: str, **fields: Any) -> Recipe:
    try:
        return Recipe.model_validate(without_credentials(fields))
    except ValidationError as exc:
        raise from_validation(exc, source, None) from exc


def from_validation(exc: ValidationError, source: str, prefix: str | None) -> RecipeError:
    first = exc.errors()[0]
    loc = ".".join(str(part) for part in first["loc"])
    field = ".".join(part for part in (prefix, loc) if part) or None
    return RecipeError(first["msg"], source=source, field=field)
