"""The claim: which queued job a host may take, and the statement that takes it (farm.store.store's lease protocol).

Who may claim what is one SQL condition (`eligible`), evaluated by the database inside the claim itself: a
quarantined host claims nothing, and a job the host already failed is left to another live, unquarantined host
of its class whose broker answers and that has not failed it, while one exists; when none does, the host may
take it again once its back-off (`retry_after`) has passed. No query reads the hosts beforehand.

On PostgreSQL a claim is one statement, run in autocommit, so one round trip to the database (or the pooler)
picks, leases and returns the job:

    WITH claimed AS (
        UPDATE jobs SET state = 'running', owner = :worker, attempt = attempt + 1,
                        lease_expires_at = now() + :lease, ...
        WHERE id = (SELECT id FROM jobs WHERE state = 'queued' AND hardware_class IN (:classes) AND <eligible>
                    ORDER BY priority, created_at LIMIT 1 FOR UPDATE SKIP LOCKED)
          AND state = 'queued'
        RETURNING ...),
    new_run AS (INSERT INTO runs (job_id, attempt, worker_id, state, started_at) SELECT ... FROM claimed)
    SELECT claimed.*, recipes.document FROM claimed
    LEFT JOIN recipes ON recipes.sha256 = claimed.recipe_sha256 AND recipes.sha256 NOT IN (:known)

The database's clock (`now()`) is read inside it. The recipe comes back only when the caller does not hold it
yet: documents are cached by their content hash (`RecipeCache`), so a cached one can never be stale. The row
lock taken with SKIP LOCKED and the `state = 'queued'` check make the claim of a job happen once however many
hosts claim at the same time; the attempt number it sets is the fencing token. A claim of a named job (the
message's) has the same shape without the ordering.

SQLite runs the same UPDATE ... RETURNING, then the run row's insert and, when the recipe is not cached, its
read, inside the store's `BEGIN IMMEDIATE` (SQLite has no data-modifying WITH; its round trips are calls into
the library).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ARRAY,
    ColumnElement,
    Dialect,
    Insert,
    Interval,
    Select,
    String,
    Update,
    and_,
    bindparam,
    func,
    insert,
    literal,
    not_,
    or_,
    select,
    union_all,
    update,
)

from farm.domain import JobState, Phase
from farm.store.models import Host, Job, RecipeRow, Run, UTCDateTime
from farm.store.records import RunState

RECIPE_CACHE_SIZE = 64
"""Recipe documents a store keeps by content hash: a fleet's queue holds sweeps of a few recipes at a time, and
every hash the cache holds is named in each claim (so the database sends those documents no more)."""

CLAIM_RETURNING = (
    Job.id,
    Job.attempt,
    Job.hardware_class,
    Job.plan,
    Job.recipe_sha256,
    Job.sweep_name,
    Job.spec_sha256,
    Job.simulated,
    Job.max_attempts,
    Job.lease_expires_at,
    Job.started_at,
)
"""What a claim returns of the job (farm.domain.ClaimedJob is made of it)."""


def claim_parameters(
    worker_id: str,
    hardware_classes: Sequence[str],
    lease_s: float,
    now: datetime | None,
    live_within_s: float,
    job_id: str | None,
    known_recipes: Sequence[str],
) -> dict[str, Any]:
    """The parameters of a claim statement (`claim_update`, `one_statement`). `now` None: the database's clock."""
    if lease_s <= 0:
        raise ValueError(f"lease_s must be positive, not {lease_s}")
    params: dict[str, Any] = {
        "worker_id": worker_id,
        "classes": list(hardware_classes),
        **{f"class_{index}": klass for index, klass in enumerate(hardware_classes)},
        "job_id": job_id,
        "known": list(known_recipes),
    }
    if now is None:
        params |= {"lease": timedelta(seconds=lease_s), "live": timedelta(seconds=live_within_s)}
    else:
        lease_expires, live_since = now + timedelta(seconds=lease_s), now - timedelta(seconds=live_within_s)
        params |= {"now": now, "lease_expires": lease_expires, "live_since": live_since}
    return params


