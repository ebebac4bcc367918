"""The local-ai-registry/v1 speed-sweep schema, and a small validator for it (no I/O, no dependency).

Where the rules come from: the registry publishes its schemas in the repository 0xSero/local-ai-registry, under
`data/registry/schema/` (commit a908edb8 read for this module). `SPEED_SWEEP_SCHEMA` below is a transcription of
`speed-sweep.schema.json` (JSON Schema 2020-12): the required top-level fields, `schema_version` fixed to
`local-ai-registry/v1`, no other top-level fields, a `metrics` block that allows only its listed fields, and at
least one row, each row with its nine required fields (extra row fields are allowed, as the registry's own
sweeps use: `content_class`, `spec_accept_len`, ...). That schema takes `provenance` and `facts` from
`common.schema.json#/$defs`, which the index does not hold; their rules here come from the registry's
generated `types.ts` (made from those schemas): a provenance has `captured_at` and at least one source, each
source a `kind` and a `url`, and nothing else than the fields listed there.

The validator implements the JSON Schema keywords the transcription uses (type, const, enum, required,
properties, additionalProperties as false or a schema, minimum, pattern, minItems, items) with JSON Schema's
meaning: an integer is a number with no fraction, booleans are not numbers. Every error names the field by
its path, e.g. `rows[0].decode_tok_s`.
"""

from __future__ import annotations

import re
from typing import Any

from farm.errors import InputError

SCHEMA_SOURCE = "https://github.com/0xSero/local-ai-registry/blob/main/data/registry/schema/speed-sweep.schema.json"
SCHEMA_VERSION = "local-ai-registry/v1"


def _nullable(kind: str, **rules: Any) -> dict[str, Any]:
    return {"type": [kind, "null"], **rules}


_COUNT = _nullable("integer", minimum=0)
_RATE = _nullable("number", minimum=0)
_BYTES = _nullable("string", pattern="^[0-9]+$")

_SOURCE: dict[str, Any] = {
    "type": "object",
    "required": ["kind", "url"],
    "properties": {
        "kind": {"type": "string"},
        "url": {"type": "string"},
        "repository": _nullable("string"),
        "commit": _nullable("string"),
        "paths": {"type": ["array", "null"], "items": {"type": "string"}},
        "captured_at": {"type": "string"},
        "publisher": {"type": "string"},
        "retrieved_from": {"type": "string"},
    },
    "additionalProperties": False,
}

PROVENANCE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["sources", "captured_at"],
    "properties": {
        "sources": {"type": "array", "minItems": 1, "items": _SOURCE},
        "captured_at": {"type": "string"},
    },
    "additionalProperties": False,
}

_FACT: dict[str, Any] = {
    "type": "object",
    "required": ["state", "provenance"],
    "properties": {
        "state": {"enum": ["known", "unknown", "unavailable", "not_applicable"]},
        "reason": {"type": ["string", "object"]},
        "note": {"type": "string"},
        "scope": {"type": "string"},
        "unit": {"type": "string"},
        "as_of": {"type": "string"},
        "provenance": PROVENANCE_SCHEMA,
    },
    "additionalProperties": False,
}

ROW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": [
        "concurrency",
        "context_tokens",
        "output_tokens",
        "prefill_tok_s",
        "decode_tok_s",
        "ttft_ms_p50",
        "peak_vram_gb",
        "samples",
        "status",
    ],
    "properties": {
        "concurrency": _nullable("integer", minimum=1),
        "context_tokens": _COUNT,
        "output_tokens": _COUNT,
        "prefill_tok_s": _RATE,
        "decode_tok_s": _RATE,
        "decode_tok_s_per_stream": _RATE,
        "ttft_ms_p50": _RATE,
        "peak_vram_gb": _RATE,
        "samples": _nullable("integer", minimum=1),
        "status": {"type": "string"},
    },
    "additionalProperties": True,
}

METRICS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "inference_engine_version": _nullable("string"),
        "concurrency": _nullable("integer", minimum=1),
        "decode_mode": _nullable("string"),
        "point_count": _COUNT,
        "max_prompt_tokens": _COUNT,
        "max_context_tokens": _COUNT,
        "peak_generation_tps": _RATE,
        "peak_prompt_tps": _RATE,
        "peak_memory_bytes": _BYTES,
        "base_memory_bytes": _BYTES,
        "base_memory_context_tokens": _COUNT,
        "decode8k_tps": _RATE,
        "decode8k_context_tokens": _COUNT,
        "decode32k_tps": _RATE,
        "decode32k_context_tokens": _COUNT,
        "decode_max_context_tps": _RATE,
        "decode_max_context_tokens": _COUNT,
        "ttft32k_seconds": _RATE,
        "ttft32k_context_tokens": _COUNT,
        "ttft32k_cached_prompt_tokens": _COUNT,
        "memory8k_bytes": _BYTES,
        "memory8k_context_tokens": _COUNT,
        "memory_max_context_bytes": _BYTES,
        "memory_max_context_tokens": _COUNT,
        "latest_point_at": _nullable("string"),
    },
    "additionalProperties": False,
}

SPEED_SWEEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["schema_version", "id", "recipe_id", "measured_at", "accepted_at", "source", "rows", "metrics"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "id": {"type": "string"},
        "recipe_id": {"type": "string"},
        "measured_at": _nullable("string"),
        "accepted_at": _nullable("string"),
        "source": _nullable("object"),
        "metrics": METRICS_SCHEMA,
        "provenance": PROVENANCE_SCHEMA,
        "facts": {"type": "object", "additionalProperties": _FACT},
        "rows": {"type": "array", "minItems": 1, "items": ROW_SCHEMA},
    },
    "additionalProperties": False,
}


def _is_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    if isinstance(value, bool):
        return False
    if kind == "number":
        return isinstance(value, int | float)
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    raise ValueError(f"unknown JSON type {kind!r}")


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def validate(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Every way `value` breaks `schema`, each as `path: what is wrong` (empty when it conforms)."""
    where = path or "(document)"
    errors: list[str] = []
    if "const" in schema and value != schema["const"]:
        return [f"{where}: must be {schema['const']!r}, not {value!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: must be one of {schema['enum']!r}, not {value!r}"]
    if "type" in schema:
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, kind) for kind in kinds):
            return [f"{where}: must be {' or '.join(kinds)}, not {type(value).__name__} {value!r}"]
    if value is None:
        return errors
    if "minimum" in schema and isinstance(value, int | float) and value < schema["minimum"]:
        errors.append(f"{where}: must be at least {schema['minimum']}, not {value!r}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value):
        errors.append(f"{where}: must match {schema['pattern']}, not {value!r}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{where}: needs at least {schema['minItems']} item(s), has {len(value)}")
        if "items" in schema:
            for index, item in enumerate(value):
                errors.extend(validate(item, schema["items"], f"{path}[{index}]"))
    if isinstance(value, dict):
        properties: dict[str, Any] = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                errors.append(f"{_join(path, name)}: required field is missing")
        extra = schema.get("additionalProperties", True)
        for name, item in value.items():
            if name in properties:
                errors.extend(validate(item, properties[name], _join(path, name)))
            elif extra is False:
                errors.append(f"{_join(path, name)}: field not allowed by the schema")
            elif isinstance(extra, dict):
                errors.extend(validate(item, extra, _join(path, name)))
    return errors


def speed_sweep_errors(document: Any) -> list[str]:
    """Every way a document breaks the local-ai-registry/v1 speed-sweep schema."""
    return validate(document, SPEED_SWEEP_SCHEMA)


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
