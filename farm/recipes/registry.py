"""The local-ai-registry/v1 recipe JSON, read into a Recipe."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from farm.errors import RecipeError
from farm.recipes.fields import (
    build,
    check_launch,
    cross_check,
    describe_parallel,
    dig,
    from_validation,
    mapping,
    max_model_len,
    model_from_argv,
    observed_tokens,
    parallel_sizes,
    pop_flag,
    read_engine,
    read_hardware_count,
    read_hardware_id,
    read_recipe_id,
    sha256_text,
    string_list,
)
from farm.recipes.model import (
    ContainerLaunch,
    Recipe,
    ServingLimits,
    SourceRef,
)

REGISTRY_SCHEMA = "local-ai-registry/v1"
"""The only registry schema version the farm reads."""

_REGISTRY_LM = "metadata.localmaxxing"

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
        raise RecipeError(f"expected {REGISTRY_SCHEMA!r}, got {schema!r}", source=source, field="schema_version")

    recipe_id = read_recipe_id(data.get("id"), source, "id")
    hardware_id = read_hardware_id(data.get("hardware_id"), source, "hardware_id")
    hardware_count = read_hardware_count(data.get("hardware_count"), source)
    engine = read_engine(data.get("engine"), source)
    localmaxxing = mapping(dig(data, _REGISTRY_LM), source, _REGISTRY_LM)
    tokenized = mapping(localmaxxing.get("tokenized"), source, f"{_REGISTRY_LM}.tokenized")
    draft_launch = mapping(data.get("draft_launch"), source, "draft_launch")

    observed_field = f"{_REGISTRY_LM}.observed_command"
    observed = observed_tokens(localmaxxing.get("observed_command"), source, observed_field)
    argv_field, argv = _registry_argv(data, tokenized, draft_launch, observed, source)
    if observed is not None and argv_field in ("argv", f"{_REGISTRY_LM}.tokenized.arguments"):
        cross_check(argv, argv_field, observed, observed_field, source)
    check_launch(argv, engine.name, source, argv_field)

    model_id = data.get("model_id")
    if model_id is None:
        model_id = model_from_argv(argv, source, argv_field)
    elif not isinstance(model_id, str) or not model_id.strip():
        raise RecipeError(f"expected a non-empty string, got {model_id!r}", source=source, field="model_id")

    sizes = parallel_sizes(argv, source=source, field=argv_field)
    devices = sizes["tensor"] * sizes["pipeline"] * sizes["data"]
    if devices != hardware_count:
        raise RecipeError(
            f"is {hardware_count}, but the launch command runs on {devices} device(s) "
            f"({describe_parallel(sizes)} in {argv_field})",
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

    context = max_model_len(argv)
    if serving.max_context_tokens is None and context is not None:
        serving = serving.model_copy(update={"max_context_tokens": context})

    container = None
    if draft_launch.get("kind") == "docker":
        container = _container(draft_launch, source)

    provenance = mapping(data.get("provenance"), source, "provenance")
    launch = mapping(data.get("launch"), source, "launch")
    run_id = launch.get("run_id") or localmaxxing.get("run_id")
    notes = data.get("notes") if data.get("notes") is not None else localmaxxing.get("notes")
    return build(
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
            "content_sha256": content_sha256 or sha256_text(text),
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
        return "argv", string_list(data["argv"], source, "argv")
    if "arguments" in tokenized:
        field = f"{_REGISTRY_LM}.tokenized.arguments"
        return field, string_list(tokenized["arguments"], source, field)
    if observed is not None:
        return f"{_REGISTRY_LM}.observed_command", observed
    if "arguments" in draft_launch:
        # A draft launch holds the server's arguments after the executable; the model travels as --model.
        field = "draft_launch.arguments"
        arguments = string_list(draft_launch["arguments"], source, field, allow_empty=True)
        model, rest = pop_flag(arguments, "--model")
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
        raise from_validation(exc, source, "draft_launch") from exc


def _serving(value: object, source: str) -> ServingLimits:
    fields = mapping(value, source, "serving")
    known = {key: fields[key] for key in ServingLimits.model_fields if fields.get(key) is not None}
    try:
        return ServingLimits.model_validate(known)
    except ValidationError as exc:
        raise from_validation(exc, source, "serving") from exc


def _sources(value: object, source: str) -> list[SourceRef]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecipeError(f"expected a list, got {value!r}", source=source, field="provenance.sources")
    refs = []
    for index, item in enumerate(value):
        field = f"provenance.sources[{index}]"
        entry = mapping(item, source, field)
        try:
            refs.append(SourceRef.model_validate({k: entry.get(k) for k in ("kind", "url", "captured_at")}))
        except ValidationError as exc:
            raise from_validation(exc, source, field) from exc
    return refs