def _serves(hardware_classes: ColumnElement[Any], hardware_class: ColumnElement[str], *, postgres: bool) -> Any:
    """Whether a host's JSON list of classes holds `hardware_class`."""
    if postgres:
        return hardware_classes.op("@>", is_comparison=True)(func.jsonb_build_array(hardware_class))
    entries = func.json_each(hardware_classes).table_valued("value")
    return select(entries.c.value).where(entries.c.value == hardware_class).correlate_except(entries).exists()


def _failed_by(worker_id: ColumnElement[str]) -> ColumnElement[bool]:
    """The job (correlated) has a failed attempt on this host (a column of an enclosing query, or a parameter)."""
    return (
        select(Run.id)
        .where(Run.job_id == Job.id, Run.worker_id == worker_id, Run.state == RunState.FAILED.value)
        .correlate_except(Run)  # the job and the host are the enclosing queries', however deep
        .exists()
    )


def eligible(
    worker_id: ColumnElement[str],
    now: ColumnElement[datetime],
    live_since: ColumnElement[datetime],
    *,
    postgres: bool,
) -> ColumnElement[bool]:
    """The jobs (correlated) `worker_id` may claim at `now`: the rule in the module docstring. `live_since`: a
    host heard from after it is live."""
    quarantined = select(Host.worker_id).where(Host.worker_id == worker_id, Host.quarantined_at.is_not(None)).exists()
    # Another host that could take the job instead: live, in rotation, its broker answering (a host whose broker
    # does not answer cannot receive the job's message), serving the job's class, and it has not failed the job.
    another_host = (
        select(Host.worker_id)
        .where(
            Host.worker_id != worker_id,
            Host.quarantined_at.is_(None),
            Host.last_heartbeat > live_since,
            or_(Host.broker_ok.is_(None), Host.broker_ok.is_(True)),
            _serves(Host.hardware_classes, Job.hardware_class, postgres=postgres),
            not_(_failed_by(Host.worker_id)),
        )
        .correlate_except(Host)
        .exists()
    )
    backed_off = or_(Job.retry_after.is_(None), Job.retry_after <= now)
    return and_(not_(quarantined), or_(not_(_failed_by(worker_id)), and_(backed_off, not_(another_host))))


@functools.cache
def claim_update(*, postgres: bool, by_id: bool, database_clock: bool, classes: int) -> Update:
    """The UPDATE ... RETURNING that claims the next job a host of `classes` hardware classes may take (`by_id`:
    the message's job), built once per shape; its parameters come from `claim_parameters` (`database_clock`:
    `now` was None there).

    The next job is the head of each class's queue in the claim index (state, hardware_class, priority,
    created_at), read in index order and locked with SKIP LOCKED, and the first of those heads: so a claim reads
    a few index entries, not the queue (sorting a 7,000-job queue for every claim took 29 ms). Jobs of equal
    priority and age (one submission) go in index order; their ids are random, so ordering by id as well would
    only have made the database read the whole submission."""
    worker_id: ColumnElement[str] = bindparam("worker_id", type_=String)
    if database_clock:
        when: ColumnElement[datetime] = func.now()
        lease_expires = when + bindparam("lease", type_=Interval)
        live_since = when - bindparam("live", type_=Interval)
    else:
        when = bindparam("now", type_=UTCDateTime)
        lease_expires = bindparam("lease_expires", type_=UTCDateTime)
        live_since = bindparam("live_since", type_=UTCDateTime)
    may_take = and_(Job.state == JobState.QUEUED.value, eligible(worker_id, when, live_since, postgres=postgres))
    if by_id:
        if postgres:  # an array: one statement text whatever the number of classes
            in_classes = Job.hardware_class == func.any(bindparam("classes", type_=ARRAY(String)))
        else:
            in_classes = Job.hardware_class.in_(bindparam("classes", expanding=True))
        which = and_(Job.id == bindparam("job_id", type_=String), in_classes, may_take)
    else:
        heads = [
            select(Job.id, Job.priority, Job.created_at)
            .where(Job.hardware_class == bindparam(f"class_{index}", type_=String), may_take)
            .order_by(Job.priority, Job.created_at)
            .limit(1)
            .with_for_update(skip_locked=True)
            .correlate(None)
            for index in range(classes)
        ]
        if len(heads) == 1:
            candidate = heads[0].with_only_columns(Job.id).scalar_subquery()
        else:
            # Another class's head stays locked until the statement ends (a claim in autocommit): a claimer
            # meanwhile skips it, as it skips any job being claimed.
            union = union_all(*(select(head.subquery()) for head in heads)).subquery("heads")
            candidate = select(union.c.id).order_by(union.c.priority, union.c.created_at).limit(1).scalar_subquery()
        which = Job.id == candidate
    return (
        update(Job)
        .where(which, Job.state == JobState.QUEUED.value)
        .values(
            state=JobState.RUNNING.value,
            owner=worker_id,
            attempt=Job.attempt + 1,
            lease_expires_at=lease_expires,
            retry_after=None,
            phase=Phase.CLAIMED.value,
            progress=None,
            updated_at=when,
            started_at=when,
        )
        .returning(*CLAIM_RETURNING)
    )


