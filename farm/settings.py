"""Process settings from the environment (prefix FARM_). Every default is defined here once, with why.

A worker profile (`workers/*.toml`, `[worker]`) may override `lease_s` and `poll_interval_s` for its host; unset
there, the values here apply. `Worker` and the farm-mode runtime read every setting below; nothing else
declares a default for them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from farm.errors import SettingsError

T = TypeVar("T")

LIVE_WITHIN_S = 120.0
"""A worker heard from within this long is live. Idle farm workers report every sweep (5 s), busy ones with each
lease renewal (lease_s / 4: 15 s for the default 60-s lease); two minutes leaves room for a slow database without
calling a working host lost. (A module constant, so that code without a Settings object uses the same value.)"""

ENV_PREFIX = "FARM_"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")


def default_data_dir() -> Path:
    """The user's data directory for the embedded store and worker spool."""
    import platformdirs

    return Path(platformdirs.user_data_dir("bench-farm", appauthor=False))


def _positive(value: float) -> str | None:
    return None if value > 0 else "a number above 0"


def _not_negative(value: float) -> str | None:
    return None if value >= 0 else "a number of 0 or more"


def _at_least_one(value: int) -> str | None:
    return None if value >= 1 else "a whole number of 1 or more"


def _one_of(*choices: str) -> Callable[[str | None], str | None]:
    def check(value: str | None) -> str | None:
        return None if value is None or value in choices else "one of " + ", ".join(choices)

    return check


def _environment() -> dict[str, str]:
    """The FARM_* variables, by upper-case name (the names are read without regard to case)."""
    return {name.upper(): value for name, value in os.environ.items() if name.upper().startswith(ENV_PREFIX)}


def _setting(
    default: T | Callable[[], T],
    parse: Callable[[str], T],
    description: str = "",
    *,
    check: Callable[[T], str | None] | None = None,
) -> T:
    """A setting: FARM_<NAME> from the environment when set, else `default` (a value or a factory); given to
    Settings(...) explicitly, the argument wins. `check` names what a value must be, or returns None."""
    return cast(T, field(default=default, metadata={"parse": parse, "check": check, "description": description}))


def _optional_text(raw: str) -> str | None:
    return raw or None


_LABEL = r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?"
_HOST_NAME = re.compile(rf"^(\[[0-9a-f:.]+\]|{_LABEL}(\.{_LABEL})*)$")


def _host_names(raw: str) -> tuple[str, ...]:
    """Comma-separated host names (or IP addresses), lower case, without a trailing dot or a port."""
    return tuple(name.strip().lower().rstrip(".") for name in raw.split(",") if name.strip())


def _valid_host_names(names: tuple[str, ...]) -> str | None:
    bad = [name for name in names if not _HOST_NAME.match(name) or len(name) > 253]
    return None if not bad else "host names or IP addresses, comma-separated, without ports (not " + repr(bad[0]) + ")"


def _whole(raw: str) -> int:
    return int(raw.strip())


def _number(raw: str) -> float:
    return float(raw.strip())


