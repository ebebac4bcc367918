"""The store: jobs, claims, leases, the reaper and results, in SQLite (embedded) or PostgreSQL (farm).

`Store` is the seam; the ORM models stay inside this package and callers get farm.domain records and the
records of farm.store.records. `farm.store.reads` is the one query layer for results.
"""

from farm.store.records import LeaderboardRow, RunState, RunView, Stat, WorkerView
from farm.store.store import Store, new_job_id, recipe_sha256

__all__ = [
    "LeaderboardRow",
    "RunState",
    "RunView",
    "Stat",
    "Store",
    "WorkerView",
    "new_job_id",
    "recipe_sha256",
]
