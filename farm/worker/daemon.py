"""The worker loop: claim a matching job, supervise its engine, run the sweep, write results, clean up.

One job at a time. Every wait has a deadline; the engine is stopped on every exit path; a heartbeat thread
renews the lease and reports the phase; results go to the store in one transaction, or to the spool when the
store cannot be reached (delivered before the next claim or reap: the store takes them while no later attempt
of the job exists).

A host whose engine fails to start `quarantine_after` times in a row is quarantined by the store: it claims
nothing, and every `self_check_interval_s` it starts its engine with no job (the recipe of the last job it
claimed, or a minimal one on the simulator); a start that succeeds returns it to rotation, as does
`farm workers --release HOST`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

import structlog

from farm.bench.energy_figures import energy_figures, workloads_of
from farm.bench.records import KIND_MEMORY, Figure, figure_key
from farm.bench.runner import SweepOutcome, run_sweep
from farm.domain import START_FAILURES, Artifact, ClaimedJob, FailureClass, JobState, Phase, RunResult
from farm.engines.base import Engine
from farm.engines.process import wait_gpus_free
from farm.engines.registry import engine_kind
from farm.errors import EngineError, FarmError, LeaseLost, MeasurementError, StoreError, StoreRefused
from farm.hardware.probe import HardwareProbe, SimulatedProbe
from farm.logs import get_logger
from farm.net import free_port
from farm.provenance import HostInfo, Provenance, capture_provenance, now_utc
from farm.recipes.model import Engine as RecipeEngine
from farm.recipes.model import Recipe, RecipeProvenance
from farm.recipes.sweep import SweepPlan
from farm.scrubber import scrub_artifact, scrub_text
from farm.settings import Settings
from farm.signing.keys import HostKey
from farm.signing.runs import sign_result
from farm.store import Store, recipe_sha256
from farm.worker.energy import ENERGY_SAMPLE_INTERVAL_S, EnergySampler
from farm.worker.engines import EngineFactory, default_engine_factory, engine_versions, probe_for
from farm.worker.failures import classify_request_failure
from farm.worker.memory import PeakMemorySampler
from farm.worker.outage import StoreWatch
from farm.worker.profile import WorkerProfile
from farm.worker.spool import Spool

log = get_logger(__name__)
T = TypeVar("T")


@dataclass
class _RunState:
    """Shared between the job's thread and its heartbeat thread."""

    phase: str = Phase.CLAIMED
    progress: float = 0.0
    lease_lost: str | None = None
    engine_served: bool = False
    stop: threading.Event = field(default_factory=threading.Event)


