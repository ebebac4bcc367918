"""Which results a read covers: the one declaration of the result filters, parsed from text (no I/O).

`FILTERS` declares each filter once (name, help, repeatable or not); the CLI builds its options from it, the
HTTP API parses its query string with it and the OpenAPI document lists its parameters from it. The store turns
a `ResultFilter` into SQL (farm.store.reads). A bad value is an InputError whose `field` names the parameter.

- model: the model id (`deepseek-ai/DeepSeek-V4-Flash-0731`) or its last part (`DeepSeek-V4-Flash-0731`),
  case-insensitive, or the recipe id.
- hardware: the hardware class (`rtx-pro-6000-blackwell-96gb x 2`) or the hardware id; a simulated run's class
  (`sim:... x 2`) matches either without its `sim:` prefix too.
- engine: the engine name (`vllm`, `sim`), a version (`0.11.2`, which also matches `0.11.2+local.suffix`), or
  `name@version`.
- since / until: ISO dates or times (UTC when no zone is given) bounding when a run finished; a bare `until`
  date covers that whole day. Years outside 1970-9998 are refused (they cannot name a run).
- status: `measured` (real hardware, launched or an endpoint), `simulated`, `complete` or `incomplete` (fewer
  samples than the sweep asked for). Several values: an entry passes when it matches any of them.
- job: only these jobs.
- real_only: leave out simulated results.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from farm.errors import InputError

STATUSES = ("measured", "simulated", "complete", "incomplete")
"""The values of the status filter (see the module docstring)."""

EARLIEST_YEAR = 1970
LATEST_YEAR = 9998
"""Dates outside these years cannot name a run, and 9999-12-31 plus a day overflows Python's datetime."""

_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class FilterParameter:
    """One filter as every interface shows it: its name, what it does, whether it repeats, its type."""

    name: str
    help: str
    repeatable: bool
    kind: str = "string"
    """`string`, `datetime` or `boolean` (the OpenAPI type and how the API parses it)."""
    choices: tuple[str, ...] = ()


FILTERS: tuple[FilterParameter, ...] = (
    FilterParameter("model", "model id, its last part, or recipe id", repeatable=True),
    FilterParameter("hardware", "hardware class or hardware id", repeatable=True),
    FilterParameter("engine", "engine name, version, or name@version", repeatable=True),
    FilterParameter("since", "runs finished at or after this ISO date/time", repeatable=False, kind="datetime"),
    FilterParameter(
        "until", "runs finished at or before this ISO date/time (a date: that day)", repeatable=False, kind="datetime"
    ),
    FilterParameter("status", "measured, simulated, complete or incomplete", repeatable=True, choices=STATUSES),
    FilterParameter("job", "only these jobs", repeatable=True),
    FilterParameter("real_only", "leave out simulated results", repeatable=False, kind="boolean"),
    FilterParameter(
        "verified", "only runs signed by a trusted key that match their signatures", repeatable=False, kind="boolean"
    ),
)
"""The result filters, declared once."""

FILTER_NAMES = tuple(f.name for f in FILTERS)


class RunIdentity(Protocol):
    """What the filters read of a run."""

    @property
    def job_id(self) -> str: ...
    @property
    def model_id(self) -> str: ...
    @property
    def recipe_id(self) -> str: ...
    @property
    def hardware_class(self) -> str: ...
    @property
    def hardware_id(self) -> str: ...
    @property
    def engine_name(self) -> str: ...
    @property
    def engine_version(self) -> str | None: ...
    @property
    def simulated(self) -> bool: ...
    @property
    def measured_at(self) -> datetime: ...


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
    verified_only: bool = False
    """Only runs signed by a trusted key that matched their signatures at their last check (farm.signing)."""

    def matches_run(self, run: RunIdentity) -> bool:
        """Whether a run held in memory passes the run-level filters (the store applies the same in SQL)."""
        if self.real_only and run.simulated:
            return False
        if self.verified_only and not getattr(run, "verified", False):
            return False
        origins = self.origin_statuses
        own = "simulated" if run.simulated else "measured"
        if origins and not set(self.statuses) - origins and own not in origins:
            return False
        if self.since is not None and run.measured_at < self.since:
            return False
        if self.until is not None and run.measured_at > self.until:
            return False
        if self.job_ids and run.job_id not in self.job_ids:
            return False
        if self.models and not any(model_matches(m, run.model_id, run.recipe_id) for m in self.models):
            return False
        if self.hardware and not any(hardware_matches(h, run.hardware_class, run.hardware_id) for h in self.hardware):
            return False
        return not self.engines or any(engine_matches(e, run.engine_name, run.engine_version) for e in self.engines)

    def matches_status(self, simulated: bool, incomplete: bool) -> bool:
        """Whether an aggregated entry passes the status filter."""
        if not self.statuses:
            return True
        own = {"simulated" if simulated else "measured", "incomplete" if incomplete else "complete"}
        return bool(own & set(self.statuses))

    @property
    def origin_statuses(self) -> frozenset[str]:
        """The status values that select runs by where they were measured (measured, simulated)."""
        return frozenset(self.statuses) & {"measured", "simulated"}

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
            "verified": self.verified_only,
        }


