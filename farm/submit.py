"""Submitting jobs and waking workers.

Embedded mode (no broker): workers poll the jobs table, so storing is announcing. Farm mode (FARM_BROKER_URL
set): the jobs are stored in one transaction first, then each is announced on its hardware class's queue
(farm.queue.announce); a job whose announcement fails stays stored and a worker's sweeper announces it.
"""

from __future__ import annotations

from farm.engines.admission import check_recipe_for_submit, check_runnable
from farm.errors import BrokerError
from farm.logs import get_logger
from farm.recipes.spec import LoadedSweep
from farm.settings import Settings
from farm.store import Store
from farm.worker.profile import simulated_class

log = get_logger(__name__)

FROM_SETTINGS = "from-settings"
"""`broker_url` default of submit_sweep: the broker of the process settings (FARM_BROKER_URL), if any."""


def submit_sweep(
    store: Store,
    sweep: LoadedSweep,
    *,
    simulate: bool = False,
    count: int = 1,
    broker_url: str | None = FROM_SETTINGS,
) -> list[str]:
    """Store `count` jobs for a loaded sweep in one transaction, announce them in farm mode, return their ids.

    `simulate` asks for the recipe's hardware played by the simulator: such a job is claimed only by a
    simulator worker, and its results are marked simulated. `broker_url` None means embedded mode (nothing to
    announce); by default it is FARM_BROKER_URL.
    """
    recipe = sweep.recipe
    check_recipe_for_submit(recipe)
    check_runnable(recipe)
    klass = simulated_class(recipe.hardware_class) if simulate else recipe.hardware_class
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
    url = Settings().broker_url if broker_url == FROM_SETTINGS else broker_url
    if url:
        from farm.queue.announce import Announcer, announce_jobs

        try:
            announcer = Announcer.from_url(url)
        except BrokerError as exc:
            log.warning("submit.announce_failed", error=str(exc))
            missed = job_ids
        else:
            try:
                missed = announce_jobs(announcer, [(job_id, klass) for job_id in job_ids])
            finally:
                announcer.close()
        if missed:
            log.warning("submit.not_announced", jobs=missed, note="stored; a worker's sweeper will announce them")
    return job_ids
