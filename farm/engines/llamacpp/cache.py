"""How llama-server's prompt cache is made cold before a measurement that must start cold.

What its endpoints do, read in tools/server of the llama.cpp that llama-cpp-python 0.3.36 vendors
(server-context.cpp, server.cpp, server-task.cpp; docs/cache-state.md). Not yet run against a built server: the
e2e test (tests/e2e/test_llamacpp_cpu.py) checks the 501, `cache_prompt: false` and `timings.cache_n` there.

- `GET /slots` lists the slots (`id`, `n_ctx`, `is_processing`, ...); HTTP 501 when started with `--no-slots`.
- `POST /slots/{id}?action=erase` drops slot `id`'s cached tokens (`{"id_slot": id, "n_erased": n}`), once the
  slot has finished what it runs. Without `--slot-save-path` every slot action answers HTTP 501 ("This server
  does not support slots action. Start it with `--slot-save-path`"), erase included; the farm's judge refuses
  `--slot-save-path` (it writes KV caches to files), so a farm-launched llama-server cannot be erased.
- An erase leaves the host-memory prompt cache (`--cache-ram`, 8192 MiB by default): a request given an empty
  slot loads the most similar prompt kept there (server_prompt_cache::load), so an erase alone does not make a
  single request cold.
- A request with `"cache_prompt": false` reuses nothing, whatever the slot or the host cache hold: its prompt is
  evaluated from position 0 (n_past stays 0) and its `timings.cache_n` is 0.

So the farm erases every slot where the server allows it (a conversation or a trace then starts from nothing),
and the requests of a measurement meant cold carry `cache_prompt: false` in any case (`COLD_REQUEST_FIELDS`).
"""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp

from farm.engines.base import PrefixCacheReset

COLD_REQUEST_FIELDS: dict[str, Any] = {"cache_prompt": False}
"""What makes one llama-server request reuse no cached prompt (its slot's nor the host-memory cache's)."""

_ERROR_TEXT_CHARS = 200
"""How much of a refusal's message the figures' params keep."""


def _refusal(status: int, body: Any) -> str:
    """`HTTP 501 (message)` from llama-server's error shape `{"error": {"message": ...}}`."""
    message = body.get("error", {}).get("message") if isinstance(body, dict) else None
    if isinstance(message, str) and message:
        return f"HTTP {status} ({message[:_ERROR_TEXT_CHARS]})"
    return f"HTTP {status}"


async def _call(session: aiohttp.ClientSession, method: str, url: str) -> tuple[int, Any]:
    async with session.request(method, url) as response:
        try:
            body = await response.json(content_type=None)
        except ValueError:
            body = None
        return response.status, body


def _slot_ids(body: Any) -> list[int] | None:
    if not isinstance(body, list):
        return None
    ids: list[int] = []
    for slot in body:
        slot_id = slot.get("id") if isinstance(slot, dict) else None
        if not isinstance(slot_id, int) or isinstance(slot_id, bool):
            return None
        ids.append(slot_id)
    return sorted(ids) or None


async def reset_prefix_cache(session: aiohttp.ClientSession, base_url: str, timeout_s: float) -> PrefixCacheReset:
    """Erase every slot `GET /slots` lists, where the server allows it; never raises. Either way the cold
    requests carry `cache_prompt: false`."""
    base = base_url.rstrip("/")
    try:
        async with asyncio.timeout(timeout_s):
            status, body = await _call(session, "GET", base + "/slots")
            if status != 200:
                return _not_erased(f"GET /slots answered {_refusal(status, body)}")
            ids = _slot_ids(body)
            if ids is None:
                return _not_erased("GET /slots listed no slot ids")
            for slot in ids:
                status, body = await _call(session, "POST", f"{base}/slots/{slot}?action=erase")
                if status != 200:
                    return _not_erased(f"POST /slots/{slot}?action=erase answered {_refusal(status, body)}")
    except (aiohttp.ClientError, TimeoutError) as error:
        return _not_erased(f"the slot erase failed ({type(error).__name__})")
    return PrefixCacheReset(
        done=f"erased slots {', '.join(map(str, ids))} (POST /slots/{{id}}?action=erase; the host-memory prompt "
        "cache is not erased)",
        emptied=True,
        cold_request_fields=COLD_REQUEST_FIELDS,
    )


def _not_erased(why: str) -> PrefixCacheReset:
    return PrefixCacheReset(done=f"no slot erased: {why}", emptied=False, cold_request_fields=COLD_REQUEST_FIELDS)