class Worker:
    """One worker daemon: one job at a time, from the hardware classes of its profile."""

    def __init__(
        self,
        store: Store,
        profile: WorkerProfile,
        *,
        data_dir: Path,
        engine_factory: EngineFactory = default_engine_factory,
        probe: HardwareProbe | None = None,
        worker_id: str | None = None,
        settings: Settings | None = None,
    ) -> None:
        self.store = store
        self.profile = profile
        self.settings = settings or Settings()
        self.worker_id = worker_id or profile.worker_id()
        self.data_dir = data_dir
        self.engine_factory = engine_factory
        self.probe = probe or probe_for(profile)
        self.spool = Spool(data_dir / "spool" / self.worker_id)
        self.hardware_classes = profile.hardware_classes()
        self.lease_s = profile.worker.lease_s or self.settings.lease_s
        self.poll_interval_s = profile.worker.poll_interval_s or self.settings.poll_interval_s
        self.broker_ok: bool | None = None
        """Farm mode: whether the broker answered the sweeper's last check; None in embedded mode."""
        self._shutdown = threading.Event()
        self._spool_lock = threading.Lock()
        """One delivery of the spool at a time: farm mode delivers from the sweeper and from a task's thread."""
        self._host = HostInfo.read()
        self.host_key = HostKey.load_or_create(data_dir)
        """This host's signing key (farm.signing.keys: made at the first start, 0600 in the data directory)."""
        self._last_recipe: Recipe | None = None
        self._next_self_check = 0.0

    @functools.cached_property
    def store_watch(self) -> StoreWatch:
        """What this worker saw of the database: a reap waits after an outage (farm.worker.outage), and from its
        first use (the worker's start). Not on SQLite: a file on this host has no outage that another host's owner
        could be caught in."""
        return StoreWatch(0.0 if self.store.is_sqlite else self.settings.reap_grace_s)

    # --- the loop ---

    def shutdown(self) -> None:
        """Ask the loop to stop after the current job (or at once when idle)."""
        self._shutdown.set()

    def run(
        self,
        *,
        max_jobs: int | None = None,
        idle_exit_s: float | None = None,
        only_jobs: Sequence[str] | None = None,
    ) -> int:
        """Claim and run jobs until shut down, `max_jobs` are done, or idle for `idle_exit_s`. Returns jobs run.

        `only_jobs` restricts the worker to those job ids (the demo runs its own job and nothing else).
        """
        structlog.contextvars.bind_contextvars(worker=self.worker_id)
        log.info("worker.start", classes=list(self.hardware_classes), key_id=self.host_key.key_id)
        self.store.register_worker(
            self.worker_id,
            host=self._host.name,
            hardware_classes=list(self.hardware_classes),
            public_key=self.host_key.public,
            engine_versions=engine_versions(self.profile),
        )
        done = 0
        idle_since = time.monotonic()
        while not self._shutdown.is_set():
            waiting = self.deliver_spooled()  # before the reap: results of an attempt nobody else took are still taken
            try:
                if self.store_watch.may_reap():
                    self.store.reap()
                else:
                    self.store.ping()
                self.store_watch.answered()
                if waiting:  # the store answers again: deliver before any claim could start a later attempt
                    waiting = self.deliver_spooled()
                self.check_quarantine()
                job = None if waiting else self._claim(only_jobs)
            except StoreError as exc:
                self.store_watch.failed()
                log.warning("worker.store_unavailable", error=str(exc))
                job = None
            if job is None:
                self._idle_heartbeat()
                if idle_exit_s is not None and time.monotonic() - idle_since > idle_exit_s:
                    break
                self._shutdown.wait(self.poll_interval_s)
                continue
            self.run_job(job)
            done += 1
            idle_since = time.monotonic()
            if max_jobs is not None and done >= max_jobs:
                break
        log.info("worker.stop", jobs=done)
        return done

    def _claim(self, only_jobs: Sequence[str] | None) -> ClaimedJob | None:
        live = self.settings.live_within_s
        if only_jobs is None:
            return self.store.claim(self.worker_id, self.hardware_classes, self.lease_s, live_within_s=live)
        for job_id in only_jobs:
            job = self.store.claim_job(job_id, self.worker_id, self.hardware_classes, self.lease_s, live_within_s=live)
            if job is not None:
                return job
        return None

    # --- quarantine ---

    def check_quarantine(self) -> str | None:
        """The reason this host is quarantined (None when in rotation); runs a self-check when one is due."""
        reason = self.store.quarantine_reason(self.worker_id)
        if reason is None:
            return None
        if time.monotonic() >= self._next_self_check:
            self._next_self_check = time.monotonic() + self.settings.self_check_interval_s
            if self.self_check():
                released = self.store.release_host(self.worker_id)
                log.info("worker.back_in_rotation", released=released, by="self-check")
                return None
        return reason

    def self_check(self) -> bool:
        """Start the engine with no job, wait until it serves, stop it: True when it served."""
        recipe = self._last_recipe or (_self_check_recipe(self.profile) if self.profile.simulated else None)
        if recipe is None:
            log.warning("worker.self_check_skipped", reason="no recipe to start an engine with yet")
            return False
        run_dir = self.data_dir / "self-check"
        port = self.profile.engine.port or free_port(self.profile.engine.host)
        try:
            engine = self.engine_factory(recipe, self.profile, port, run_dir / "engine.log", self.probe)
        except FarmError as exc:
            log.warning("worker.self_check_failed", error=scrub_text(str(exc)).splitlines()[0])
            return False
        try:
            engine.start()
            engine.wait_ready(self.profile.engine.ready_timeout_s)
        except FarmError as exc:
            log.warning("worker.self_check_failed", error=scrub_text(str(exc)).splitlines()[0])
            return False
        finally:
            self._stop_engine(engine)
        log.info("worker.self_check_passed")
        return True

    def _idle_heartbeat(self) -> None:
        with contextlib.suppress(StoreError):  # an unreachable store is noticed and logged by the claim
            self.report_alive()

    def report_alive(self, job_id: str | None = None, phase: str | None = None) -> None:
        """The worker's heartbeat: alive, its job and phase, whether its broker answers, and how many results its
        spool holds in memory (the disk refused them). StoreError when the store does not answer."""
        self.store.worker_heartbeat(
            self.worker_id, job_id=job_id, phase=phase, broker_ok=self.broker_ok, spool_held=self.spool.held
        )

    def broker_answered(self, error: str | None) -> None:
        """The sweeper's check of the broker: None when it answered, else why not. A change is logged."""
        ok = error is None
        if ok != self.broker_ok:
            if ok:
                log.info("worker.broker_answers")
            else:
                log.error("worker.broker_unreachable", error=error, note="this worker receives no messages")
        self.broker_ok = ok

    def deliver_spooled(self) -> frozenset[str]:
        """Deliver the results spooled through a store outage; the ids of the jobs whose results still wait (the
        store did not answer). While any wait, this worker claims nothing: a claim could start a later attempt of
        their own job, which would fence them out."""
        with self._spool_lock:
            return self._deliver_spooled()

    def _deliver_spooled(self) -> frozenset[str]:
        pending = self.spool.pending()
        for index, item in enumerate(pending):
            try:
                self.store.complete(item.job_id, item.attempt, item.worker_id, item.result)
                self.store_watch.answered()
            except LeaseLost as exc:
                self.store_watch.answered()
                log.warning("spool.refused", job=item.job_id, attempt=item.attempt, reason=str(exc))
            except StoreRefused as exc:
                # The store answered and refused the content: it would refuse it at every pass, and a worker that
                # waited on it would never claim again. The file is kept aside and the attempt fails where this
                # worker still holds it (a reaper that took the job back already made it run again).
                kept = self.spool.set_aside(item)
                log.error("spool.set_aside", job=item.job_id, attempt=item.attempt, kept=str(kept), error=str(exc))
                self._fail_attempt(item.job_id, item.attempt, _refused_message(exc, self.worker_id, kept))
                continue
            except StoreError as exc:
                self.store_watch.failed()
                waiting = frozenset(kept.job_id for kept in pending[index:])  # kept for the next pass
                log.warning("spool.waiting", jobs=sorted(waiting), error=(str(exc).splitlines() or [""])[0][:200])
                return waiting
            else:
                log.info("spool.delivered", job=item.job_id, attempt=item.attempt)
            self.spool.remove(item)
        return frozenset()

    # --- one job ---

    def run_job(self, job: ClaimedJob) -> JobState | None:
        """Run one claimed job to its end; the state this worker's last write left it in (None when it does not
        know: the lease was lost, the results were spooled or refused)."""
        structlog.contextvars.bind_contextvars(job=job.id, attempt=job.attempt)
        state = _RunState()
        heartbeat = threading.Thread(target=self._heartbeat_loop, args=(job, state), name="heartbeat", daemon=True)
        heartbeat.start()
        engine: Engine | None = None
        try:
            recipe = Recipe.model_validate(job.recipe)
            self._last_recipe = recipe
            plan = SweepPlan.model_validate(job.plan)
            run_dir = self.data_dir / "runs" / job.id / str(job.attempt)
            port = self.profile.engine.port or free_port(self.profile.engine.host)
            engine = self.engine_factory(recipe, self.profile, port, run_dir / "engine.log", self.probe)
            result = self._execute(job, recipe, plan, engine, state)
            self._set_phase(state, Phase.STOPPING)
            self._stop_engine(engine)
            result = self._signed(job, _with_log(result, engine))
            return self._deliver(job, result)
        except LeaseLost as exc:
            log.warning("job.lease_lost", reason=str(exc))
        except EngineError as exc:
            return self._fail(job, exc.failure_class, str(exc), engine)
        except MeasurementError as exc:
            if state.lease_lost:
                log.warning("job.abandoned", reason=state.lease_lost)
            else:
                return self._fail(job, classify_request_failure(str(exc)), str(exc), engine)
        except FarmError as exc:
            return self._fail(job, FailureClass.BAD_RECIPE, str(exc), engine)
        except Exception as exc:
            log.exception("job.unexpected_error")
            return self._fail(job, FailureClass.MEASUREMENT_ERROR, f"{type(exc).__name__}: {exc}", engine)
        finally:
            if engine is not None:
                self._stop_engine(engine)
            state.stop.set()
            heartbeat.join(timeout=10)
            structlog.contextvars.unbind_contextvars("job", "attempt")
        return None

    def _stop_engine(self, engine: Engine) -> None:
        """Stop the engine; cards that stay busy afterwards make this host unfit for more jobs."""
        try:
            engine.stop()
        except EngineError as exc:
            log.error("worker.gpus_not_free", error=str(exc))
            self.shutdown()

    def _execute(self, job: ClaimedJob, recipe: Recipe, plan: SweepPlan, engine: Engine, state: _RunState) -> RunResult:
        self._set_phase(state, Phase.LAUNCHING)
        if not engine.simulated:
            wait_gpus_free(self.probe, deadline_s=0)  # a card still busy (a killed run's engine) fails fast
        engine.start()
        engine.wait_ready(self.profile.engine.ready_timeout_s)
        if isinstance(self.probe, SimulatedProbe):
            self.probe.base_url = engine.base_url

        def on_phase(phase: str) -> None:
            self._set_phase(state, phase)

        def on_progress(fraction: float, _what: str) -> None:
            state.progress = fraction

        def should_stop() -> bool:
            return state.lease_lost is not None or not engine.alive()

        started = now_utc()
        # Power is sampled from here, once the engine serves: the model load is never in a measurement window.
        with PeakMemorySampler(self.probe.memory_used_mib) as sampler, EnergySampler(self.probe.power) as power:
            try:
                outcome = asyncio.run(
                    _cancel_when(
                        run_sweep(
                            engine.base_url,
                            engine.served_model,
                            plan,
                            on_phase=on_phase,
                            on_progress=on_progress,
                            should_stop=should_stop,
                            counter_names=getattr(engine, "metric_names", None),
                            on_window_edge=power.edge,
                            # the engine's own timing report, where it gives one (the simulator of kind
                            # `sim` speaks vLLM's API whatever the recipe's engine: none there)
                            own_timing=None
                            if self.profile.engine.kind == "sim"
                            else engine_kind(recipe.engine.name).own_timing,
                        ),
                        should_stop,
                    )
                )
            except (MeasurementError, asyncio.CancelledError) as exc:
                if state.lease_lost:
                    raise LeaseLost(state.lease_lost) from exc
                if _engine_died(engine, ENGINE_DEATH_GRACE_S):
                    raise EngineError(
                        f"engine exited during the sweep ({exc})",
                        failure_class=engine.classify(started=True),
                        log_tail="\n".join(engine.log_text().splitlines()[-40:]),
                    ) from exc
                if isinstance(exc, asyncio.CancelledError):
                    raise MeasurementError("the sweep was stopped") from exc
                raise
        if state.lease_lost:
            raise LeaseLost(state.lease_lost)
        outcome = self._with_energy(outcome, power, engine.simulated, recipe.hardware_count)
        figures = list(outcome.figures) + _memory_figures(sampler.peaks_mib, plan.repeats)
        provenance = self._provenance(job, recipe, plan, engine, outcome, started)
        provenance = replace(provenance, extra={**provenance.extra, "energy": self._energy_provenance(power)})
        return RunResult(
            figures=tuple(figures),
            samples=outcome.samples,
            provenance=provenance.to_json(),
            failed_requests=outcome.failed_requests,
            total_requests=outcome.total_requests,
        )

    def _with_energy(self, outcome: SweepOutcome, power: EnergySampler, simulated: bool, cards: int) -> SweepOutcome:
        """The sweep's outcome with its energy, power and cost figures (absent ones with their reasons), over the
        job's own cards: the first `cards` the probe reads, those the engine was given (engines.assigned_gpus), so
        a one-card job on a two-card host is not charged the idle card."""
        measured = energy_figures(
            outcome.samples,
            power.series[:cards],
            source=power.source,
            unavailable=power.unavailable,
            prices=self.profile.cost.prices(),
            workloads=workloads_of(outcome.figures),
            sampled_every_s=ENERGY_SAMPLE_INTERVAL_S,
            simulated=simulated,
        )
        return replace(
            outcome, figures=(*outcome.figures, *measured.figures), absent={**outcome.absent, **measured.absent}
        )

    def _energy_provenance(self, power: EnergySampler) -> dict[str, Any]:
        """How the cards' energy was read, and the prices the cost figures used."""
        return {
            "source": power.source or None,
            "unavailable": power.unavailable if not any(power.series) else None,
            "sampled_every_s": ENERGY_SAMPLE_INTERVAL_S,
            "readings": [len(series) for series in power.series],
            "read_errors": power.errors,
            "scope": "GPU only",
            "prices": self.profile.cost.prices().to_json() if self.profile.cost.prices().stated else None,
        }

    def _provenance(
        self,
        job: ClaimedJob,
        recipe: Recipe,
        plan: SweepPlan,
        engine: Engine,
        outcome: SweepOutcome,
        started: str,
    ) -> Provenance:
        return capture_provenance(
            host=self._host,
            report=self.probe.report(),
            gpu_names=self.profile.hardware.gpu_names,
            recipe=recipe,
            recipe_sha256=recipe_sha256(recipe),
            plan=plan,
            engine=engine,
            outcome=outcome,
            started=started,
            worker_id=self.worker_id,
            attempt=job.attempt,
        )

    def _signed(self, job: ClaimedJob, result: RunResult) -> RunResult:
        """The result signed with the host key, here where it was measured (so a spooled result carries its
        signature); unsigned, with an error logged, when it has no canonical form (a NaN in its provenance)."""
        try:
            return sign_result(job.id, job.attempt, self.worker_id, result, self.host_key)
        except ValueError as exc:
            log.error("job.unsigned", error=str(exc))
            return result

    def _deliver(self, job: ClaimedJob, result: RunResult) -> JobState | None:
        """Store the results (SUCCEEDED), else spool them (None: they wait) or fail the attempt they were refused in."""
        try:
            self.store.complete(job.id, job.attempt, self.worker_id, result)
        except LeaseLost:
            raise
        except StoreRefused as exc:
            kept = self.spool.put(job.id, job.attempt, self.worker_id, result, aside=True)
            log.error("job.results_refused", kept=str(kept), error=str(exc))
            return self._fail_attempt(job.id, job.attempt, _refused_message(exc, self.worker_id, kept))
        except StoreError as exc:
            self.store_watch.failed()
            path = self.spool.put(job.id, job.attempt, self.worker_id, result)
            if path is None:  # the disk refused them too: held in memory (logged by the spool), delivered later
                log.warning("job.results_spooled", in_memory=True, error=str(exc))
            else:
                log.warning("job.results_spooled", path=str(path), error=str(exc))
            return None
        log.info("job.succeeded", figures=len(result.figures))
        return JobState.SUCCEEDED

    def _fail(self, job: ClaimedJob, failure_class: str, message: str, engine: Engine | None) -> JobState | None:
        artifacts = (Artifact("engine.log", engine.log_text()),) if engine is not None else ()
        return self._fail_attempt(job.id, job.attempt, message, failure_class, artifacts)

    def _fail_attempt(
        self,
        job_id: str,
        attempt: int,
        message: str,
        failure_class: str = FailureClass.MEASUREMENT_ERROR,
        artifacts: tuple[Artifact, ...] = (),
    ) -> JobState | None:
        """Fail the attempt; the state the store left the job in (None: it refused or did not answer)."""
        message = scrub_text(message)
        try:
            state = self.store.fail(
                job_id,
                attempt,
                self.worker_id,
                failure_class,
                message,
                artifacts,
                backoff_s=self.settings.backoff_s(attempt),
                quarantine_after=self.settings.quarantine_after,
            )
        except LeaseLost as exc:
            log.warning("job.fail_refused", job=job_id, attempt=attempt, reason=str(exc))
            return None
        except StoreError as exc:
            log.error("job.fail_unrecorded", job=job_id, attempt=attempt, error=str(exc))
            return None
        first_line = message.splitlines()[0] if message else ""
        log.error(
            "job.failed", job=job_id, attempt=attempt, failure_class=failure_class, message=first_line, state=str(state)
        )
        if failure_class in START_FAILURES:
            with contextlib.suppress(StoreError):
                reason = self.store.quarantine_reason(self.worker_id)
                if reason is not None:
                    self._next_self_check = time.monotonic() + self.settings.self_check_interval_s
                    log.error("worker.quarantined", reason=reason)
        return state

    # --- heartbeat ---

    def _set_phase(self, state: _RunState, phase: str) -> None:
        # Not bound as log context: the sweep reports phases from inside its event loop's own context copy.
        state.phase = phase
        log.info("job.phase", phase=phase)
        if phase in (Phase.WARMING, Phase.MEASURING) and not state.engine_served:
            state.engine_served = True  # the engine is ready: this host's run of failed starts is over
            with contextlib.suppress(StoreError):
                self.store.engine_started(self.worker_id)

    def _heartbeat_loop(self, job: ClaimedJob, state: _RunState) -> None:
        interval = self.lease_s / 4
        while not state.stop.wait(interval):
            try:
                self.store.heartbeat(job.id, job.attempt, self.worker_id, state.phase, state.progress, self.lease_s)
                self.report_alive(job_id=job.id, phase=state.phase)
                self.store_watch.answered()
            except LeaseLost as exc:
                state.lease_lost = str(exc)
                log.warning("job.lease_lost", reason=str(exc))
                return
            except StoreError as exc:
                self.store_watch.failed()
                log.warning("heartbeat.store_unavailable", error=str(exc))


