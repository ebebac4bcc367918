"""The read-only HTTP API (`farm serve`): leaderboard, jobs, results and exports, on aiohttp.

Every path answers GET (HEAD too); any other method is 405 with an `Allow` header. Errors are JSON
(farm.api.schemas.Error): 400 for a bad or unknown query parameter (named; out-of-range dates, cursors this API
did not give out, NUL characters and bytes that are not UTF-8 too), 401 without the bearer token when one is set,
404 for an unknown job or export format, 421 for a `Host` that is not this API's (farm.api.auth), 503 when the
store cannot be read. Malformed input never gets a 5xx (tests/integration/test_api_inputs.py fuzzes it).
Error bodies carry the farm's own message, never a driver's text or the request's headers. Lists are paged
(`limit`, `cursor`); exports stream. The store is synchronous, so each read runs in a thread.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Awaitable, Callable, Iterator
from datetime import datetime
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from farm.api.auth import allowed_host_names, bearer_middleware, checked_token, host_middleware
from farm.api.openapi import DEFAULT_PAGE, EXPORT_FORMATS, MAX_PAGE, ROUTES, openapi_document
from farm.api.schemas import (
    ApiModel,
    Error,
    Health,
    JobDetail,
    JobResults,
    JobsPage,
    Keys,
    LeaderboardPage,
    RunSignatureAnswer,
)
from farm.domain import JobState
from farm.errors import InputError, JobNotFound, StoreError
from farm.filters import FILTER_NAMES, ResultFilter, filter_from_mapping
from farm.report import service
from farm.store import Store

STORE_KEY = web.AppKey("store", Store)
PARAMETERS = {route.path: route.parameters for route in ROUTES}
EXPORT_CHUNK = 64 * 1024
"""Bytes gathered before an export chunk goes out: few writes, little memory."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ApiError(Exception):
    """An answer other than 200, as JSON."""

    def __init__(self, status: int, message: str, parameter: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.parameter = parameter


def _send(model: ApiModel, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        text=json.dumps(model.model_dump(mode="json"), indent=2) + "\n",
        status=status,
        content_type="application/json",
        headers=headers,
    )


def _error(
    status: int, message: str, parameter: str | None = None, headers: dict[str, str] | None = None
) -> web.Response:
    return _send(Error(error=message, status=status, parameter=parameter), status, headers)


def _unreadable(text: str) -> bool:
    """Text no store can hold or compare: a NUL (PostgreSQL refuses it) or a lone surrogate (undecodable bytes)."""
    return "\x00" in text or any("\ud800" <= ch <= "\udfff" for ch in text)


def _check_plain(request: web.Request) -> None:
    """400 for a path or a query parameter holding what no stored value can (before any handler reads it)."""
    if _unreadable(request.path):
        raise ApiError(400, "the path holds a NUL character or bytes that are not UTF-8")
    for name, value in request.query.items():
        if _unreadable(name) or _unreadable(value):
            shown = name[:64] if not _unreadable(name) else None
            raise ApiError(400, "a query parameter holds a NUL character or bytes that are not UTF-8", shown)


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every failure as a JSON error with the right status."""
    try:
        _check_plain(request)
        return await handler(request)
    except ApiError as exc:
        return _error(exc.status, str(exc), exc.parameter)
    except InputError as exc:
        return _error(400, exc.detail, exc.field)
    except JobNotFound as exc:
        return _error(404, str(exc))
    except StoreError:
        # The store's message can name the database (its URL is masked, but the driver's text is not ours).
        return _error(503, "the store cannot be read; see the server's log")
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
                400,
                f"unknown query parameter {name[:64]!r}; this path takes: {', '.join(allowed) or 'none'}",
                name[:64],
            )


def filters_from_query(request: web.Request, allowed: tuple[str, ...]) -> ResultFilter:
    """The result filters from the query string (InputError naming a bad parameter)."""
    _check_parameters(request, allowed)
    return filter_from_mapping({name: request.query.getall(name, []) for name in FILTER_NAMES})


def _limit(request: web.Request) -> int:
    text = request.query.get("limit", str(DEFAULT_PAGE))
    if not (text.isascii() and text.isdigit() and len(text) <= 6) or not 1 <= int(text) <= MAX_PAGE:
        raise ApiError(400, f"limit must be an integer from 1 to {MAX_PAGE}", "limit")
    return int(text)


def encode_cursor(data: list[Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def decode_cursor(request: web.Request) -> list[Any] | None:
    text = request.query.get("cursor")
    if text is None:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, "cursor is not one this API gave out", "cursor") from exc
    if not isinstance(data, list):
        raise ApiError(400, "cursor is not one this API gave out", "cursor")
    return data


def _store(request: web.Request) -> Store:
    return request.app[STORE_KEY]


async def healthz(request: web.Request) -> web.Response:
    _check_parameters(request, ())
    revision = await asyncio.to_thread(_store(request).schema_revision)
    return _send(Health(status="ok", schema_revision=revision))


async def openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


async def leaderboard(request: web.Request) -> web.Response:
    filters = filters_from_query(request, PARAMETERS["/v1/leaderboard"])
    limit = _limit(request)
    cursor = decode_cursor(request)
    offset = cursor[0] if cursor and isinstance(cursor[0], int) and cursor[0] >= 0 else 0
    rows = await asyncio.to_thread(service.leaderboard, _store(request), filters)
    page = rows[offset : offset + limit]
    more = offset + limit < len(rows)
    return _send(
        LeaderboardPage(
            filters=filters.as_json(),
            rows=page,
            total=len(rows),
            next_cursor=encode_cursor([offset + limit]) if more else None,
        )
    )


async def jobs(request: web.Request) -> web.Response:
    _check_parameters(request, PARAMETERS["/v1/jobs"])
    states = request.query.getall("state", [])
    for state in states:
        if state not in {s.value for s in JobState}:
            raise ApiError(400, f"{state[:32]!r} is not a job state ({', '.join(s.value for s in JobState)})", "state")
    limit = _limit(request)
    cursor = decode_cursor(request)
    after: tuple[datetime, str] | None = None
    if cursor is not None:
        try:
            after = (datetime.fromisoformat(str(cursor[0])), str(cursor[1]))
        except (ValueError, IndexError) as exc:
            raise ApiError(400, "cursor is not one this API gave out", "cursor") from exc
    views = await asyncio.to_thread(
        _store(request).list_jobs, states or None, sweep_name=request.query.get("sweep"), limit=limit + 1, after=after
    )
    page = views[:limit]
    more = len(views) > limit
    return _send(
        JobsPage(
            jobs=page,
            next_cursor=encode_cursor([page[-1].created_at.isoformat(), page[-1].id]) if more and page else None,
        )
    )


async def job(request: web.Request) -> web.Response:
    _check_parameters(request, ())
    job_id = request.match_info["job_id"]
    store = _store(request)
    view = await asyncio.to_thread(store.get_job, job_id)
    runs = await asyncio.to_thread(store.runs, job_id)
    return _send(JobDetail(job=view, runs=runs))


async def results(request: web.Request) -> web.Response:
    _check_parameters(request, ())
    job_id = request.match_info["job_id"]
    store = _store(request)
    view = await asyncio.to_thread(store.get_job, job_id)
    figures = await asyncio.to_thread(store.results, job_id)
    return _send(JobResults(job=view, figures=figures))


async def keys(request: web.Request) -> web.Response:
    _check_parameters(request, ())
    return _send(Keys(keys=await asyncio.to_thread(_store(request).keys)))


async def signature(request: web.Request) -> web.Response:
    _check_parameters(request, ())
    found = await asyncio.to_thread(_store(request).signature, request.match_info["job_id"])
    return _send(RunSignatureAnswer(signature=found))


def _export_chunks(store: Store, fmt: str, filters: ResultFilter) -> Iterator[bytes]:
    from farm.report.exports import render_submissions, stream

    if fmt == "localmaxxing":
        yield render_submissions(service.localmaxxing_submissions(store, filters)).encode("utf-8")
        return
    gathered: list[str] = []
    size = 0
    entries = service.entries(store, filters)
    for chunk in stream(fmt, entries, filters):
        gathered.append(chunk)
        size += len(chunk)
        if size >= EXPORT_CHUNK:
            yield "".join(gathered).encode("utf-8")
            gathered, size = [], 0
    if gathered:
        yield "".join(gathered).encode("utf-8")


async def export(request: web.Request) -> web.StreamResponse:
    from farm.report.exports import MEDIA_TYPES

    fmt = request.match_info["format"]
    if fmt not in EXPORT_FORMATS:
        raise ApiError(404, f"no export format {fmt[:32]!r}; formats: {', '.join(EXPORT_FORMATS)}", "format")
    filters = filters_from_query(request, PARAMETERS["/v1/export/{format}"])
    chunks = _export_chunks(_store(request), fmt, filters)
    sentinel = object()
    try:
        first = await asyncio.to_thread(next, chunks, sentinel)
    except InputError as exc:
        raise ApiError(500, f"the {fmt} export does not conform: {exc}") from exc
    response = web.StreamResponse(headers={"Content-Type": f"{MEDIA_TYPES[fmt]}; charset=utf-8"})
    await response.prepare(request)
    chunk = first
    while chunk is not sentinel:
        assert isinstance(chunk, bytes)
        await response.write(chunk)
        chunk = await asyncio.to_thread(next, chunks, sentinel)
    await response.write_eof()
    return response


def build_app(
    store: Store,
    *,
    token: str | None = None,
    allowed_hosts: frozenset[str] | None = None,
) -> web.Application:
    """The application over an open store (the caller closes the store); `token` makes every request need it, and
    only requests naming one of `allowed_hosts` (default: loopback's names) are answered. An empty or padded token
    is an InputError."""
    token = checked_token(token)
    middlewares: list[Middleware] = [json_errors, host_middleware(allowed_hosts or allowed_host_names(None))]
    if token is not None:
        middlewares.append(bearer_middleware(token))
    app = web.Application(middlewares=middlewares)
    app[STORE_KEY] = store
    handlers: dict[str, Handler] = {
        "/healthz": healthz,
        "/openapi.json": openapi,
        "/v1/leaderboard": leaderboard,
        "/v1/jobs": jobs,
        "/v1/jobs/{job_id}": job,
        "/v1/runs/{job_id}/results": results,
        "/v1/keys": keys,
        "/v1/runs/{job_id}/signature": signature,
        "/v1/export/{format}": export,
    }
    for route in ROUTES:
        app.router.add_get(route.path, handlers[route.path])
    return app


def serve(
    store: Store,
    host: str,
    port: int,
    *,
    token: str | None = None,
    allowed_hosts: tuple[str, ...] = (),
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve until interrupted (SIGINT or SIGTERM); requests must name loopback, `host` or one of `allowed_hosts`."""

    def announce(_message: str) -> None:
        if on_ready:
            on_ready(f"http://{host}:{port}")

    app = build_app(store, token=token, allowed_hosts=allowed_host_names(host, allowed_hosts))
    web.run_app(app, host=host, port=port, print=announce, access_log=None, handle_signals=True)
