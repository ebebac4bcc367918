"""The read-only HTTP API (`farm serve`): leaderboard, jobs, results and exports as JSON, on aiohttp.

Every path answers GET (HEAD too); any other method is 405 with an `Allow` header. Errors are JSON
(`{"error", "status", "parameter"}`): 400 for a bad or unknown query parameter (named), 404 for an unknown job
or export format, 503 when the store cannot be read. The store is synchronous, so each read runs in a thread.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import Any

from aiohttp import web

from farm.api.openapi import FILTER_PARAMETERS, openapi_document
from farm.bench.records import figure_to_json
from farm.domain import JobState, JobView
from farm.errors import InputError, JobNotFound, StoreError
from farm.report import service
from farm.report.exports import FORMATS, MEDIA_TYPES, render
from farm.report.filters import ResultFilter, build_filter
from farm.store import Store

STORE_KEY = web.AppKey("store", Store)
MAX_JOBS = 1000
DEFAULT_JOBS = 100
"""`/v1/jobs` returns a screenful of the newest jobs unless asked for more (at most MAX_JOBS)."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    """An answer other than 200, as JSON."""

    def __init__(self, status: int, message: str, parameter: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.parameter = parameter


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        text=json.dumps(data, indent=2, default=str) + "\n",
        status=status,
        content_type="application/json",
        headers=headers,
    )


def _error(
    status: int, message: str, parameter: str | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    return _json({"error": message, "status": status, "parameter": parameter}, status, headers)


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure as a JSON error with the right status."""
    try:
        return await handler(request)
    except ApiError as exc:
        return _error(exc.status, str(exc), exc.parameter)
    except InputError as exc:
        return _error(400, exc.detail, exc.field)
    except JobNotFound as exc:
        return _error(404, str(exc))
    except StoreError as exc:
        return _error(503, str(exc))
    except web.HTTPMethodNotAllowed as exc:
        allowed = ", ".join(sorted(exc.allowed_methods))
        return _error(
            405, f"{request.method} is not allowed: this API is read-only ({allowed})", headers={"Allow": allowed}
        )
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(exc.status, exc.reason)


def _check_parameters(request: web.Request, allowed: tuple[str, ...]) -> None:
    for name in request.query:
        if name not in allowed:
            raise ApiError(
                400, f"unknown query parameter {name!r}; this path takes: {', '.join(allowed) or 'none'}", name
            )


def _bool(request: web.Request, name: str) -> bool:
    text = request.query.get(name)
    if text is None:
        return False
    if text.lower() in ("1", "true", "yes"):
        return True
    if text.lower() in ("0", "false", "no"):
        return False
    raise ApiError(400, f"{name} must be true or false, not {text!r}", name)


def filters_from_query(request: web.Request) -> ResultFilter:
    """The result filters from the query string (InputError naming a bad parameter)."""
    _check_parameters(request, FILTER_PARAMETERS)
    q = request.query
    return build_filter(
        models=q.getall("model", []),
        hardware=q.getall("hardware", []),
        engines=q.getall("engine", []),
        since=q.get("since"),
        until=q.get("until"),
        statuses=q.getall("status", []),
        job_ids=q.getall("job", []),
        real_only=_bool(request, "real_only"),
    )


def _job_json(job: JobView) -> dict[str, Any]:
    data = asdict(job)
    data["state"] = job.state.value
    return data


def _store(request: web.Request) -> Store:
    return request.app[STORE_KEY]


async def healthz(request: web.Request) -> web.Response:
    _check_parameters(request, ())
    revision = await asyncio.to_thread(_store(request).schema_revision)
    return _json({"status": "ok", "schema_revision": revision})


async def openapi(request: web.Request) -> web.Response:
    return _json(openapi_document())


async def leaderboard(request: web.Request) -> web.Response:
    filters = filters_from_query(request)
    rows = await asyncio.to_thread(service.leaderboard, _store(request), filters)
    return _json({"filters": filters.as_json(), "rows": [asdict(row) for row in rows]})


async def jobs(request: web.Request) -> web.Response:
    _check_parameters(request, ("state", "sweep", "limit"))
    states = request.query.getall("state", [])
    for state in states:
        if state not in {s.value for s in JobState}:
            raise ApiError(400, f"{state!r} is not a job state ({', '.join(s.value for s in JobState)})", "state")
    limit_text = request.query.get("limit", str(DEFAULT_JOBS))
    if not limit_text.isdigit() or not 1 <= int(limit_text) <= MAX_JOBS:
        raise ApiError(400, f"limit must be an integer from 1 to {MAX_JOBS}, not {limit_text!r}", "limit")
    views = await asyncio.to_thread(
        _store(request).list_jobs, states or None, sweep_name=request.query.get("sweep"), limit=int(limit_text)
    )
    return _json({"jobs": [_job_json(view) for view in views]})


async def job(request: web.Request) -> web.Response:
    _check_parameters(request, ())
    job_id = request.match_info["job_id"]
    store = _store(request)
    view = await asyncio.to_thread(store.get_job, job_id)
    runs = await asyncio.to_thread(store.runs, job_id)
    return _json({"job": _job_json(view), "runs": [asdict(run) | {"state": run.state.value} for run in runs]})


async def results(request: web.Request) -> web.Response:
    _check_parameters(request, ())
    job_id = request.match_info["job_id"]
    store = _store(request)
    view = await asyncio.to_thread(store.get_job, job_id)
    figures = await asyncio.to_thread(store.results, job_id)
    return _json({"job": _job_json(view), "figures": [figure_to_json(f) for f in figures]})


async def export(request: web.Request) -> web.Response:
    fmt = request.match_info["format"]
    if fmt not in FORMATS:
        raise ApiError(404, f"no export format {fmt!r}; formats: {', '.join(FORMATS)}", "format")
    filters = filters_from_query(request)
    loaded = await asyncio.to_thread(service.load_results, _store(request), filters)
    try:
        text = render(fmt, loaded)
    except InputError as exc:
        raise ApiError(500, f"the {fmt} export does not conform: {exc}") from exc
    return web.Response(text=text, content_type=MEDIA_TYPES[fmt], charset="utf-8")


def build_app(store: Store) -> web.Application:
    """The application over an open store (the caller closes the store)."""
    app = web.Application(middlewares=[json_errors])
    app[STORE_KEY] = store
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/openapi.json", openapi)
    app.router.add_get("/v1/leaderboard", leaderboard)
    app.router.add_get("/v1/jobs", jobs)
    app.router.add_get("/v1/jobs/{job_id}", job)
    app.router.add_get("/v1/runs/{job_id}/results", results)
    app.router.add_get("/v1/export/{format}", export)
    return app


def serve(store: Store, host: str, port: int, *, on_ready: Callable[[str], None] | None = None) -> None:
    """Serve until interrupted (SIGINT or SIGTERM)."""

    def announce(_message: str) -> None:
        if on_ready:
            on_ready(f"http://{host}:{port}")

    web.run_app(build_app(store), host=host, port=port, print=announce, access_log=None, handle_signals=True)
