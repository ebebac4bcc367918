"""How vLLM's prefix cache is reset before a measurement that must start cold, and why a farm-launched vLLM
usually cannot be (docs/cache-state.md).

What vLLM 0.32/0.33 serve (vllm/entrypoints/serve/dev/cache/api_router.py, registered by
vllm/entrypoints/launchers/api_server/routers.py only when `VLLM_SERVER_DEV_MODE=1`):

- `POST /reset_prefix_cache` answers `{"success": bool}`: false while blocks are still held (requests running,
  KV offload in flight), and the caller may retry. Without dev mode the path is not served: HTTP 404.
- Dev mode also serves `/collective_rpc` (any method of every engine worker, by name, with string arguments),
  `/sleep`, `/wake_up`, `/server_info` and the RL routes (`/pause`, `/abort_requests`, `/update_weights`,
  `/init_weight_transfer_engine`, ...). vLLM logs "SECURITY WARNING: Development endpoints are enabled!".

The decision: a recipe never sets `VLLM_SERVER_DEV_MODE` (farm/engines/vllm/environment.py refuses it); the
worker serves vLLM in dev mode only where its profile says `[engine.vllm] dev_mode_reset = true`, which needs the
engine's loopback address (farm.worker.profile). A loopback port is reachable by every process on the host, so
that switch is for hosts that run nobody else's processes. Elsewhere the reset answers 404, said in the params,
and the cold measurements stay cold by their unique prefixes, their hit rates read from vLLM's counters
(`cold_but_warm` flags one that was not).
"""

from __future__ import annotations

import asyncio

import aiohttp

from farm.engines.base import PrefixCacheReset

RESET_PATH = "/reset_prefix_cache"
RESET_TRIES = 3
"""Tries while vLLM answers `success: false` (blocks still held by a request that is finishing)."""
RESET_RETRY_S = 0.2
"""Wait between those tries: a finished request frees its blocks within a scheduler step or two."""
NOT_SERVED = (
    f"POST {RESET_PATH} answered HTTP 404 (vLLM serves it only with VLLM_SERVER_DEV_MODE=1, off on this host: "
    "docs/cache-state.md)"
)


async def reset_prefix_cache(session: aiohttp.ClientSession, base_url: str, timeout_s: float) -> PrefixCacheReset:
    """`POST /reset_prefix_cache`, retried while vLLM says `success: false`; never raises."""
    url = base_url.rstrip("/") + RESET_PATH
    try:
        async with asyncio.timeout(timeout_s):
            for attempt in range(RESET_TRIES):
                async with session.post(url) as response:
                    if response.status == 404:
                        return PrefixCacheReset(done=NOT_SERVED, emptied=False)
                    if response.status >= 300:
                        return PrefixCacheReset(
                            done=f"POST {RESET_PATH} answered HTTP {response.status}", emptied=False
                        )
                    try:
                        body = await response.json(content_type=None)
                    except ValueError:
                        body = None
                # An older vLLM answers 200 with no body: the reset was done.
                if not isinstance(body, dict) or body.get("success", True) is not False:
                    return PrefixCacheReset(done=f"POST {RESET_PATH}", emptied=True)
                if attempt + 1 < RESET_TRIES:
                    await asyncio.sleep(RESET_RETRY_S)
    except (aiohttp.ClientError, TimeoutError) as error:
        return PrefixCacheReset(done=f"POST {RESET_PATH} failed ({type(error).__name__})", emptied=False)
    return PrefixCacheReset(
        done=f"POST {RESET_PATH} answered success: false {RESET_TRIES} times (blocks still held)", emptied=False
    )