def model_matches(wanted: str, model_id: str, recipe_id: str) -> bool:
    w = wanted.casefold()
    return w in (model_id.casefold(), model_id.split("/")[-1].casefold(), recipe_id.casefold())


def hardware_matches(wanted: str, hardware_class: str, hardware_id: str) -> bool:
    w = wanted.casefold().strip()
    cls = hardware_class.casefold()
    return w in (cls, cls.removeprefix("sim:"), hardware_id.casefold())


def engine_matches(wanted: str, name: str, version: str | None) -> bool:
    """`vllm`, `0.11.2` (also matching `0.11.2+suffix`) or `vllm@0.11.2` against an engine name and version."""
    want_name, at, want_version = wanted.partition("@")
    if at:
        return want_name == name and _version_matches(want_version, version)
    return wanted == name or _version_matches(wanted, version)


def _version_matches(wanted: str, version: str | None) -> bool:
    return version is not None and (version == wanted or version.startswith(wanted + "+"))


def parse_time(text: str, parameter: str, *, end_of_day: bool = False) -> datetime:
    """An ISO date or time as an aware UTC datetime; a bare date with `end_of_day` means the end of that day.

    InputError naming the parameter for text that is not a date, or a year outside EARLIEST_YEAR-LATEST_YEAR.
    """
    cleaned = text.strip()
    try:
        value = datetime.fromisoformat(cleaned.replace("Z", "+00:00"))
    except ValueError as exc:
        raise InputError(f"{text!r} is not an ISO date or time (e.g. 2026-11-30)", field=parameter) from exc
    if not EARLIEST_YEAR <= value.year <= LATEST_YEAR:
        raise InputError(
            f"{text!r} is out of range: give a date between {EARLIEST_YEAR} and {LATEST_YEAR}", field=parameter
        )
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    if end_of_day and _DATE_ONLY.match(cleaned):
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
    verified_only: bool = False,
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
        verified_only=verified_only,
    )


def parse_bool(text: str, parameter: str) -> bool:
    """`true`/`false` (also 1/0, yes/no) as a boolean; InputError naming the parameter otherwise."""
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no", ""):
        return False
    raise InputError(f"must be true or false, not {text!r}", field=parameter)


def filter_from_mapping(values: Mapping[str, Sequence[str]]) -> ResultFilter:
    """A ResultFilter from every value given per parameter name (a query string, the CLI's options).

    A parameter given twice that does not repeat is refused, naming it."""
    single: dict[str, str | None] = {}
    for parameter in FILTERS:
        given = list(values.get(parameter.name, ()))
        if not parameter.repeatable:
            if len(given) > 1:
                raise InputError("given more than once; it takes one value", field=parameter.name)
            single[parameter.name] = given[0] if given else None
    real_only_text = single.get("real_only")
    verified_text = single.get("verified")
    return build_filter(
        models=values.get("model", ()),
        hardware=values.get("hardware", ()),
        engines=values.get("engine", ()),
        since=single.get("since"),
        until=single.get("until"),
        statuses=values.get("status", ()),
        job_ids=values.get("job", ()),
        real_only=parse_bool(real_only_text, "real_only") if real_only_text is not None else False,
        verified_only=parse_bool(verified_text, "verified") if verified_text is not None else False,
    )


def _split(values: Iterable[str]) -> Sequence[str]:
    """Values as given, each also allowed to be a comma-separated list (`--status measured,incomplete`)."""
    out: list[str] = []
    for value in values:
        out.extend(part.strip() for part in value.split(",") if part.strip())
    return out


ALL = ResultFilter()
"""No restriction: every succeeded run."""
