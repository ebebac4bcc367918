"""The OpenAPI 3.1 description of the read-only HTTP API, written by hand (served at /openapi.json)."""

from __future__ import annotations

from typing import Any

import farm
from farm.domain import JobState
from farm.report.exports import FORMATS
from farm.report.filters import STATUSES

FILTER_PARAMETERS = ("model", "hardware", "engine", "since", "until", "status", "job", "real_only")
"""The query parameters every result endpoint takes (farm.report.filters)."""


def _query(name: str, description: str, schema: dict[str, Any], *, repeated: bool = False) -> dict[str, Any]:
    if repeated:
        schema = {"type": "array", "items": schema}
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": schema,
        **({"style": "form", "explode": True} if repeated else {}),
    }


_FILTERS = [
    _query("model", "model id, its last part, or recipe id", {"type": "string"}, repeated=True),
    _query(
        "hardware",
        "hardware class (`rtx-pro-6000-blackwell-96gb x 2`) or hardware id",
        {"type": "string"},
        repeated=True,
    ),
    _query("engine", "engine name, version, or name@version", {"type": "string"}, repeated=True),
    _query("since", "runs finished at or after this ISO date/time", {"type": "string", "format": "date-time"}),
    _query("until", "runs finished at or before this ISO date/time (a bare date: that whole day)", {"type": "string"}),
    _query("status", "entry status", {"type": "string", "enum": list(STATUSES)}, repeated=True),
    _query("job", "only these job ids", {"type": "string"}, repeated=True),
    _query("real_only", "leave out simulated results", {"type": "boolean"}),
]

_ERROR = {"$ref": "#/components/schemas/Error"}


def _responses(ok: dict[str, Any], *extra: int, media: str = "application/json") -> dict[str, Any]:
    out: dict[str, Any] = {"200": {"description": "OK", "content": {media: {"schema": ok}}}}
    reasons = {400: "bad parameter (named in the error)", 404: "unknown id or format", 503: "store unreachable"}
    for status in (*extra, 503):
        out[str(status)] = {"description": reasons[status], "content": {"application/json": {"schema": _ERROR}}}
    return out


def _get(
    summary: str, operation_id: str, parameters: list[dict[str, Any]], responses: dict[str, Any]
) -> dict[str, Any]:
    return {"get": {"summary": summary, "operationId": operation_id, "parameters": parameters, "responses": responses}}


_STAT = {
    "type": "object",
    "properties": {k: {"type": "number"} for k in ("n", "mean", "min", "max", "spread")},
    "required": ["n", "mean", "min", "max", "spread"],
}

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error", "status"],
        "properties": {
            "error": {"type": "string"},
            "status": {"type": "integer"},
            "parameter": {"type": ["string", "null"], "description": "the query parameter that was wrong"},
        },
    },
    "LeaderboardRow": {
        "type": "object",
        "description": "as `farm leaderboard --json`",
        "properties": {
            "recipe_id": {"type": "string"},
            "recipe_sha256": {"type": "string"},
            "model_id": {"type": "string"},
            "hardware_class": {"type": "string"},
            "engine_name": {"type": "string"},
            "engine_version": {"type": ["string", "null"]},
            "workload": {"type": "string"},
            "simulated": {"type": "boolean"},
            "runs": {"type": "integer"},
            "decode_tok_s": _STAT,
            "prefill_tok_s": {"type": ["number", "null"]},
            "prefill_prompt_tokens": {"type": ["integer", "null"]},
            "short_ttft_ms": {"type": ["number", "null"]},
            "peak_memory_gib": {"type": ["number", "null"]},
            "spec_acceptance_rate": {"type": ["number", "null"]},
            "job_ids": {"type": "array", "items": {"type": "string"}},
        },
    },
    "Job": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "state": {"type": "string", "enum": [s.value for s in JobState]},
            "recipe_id": {"type": "string"},
            "sweep_name": {"type": "string"},
            "hardware_class": {"type": "string"},
            "attempt": {"type": "integer"},
            "max_attempts": {"type": "integer"},
            "simulated": {"type": "boolean"},
            "failure_class": {"type": ["string", "null"]},
            "failure_message": {"type": ["string", "null"]},
        },
        "additionalProperties": True,
    },
    "Run": {"type": "object", "description": "one attempt of a job, with its provenance", "additionalProperties": True},
    "Figure": {
        "type": "object",
        "properties": {
            "kind": {"type": "string"},
            "key": {"type": "string"},
            "metric": {"type": "string"},
            "unit": {"type": "string"},
            "values": {"type": "array", "items": {"type": "number"}},
            "summary": {"type": "object"},
            "workload": {"type": ["string", "null"]},
            "params": {"type": "object"},
            "requested_repeats": {"type": ["integer", "null"]},
        },
    },
}


