"""An endpoint as an engine: a server the farm did not launch, behind the same seam as the ones it does.

A worker profile may name one (engine kind "endpoint" with a URL) so a farm can measure hosted endpoints on a
schedule. Nothing is started or stopped: `start` and `stop` do nothing; `wait_ready` and `alive` ask the server
(`/health`, else `/v1/models`); `version` reads `/version`. The URL given may carry credentials (user and
password); everything that is stored or logged uses `public_url`, without them.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from farm.domain import ENGINE_KIND_ENDPOINT, FailureClass
from farm.errors import EngineError
from farm.net import basic_auth_header, url_without_credentials
from farm.private_files import open_private

READY_POLL_S = 1.0
"""How often a hosted endpoint is asked whether it serves while the worker waits for it."""

PROBE_TIMEOUT_S = 5.0
"""One liveness probe of a hosted endpoint (it may be across the internet)."""


class EndpointSection(BaseModel):
    """A worker profile's `[engine.endpoint]`: the server to measure, and the names it serves models under."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(description="the server's base URL, e.g. https://llm.example.com (credentials are not stored)")
    served_models: dict[str, str] = Field(
        default_factory=dict, description="recipe model id -> the name the endpoint serves it under"
    )
    simulated: bool = Field(False, description="the endpoint is the farm's simulator (its results are marked)")


class EndpointEngine:
    """A server that is already running; the farm neither starts nor stops it."""

    def __init__(self, url: str, served_model: str, *, log_path: Path, simulated: bool = False) -> None:
        self._url = url.rstrip("/")
        self._served_model = served_model
        self._log_path = log_path
        self._simulated = simulated
        self._notes: list[str] = []

    @property
    def base_url(self) -> str:
        return self._url

    @property
    def public_url(self) -> str:
        return url_without_credentials(self._url)

    @property
    def served_model(self) -> str:
        return self._served_model

    @property
    def argv(self) -> tuple[str, ...]:
        return ()

    @property
    def simulated(self) -> bool:
        return self._simulated

    @property
    def environment(self) -> dict[str, str]:
        return {}

    @property
    def log_path(self) -> Path:
        return self._log_path

    def start(self) -> None:
        """Nothing to start: the endpoint is somebody else's server."""
        self._note(f"endpoint {self.public_url}: not launched by the farm")

    def wait_ready(self, timeout_s: float) -> None:
        """Until /health (or /v1/models) answers 200; EngineError STARTUP_TIMEOUT after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self.alive():
                self._note("ready")
                return
            if time.monotonic() >= deadline:
                raise EngineError(
                    f"endpoint {self.public_url} did not answer /health or /v1/models within {timeout_s:.0f} s",
                    failure_class=FailureClass.STARTUP_TIMEOUT,
                    log_tail=self.log_text(),
                )
            time.sleep(min(READY_POLL_S, max(0.0, deadline - time.monotonic())))

    def version(self) -> str | None:
        body = self._json("/version")
        version = body.get("version") if isinstance(body, dict) else None
        return str(version) if version is not None else None

    def alive(self) -> bool:
        return self._status("/health") == 200 or self._status("/v1/models") == 200

    def stop(self) -> int | None:
        """Nothing to stop; there is no exit status."""
        return None

    def log_text(self) -> str:
        return "\n".join(self._notes)

    def classify(self, *, started: bool) -> str:
        """An endpoint that stops answering is lost to us, whatever happened to it."""
        return FailureClass.ENGINE_CRASHED if started else FailureClass.ENGINE_START_FAILED

    def provenance(self) -> dict[str, Any]:
        """The `engine` part of a run's provenance on this endpoint."""
        return {
            "kind": ENGINE_KIND_ENDPOINT,
            "launched_by_farm": False,
            "name": "unknown",
            "url": self.public_url,
            "version": self.version(),
            "image_digest": None,
        }

    def _note(self, text: str) -> None:
        self._notes.append(text)
        try:
            with open_private(self._log_path, "a", encoding="utf-8") as log_file:
                log_file.write(text + "\n")
        except OSError:
            pass  # the notes stay in memory; the log file is a convenience

    def _open(self, path: str) -> Any:
        request = urllib.request.Request(  # noqa: S310 - the profile's endpoint
            self.public_url + path, method="GET", headers=basic_auth_header(self._url)
        )
        return urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S)  # noqa: S310 - same

    def _status(self, path: str) -> int | None:
        try:
            with self._open(path) as response:
                response.read()
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except (urllib.error.URLError, OSError, TimeoutError, ValueError):
            return None

    def _json(self, path: str) -> Any:
        try:
            with self._open(path) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, TimeoutError, ValueError):
            return None


def endpoint_engine(section: EndpointSection, recipe_model_id: str, *, log_path: Path) -> EndpointEngine:
    """The engine for a recipe on a profile's endpoint: the recipe's model under the endpoint's name for it."""
    served = section.served_models.get(recipe_model_id, recipe_model_id)
    return EndpointEngine(section.url, served, log_path=log_path, simulated=section.simulated)
