"""Who may read the API: loopback addresses, and a bearer token beyond them (no I/O but the request's header).

`farm serve` listens on 127.0.0.1 by default. Beyond loopback it needs FARM_API_TOKEN, and then every request
carries `Authorization: Bearer <token>`, compared in constant time (`hmac.compare_digest`), so the answer's
timing says nothing about the token. A refusal never echoes what the client sent.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

OPEN_PATHS = frozenset({"/healthz"})
"""Paths that answer without a token (a load balancer's health check)."""


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
    return hmac.compare_digest(given.strip().encode("utf-8"), token.encode("utf-8"))


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
