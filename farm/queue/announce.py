"""Announcing jobs on the broker, and the sweeper that announces again what the broker may have lost.

A stored job is announced with a message that carries its id, sent to the queue of its hardware class. The
store stays the only truth; the bookkeeping of announcements lives in Redis beside the messages (no store
change): one key per job, `farm:announced:<job id>` = "<attempt> <unix time>", written just before the message
is sent and removed again when the send fails.

A queued job needs a (new) announcement when

- it has no key: never announced (the submitter died between storing and announcing), or Redis lost its data
  (restarted without persistence); after a grace period (FARM_ANNOUNCE_GRACE_S) from the job's last change,
  so the sweeper does not race a submitter that is about to announce;
- its key names an older attempt: the job was claimed since, and came back (reaped, released, retried), so
  the message that announced it was consumed;
- its key is older than FARM_ANNOUNCE_STALE_S while its class's queue is empty: a message that should be
  waiting is not (a queue purged by hand, a worker killed between taking a message and claiming its job), or
  it sits with a busy worker (after a reconnect Celery may take one message beyond the one it runs), where
  an idle worker could run it.

The decision and the write of the key are one Lua script, so any number of sweepers can run at once without
announcing a job twice. A job announced twice anyway is harmless: the second claim finds it running or done.

A job claimed straight from the store (not through its message: farm.worker.celery) leaves its message in the
queue. The claimer withdraws the announcement (`withdraw`: the key is deleted if it names an earlier attempt than
the one claimed), batched with its sweeper's next broker ping, so no round trip is added to the claim; the
worker that takes such a message finds no key (`announcement_stands`) and drops it without a claim query. A
message is only ever sent after its key was written, so a message without a key is one whose job was claimed
since, or whose announcement was forgotten (a message consumed without a claim, Redis that lost its data):
in the last two cases the job waits for its next announcement, which the sweepers make as for a job never
announced (after FARM_ANNOUNCE_GRACE_S).

The sweeper (farm.worker.sweeper) runs as a thread in every farm worker: no extra service to deploy, and it lives
exactly as long as some worker for the class does (celery beat would be one more process that must run exactly
once).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import redis
from celery import Celery
from redis.backoff import NoBackoff
from redis.retry import Retry

from farm.domain import JobView
from farm.errors import BrokerError
from farm.logs import get_logger
from farm.queue.celery_app import RUN_JOB_TASK, create_app, queue_name
from farm.settings import Settings

log = get_logger(__name__)

ANNOUNCED_KEY_PREFIX = "farm:announced:"
"""Redis key of a job's last announcement: `farm:announced:<job id>`."""

SWEEP_TURN_KEY_PREFIX = "farm:sweep-turn:"
"""Redis key of a hardware class's announcing turn: `farm:sweep-turn:<class>`, held by one sweeper for a sweep
interval (Announcer.take_turn)."""

ANNOUNCED_KEY_TTL_S = 7 * 24 * 3600
"""Keys of finished jobs are garbage after this long; a job still queued then is announced once more (harmless)."""

_ANNOUNCE_IF_DUE = """
local current = redis.call('GET', KEYS[1])
if current then
  local sep = string.find(current, ' ', 1, true)
  if sep then
    local attempt = string.sub(current, 1, sep - 1)
    local at = tonumber(string.sub(current, sep + 1))
    if attempt == ARGV[1] and at ~= nil and at > tonumber(ARGV[3]) then
      return 0
    end
  end
elseif tonumber(ARGV[5]) == 0 then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[2], 'EX', ARGV[4])
return 1
"""
"""KEYS: the job's key. ARGV: attempt, now, stale_before (an entry at this attempt written after it stands),
key TTL, 1 when a job without a key is due (0 while it is in its grace period). Returns 1 when the caller is to
announce (the key is written), else 0."""

_WITHDRAW = """
for index, key in ipairs(KEYS) do
  local current = redis.call('GET', key)
  if current then
    local sep = string.find(current, ' ', 1, true)
    local attempt = sep and tonumber(string.sub(current, 1, sep - 1))
    if attempt ~= nil and attempt < tonumber(ARGV[index]) then
      redis.call('DEL', key)
    end
  end
end
return 0
"""
"""KEYS: jobs' keys. ARGV: the attempt claimed of each. A key that names an earlier attempt is deleted (its
message is surplus); one written since for this attempt or a later one (the job came back and was announced
again) stands."""

