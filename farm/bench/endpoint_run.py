"""`farm bench URL`: a sweep against a server the farm did not launch, stored like any other run.

The spec is a sweep spec TOML: `name`, `[plan]`, optionally `[open_loop]` (farm.bench.load.OpenLoopPlan) and
`[client]` (farm.bench.sharded.ClientPlan: the concurrency levels are measured by that many load-generator
processes, each reporting its loop lag and CPU, a client-bound level flagged). Its `recipe` is optional and
not read: the endpoint is the recipe.

The run is written through the store's own path: a job of one attempt is submitted under the hardware class
`endpoint/<hardware> x <count>` (no worker serves it, so none can take it), claimed at once by this process,
and completed with the figures, the samples and provenance whose engine kind is "endpoint". A sweep that
fails marks the job failed with its reason, like a worker would.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

import farm
from farm.bench.endpoint import (
    UNKNOWN_HARDWARE,
    EndpointInfo,
    endpoint_engine_provenance,
    endpoint_recipe,
    probe_endpoint,
)
from farm.bench.load import OpenLoopPlan
from farm.bench.records import Figure
from farm.bench.runner import run_sweep
from farm.bench.sharded import ClientPlan
from farm.domain import FailureClass, RunResult, hardware_class
from farm.errors import FarmError, MeasurementError, SweepSpecError
from farm.provenance import HostInfo, Provenance, farm_commit, farm_version, now_utc
from farm.recipes.sweep import SweepPlan
from farm.store import Store, recipe_sha256

if TYPE_CHECKING:
    from farm.signing.keys import HostKey

ENDPOINT_CLASS_PREFIX = "endpoint/"
"""Jobs of endpoint runs are filed under `endpoint/<hardware class>`, a class no worker claims."""

LEASE_MARGIN_S = 120.0
"""The claim's lease outlasts the sweep's time budget by this much (there is no heartbeat thread here)."""


def default_spec_path() -> Path:
    """jobs/demo.toml of the farm's source tree: its plan is what `farm bench` runs by default."""
    return Path(farm.__file__).resolve().parent.parent / "jobs" / "demo.toml"


class EndpointSpec(BaseModel):
    """A sweep spec read for an endpoint: the recipe is optional (and unused), `[open_loop]` is allowed."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field("endpoint", min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    recipe: str | None = None
    description: str | None = None
    max_attempts: int = 1
    plan: SweepPlan = SweepPlan()
    open_loop: OpenLoopPlan | None = None
    client: ClientPlan | None = None


@dataclass(frozen=True)
class LoadedEndpointSpec:
    spec: EndpointSpec
    path: Path
    sha256: str


def load_endpoint_spec(path: Path) -> LoadedEndpointSpec:
    """Read a sweep spec for `farm bench`; SweepSpecError names the file and the field."""
    source = str(path)
    try:
        data = path.read_bytes()
        document = tomllib.loads(data.decode("utf-8"))
    except OSError as exc:
        raise SweepSpecError(f"cannot read the file: {exc.strerror or exc}", source=source) from exc
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SweepSpecError(f"not valid TOML: {exc}", source=source) from exc
    try:
        spec = EndpointSpec.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise SweepSpecError(first["msg"], source=source, field=field) from exc
    if not spec.plan.measures_anything and spec.open_loop is None:
        raise SweepSpecError("measures nothing: add a [plan.*] section or [open_loop]", source=source, field="plan")
    return LoadedEndpointSpec(spec, path, hashlib.sha256(data).hexdigest())


@dataclass(frozen=True)
class EndpointRun:
    """What `farm bench` measured and where it was stored."""

    job_id: str
    info: EndpointInfo
    figures: tuple[Figure, ...]
    failed_requests: int
    total_requests: int
    simulated: bool


def check_fits(plan: SweepPlan, open_loop: OpenLoopPlan | None, info: EndpointInfo, model: str) -> None:
    """MeasurementError when a prompt of the plan cannot fit the model's context as the server reports it."""
    limit = info.max_model_len.get(model)
    if limit is None:
        return
    wanted: list[tuple[str, int]] = []
    if plan.prefill is not None:
        wanted += [("plan.prefill.prompt_tokens", n + plan.prefill.output_tokens) for n in plan.prefill.prompt_tokens]
    if plan.concurrency is not None:
        wanted.append(("plan.concurrency", plan.concurrency.prompt_tokens + plan.concurrency.output_tokens))
    if plan.context_depth is not None:
        depth = plan.context_depth
        wanted += [("plan.context_depth.depths", d + depth.long_output_tokens) for d in depth.depths]
    if open_loop is not None:
        wanted.append(("open_loop", open_loop.prompt_tokens + open_loop.output_tokens))
    for field, tokens in wanted:
        if tokens > limit:
            raise MeasurementError(f"{field}: {tokens} tokens do not fit the server's max_model_len of {limit}")