def openapi_document() -> dict[str, Any]:
    """The whole description."""
    job_id = {"name": "job_id", "in": "path", "required": True, "schema": {"type": "string"}}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "bench farm results API",
            "version": farm.__version__,
            "description": "Read-only: every path answers GET (and HEAD); any other method is 405.",
        },
        "paths": {
            "/healthz": _get(
                "liveness and the store's schema revision",
                "healthz",
                [],
                _responses({"type": "object", "properties": {"status": {"const": "ok"}}}),
            ),
            "/openapi.json": _get("this description", "openapi", [], _responses({"type": "object"})),
            "/v1/leaderboard": _get(
                "one row per recipe × hardware × engine version × workload; simulated rows marked",
                "leaderboard",
                _FILTERS,
                _responses(
                    {
                        "type": "object",
                        "properties": {
                            "filters": {"type": "object"},
                            "rows": {"type": "array", "items": {"$ref": "#/components/schemas/LeaderboardRow"}},
                        },
                    },
                    400,
                ),
            ),
            "/v1/jobs": _get(
                "jobs, newest first",
                "listJobs",
                [
                    _query(
                        "state",
                        "only jobs in these states",
                        {"type": "string", "enum": [s.value for s in JobState]},
                        repeated=True,
                    ),
                    _query("sweep", "only jobs of this sweep", {"type": "string"}),
                    _query(
                        "limit",
                        "at most this many (1-1000, default 100)",
                        {"type": "integer", "minimum": 1, "maximum": 1000},
                    ),
                ],
                _responses(
                    {
                        "type": "object",
                        "properties": {"jobs": {"type": "array", "items": {"$ref": "#/components/schemas/Job"}}},
                    },
                    400,
                ),
            ),
            "/v1/jobs/{job_id}": _get(
                "one job with every attempt",
                "getJob",
                [job_id],
                _responses(
                    {
                        "type": "object",
                        "properties": {
                            "job": {"$ref": "#/components/schemas/Job"},
                            "runs": {"type": "array", "items": {"$ref": "#/components/schemas/Run"}},
                        },
                    },
                    404,
                ),
            ),
            "/v1/runs/{job_id}/results": _get(
                "every figure of the job's succeeded run (empty while it has none)",
                "getResults",
                [job_id],
                _responses(
                    {
                        "type": "object",
                        "properties": {
                            "job": {"$ref": "#/components/schemas/Job"},
                            "figures": {"type": "array", "items": {"$ref": "#/components/schemas/Figure"}},
                        },
                    },
                    404,
                ),
            ),
            "/v1/export/{format}": {
                "get": {
                    "summary": "an export: registry (array of local-ai-registry/v1 speed sweeps), localmaxxing "
                    "(array of submissions), csv, json (every aggregated entry)",
                    "operationId": "export",
                    "parameters": [
                        {
                            "name": "format",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "string", "enum": list(FORMATS)},
                        },
                        *_FILTERS,
                    ],
                    "responses": {
                        **_responses({"type": ["array", "object"]}, 400, 404),
                        "200": {
                            "description": "OK",
                            "content": {
                                "application/json": {"schema": {"type": ["array", "object"]}},
                                "text/csv": {"schema": {"type": "string"}},
                            },
                        },
                    },
                }
            },
        },
        "components": {"schemas": SCHEMAS},
    }