WITHDRAWALS_HELD = 10_000
"""Withdrawals a worker holds while its broker does not answer; beyond them the oldest are let go (a message not
withdrawn costs one claim query that finds its job taken, nothing else)."""


class Announcer:
    """Sends wake-up messages (a job id to its hardware class's queue) and keeps their bookkeeping in Redis."""

    def __init__(self, app: Celery, client: redis.Redis) -> None:
        self.app = app
        self.redis = client
        self._script = client.register_script(_ANNOUNCE_IF_DUE)
        self._withdrawals: dict[str, int] = {}
        self._withdrawals_lock = threading.Lock()

    @classmethod
    def from_url(cls, broker_url: str, settings: Settings | None = None) -> Announcer:
        """An announcer on the broker (a Redis URL) with farm mode's Celery settings; every call it makes gives
        up after FARM_BROKER_TIMEOUT_S (a dead or silent broker never hangs a submit or a sweep)."""
        settings = settings or Settings()
        timeout = settings.broker_timeout_s
        try:
            client = redis.Redis.from_url(
                broker_url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                socket_keepalive=True,
                retry=Retry(NoBackoff(), 0),  # redis-py retries 3 times by default: four timeouts per call
            )
        except ValueError as exc:
            raise BrokerError(f"FARM_BROKER_URL is not a Redis URL: {exc}") from exc
        return cls(create_app(broker_url, settings), client)

    def ping(self) -> str | None:
        """Whether the broker answers: None when it does, else why not (one round trip, bounded by the timeout,
        that carries the withdrawals held since the last one)."""
        with self._withdrawals_lock:
            withdrawals, self._withdrawals = self._withdrawals, {}
        try:
            if withdrawals:
                pipe = self.redis.pipeline(transaction=False)
                keys = [ANNOUNCED_KEY_PREFIX + job_id for job_id in withdrawals]
                # EVAL, not the registered script: a pipeline checks its scripts with one more round trip first.
                pipe.eval(_WITHDRAW, len(keys), *keys, *withdrawals.values())
                pipe.ping()
                pipe.execute()
            else:
                self.redis.ping()
        except redis.RedisError as exc:
            with self._withdrawals_lock:
                self._withdrawals = {**withdrawals, **self._withdrawals}
                for job_id in list(self._withdrawals)[: max(0, len(self._withdrawals) - WITHDRAWALS_HELD)]:
                    del self._withdrawals[job_id]
            return f"{type(exc).__name__}: {exc}"
        return None

    def withdraw(self, job_id: str, attempt: int) -> None:
        """The job was claimed (attempt `attempt`) without its message: that message is surplus. Held, and sent
        with the next `ping` (module docstring)."""
        with self._withdrawals_lock:
            self._withdrawals[job_id] = attempt

    def announcement_stands(self, job_id: str) -> bool:
        """Whether a message for this job may still be wanted: False when the job has no announcement (it was
        withdrawn, or forgotten: module docstring), and the message is dropped without a claim. True when Redis
        does not answer: the claim decides then."""
        try:
            return bool(self.redis.exists(ANNOUNCED_KEY_PREFIX + job_id))
        except redis.RedisError as exc:
            log.warning("announce.check_failed", job=job_id, error=str(exc))
            return True

    def close(self) -> None:
        self.redis.close()
        self.app.close()

    def announce(self, job_id: str, hardware_class: str, attempt: int) -> bool:
        """Announce a job now (a new job, a reaped or requeued one) unless this very attempt of it was announced
        already (two workers that both saw it come back send one message). True when it was announced."""
        return self._announce(job_id, hardware_class, attempt, stale_before=float("-inf"), keyless_due=True)

    def announce_if_due(self, job: JobView, *, now: float, grace_s: float, stale_s: float, queue_empty: bool) -> bool:
        """Announce a queued job when the module docstring's rules say it needs it; True when it was announced."""
        keyless_due = job.updated_at.timestamp() <= now - grace_s
        stale_before = now - stale_s if queue_empty else float("-inf")
        return self._announce(job.id, job.hardware_class, job.attempt, stale_before, keyless_due, now=now)

    def take_turn(self, hardware_class: str, worker_id: str, seconds: float) -> bool:
        """Whether this worker's sweeper announces for `hardware_class` in this pass: the turn goes to one sweeper
        of the fleet per `seconds` (a SET NX with that expiry; the holder takes it again when it expires). Every
        sweeper looking at the same oldest queued jobs every pass was one Lua call per job per worker: 100 workers
        with a backlog made 2,000 calls a second and half a core of sweeping (bench/fleet.py). A holder that died
        leaves the turn to another within `seconds`. False, not an error, when the broker does not answer: the
        sweeper's ping says so."""
        key = SWEEP_TURN_KEY_PREFIX + hardware_class
        try:
            if self.redis.set(key, worker_id, nx=True, px=max(1, int(seconds * 1000))):
                return True
            holder = self.redis.get(key)
        except redis.RedisError as exc:
            log.warning("announce.turn_failed", hardware_class=hardware_class, error=str(exc))
            return False
        return holder is not None and (holder.decode() if isinstance(holder, bytes) else str(holder)) == worker_id

    def forget(self, job_id: str) -> None:
        """Drop a job's announcement (its message was consumed without a claim); a sweeper announces it again."""
        try:
            self.redis.delete(ANNOUNCED_KEY_PREFIX + job_id)
        except redis.RedisError as exc:
            log.warning("announce.forget_failed", job=job_id, error=str(exc))

    def queue_length(self, hardware_class: str) -> int:
        """Messages waiting in a class's queue (not those a worker has taken and not yet acknowledged)."""
        try:
            return int(self.redis.llen(queue_name(hardware_class)))
        except redis.RedisError as exc:
            raise BrokerError(f"cannot read the queue of {hardware_class}: {exc}") from exc

    def last_announcement(self, job_id: str) -> tuple[int, float] | None:
        """(attempt, unix time) of a job's last announcement, or None."""
        raw = self.redis.get(ANNOUNCED_KEY_PREFIX + job_id)
        if raw is None:
            return None
        text = raw.decode() if isinstance(raw, bytes) else str(raw)
        attempt, at = text.split(" ", 1)
        return int(attempt), float(at)

    def _announce(
        self,
        job_id: str,
        hardware_class: str,
        attempt: int,
        stale_before: float,
        keyless_due: bool,
        *,
        now: float | None = None,
    ) -> bool:
        queue = queue_name(hardware_class)
        key = ANNOUNCED_KEY_PREFIX + job_id
        when = time.time() if now is None else now
        try:
            due = self._script(
                keys=[key],
                args=[attempt, repr(when), _lua_number(stale_before), ANNOUNCED_KEY_TTL_S, int(keyless_due)],
            )
        except redis.RedisError as exc:
            raise BrokerError(f"cannot announce job {job_id}: {exc}") from exc
        if not due:
            return False
        try:
            # One attempt, bounded by the transport's timeouts: a retry belongs to the next sweep, not to a wait here.
            self.app.send_task(RUN_JOB_TASK, args=[job_id], queue=queue, retry=False)
        except Exception as exc:
            # kombu raises its own and the transport's errors here; whatever it was, the message is not sent.
            self.forget(job_id)
            raise BrokerError(f"cannot announce job {job_id} on {queue}: {exc}") from exc
        log.info("job.announced", job=job_id, queue=queue, attempt=attempt)
        return True


def _lua_number(value: float) -> str:
    # Lua's tonumber() reads neither "inf" nor "-inf"; 1e300 is as good for Unix times.
    if value == float("inf"):
        return "1e300"
    if value == float("-inf"):
        return "-1e300"
    return repr(value)


def announce_jobs(announcer: Announcer, jobs: Sequence[tuple[str, str]]) -> tuple[list[str], str | None]:
    """Announce new jobs (id, hardware class) until the broker fails once: (the ids not announced, the broker's
    error or None). The first failure ends it, so a dead or silent broker costs one timeout per call of this,
    not one per job; the jobs left over are stored, and the workers' sweepers announce them."""
    for index, (job_id, hardware_class) in enumerate(jobs):
        try:
            announcer.announce(job_id, hardware_class, attempt=0)
        except BrokerError as exc:
            log.warning("job.announce_failed", job=job_id, error=str(exc))
            return [job for job, _ in jobs[index:]], str(exc)
    return [], None
