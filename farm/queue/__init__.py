"""Submitting jobs and waking workers. Embedded mode: workers poll the jobs table, so storing is announcing."""

from __future__ import annotations

from farm.recipes.spec import LoadedSweep
from farm.store import Store
from farm.worker.profile import simulated_class


def submit_sweep(store: Store, sweep: LoadedSweep, *, simulate: bool = False, count: int = 1) -> list[str]:
    """Store `count` jobs for a loaded sweep in one transaction and return their ids.

    `simulate` asks for the recipe's hardware played by the simulator: such a job is claimed only by a
    simulator worker, and its results are marked simulated.
    """
    recipe = sweep.recipe
    klass = simulated_class(recipe.hardware_class) if simulate else recipe.hardware_class
    return store.submit(
        recipe,
        sweep_name=sweep.spec.name,
        plan=sweep.spec.plan.model_dump(mode="json"),
        spec_sha256=sweep.spec_sha256,
        max_attempts=sweep.spec.max_attempts,
        simulated=simulate,
        count=count,
        hardware_class=klass,
    )
