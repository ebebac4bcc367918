"""The local-ai-registry/v1 speed-sweep schema, checked with `jsonschema` against the registry's own files.

The schema files ship with the farm (farm/report/schemas/, package data):
- `speed-sweep.schema.json`: the registry's own file, as published in 0xSero/local-ai-registry under
  `data/registry/schema/` (commit a908edb8). Replace it with a newer copy to follow the registry.
- `common.schema.json`: RECONSTRUCTED. The registry's schemas `$ref` `common.schema.json#/$defs/provenance` and
  `#/$defs/facts`, but the registry does not publish that file; its definitions are rebuilt from the registry's
  generated `types.ts` (Provenance, Source, Facts, Fact), and the file says so in its `$comment`.

Every error names the field by its path, e.g. `rows[0].decode_tok_s: ...`; a missing or unexpected field is
named itself (`rows[1].ttft_ms_p50: required field is missing`).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any

from farm.errors import InputError

if TYPE_CHECKING:  # jsonschema is imported by the first check: readers that never export should not pay for it
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

SCHEMA_SOURCE = "https://github.com/0xSero/local-ai-registry/blob/main/data/registry/schema/speed-sweep.schema.json"
SCHEMA_VERSION = "local-ai-registry/v1"
SCHEMA_FILES = ("speed-sweep.schema.json", "common.schema.json")


def load_schema(name: str) -> dict[str, Any]:
    """One of the shipped schema files, parsed."""
    text = resources.files("farm.report").joinpath("schemas", name).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _validator() -> Draft202012Validator:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    schemas = {name: load_schema(name) for name in SCHEMA_FILES}
    registry: Registry[Any] = Registry().with_resources(
        (schema["$id"], Resource.from_contents(schema)) for schema in schemas.values()
    )
    return Draft202012Validator(schemas["speed-sweep.schema.json"], registry=registry)


SPEED_SWEEP_SCHEMA = load_schema("speed-sweep.schema.json")
"""The registry's speed-sweep schema, as shipped."""


def _path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _messages(error: ValidationError) -> list[str]:
    """One error as `path: what is wrong` lines, the deepest cause first for a combinator (oneOf, $ref)."""
    if error.context:
        return [line for cause in error.context for line in _messages(cause)]
    path = _path(error.absolute_path)
    instance = error.instance
    required = error.validator_value
    if error.validator == "required" and isinstance(instance, dict) and isinstance(required, list):
        return [f"{_join(path, name)}: required field is missing" for name in required if name not in instance]
    if error.validator == "additionalProperties" and isinstance(instance, dict):
        schema = error.schema if isinstance(error.schema, dict) else {}
        allowed = set(schema.get("properties", {}))
        return [f"{_join(path, name)}: field not allowed by the schema" for name in instance if name not in allowed]
    return [f"{path or '(document)'}: {error.message}"]


def speed_sweep_errors(document: Any) -> list[str]:
    """Every way a document breaks the local-ai-registry/v1 speed-sweep schema (empty when it conforms)."""
    errors = sorted(_validator().iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    return [line for error in errors for line in _messages(error)]


def check_speed_sweep(document: Any, *, source: str = "speed-sweep export") -> None:
    """InputError naming every bad field when the document is not a valid speed sweep."""
    errors = speed_sweep_errors(document)
    if errors:
        first = errors[0].split(":", 1)[0]
        raise InputError(
            f"not a valid {SCHEMA_VERSION} speed sweep ({len(errors)} error(s)):\n  " + "\n  ".join(errors),
            source=source,
            field=first,
        )