STOP_CHECK_INTERVAL_S = 0.1

ENGINE_DEATH_GRACE_S = 3.0
"""How long a failed sweep waits for the engine process to show it died before the failure is classed as the
measurement's. A crashing engine drops its connections before the process is reaped, so under load the request
fails first; the grace makes the class depend on what happened, not on which the worker noticed first."""


class _Supervised(Protocol):
    def alive(self) -> bool: ...


def _engine_died(engine: _Supervised, grace_s: float) -> bool:
    """Whether the engine's process is gone, or goes within `grace_s` (polled, returns as soon as it is)."""
    deadline = time.monotonic() + grace_s
    while engine.alive():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


"""How soon a lost lease or a dead engine stops the requests in flight (a long request can take minutes)."""


async def _cancel_when(work: Coroutine[Any, Any, T], should_stop: Callable[[], bool]) -> T:
    """Run `work`, cancelling it (and every request it has in flight) as soon as `should_stop()` is true."""
    task = asyncio.ensure_future(work)
    while not task.done():
        await asyncio.wait({task}, timeout=STOP_CHECK_INTERVAL_S)
        if not task.done() and should_stop():
            task.cancel()
    return task.result()


def _memory_figures(peaks_mib: tuple[int, ...], repeats: int) -> list[Figure]:
    from farm.bench.metrics import summarize

    figures = []
    for index, peak in enumerate(peaks_mib):
        gib = round(peak / 1024, 3)
        figures.append(
            Figure(
                kind=KIND_MEMORY,
                key=figure_key(KIND_MEMORY, f"gpu{index}", "peak_memory_gib"),
                metric="peak_memory_gib",
                unit="GiB",
                values=(gib,),
                summary=summarize([gib]),
                params={"card": index, "sampled_every_s": 0.5},
                requested_repeats=1,
            )
        )
    return figures