def run_insert(job_id: str, attempt: int, worker_id: str, started_at: datetime) -> Insert:
    """The run row of a claimed attempt (SQLite; PostgreSQL inserts it inside the claim)."""
    return insert(Run).values(
        job_id=job_id, attempt=attempt, worker_id=worker_id, state=RunState.RUNNING.value, started_at=started_at
    )


def one_statement(claim: Update) -> Select[Any]:
    """PostgreSQL: the claim, its run row and (unless it is among the parameter `known`) its recipe document in
    one statement."""
    claimed = claim.cte("claimed")
    new_run = insert(Run).from_select(
        [Run.job_id, Run.attempt, Run.worker_id, Run.state, Run.started_at],
        select(
            claimed.c.id,
            claimed.c.attempt,
            bindparam("worker_id", type_=String),
            literal(RunState.RUNNING.value),
            claimed.c.started_at,
        ),
    )
    unknown = RecipeRow.sha256 != func.all(bindparam("known", type_=ARRAY(String)))
    recipe = and_(RecipeRow.sha256 == claimed.c.recipe_sha256, unknown)
    return (
        select(claimed, RecipeRow.document)
        .select_from(claimed.outerjoin(RecipeRow, recipe))
        .add_cte(new_run.cte("new_run"))
    )


_COMPILED: dict[tuple[Any, ...], tuple[str, dict[str, Any]]] = {}
"""Compiled PostgreSQL claim statements, by dialect and shape (`postgres_statement`)."""


def postgres_statement(
    dialect: Dialect, *, by_id: bool, database_clock: bool, classes: int
) -> tuple[str, dict[str, Any]]:
    """A PostgreSQL claim statement (`one_statement`) compiled for the driver: its text and the values of its
    fixed parameters. Executed as the driver's SQL (`Connection.exec_driver_sql`), a claim spends no CPU building,
    caching or compiling a statement (a third of a claim's CPU when it did, with 50 hosts in a process). Compiled
    once per shape and process, for every store of the process."""
    classes = 0 if by_id else classes
    key = (dialect.name, dialect.driver, dialect.server_version_info, by_id, database_clock, classes)
    compiled = _COMPILED.get(key)
    if compiled is None:
        claim = claim_update(postgres=True, by_id=by_id, database_clock=database_clock, classes=classes)
        done = one_statement(claim).compile(dialect=dialect)
        compiled = _COMPILED.setdefault(key, (done.string, dict(done.params)))
    return compiled


class RecipeCache:
    """Recipe documents by content hash (the hash names the content, so an entry is never stale). Each claim gets
    its own copy. Thread-safe; it forgets everything when full (a new sweep's recipes fill it again)."""

    def __init__(self, size: int = RECIPE_CACHE_SIZE) -> None:
        self.size = size
        self._documents: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def known(self) -> list[str]:
        with self._lock:
            return list(self._documents)

    def get(self, sha256: str) -> dict[str, Any] | None:
        with self._lock:
            document = self._documents.get(sha256)
        if document is None:
            return None
        copied: dict[str, Any] = _copy(document)
        return copied

    def put(self, sha256: str, document: dict[str, Any]) -> dict[str, Any]:
        """Keep `document`; returns a copy of it for the caller."""
        kept: dict[str, Any] = _copy(document)
        with self._lock:
            if len(self._documents) >= self.size and sha256 not in self._documents:
                self._documents.clear()
            self._documents[sha256] = kept
        copied: dict[str, Any] = _copy(kept)
        return copied


def _copy(value: Any) -> Any:
    """A deep copy of a JSON document (dicts, lists and scalars): faster than copy.deepcopy, which a claim pays."""
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    return value
