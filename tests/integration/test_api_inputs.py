"""Malformed input to the API, over a real socket on SQLite and PostgreSQL: hypothesis writes query values,
cursors, paths and header bytes, and every answer is a 4xx with a reason (or a 200), never a 500 or a dropped
connection. The `Host` allowlist refuses a rebound name, and an empty or padded token is refused at start."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiohttp import web
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from farm.api.app import build_app
from farm.api.auth import allowed_host_names
from farm.cli.app import app as cli
from farm.errors import InputError
from farm.recipes.model import Recipe
from farm.store import Store

TOKEN = "fuzz-token-value"
PATHS = ["/healthz", "/openapi.json", "/v1/leaderboard", "/v1/jobs", "/v1/export/csv", "/v1/export/json"]
NAMES = ["model", "hardware", "engine", "since", "until", "status", "job", "real_only", "limit", "cursor", "state"]
NAMES += ["sweep", "x"]
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


class Served:
    """The API app on a free port of 127.0.0.1, in a thread with its own event loop."""

    def __init__(self, application: web.Application) -> None:
        self.loop = asyncio.new_event_loop()
        self.runner = web.AppRunner(application, access_log=None)
        self.loop.run_until_complete(self.runner.setup())
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        self.loop.run_until_complete(site.start())
        self.port: int = self.runner.addresses[0][1]
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.runner.cleanup(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()

    def raw(self, target: bytes, headers: list[tuple[bytes, bytes]] | None = None, *, host: bytes | None = None) -> int:
        """The status of `GET target` sent byte for byte; 0 when the server closed without answering."""
        lines = [b"GET " + target + b" HTTP/1.1"]
        lines.append(b"Host: " + (host if host is not None else f"127.0.0.1:{self.port}".encode()))
        lines += [name + b": " + value for name, value in headers or []]
        lines += [b"Connection: close", b"", b""]
        with socket.create_connection(("127.0.0.1", self.port), timeout=20) as sock:
            sock.sendall(b"\r\n".join(lines))
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        if not answer.startswith(b"HTTP/1."):
            return 0
        status = int(answer.split(b" ", 2)[1])
        body = answer.partition(b"\r\n\r\n")[2]
        if status >= 400 and status != 405:
            assert body, "an error without a reason"
        return status


@pytest.fixture
def served(store: Store, make_recipe: Callable[..., Recipe]) -> Iterator[Served]:
    """The API over a store holding a few jobs, guarded by a token."""
    store.submit(make_recipe(), "fuzz", {"repeats": 1}, "cd" * 32, 2, simulated=True, count=3)
    server = Served(build_app(store, token=TOKEN, allowed_hosts=allowed_host_names("127.0.0.1", ("farm.example",))))
    try:
        yield server
    finally:
        server.close()


AUTH = [(b"Authorization", f"Bearer {TOKEN}".encode())]


def _encoded(data: bytes) -> bytes:
    return urllib.parse.quote_from_bytes(data, safe="").encode()


@FUZZ
@given(
    path=st.sampled_from(PATHS),
    pairs=st.lists(
        st.tuples(st.sampled_from(NAMES), st.binary(max_size=40) | st.text(max_size=12).map(str.encode)), max_size=5
    ),
)
@example(path="/v1/jobs", pairs=[("limit", "²".encode())])
@example(path="/v1/leaderboard", pairs=[("limit", "١٢".encode())])
@example(path="/v1/jobs", pairs=[("state", b"\x00")])
def test_any_query_value_is_an_answer_or_a_4xx(served: Served, path: str, pairs: list[tuple[str, bytes]]) -> None:
    """Any bytes as query values (NUL, invalid UTF-8, huge numbers, repeated names): 200 or 4xx, never 5xx."""
    query = b"&".join(name.encode() + b"=" + _encoded(value) for name, value in pairs)
    status = served.raw(path.encode() + b"?" + query, AUTH)
    assert 200 <= status < 500, (path, pairs, status)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


@FUZZ
@given(path=st.sampled_from(["/v1/jobs", "/v1/leaderboard"]), value=_JSON, raw=st.binary(max_size=40))
def test_any_cursor_is_an_answer_or_a_400(served: Served, path: str, value: Any, raw: bytes) -> None:
    """A cursor of any JSON this API never gave out (dates without a zone, huge numbers, nesting), or of any bytes:
    200 or 400 naming the cursor."""
    encoded = base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=")
    for cursor in (encoded, _encoded(raw), _encoded(base64.urlsafe_b64encode(raw))):
        status = served.raw(path.encode() + b"?cursor=" + cursor, AUTH)
        assert status in (200, 400), (path, value, raw, status)


@FUZZ
@given(
    template=st.sampled_from(["/v1/jobs/{}", "/v1/runs/{}/results", "/v1/export/{}", "/{}", "/v1/{}/x"]),
    segment=st.binary(min_size=1, max_size=60),
    encode=st.booleans(),
)
def test_any_path_is_an_answer_or_a_4xx(served: Served, template: str, segment: bytes, encode: bool) -> None:
    """Any bytes in a path segment, percent-encoded or raw where HTTP allows: 200 or 4xx (404 for no such job)."""
    if not encode and any(b <= 0x20 or b >= 0x7F or b in b"?#%/" for b in segment):
        encode = True
    part = _encoded(segment) if encode else segment
    status = served.raw(template.encode().replace(b"{}", part), AUTH)
    assert 200 <= status < 500, (template, segment, status)


@FUZZ
@given(
    name=st.sampled_from([b"Authorization", b"Host", b"X-Anything", b"Accept", b"If-None-Match", b"Content-Length"]),
    value=(st.binary(max_size=60) | st.builds(b"Bearer ".__add__, st.binary(max_size=40))).filter(
        lambda v: b"\r" not in v and b"\n" not in v
    ),
)
@example(name=b"Authorization", value=b"Bearer \xff\xfe")
@example(name=b"Authorization", value="Bearer tökén".encode())
def test_any_header_bytes_are_an_answer_or_a_4xx(served: Served, name: bytes, value: bytes) -> None:
    """Any bytes in a header value (the token's among them, non-UTF-8 too) or the Host: 200 or 4xx, never 5xx."""
    if name == b"Host":
        status = served.raw(b"/v1/jobs", AUTH, host=value)
    elif name == b"Authorization":
        status = served.raw(b"/v1/jobs", [(name, value)])
    else:
        status = served.raw(b"/v1/jobs", [*AUTH, (name, value)])
    assert 200 <= status < 500, (name, value, status)


@pytest.mark.parametrize(
    ("host", "status"),
    [
        (b"127.0.0.1", 200),
        (b"localhost:8080", 200),
        (b"LOCALHOST.", 200),
        (b"[::1]:1", 200),
        (b"farm.example", 200),
        (b"rebound.attacker.example", 421),
        (b"127.0.0.1.nip.io", 421),
        (b"", 421),
    ],
)
def test_only_allowed_host_names_are_answered(served: Served, host: bytes, status: int) -> None:
    """Loopback's names, the listening address and the configured names are answered; a name an attacker's DNS
    rebinds to this machine is refused with 421 (before the token is looked at), health check included."""
    assert served.raw(b"/v1/jobs", AUTH, host=host) == status
    assert served.raw(b"/healthz", host=host) == status


@pytest.mark.parametrize("token", ["", "   ", "\t", " padded", "padded ", "a b", "tab\there"])
def test_an_empty_or_padded_token_is_refused_at_start(store: Store, token: str) -> None:
    """build_app refuses a token nobody could send back, and `farm serve` exits 2 naming FARM_API_TOKEN."""
    with pytest.raises(InputError, match="FARM_API_TOKEN"):
        build_app(store, token=token)
    result = CliRunner().invoke(cli, ["serve", "--port", "1"], env={"FARM_API_TOKEN": token})
    assert result.exit_code == 2
    assert "FARM_API_TOKEN" in result.stderr
