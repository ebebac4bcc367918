"""Which results a report, an export or an API answer covers: the filters, parsed from text and matched (no I/O).

The same filters serve the CLI (`--model`, `--hardware`, ...) and the HTTP API (query parameters of the same
names). A bad value is an InputError whose `field` names the parameter.

- model: the model id (`deepseek-ai/DeepSeek-V4-Flash-0731`) or its last part (`DeepSeek-V4-Flash-0731`),
  case-insensitive, or the recipe id.
- hardware: the hardware class (`rtx-pro-6000-blackwell-96gb x 2`) or the hardware id; a simulated run's class
  (`sim:... x 2`) matches either without its `sim:` prefix too.
- engine: the engine name (`vllm`, `sim`), a version (`0.11.2`, which also matches `0.11.2+local.suffix`), or
  `name@version`.
- since / until: ISO dates or times (UTC when no zone is given) bounding when a run finished (`measured_at`);
  a bare `until` date covers that whole day.
- status: `measured` (real hardware), `simulated`, `complete` or `incomplete` (fewer samples than the sweep
  asked for). Several values: an entry passes when it matches any of them.
- job: only these jobs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from farm.errors import InputError
from farm.store.reads import RunMeasurements

STATUSES = ("measured", "simulated", "complete", "incomplete")
"""The values of the status filter (see the module docstring)."""

_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class ResultFilter:
    """Every filter a result query takes; empty tuples and None mean no restriction."""

    models: tuple[str, ...] = ()
    hardware: tuple[str, ...] = ()
    engines: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    statuses: tuple[str, ...] = ()
    job_ids: tuple[str, ...] = ()
    real_only: bool = False

    def matches_run(self, run: RunMeasurements) -> bool:
        """Whether a run passes the model, hardware, engine and simulated filters (the store did the dates)."""
        if self.real_only and run.simulated:
            return False
        if self.models and not any(_model_matches(m, run) for m in self.models):
            return False
        if self.hardware and not any(_hardware_matches(h, run) for h in self.hardware):
            return False
        return not self.engines or any(engine_matches(e, run.engine_name, run.engine_version) for e in self.engines)

    def matches_status(self, simulated: bool, incomplete: bool) -> bool:
        """Whether an aggregated entry passes the status filter."""
        if not self.statuses:
            return True
        own = {"simulated" if simulated else "measured", "incomplete" if incomplete else "complete"}
        return bool(own & set(self.statuses))

    def as_json(self) -> dict[str, object]:
        """The filters as plain JSON, for the header of an export or a report."""
        return {
            "model": list(self.models),
            "hardware": list(self.hardware),
            "engine": list(self.engines),
            "since": self.since.isoformat() if self.since else None,
            "until": self.until.isoformat() if self.until else None,
            "status": list(self.statuses),
            "job": list(self.job_ids),
            "real_only": self.real_only,
        }


def _model_matches(wanted: str, run: RunMeasurements) -> bool:
    w = wanted.casefold()
    return w in (run.model_id.casefold(), run.model_id.split("/")[-1].casefold(), run.recipe_id.casefold())


def _hardware_matches(wanted: str, run: RunMeasurements) -> bool:
    w = wanted.casefold().strip()
    hardware_class = run.hardware_class.casefold()
    return w in (hardware_class, hardware_class.removeprefix("sim:"), run.hardware_id.casefold())


def engine_matches(wanted: str, name: str, version: str | None) -> bool:
    """`vllm`, `0.11.2` (also matching `0.11.2+suffix`) or `vllm@0.11.2` against an engine name and version."""
    want_name, at, want_version = wanted.partition("@")
    if at:
        return want_name == name and _version_matches(want_version, version)
    return wanted == name or _version_matches(wanted, version)


def _version_matches(wanted: str, version: str | None) -> bool:
    return version is not None and (version == wanted or version.startswith(wanted + "+"))


def parse_time(text: str, parameter: str, *, end_of_day: bool = False) -> datetime:
    """An ISO date or time as an aware UTC datetime; a bare date with `end_of_day` means the end of that day."""
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise InputError(f"{text!r} is not an ISO date or time (e.g. 2026-11-30)", field=parameter) from exc
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    if end_of_day and _DATE_ONLY.match(text.strip()):
        value = value + timedelta(days=1) - timedelta(microseconds=1)
    return value.astimezone(UTC)


def build_filter(
    *,
    models: Iterable[str] = (),
    hardware: Iterable[str] = (),
    engines: Iterable[str] = (),
    since: str | None = None,
    until: str | None = None,
    statuses: Iterable[str] = (),
    job_ids: Iterable[str] = (),
    real_only: bool = False,
) -> ResultFilter:
    """A ResultFilter from text as a user typed it; InputError naming the parameter for a bad value."""
    status_values = tuple(_split(statuses))
    for status in status_values:
        if status not in STATUSES:
            raise InputError(f"{status!r} is not one of {', '.join(STATUSES)}", field="status")
    since_at = parse_time(since, "since") if since else None
    until_at = parse_time(until, "until", end_of_day=True) if until else None
    if since_at and until_at and since_at > until_at:
        raise InputError(f"since ({since}) is after until ({until})", field="since")
    return ResultFilter(
        models=tuple(_split(models)),
        hardware=tuple(_split(hardware)),
        engines=tuple(_split(engines)),
        since=since_at,
        until=until_at,
        statuses=status_values,
        job_ids=tuple(_split(job_ids)),
        real_only=real_only,
    )


def _split(values: Iterable[str]) -> Sequence[str]:
    """Values as given, each also allowed to be a comma-separated list (`--status measured,incomplete`)."""
    out: list[str] = []
    for value in values:
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return out


ALL = ResultFilter()
"""No restriction: every succeeded run."""