def _self_check_recipe(profile: WorkerProfile) -> Recipe:
    """A minimal recipe for a simulator host's self-check (the simulator serves any model name), of the first
    engine the host runs."""
    kind = engine_kind(profile.engine.runs()[0])
    model = "farm/self-check"
    argv = (*kind.launcher, model) if kind.positional_model else (*kind.launcher, kind.model_flags[0], model)
    return Recipe(
        id="farm-self-check",
        model_id="farm/self-check",
        hardware_id=profile.hardware.hardware_id,
        hardware_count=profile.hardware.count,
        engine=RecipeEngine(name=kind.name),
        argv=argv,
        provenance=RecipeProvenance(source_format="local-ai-registry/v1", content_sha256="0" * 64),
    )


def _with_log(result: RunResult, engine: Engine) -> RunResult:
    return RunResult(
        figures=result.figures,
        samples=result.samples,
        provenance=result.provenance,
        artifacts=(*result.artifacts, scrub_artifact(Artifact("engine.log", engine.log_text()))),
        failed_requests=result.failed_requests,
        total_requests=result.total_requests,
    )


def _refused_message(error: StoreRefused, worker_id: str, kept: Path | None) -> str:
    """The failure recorded for an attempt whose results the store refused, naming where they are kept."""
    where = f"at {kept}" if kept is not None else "in its memory (its spool's disk refused them)"
    return f"the store refused this attempt's results ({error}); they are kept on worker {worker_id} {where}"