def bench_endpoint(
    store: Store,
    url: str,
    model: str,
    loaded: LoadedEndpointSpec,
    *,
    hardware_id: str,
    hardware_count: int = 1,
    worker_id: str | None = None,
    host_key: HostKey | None = None,
) -> EndpointRun:
    """Probe the server, run the spec against it, store the run; FarmError when it cannot be measured.

    With `host_key` (the CLI passes this host's, farm.signing.keys), the run is signed here where it was measured,
    as a worker signs its runs, and the key becomes known to the store (not trusted: `farm keys trust`)."""
    spec = loaded.spec
    info = asyncio.run(probe_endpoint(url))
    if model not in info.models:
        raise MeasurementError(f"{info.url} does not serve {model!r} (it serves {', '.join(info.models) or 'none'})")
    check_fits(spec.plan, spec.open_loop, info, model)
    recipe = endpoint_recipe(info, model, hardware_id=hardware_id, hardware_count=hardware_count)
    klass = ENDPOINT_CLASS_PREFIX + hardware_class(hardware_id, hardware_count)
    plan_json = spec.plan.model_dump(mode="json")
    if spec.open_loop is not None:
        plan_json["open_loop"] = spec.open_loop.model_dump(mode="json")
    if spec.client is not None:
        plan_json["client"] = spec.client.model_dump(mode="json")
    (job_id,) = store.submit(
        recipe,
        sweep_name=spec.name,
        plan=plan_json,
        spec_sha256=loaded.sha256,
        max_attempts=1,
        simulated=info.simulated,
        hardware_class=klass,
    )
    worker = worker_id or f"bench@{socket.gethostname()}"
    job = store.claim_job(job_id, worker, [klass], lease_s=spec.plan.time_budget_s + LEASE_MARGIN_S)
    if job is None:
        raise MeasurementError(f"job {job_id} could not be claimed right after it was submitted")
    started = now_utc()
    try:
        outcome = asyncio.run(run_sweep(url, model, spec.plan, open_loop=spec.open_loop, client=spec.client))
    except FarmError as exc:
        store.fail(job_id, job.attempt, worker, FailureClass.MEASUREMENT_ERROR, str(exc), ())
        raise
    provenance = Provenance(
        captured_at=now_utc(),
        host=HostInfo.read().__dict__ | {"started_at": started, "role": "client (the server is elsewhere)"},
        gpus={
            "hardware_id": hardware_id,
            "count": hardware_count,
            "declared": hardware_id != UNKNOWN_HARDWARE,
            "source": "farm bench flags (--hardware), not probed: the server is not on this host",
        },
        engine=endpoint_engine_provenance(info, engine_version=outcome.engine_version),
        argv=(),
        environment={},
        recipe_id=recipe.id,
        recipe_sha256=recipe_sha256(recipe),
        recipe_source_sha256=recipe.provenance.content_sha256,
        model_id=model,
        model_revision=None,
        farm_version=farm_version(),
        farm_commit=farm_commit(),
        method=plan_json,
        prompt_sha256=dict(outcome.prompt_sha256),
        output_sha256=dict(outcome.output_sha256),
        cache_state="unknown: the server was not started for this run; prefill prompts carry a unique prefix",
        worker_id=worker,
        attempt=job.attempt,
        simulated=info.simulated,
        extra={
            "endpoint": info.to_json(),
            "spec_path": str(loaded.path),
            "prompt_sized_by": outcome.prompt_sized_by,
        },
    )
    result = RunResult(
        figures=outcome.figures,
        samples=outcome.samples,
        provenance=provenance.to_json(),
        failed_requests=outcome.failed_requests,
        total_requests=outcome.total_requests,
    )
    if host_key is not None:
        from farm.signing.runs import sign_result

        store.know_key(host_key.public, label=worker, source="bench")
        result = sign_result(job_id, job.attempt, worker, result, host_key)
    store.complete(job_id, job.attempt, worker, result)
    return EndpointRun(job_id, info, outcome.figures, outcome.failed_requests, outcome.total_requests, info.simulated)
