"""Who may read the API: loopback addresses, and a bearer token beyond them (no I/O but the request's header).

`farm serve` listens on 127.0.0.1 by default. Beyond loopback it needs FARM_API_TOKEN, and then every request
carries `Authorization: Bearer <token>`, compared in constant time (`hmac.compare_digest`), so the answer's
timing says nothing about the token. An empty token, or one with spaces around it, is refused at start.

Every request names an allowed `Host` (loopback's names, the address it listens on, FARM_API_ALLOWED_HOSTS):
a page in a browser whose name an attacker rebinds to 127.0.0.1 (DNS rebinding) sends its own name and is
refused with 421, before the token is even looked at. A refusal never echoes what the client sent.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from farm.errors import InputError

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

OPEN_PATHS = frozenset({"/healthz"})
"""Paths that answer without a token (a load balancer's health check)."""

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
"""Host header names the API always answers: what a client on this machine types."""


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback address or `localhost` (the only places the API listens without a token)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False


def token_matches(header: str | None, token: str) -> bool:
    """Whether an Authorization header carries `Bearer <token>` (constant-time comparison)."""
    if not header:
        return False
    scheme, _, given = header.partition(" ")
    if scheme.lower() != "bearer":
        return False
    # surrogatepass: header bytes that are not UTF-8 reach here as surrogates; they compare (unequal), never raise
    return hmac.compare_digest(given.strip().encode("utf-8", "surrogatepass"), token.encode("utf-8"))


def checked_token(token: str | None) -> str | None:
    """The API token to require, InputError for one that is empty or has spaces around it (a token nobody can
    send the same way, or none at all where one was meant)."""
    if token is None:
        return None
    if not token.strip():
        raise InputError(
            "FARM_API_TOKEN is set but empty: set a token, or unset it on loopback", field="FARM_API_TOKEN"
        )
    if token != token.strip() or any(ch.isspace() or not ch.isprintable() for ch in token):
        raise InputError(
            "FARM_API_TOKEN holds spaces or control characters: clients could not send it as a bearer token",
            field="FARM_API_TOKEN",
        )
    return token


def host_name(header: str | None) -> str | None:
    """The name in a Host header, lower case, without its port or trailing dot (`[::1]:8080` is `::1`); None when
    there is none."""
    if header is None or not header.strip():
        return None
    value = header.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        return name if not rest or rest.startswith(":") else None
    return value.rsplit(":", 1)[0].rstrip(".") if value.count(":") <= 1 else value


def allowed_host_names(listen_host: str | None, configured: tuple[str, ...] = ()) -> frozenset[str]:
    """Loopback's names, the address `farm serve` listens on (unless it is a wildcard), and the configured ones."""
    names = set(LOOPBACK_NAMES)
    if listen_host and listen_host.strip("[]") not in ("0.0.0.0", "::", ""):
        names.add(listen_host.strip().strip("[]").lower())
    names.update(name.strip("[]") for name in configured)
    return frozenset(names)


def host_middleware(allowed: frozenset[str]) -> Middleware:
    """A middleware that answers 421 (as JSON, echoing nothing) to a request whose Host is not allowed."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        name = host_name(request.headers.get("Host"))
        if name is None or name not in allowed:
            return web.json_response(
                {
                    "error": "this API answers only to its own host names (loopback, the address it listens on, "
                    "FARM_API_ALLOWED_HOSTS); the request's Host header is not one of them",
                    "status": 421,
                    "parameter": "Host",
                },
                status=421,
            )
        return await handler(request)

    return check


def bearer_middleware(token: str) -> Middleware:
    """A middleware that answers 401 (as JSON, echoing nothing) unless the request carries the token."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in OPEN_PATHS and not token_matches(request.headers.get("Authorization"), token):
            return web.json_response(
                {
                    "error": "a bearer token is needed (Authorization: Bearer <FARM_API_TOKEN>)",
                    "status": 401,
                    "parameter": None,
                },
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="farm"'},
            )
        return await handler(request)

    return check
