"""Submitting jobs and waking workers.

Embedded mode (no broker): workers poll the jobs table, so storing is announcing. Farm mode (FARM_BROKER_URL
set): the jobs are stored in one transaction first, then announced on their hardware class's queue
(farm.queue.announce) until the broker fails once: one bounded attempt per submit (FARM_BROKER_TIMEOUT_S), not
one per job. Jobs left unannounced stay stored; the workers' sweepers announce them (after
FARM_ANNOUNCE_GRACE_S), and the submission says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from farm.engines.admission import check_runnable, judge_for_submit
from farm.errors import BrokerError
from farm.logs import get_logger
from farm.recipes.spec import LoadedSweep
from farm.settings import Settings
from farm.store import Store
from farm.worker.profile import simulated_class

log = get_logger(__name__)

FROM_SETTINGS = "from-settings"
"""`broker_url` default of submit_sweep: the broker of the process settings (FARM_BROKER_URL), if any."""


@dataclass(frozen=True)
class Submission:
    """What a submit stored, and what it left to the sweepers to announce."""

    job_ids: list[str]
    unannounced: list[str]
    """Stored but not announced (the broker failed): a worker's sweeper announces them."""
    broker_error: str | None = None
    judged_against: tuple[str, ...] = ()
    """The engine specs that accepted the recipe's command (`vllm 0.33.0`): those of the versions the matching
    workers reported (farm.engines.admission.judge_for_submit), or the newest shipped where none has."""
    reported_versions: tuple[str, ...] = ()
    """The engine versions the matching workers reported; empty: none has."""


WORKER_SEEN_S = 3600.0
"""A worker whose heartbeat is older than this no longer says which engine versions the farm runs."""


def running_versions(store: Store, engine: str, hardware_class: str) -> tuple[str, ...]:
    """The versions of `engine` that the farm's workers serving `hardware_class` run: those seen within
    WORKER_SEEN_S and not quarantined, as they reported them at start."""
    from datetime import UTC, datetime

    from farm.engines.registry import canonical_engine_name

    name = canonical_engine_name(engine)
    now = datetime.now(UTC)
    versions = {
        worker.engine_versions[name]
        for worker in store.list_workers()
        if name in worker.engine_versions
        and hardware_class in worker.hardware_classes
        and worker.quarantined_at is None
        and (now - worker.last_heartbeat).total_seconds() <= WORKER_SEEN_S
    }
    return tuple(sorted(versions))


def submit_sweep(
    store: Store,
    sweep: LoadedSweep,
    *,
    simulate: bool = False,
    count: int = 1,
    broker_url: str | None = FROM_SETTINGS,
) -> list[str]:
    """`submit`, returning the ids of the jobs stored."""
    return submit(store, sweep, simulate=simulate, count=count, broker_url=broker_url).job_ids


def submit(
    store: Store,
    sweep: LoadedSweep,
    *,
    simulate: bool = False,
    count: int = 1,
    broker_url: str | None = FROM_SETTINGS,
) -> Submission:
    """Store `count` jobs for a loaded sweep in one transaction and announce them in farm mode.

    `simulate` asks for the recipe's hardware played by the simulator: such a job is claimed only by a
    simulator worker, and its results are marked simulated. `broker_url` None means embedded mode (nothing to
    announce); by default it is FARM_BROKER_URL.
    """
    recipe = sweep.recipe
    klass = simulated_class(recipe.hardware_class) if simulate else recipe.hardware_class
    judgement = judge_for_submit(recipe, versions=running_versions(store, recipe.engine.name, klass))
    check_runnable(recipe)
    job_ids = store.submit(
        recipe,
        sweep_name=sweep.spec.name,
        plan=sweep.spec.plan.model_dump(mode="json"),
        spec_sha256=sweep.spec_sha256,
        max_attempts=sweep.spec.max_attempts,
        simulated=simulate,
        count=count,
        hardware_class=klass,
    )
    settings = Settings()
    url = settings.broker_url if broker_url == FROM_SETTINGS else broker_url
    judged, reported = judgement.judged_against, judgement.reported
    if not url:
        return Submission(job_ids, [], judged_against=judged, reported_versions=reported)
    from farm.queue.announce import Announcer, announce_jobs

    error: str | None
    try:
        announcer = Announcer.from_url(url, settings)
    except BrokerError as exc:
        missed, error = job_ids, str(exc)
    else:
        try:
            missed, error = announce_jobs(announcer, [(job_id, klass) for job_id in job_ids])
        finally:
            announcer.close()
    if missed:
        log.warning(
            "submit.not_announced", jobs=missed, error=error, note="stored; the workers' sweepers announce them"
        )
    return Submission(job_ids, missed, error, judged_against=judged, reported_versions=reported)
