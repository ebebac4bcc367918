"""Small network helpers shared by the worker, the simulator's launcher, bench/ and the tests."""

from __future__ import annotations

import base64
import socket
from urllib.parse import unquote, urlsplit, urlunsplit


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the kernel's pick; another process may take it before we do)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def url_without_credentials(url: str) -> str:
    """The URL with any `user:password@` removed, and no query or fragment (they may carry tokens)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def basic_auth_header(url: str) -> dict[str, str]:
    """An Authorization header for the `user:password@` of a URL ({} when it has none)."""
    parts = urlsplit(url)
    if parts.username is None:
        return {}
    token = base64.b64encode(f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()).decode()
    return {"Authorization": f"Basic {token}"}
