"""What a worker has seen of the database: whether its last call was answered, and since when it answers again.

The reaper's rule after an outage. When PostgreSQL comes back, every lease that ran out while nobody could reach
it is expired at once, and the first reaper to reconnect would take all those jobs back and announce them; an
idle worker then claims one as a new attempt milliseconds before its owner delivers the results it spooled,
and they are refused (the attempt number is the fencing token). So a reaper waits: it reaps nothing until the
database has answered it for `reap_grace_s` in a row, and a worker's start counts as such a return (it saw
nothing before it). The owners, meanwhile, deliver their spools as soon as the database answers them (the
sweeper retries its spool every SPOOL_RETRY_S while results wait).

A reaper's own observation is enough, across hosts: every worker reaches the same database, so a reaper that
could not reach it either saw the outage, and one that could (a partition that cut only the owner off) reaps
after the lease as before; the owner's late results are still taken then if no later attempt has started.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from farm.logs import get_logger

log = get_logger(__name__)


class StoreWatch:
    """The worker's view of the database's availability (thread-safe: the sweeper, the job's thread and the
    heartbeat all report to it)."""

    def __init__(self, reap_grace_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.reap_grace_s = reap_grace_s
        self._clock = clock
        self._lock = threading.Lock()
        self._down_since: float | None = None
        self._answering_since = clock()  # a start counts as a return: nothing was seen before it

    @property
    def down(self) -> bool:
        """The last call to the database failed."""
        return self._down_since is not None

    def failed(self) -> None:
        """A call to the database failed (it did not answer)."""
        with self._lock:
            if self._down_since is None:
                self._down_since = self._clock()
                log.warning("store.unreachable")

    def answered(self) -> None:
        """A call to the database was answered."""
        with self._lock:
            if self._down_since is not None:
                now = self._clock()
                log.info("store.back", outage_s=round(now - self._down_since, 1), reap_held_s=self.reap_grace_s)
                self._answering_since = now
                self._down_since = None

    def reap_held_for_s(self) -> float:
        """How much longer a reap must wait (0: it may reap now); infinite while the database does not answer."""
        with self._lock:
            if self._down_since is not None:
                return float("inf")
            return max(0.0, self._answering_since + self.reap_grace_s - self._clock())

    def may_reap(self) -> bool:
        return self.reap_held_for_s() == 0.0
