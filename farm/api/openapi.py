"""The OpenAPI 3.1 description of the read-only HTTP API, generated (served at /openapi.json).

The components are the JSON Schemas of the response models the handlers send (farm.api.schemas); the filter
parameters come from their one declaration (farm.filters.FILTERS); the routes from `ROUTES` below, the same
table farm.api.app registers. Nothing here is written twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic.json_schema import models_json_schema

import farm
from farm.api.schemas import (
    RESPONSE_MODELS,
    ApiModel,
    Health,
    JobDetail,
    JobResults,
    JobsPage,
    Keys,
    LeaderboardPage,
    RunSignatureAnswer,
)
from farm.filters import FILTERS, FilterParameter

EXPORT_FORMATS = ("registry", "localmaxxing", "csv", "json", "jsonl")
"""farm.report.exports.FORMATS (a test checks they agree; named here so the API starts without the report)."""
EXPORT_MEDIA_TYPES = ("application/json", "text/csv", "application/x-ndjson")
"""What an export answers: json, registry and localmaxxing are JSON, csv is CSV, jsonl is JSON lines."""
MAX_PAGE = 1000
DEFAULT_PAGE = 100
"""A page holds DEFAULT_PAGE items unless `limit` asks for more (at most MAX_PAGE)."""


@dataclass(frozen=True)
class Route:
    """One GET path: what it answers, which query parameters it takes, its body's model (None: not JSON)."""

    path: str
    operation_id: str
    summary: str
    parameters: tuple[str, ...]
    model: type[ApiModel] | None
    media_type: str = "application/json"
    errors: tuple[int, ...] = (400,)


PAGING = ("limit", "cursor")
FILTER_NAMES = tuple(p.name for p in FILTERS)

ROUTES: tuple[Route, ...] = (
    Route("/healthz", "healthz", "Liveness and the store's schema revision", (), Health, errors=()),
    Route("/openapi.json", "openapi", "This description", (), None, errors=()),
    Route(
        "/v1/leaderboard",
        "leaderboard",
        "Leaderboard rows, launched, endpoint and simulated ranked apart",
        (*FILTER_NAMES, *PAGING),
        LeaderboardPage,
    ),
    Route("/v1/jobs", "listJobs", "Jobs, newest first", ("state", "sweep", *PAGING), JobsPage),
    Route("/v1/jobs/{job_id}", "getJob", "One job and its attempts", (), JobDetail, errors=(404,)),
    Route(
        "/v1/runs/{job_id}/results",
        "getResults",
        "Every figure of a job's succeeded run",
        (),
        JobResults,
        errors=(404,),
    ),
    Route("/v1/keys", "listKeys", "The farm's public keys and which are trusted", (), Keys),
    Route(
        "/v1/runs/{job_id}/signature",
        "getSignature",
        "The signature of a job's succeeded run and its last verdict",
        (),
        RunSignatureAnswer,
        errors=(404,),
    ),
    Route(
        "/v1/export/{format}",
        "export",
        "An export, streamed: registry, localmaxxing, csv, json or jsonl",
        FILTER_NAMES,
        None,
        media_type="export",
        errors=(400, 404),
    ),
)


def _filter_parameter(parameter: FilterParameter) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    if parameter.kind == "datetime":
        schema = {"type": "string", "description": "ISO date or date-time (UTC when no zone)"}
    elif parameter.kind == "boolean":
        schema = {"type": "boolean"}
    if parameter.choices:
        schema = {"type": "string", "enum": list(parameter.choices)}
    if parameter.repeatable:
        schema = {"type": "array", "items": schema}
    return {
        "name": parameter.name,
        "in": "query",
        "required": False,
        "description": parameter.help,
        "schema": schema,
        **({"style": "form", "explode": True} if parameter.repeatable else {}),
    }


_OTHER_PARAMETERS: dict[str, dict[str, Any]] = {
    "limit": {
        "name": "limit",
        "in": "query",
        "required": False,
        "description": f"items per page (1 to {MAX_PAGE}, {DEFAULT_PAGE} by default)",
        "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE},
    },
    "cursor": {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "the `next_cursor` of the previous page",
        "schema": {"type": "string"},
    },
    "state": {
        "name": "state",
        "in": "query",
        "required": False,
        "description": "only jobs in these states",
        "schema": {
            "type": "array",
            "items": {"type": "string", "enum": ["queued", "running", "succeeded", "failed", "cancelled"]},
        },
        "style": "form",
        "explode": True,
    },
    "sweep": {
        "name": "sweep",
        "in": "query",
        "required": False,
        "description": "one sweep",
        "schema": {"type": "string"},
    },
}


def parameter(name: str) -> dict[str, Any]:
    for declared in FILTERS:
        if declared.name == name:
            return _filter_parameter(declared)
    return _OTHER_PARAMETERS[name]


def component_schemas() -> dict[str, Any]:
    """The JSON Schema of every response model, as OpenAPI components."""
    _, schema = models_json_schema(
        [(model, "serialization") for model in RESPONSE_MODELS], ref_template="#/components/schemas/{model}"
    )
    return dict(schema.get("$defs", {}))


def _path_parameters(path: str) -> list[dict[str, Any]]:
    out = []
    for part in path.split("/"):
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1]
            schema: dict[str, Any] = {"type": "string"}
            if name == "format":
                schema = {"type": "string", "enum": list(EXPORT_FORMATS)}
            out.append({"name": name, "in": "path", "required": True, "schema": schema})
    return out


def _responses(route: Route) -> dict[str, Any]:
    if route.model is not None:
        ok: dict[str, Any] = {"application/json": {"schema": {"$ref": f"#/components/schemas/{route.model.__name__}"}}}
    elif route.media_type == "application/json":
        ok = {route.media_type: {"schema": {"type": "object"}}}
    else:
        ok = {media: {"schema": {"type": "string"}} for media in EXPORT_MEDIA_TYPES}
    out: dict[str, Any] = {"200": {"description": "OK", "content": ok}}
    reasons = {
        400: "bad parameter (named in the error)",
        401: "a bearer token is needed",
        404: "unknown id or format",
        503: "store unreachable",
    }
    for status in (*route.errors, 401, 503):
        out[str(status)] = {
            "description": reasons[status],
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    return out


def openapi_document() -> dict[str, Any]:
    """The whole description."""
    paths = {
        route.path: {
            "get": {
                "summary": route.summary,
                "operationId": route.operation_id,
                "parameters": [*_path_parameters(route.path), *(parameter(name) for name in route.parameters)],
                "responses": _responses(route),
            }
        }
        for route in ROUTES
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "bench farm results API",
            "version": farm.__version__,
            "description": "Read-only. Only succeeded runs count; simulated and endpoint results are marked and "
            "ranked apart. Beyond loopback every request needs `Authorization: Bearer <FARM_API_TOKEN>`.",
        },
        "paths": paths,
        "components": {
            "schemas": component_schemas(),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


JSON_MODELS = {route.path: route.model for route in ROUTES}
__all__ = ["JSON_MODELS", "ROUTES", "JobDetail", "JobResults", "JobsPage", "LeaderboardPage", "openapi_document"]
