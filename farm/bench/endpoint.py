"""A server the farm did not launch: what it says about itself, and the recipe and provenance that name it.

`probe_endpoint` reads `/version`, `/v1/models` and `/metrics` where the server has them (a missing one is
recorded as absent, never guessed), and `/sim/profile`, which only the farm's simulator serves (its results are
then marked simulated, as everywhere else). `endpoint_recipe` is the recipe row such a run is stored under: no
argv, the engine kind "endpoint", the hardware the user declared or "unknown". The URL is always kept without
credentials (`farm.net.url_without_credentials`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from farm.domain import ENGINE_KIND_ENDPOINT
from farm.engines.registry import ENGINES
from farm.errors import MeasurementError
from farm.net import url_without_credentials
from farm.recipes.model import Engine, Recipe, RecipeProvenance, ServingLimits, SourceRef

"""The provenance engine kind of a server the farm did not launch (the store and leaderboard mark it)."""

UNKNOWN_HARDWARE = "unknown"
"""The hardware id of an endpoint whose hardware nobody declared."""

ENGINE_METRIC_PREFIXES = {
    **{kind.metric_prefix: name for name, kind in ENGINES.items() if kind.metric_prefix},
    "tgi_": "tgi",  # an endpoint may be Hugging Face's TGI, which no worker launches
}
"""Which engine a /metrics page comes from, by its metric names' prefix (the table's)."""

PROBE_TIMEOUT_S = 10.0
"""Each untimed probe of the server's own pages."""


@dataclass(frozen=True)
class EndpointInfo:
    """What a server told about itself. None or empty: it did not say."""

    url: str
    version: str | None
    models: tuple[str, ...]
    max_model_len: dict[str, int] = field(default_factory=dict)
    metrics_served: bool = False
    engine_name: str | None = None
    simulator_profile: str | None = None

    @property
    def simulated(self) -> bool:
        return self.simulator_profile is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "version": self.version,
            "models": list(self.models),
            "max_model_len": dict(self.max_model_len),
            "metrics_served": self.metrics_served,
            "engine_name": self.engine_name,
            "simulator_profile": self.simulator_profile,
        }


def engine_from_metrics(text: str) -> str | None:
    """The engine whose metric names a /metrics page carries (the first known prefix), or None."""
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        for prefix, name in ENGINE_METRIC_PREFIXES.items():
            if line.startswith(prefix):
                return name
    return None


async def _get(session: aiohttp.ClientSession, url: str) -> tuple[int, str] | None:
    try:
        async with asyncio.timeout(PROBE_TIMEOUT_S):
            async with session.get(url) as response:
                return response.status, await response.text()
    except (aiohttp.ClientError, TimeoutError):
        return None


async def probe_endpoint(base_url: str, headers: dict[str, str] | None = None) -> EndpointInfo:
    """Read what the server at `base_url` says about itself; MeasurementError when it lists no models."""
    base = base_url.rstrip("/")
    async with aiohttp.ClientSession(headers=headers or {}) as session:
        version_page, models_page, metrics_page, sim_page = await asyncio.gather(
            _get(session, base + "/version"),
            _get(session, base + "/v1/models"),
            _get(session, base + "/metrics"),
            _get(session, base + "/sim/profile"),
        )
    clean = url_without_credentials(base)
    if models_page is None or models_page[0] != 200:
        status = "no answer" if models_page is None else f"HTTP {models_page[0]}"
        raise MeasurementError(f"{clean}/v1/models: {status}; is this an OpenAI-compatible server?")
    models, lengths = _models(models_page[1], clean)
    version = _json_field(version_page, "version")
    engine_name = engine_from_metrics(metrics_page[1]) if metrics_page and metrics_page[0] == 200 else None
    profile = _json_field(sim_page, "profile", "name")
    return EndpointInfo(
        url=clean,
        version=version,
        models=models,
        max_model_len=lengths,
        metrics_served=metrics_page is not None and metrics_page[0] == 200,
        engine_name="sim" if profile is not None else engine_name,
        simulator_profile=profile,
    )


def _models(text: str, url: str) -> tuple[tuple[str, ...], dict[str, int]]:
    try:
        document = json.loads(text)
        entries = document["data"]
        ids = tuple(str(entry["id"]) for entry in entries)
    except (ValueError, KeyError, TypeError) as exc:
        raise MeasurementError(f"{url}/v1/models: not an OpenAI model list ({exc})") from exc
    lengths = {
        str(entry["id"]): int(entry["max_model_len"])
        for entry in entries
        if isinstance(entry.get("max_model_len"), int)
    }
    return ids, lengths


def _json_field(page: tuple[int, str] | None, *path: str) -> str | None:
    """The string at `path` in a JSON page that answered 200, or None."""
    if page is None or page[0] != 200:
        return None
    try:
        value: Any = json.loads(page[1])
    except ValueError:
        return None
    for name in path:
        value = value.get(name) if isinstance(value, dict) else None
    return str(value) if value is not None else None


def endpoint_recipe(info: EndpointInfo, model: str, *, hardware_id: str, hardware_count: int) -> Recipe:
    """The recipe an endpoint run is stored under: the model, the declared hardware, no launch command."""
    identity = json.dumps({"url": info.url, "model": model}, sort_keys=True)
    return Recipe(
        id=f"endpoint:{model}@{info.url}",
        model_id=model,
        hardware_id=hardware_id,
        hardware_count=hardware_count,
        engine=Engine(name=ENGINE_KIND_ENDPOINT, version=info.version),
        argv=(),
        serving=ServingLimits(max_context_tokens=info.max_model_len.get(model)),
        provenance=RecipeProvenance(
            source_format=ENGINE_KIND_ENDPOINT,
            sources=(SourceRef(kind=ENGINE_KIND_ENDPOINT, url=info.url),),
            content_sha256=hashlib.sha256(identity.encode()).hexdigest(),
        ),
        notes="a server the farm did not launch (farm bench URL)",
    )


def endpoint_engine_provenance(info: EndpointInfo, *, engine_version: str | None) -> dict[str, Any]:
    """The `engine` part of an endpoint run's provenance."""
    return {
        "kind": ENGINE_KIND_ENDPOINT,
        "launched_by_farm": False,
        "name": info.engine_name or "unknown",
        "recipe_engine": ENGINE_KIND_ENDPOINT,
        "version": engine_version or info.version,
        "url": info.url,
        "served_models": list(info.models),
        "metrics_served": info.metrics_served,
        "image_digest": None,
    }
