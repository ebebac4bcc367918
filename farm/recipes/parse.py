"""Reading recipe documents: local-ai-registry/v1 JSON and LocalMaxxing run pages, into one validated Recipe.

Every refusal is a farm.errors.RecipeError that names the file and the dotted field, so a bad recipe is
caught before anything is queued. The launch argv is the recipe's core: it is taken from the tokenized
arguments when a document has them, cross-checked against the observed command line, and checked against the
engine and the hardware count the recipe claims.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from farm import hardware
from farm.errors import RecipeError
from farm.recipes.model import (
    ENGINE_SUBCOMMANDS,
    KNOWN_ENGINES,
    ContainerLaunch,
    Engine,
    Recipe,
    ServingLimits,
    SourceRef,
)

__all__ = [
    "KNOWN_ENGINES",
    "PAGE_FORMAT",
    "REGISTRY_SCHEMA",
    "load_recipe",
    "parallel_sizes",
    "parse_localmaxxing_page",
    "parse_registry",
    "split_token_list",
]

REGISTRY_SCHEMA = "local-ai-registry/v1"
"""The only registry schema version the farm reads."""

PAGE_FORMAT = "localmaxxing-page"
"""RecipeProvenance.source_format of a recipe read from a LocalMaxxing run page."""

_PAGE_PREFIX = "localmaxxing · "
_PAGE_SEPARATOR = " · "
_PAGE_GROUPS = frozenset({"facts", "metadata", "provenance"})
"""Page headers that only open a group; the fields below them follow."""
_PAGE_FIELDS = frozenset({"captured at"})
"""Page headers outside the localmaxxing namespace that carry a value (under the group that precedes them)."""

_REGISTRY_LM = "metadata.localmaxxing"

# vLLM's parallelism flags: devices used = tensor × pipeline × data parallel (decode-context parallel reuses
# the tensor-parallel devices, so it does not count).
_PARALLEL_FLAGS: dict[str, tuple[str, ...]] = {
    "tensor": ("--tensor-parallel-size", "-tp"),
    "pipeline": ("--pipeline-parallel-size", "-pp"),
    "data": ("--data-parallel-size", "-dp"),
}


def load_recipe(path: Path) -> Recipe:
    """Read a recipe file and parse it by its content: JSON is a registry recipe, text with
    `localmaxxing · ...` section headers is a LocalMaxxing run page."""
    source = str(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RecipeError(f"cannot read the file: {exc.strerror or exc}", source=source) from exc
    text = _decode(data, source)
    digest = hashlib.sha256(data).hexdigest()
    if text.lstrip().startswith(("{", "[")):
        return parse_registry(text, source, content_sha256=digest)
    if any(line.strip().startswith(_PAGE_PREFIX) for line in text.splitlines()):
        return parse_localmaxxing_page(text, source, content_sha256=digest)
    raise RecipeError(
        f"not a recipe: neither {REGISTRY_SCHEMA} JSON nor a LocalMaxxing run page "
        f"(no '{_PAGE_PREFIX.strip()}' section headers)",
        source=source,
    )


def _decode(data: bytes, source: str) -> str:
    if not data.strip():
        raise RecipeError("empty file: a recipe needs content", source=source)
    nul = data.find(b"\0")
    if nul >= 0:
        raise RecipeError(f"binary file (NUL byte at offset {nul}): a recipe is UTF-8 text", source=source)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise RecipeError(
            f"binary file (not UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start}): "
            "a recipe is UTF-8 text",
            source=source,
        ) from exc


def _sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- the registry's JSON --------------------------------------------------------------------------


def parse_registry(text: str, source: str, *, content_sha256: str | None = None) -> Recipe:
    """Parse a local-ai-registry/v1 recipe (the API's `{"data": ...}` envelope or the bare record).

    A minimal recipe carries only schema_version, id, hardware_id, hardware_count, engine {name, version?}
    and a launch command: a top-level `argv` list, metadata.localmaxxing.tokenized.arguments,
    metadata.localmaxxing.observed_command, or draft_launch.arguments (tried in that order). An optional
    top-level `model_id` names the model when the argv's model is a local path.
    """
    doc = _load_json(text, source)
    envelope = doc.get("data")
    data = envelope if "schema_version" not in doc and isinstance(envelope, dict) else doc

    schema = data.get("schema_version")
    if schema is None:
        raise RecipeError(f"missing: expected {REGISTRY_SCHEMA!r}", source=source, field="schema_version")
    if schema != REGISTRY_SCHEMA:
        raise RecipeError(
            f"expected {REGISTRY_SCHEMA!r}, got {schema!r}", source=source, field="schema_version"
        )

    recipe_id = _recipe_id(data.get("id"), source, "id")
    hardware_id = _hardware_id(data.get("hardware_id"), source, "hardware_id")
    hardware_count = _hardware_count(data.get("hardware_count"), source)
    engine = _engine(data.get("engine"), source)
    localmaxxing = _mapping(_dig(data, _REGISTRY_LM), source, _REGISTRY_LM)
    tokenized = _mapping(localmaxxing.get("tokenized"), source, f"{_REGISTRY_LM}.tokenized")
    draft_launch = _mapping(data.get("draft_launch"), source, "draft_launch")

    observed_field = f"{_REGISTRY_LM}.observed_command"
    observed = _observed_tokens(localmaxxing.get("observed_command"), source, observed_field)
    argv_field, argv = _registry_argv(data, tokenized, draft_launch, observed, source)
    if observed is not None and argv_field in ("argv", f"{_REGISTRY_LM}.tokenized.arguments"):
        _cross_check(argv, argv_field, observed, observed_field, source)
    _check_launch(argv, engine.name, source, argv_field)

    model_id = data.get("model_id")
    if model_id is None:
        model_id = _model_from_argv(argv, source, argv_field)
    elif not isinstance(model_id, str) or not model_id.strip():
        raise RecipeError(f"expected a non-empty string, got {model_id!r}", source=source, field="model_id")

    sizes = parallel_sizes(argv, source=source, field=argv_field)
    devices = sizes["tensor"] * sizes["pipeline"] * sizes["data"]
    if devices != hardware_count:
        raise RecipeError(
            f"is {hardware_count}, but the launch command runs on {devices} device(s) "
            f"({_describe_parallel(sizes)} in {argv_field})",
            source=source,
            field="hardware_count",
        )
    serving = _serving(data.get("serving"), source)
    if serving.tensor_parallel is not None and serving.tensor_parallel != sizes["tensor"]:
        raise RecipeError(
            f"is {serving.tensor_parallel}, but {argv_field} has --tensor-parallel-size {sizes['tensor']}",
            source=source,
            field="serving.tensor_parallel",
        )

    context = _max_model_len(argv)
    if serving.max_context_tokens is None and context is not None:
        serving = serving.model_copy(update={"max_context_tokens": context})

    container = None
    if draft_launch.get("kind") == "docker":
        container = _container(draft_launch, source)

    provenance = _mapping(data.get("provenance"), source, "provenance")
    launch = _mapping(data.get("launch"), source, "launch")
    run_id = launch.get("run_id") or localmaxxing.get("run_id")
    notes = data.get("notes") if data.get("notes") is not None else localmaxxing.get("notes")
    return _build(
        source,
        id=recipe_id,
        model_id=model_id,
        hardware_id=hardware_id,
        hardware_count=hardware_count,
        engine=engine,
        argv=tuple(argv),
        container=container,
        serving=serving,
        notes=notes,
        provenance={
            "source_format": REGISTRY_SCHEMA,
            "captured_at": provenance.get("captured_at"),
            "sources": _sources(provenance.get("sources"), source),
            "run_id": run_id,
            "run_url": launch.get("url"),
            "argv_fidelity": tokenized.get("fidelity"),
            "content_sha256": content_sha256 or _sha256_text(text),
        },
    )


def _load_json(text: str, source: str) -> dict[str, Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        # json reports an unterminated string only when the input runs out inside it.
        body = text.rstrip()
        if exc.pos >= len(body) or exc.msg.startswith("Unterminated string"):
            end_line = body.count("\n") + 1
            end_column = len(body) - (body.rfind("\n") + 1)
            raise RecipeError(
                f"truncated JSON: the document ends at line {end_line}, column {end_column} before it is "
                f"complete ({exc.msg} {where})",
                source=source,
            ) from exc
        raise RecipeError(f"not valid JSON: {exc.msg} ({where})", source=source) from exc
    if not isinstance(doc, dict):
        raise RecipeError(f"expected a JSON object, got a JSON {type(doc).__name__}", source=source)
    return doc


def _registry_argv(
    data: Mapping[str, Any],
    tokenized: Mapping[str, Any],
    draft_launch: Mapping[str, Any],
    observed: list[str] | None,
    source: str,
) -> tuple[str, list[str]]:
    """The argv and the field it came from, in order of fidelity."""
    if "argv" in data:
        return "argv", _string_list(data["argv"], source, "argv")
    if "arguments" in tokenized:
        field = f"{_REGISTRY_LM}.tokenized.arguments"
        return field, _string_list(tokenized["arguments"], source, field)
    if observed is not None:
        return f"{_REGISTRY_LM}.observed_command", observed
    if "arguments" in draft_launch:
        # A draft launch holds the server's arguments after the executable; the model travels as --model.
        field = "draft_launch.arguments"
        arguments = _string_list(draft_launch["arguments"], source, field, allow_empty=True)
        model, rest = _pop_flag(arguments, "--model")
        if model is None:
            raise RecipeError("names no model (no --model argument)", source=source, field=field)
        return field, ["vllm", "serve", model, *rest]
    raise RecipeError(
        f"no launch command: give argv, {_REGISTRY_LM}.tokenized.arguments, {_REGISTRY_LM}.observed_command "
        "or draft_launch.arguments",
        source=source,
        field="argv",
    )


def _container(draft_launch: Mapping[str, Any], source: str) -> ContainerLaunch:
    keys = (
        "image",
        "arguments",
        "entrypoint",
        "environment",
        "ipc",
        "shm_size",
        "mounts",
        "container_port",
        "host_port",
        "accelerator_backend",
    )
    fields = {key: draft_launch[key] for key in keys if draft_launch.get(key) is not None}
    if isinstance(fields.get("mounts"), list):
        fields["mounts"] = [
            {k: m[k] for k in ("source", "target", "read_only") if k in m} if isinstance(m, dict) else m
            for m in fields["mounts"]
        ]
    try:
        return ContainerLaunch.model_validate(fields)
    except ValidationError as exc:
        raise _from_validation(exc, source, "draft_launch") from exc


def _serving(value: object, source: str) -> ServingLimits:
    fields = _mapping(value, source, "serving")
    known = {key: fields[key] for key in ServingLimits.model_fields if fields.get(key) is not None}
    try:
        return ServingLimits.model_validate(known)
    except ValidationError as exc:
        raise _from_validation(exc, source, "serving") from exc


def _sources(value: object, source: str) -> list[SourceRef]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecipeError(f"expected a list, got {value!r}", source=source, field="provenance.sources")
    refs = []
    for index, item in enumerate(value):
        field = f"provenance.sources[{index}]"
        entry = _mapping(item, source, field)
        try:
            refs.append(SourceRef.model_validate({k: entry.get(k) for k in ("kind", "url", "captured_at")}))
        except ValidationError as exc:
            raise _from_validation(exc, source, field) from exc
    return refs


# --- the LocalMaxxing run page --------------------------------------------------------------------


def parse_localmaxxing_page(text: str, source: str, *, content_sha256: str | None = None) -> Recipe:
    """Parse a LocalMaxxing run page saved as text.

    The page is an id line, then headers each followed by a blank line and a value: `localmaxxing · notes`,
    `localmaxxing · tokenized · arguments` (a comma-and-space separated token list), `provenance` /
    `captured at`, ... The hardware id comes from the hardware label through the catalogue; the device count
    from the argv's parallel sizes; the engine from the argv's executable.
    """
    recipe_id, sections = _page_sections(text, source)
    label_field = "localmaxxing.hardware_label"
    label = sections.get(label_field)
    if not label:
        raise RecipeError("missing: the page names no hardware", source=source, field=label_field)
    hardware_id = hardware.id_for_label(label)
    if hardware_id is None:
        raise RecipeError(f"no hardware in the catalogue matches {label!r}", source=source, field=label_field)

    argv_field = "localmaxxing.tokenized.arguments"
    observed_field = "localmaxxing.observed_command"
    observed = _observed_tokens(sections.get(observed_field), source, observed_field)
    listed = sections.get(argv_field)
    if listed:
        if observed is not None and ", ".join(observed) == listed:
            # The list's separator also occurs inside tokens; the observed command settles where tokens end.
            argv = observed
        else:
            argv = split_token_list(listed)
            if observed is not None:
                _cross_check(argv, argv_field, observed, observed_field, source)
    elif observed is not None:
        argv_field, argv = observed_field, observed
    else:
        raise RecipeError(
            f"missing: the page has neither tokenized arguments nor an observed command ({observed_field})",
            source=source,
            field=argv_field,
        )
    if not argv:
        raise RecipeError("empty: the launch command has no tokens", source=source, field=argv_field)
    if argv[0] not in KNOWN_ENGINES:
        raise RecipeError(
            f"executable {argv[0]!r} is not a known engine (known: {', '.join(sorted(KNOWN_ENGINES))})",
            source=source,
            field=argv_field,
        )
    engine = Engine(name=argv[0])
    _check_launch(argv, engine.name, source, argv_field)
    model_id = _model_from_argv(argv, source, argv_field)
    sizes = parallel_sizes(argv, source=source, field=argv_field)
    captured_at = sections.get("provenance.captured_at")
    return _build(
        source,
        id=recipe_id,
        model_id=model_id,
        hardware_id=hardware_id,
        hardware_count=sizes["tensor"] * sizes["pipeline"] * sizes["data"],
        engine=engine,
        argv=tuple(argv),
        serving={
            "tensor_parallel": sizes["tensor"],
            "max_context_tokens": _max_model_len(argv),
        },
        notes=sections.get("localmaxxing.notes"),
        provenance={
            "source_format": PAGE_FORMAT,
            "captured_at": captured_at,
            "sources": [{"kind": PAGE_FORMAT, "captured_at": captured_at}],
            "run_id": sections.get("localmaxxing.run_id"),
            "argv_fidelity": sections.get("localmaxxing.tokenized.fidelity"),
            "content_sha256": content_sha256 or _sha256_text(text),
        },
    )


def _page_sections(text: str, source: str) -> tuple[str, dict[str, str]]:
    """The page's id line and its values keyed by dotted field (`localmaxxing.hardware_label`,
    `provenance.captured_at`)."""
    lines = [line.strip() for line in text.splitlines()]
    nonblank = [line for line in lines if line]
    if not nonblank or _page_header(nonblank[0]):
        raise RecipeError(
            "missing: the page does not start with the run's id line", source=source, field="id"
        )
    recipe_id = _recipe_id(nonblank[0], source, "id")

    sections: dict[str, str] = {}
    group: str | None = None
    key: str | None = None
    body: list[str] = []

    def close() -> None:
        if key is not None:
            value = "\n".join(body).strip()
            if value:
                if key in sections:
                    raise RecipeError("appears twice on the page", source=source, field=key)
                sections[key] = value

    for line in lines[lines.index(nonblank[0]) + 1 :]:
        header = _page_header(line)
        if header is None:
            body.append(line)
            continue
        close()
        body = []
        if header in _PAGE_GROUPS:
            group, key = header, None
        elif header.startswith("localmaxxing."):
            key = header
        else:
            key = f"{group}.{header}" if group else header
    close()
    return recipe_id, sections


def _page_header(line: str) -> str | None:
    """The dotted field a header line opens, or None for a value line."""
    if line.startswith(_PAGE_PREFIX):
        parts = line.split(_PAGE_SEPARATOR)
        return ".".join(part.strip().replace(" ", "_") for part in parts)
    if line in _PAGE_GROUPS:
        return line
    if line in _PAGE_FIELDS:
        return line.replace(" ", "_")
    return None


def split_token_list(listed: str) -> list[str]:
    """Split a page's comma-and-space separated token list, keeping JSON values (which may hold `, `) whole.

    The split is a best effort (a plain token may hold `, ` too); the observed command is the cross-check."""
    tokens: list[str] = []
    current: list[str] = []
    depth = 0
    in_string = False
    escaped = False
    index = 0
    while index < len(listed):
        char = listed[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif depth > 0 and char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth = max(depth - 1, 0)
        elif depth == 0 and listed.startswith(", ", index):
            tokens.append("".join(current))
            current = []
            index += 2
            continue
        current.append(char)
        index += 1
    tokens.append("".join(current))
    return [token.strip() for token in tokens]


# --- checks shared by both formats ----------------------------------------------------------------


def _observed_tokens(value: object, source: str, field: str) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise RecipeError(f"expected a command line (a string), got {value!r}", source=source, field=field)
    try:
        tokens = shlex.split(value)
    except ValueError as exc:
        raise RecipeError(f"the command line does not parse: {exc}", source=source, field=field) from exc
    return tokens or None


def _cross_check(
    argv: list[str], argv_field: str, observed: list[str], observed_field: str, source: str
) -> None:
    if argv == observed:
        return
    for index, (listed, seen) in enumerate(zip(argv, observed, strict=False)):
        if listed != seen:
            detail = f"token {index} is {listed!r} here but {seen!r} there"
            break
    else:
        detail = f"{len(argv)} tokens here, {len(observed)} there"
    raise RecipeError(f"disagrees with {observed_field}: {detail}", source=source, field=argv_field)


def _check_launch(argv: Sequence[str], engine: str, source: str, field: str) -> None:
    if not argv:
        raise RecipeError("empty: the launch command has no tokens", source=source, field=field)
    if any(not token for token in argv):
        raise RecipeError(f"token {list(argv).index('')} is empty", source=source, field=field)
    if argv[0] != engine:
        raise RecipeError(f"executable {argv[0]!r} is not the engine {engine!r}", source=source, field=field)
    subcommand = ENGINE_SUBCOMMANDS.get(engine)
    if subcommand is not None and (len(argv) < 2 or argv[1] != subcommand):
        got = repr(argv[1]) if len(argv) > 1 else "nothing"
        raise RecipeError(
            f"expected '{engine} {subcommand} ...', got {got} after {engine!r}", source=source, field=field
        )


def _model_from_argv(argv: Sequence[str], source: str, field: str) -> str:
    if len(argv) > 2 and not argv[2].startswith("-"):
        return argv[2]
    model = _flag_value(argv, ("--model",))
    if model:
        return model
    raise RecipeError("names no model (no positional model and no --model)", source=source, field=field)


def parallel_sizes(argv: Sequence[str], *, source: str = "<argv>", field: str = "argv") -> dict[str, int]:
    """The tensor, pipeline and data parallel sizes an argv asks for (1 where a flag is absent)."""
    sizes = {}
    for kind, names in _PARALLEL_FLAGS.items():
        value = _flag_value(argv, names)
        if value is None:
            sizes[kind] = 1
        elif value.isdigit() and int(value) >= 1:
            sizes[kind] = int(value)
        else:
            raise RecipeError(
                f"{names[0]} expects a positive integer, got {value!r}", source=source, field=field
            )
    return sizes


def _max_model_len(argv: Sequence[str]) -> int | None:
    """The context length the argv sets (`--max-model-len`), when it is a plain integer."""
    value = _flag_value(argv, ("--max-model-len",))
    return int(value) if value is not None and value.isdigit() else None


def _describe_parallel(sizes: Mapping[str, int]) -> str:
    return " × ".join(f"{_PARALLEL_FLAGS[kind][0]} {size}" for kind, size in sizes.items())


def _flag_value(argv: Sequence[str], names: Sequence[str]) -> str | None:
    """The value of the last occurrence of a flag (`--flag value` or `--flag=value`), as argparse reads it."""
    found = None
    for index, token in enumerate(argv):
        for name in names:
            if token == name and index + 1 < len(argv):
                found = argv[index + 1]
            elif token.startswith(name + "="):
                found = token[len(name) + 1 :]
    return found


def _pop_flag(arguments: Sequence[str], name: str) -> tuple[str | None, list[str]]:
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


def _dig(data: Mapping[str, Any], dotted: str) -> object:
    value: object = data
    for part in dotted.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _mapping(value: object, source: str, field: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise RecipeError(f"expected an object, got {value!r}", source=source, field=field)
    return value


def _string_list(value: object, source: str, field: str, *, allow_empty: bool = False) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise RecipeError(f"expected a list of strings, got {value!r}", source=source, field=field)
    if not value and not allow_empty:
        raise RecipeError("empty: the launch command has no tokens", source=source, field=field)
    return list(value)


def _recipe_id(value: object, source: str, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise RecipeError(f"expected a non-empty string, got {value!r}", source=source, field=field)
    if any(char.isspace() for char in value):
        raise RecipeError(f"an id has no spaces, got {value!r}", source=source, field=field)
    return value


def _hardware_id(value: object, source: str, field: str) -> str:
    if value is None or value == "":
        raise RecipeError("missing: every recipe names the hardware it runs on", source=source, field=field)
    if not isinstance(value, str):
        raise RecipeError(f"expected a string, got {value!r}", source=source, field=field)
    if not hardware.is_known(value):
        known = ", ".join(sorted(hardware.catalogue()))
        raise RecipeError(
            f"unknown hardware id {value!r} (the catalogue knows: {known})", source=source, field=field
        )
    return value


def _hardware_count(value: object, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RecipeError(
            f"expected a positive integer, got {value!r}", source=source, field="hardware_count"
        )
    return value


def _engine(value: object, source: str) -> Engine:
    if value is None:
        raise RecipeError("missing: every recipe names its engine", source=source, field="engine")
    fields = _mapping(value, source, "engine")
    name = fields.get("name")
    if not isinstance(name, str) or not name:
        raise RecipeError(f"expected a non-empty string, got {name!r}", source=source, field="engine.name")
    if name not in KNOWN_ENGINES:
        known = ", ".join(sorted(KNOWN_ENGINES))
        raise RecipeError(f"unknown engine {name!r} (known: {known})", source=source, field="engine.name")
    version = fields.get("version")
    if version is not None and not isinstance(version, str):
        raise RecipeError(f"expected a string, got {version!r}", source=source, field="engine.version")
    return Engine(name=name, version=version)


def _build(source: str, **fields: Any) -> Recipe:
    try:
        return Recipe.model_validate(fields)
    except ValidationError as exc:
        raise _from_validation(exc, source, None) from exc


def _from_validation(exc: ValidationError, source: str, prefix: str | None) -> RecipeError:
    first = exc.errors()[0]
    loc = ".".join(str(part) for part in first["loc"])
    field = ".".join(part for part in (prefix, loc) if part) or None
    return RecipeError(first["msg"], source=source, field=field)