@dataclass(init=False)
class Settings:
    """Settings of one farm process: each field is FARM_<FIELD NAME> in the environment (any case), else its
    default. A value that cannot be read, or is out of range, is a SettingsError naming the variable.

    Plain Python rather than pydantic-settings: every CLI command builds one, and its import was a tenth of a
    command's start."""

    data_dir: Path = _setting(default_data_dir, Path, "embedded store, spool, engine logs")  # noqa: RUF009 - a field()
    database_url: str | None = _setting(None, _optional_text, "SQLAlchemy URL; unset means SQLite in data_dir")
    broker_url: str | None = _setting(None, _optional_text, "Celery broker (farm mode); unset means embedded polling")
    log_format: str = _setting(
        "auto", str, "'json', 'console' or 'auto' (console on a terminal)", check=_one_of("auto", "json", "console")
    )
    log_level: str = _setting("info", str.lower, "the lowest level logged", check=_one_of(*LOG_LEVELS))
    max_input_bytes: int = _setting(
        1_000_000,
        _whole,
        "the largest recipe or sweep spec file read (1 MB; the seed recipe is 40 KB)",
        check=_at_least_one,
    )

    # --- leases and polling (a profile's [worker] section may override the first two) ---
    lease_s: float = _setting(
        60.0,
        _number,
        "a job's lease; the heartbeat renews it every lease_s / 4 (15 s: a slow database or a GC pause never costs "
        "a healthy job its lease)",
        check=_positive,
    )
    poll_interval_s: float = _setting(
        1.0,
        _number,
        "embedded mode: how often an idle worker polls (1 s: a claim costs 2-5 ms on SQLite)",
        check=_positive,
    )
    live_within_s: float = _setting(
        LIVE_WITHIN_S,
        _number,
        "a host heard from within this long counts as live: another host that could take a retry, and a live "
        "worker in `farm workers`",
        check=_positive,
    )

    # --- retries and broken hosts ---
    quarantine_after: int = _setting(
        3,
        _whole,
        "failed engine starts in a row that take a host out of rotation (3: one bad job can fail a start, three "
        "different ones in a row point at the host)",
        check=_at_least_one,
    )
    retry_backoff_s: float = _setting(
        10.0,
        _number,
        "a host waits this long before retrying a job it failed itself, doubled per attempt",
        check=_not_negative,
    )
    retry_backoff_max_s: float = _setting(
        300.0, _number, "the back-off never grows beyond five minutes", check=_not_negative
    )
    self_check_interval_s: float = _setting(
        60.0,
        _number,
        "a quarantined host starts its engine with no job this often; success returns it",
        check=_positive,
    )

    # --- farm mode (FARM_BROKER_URL set) ---
    sweep_interval_s: float = _setting(
        5.0,
        _number,
        "a sweep every 5 s: the reaper's lag after a lease expires, and an idle heartbeat",
        check=_positive,
    )
    announce_grace_s: float = _setting(
        10.0,
        _number,
        "a job without an announcement waits this long for its submitter to announce it",
        check=_not_negative,
    )
    announce_stale_s: float = _setting(
        120.0, _number, "an announcement this old whose queue is empty is taken as lost", check=_positive
    )
    broker_timeout_s: float = _setting(
        3.0,
        _number,
        "connect and socket timeout of every broker call (Celery's and the announcer's): a broker that accepts "
        "and never answers costs this long per call, not forever (3 s: Redis answers in a millisecond)",
        check=_positive,
    )
    visibility_timeout_s: float = _setting(
        3600.0,
        _number,
        "a message taken by a worker and not acknowledged (the worker died) goes back to its queue after this "
        "long (an hour: above most sweeps; a redelivery of a running job's message is a harmless duplicate)",
        check=_positive,
    )
    reap_grace_s: float = _setting(
        30.0,
        _number,
        "after the database answers a sweeper again (or the sweeper starts), it reaps nothing for this long: "
        "owners whose leases ran out during the outage deliver their spooled results first",
        check=_not_negative,
    )
    on_sigterm: Literal["finish", "release"] | None = _setting(
        None,
        cast(Callable[[str], Literal["finish", "release"] | None], _optional_text),
        "on SIGTERM, finish the job in hand or hand it back; unset: the profile's [worker] on_sigterm, else finish",
        check=_one_of("finish", "release"),
    )

    # --- the HTTP API (farm serve) ---
    api_allowed_hosts: tuple[str, ...] = _setting(
        (),
        _host_names,
        "Host header names the API answers besides loopback's (localhost, 127.0.0.1, ::1) and the address it listens "
        "on: comma-separated. Any other Host is refused, so a web page that rebinds its own name to this machine "
        "(DNS rebinding) cannot read the API from a browser",
        check=_valid_host_names,
    )

    def __init__(self, **given: Any) -> None:
        environment = _environment()
        unknown = set(given) - {f.name for f in fields(self)}
        if unknown:
            raise TypeError(f"Settings has no setting {', '.join(sorted(unknown))}")
        for setting in fields(self):
            variable = ENV_PREFIX + setting.name.upper()
            raw = environment.get(variable)
            if setting.name in given:
                value, shown = given[setting.name], repr(given[setting.name])
            elif raw is not None:
                shown = f"{variable}={raw!r}"
                try:
                    value = setting.metadata["parse"](raw)
                except ValueError:
                    kind = {"float": "a number", "int": "a whole number"}.get(str(setting.type), str(setting.type))
                    raise SettingsError(f"{shown}: not {kind} (setting {setting.name})") from None
            else:
                default = setting.default
                value = default() if callable(default) else default
                shown = repr(value)
            check = setting.metadata["check"]
            wanted = check(value) if check is not None else None
            if wanted is not None:
                raise SettingsError(f"{shown}: expected {wanted} (setting {setting.name})")
            setattr(self, setting.name, value)

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'farm.db'}"

    def backoff_s(self, attempt: int) -> float:
        """The back-off before a host retries a job it failed in `attempt` (1-based): doubled per attempt."""
        return min(self.retry_backoff_max_s, self.retry_backoff_s * 2.0 ** max(0, attempt - 1))
