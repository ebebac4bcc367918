"""Process settings from the environment (prefix FARM_). Every default is defined here once, with why.

A worker profile (`workers/*.toml`, `[worker]`) may override `lease_s` and `poll_interval_s` for its host; unset
there, the values here apply. `Worker` and the farm-mode runtime read every setting below; nothing else
declares a default for them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import platformdirs
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

LIVE_WITHIN_S = 120.0
"""A worker heard from within this long is live. Idle farm workers report every sweep (5 s), busy ones with each
lease renewal (lease_s / 4: 15 s for the default 60-s lease); two minutes leaves room for a slow database without
calling a working host lost. (A module constant, so that code without a Settings object uses the same value.)"""


def default_data_dir() -> Path:
    """The user's data directory for the embedded store and worker spool."""
    return Path(platformdirs.user_data_dir("bench-farm", appauthor=False))


class Settings(BaseSettings):
    """Settings of one farm process."""

    model_config = SettingsConfigDict(env_prefix="FARM_", extra="ignore")

    data_dir: Path = Field(default_factory=default_data_dir, description="embedded store, spool, engine logs")
    database_url: str | None = Field(None, description="SQLAlchemy URL; unset means SQLite in data_dir")
    broker_url: str | None = Field(None, description="Celery broker (farm mode); unset means embedded polling")
    log_format: str = Field("auto", description="'json', 'console' or 'auto' (console on a terminal)")
    log_level: str = Field("info")
    max_input_bytes: int = Field(
        1_000_000, gt=0, description="the largest recipe or sweep spec file read (1 MB; the seed recipe is 40 KB)"
    )

    # --- leases and polling (a profile's [worker] section may override the first two) ---
    lease_s: float = Field(
        60.0,
        gt=0,
        description="a job's lease; the heartbeat renews it every lease_s / 4 (15 s: a slow database "
        "or a GC pause never costs a healthy job its lease)",
    )
    poll_interval_s: float = Field(
        1.0, gt=0, description="embedded mode: how often an idle worker polls (1 s: a claim costs 2-5 ms on SQLite)"
    )
    live_within_s: float = Field(
        LIVE_WITHIN_S,
        gt=0,
        description="a host heard from within this long counts as live: another host that could take a retry, and "
        "a live worker in `farm workers`",
    )

    # --- retries and broken hosts ---
    quarantine_after: int = Field(
        3,
        ge=1,
        description="failed engine starts in a row that take a host out of rotation (3: one bad job can "
        "fail a start, three different ones in a row point at the host)",
    )
    retry_backoff_s: float = Field(
        10.0, ge=0, description="a host waits this long before retrying a job it failed itself, doubled per attempt"
    )
    retry_backoff_max_s: float = Field(300.0, ge=0, description="the back-off never grows beyond five minutes")
    self_check_interval_s: float = Field(
        60.0, gt=0, description="a quarantined host starts its engine with no job this often; success returns it"
    )

    # --- farm mode (FARM_BROKER_URL set) ---
    sweep_interval_s: float = Field(
        5.0, gt=0, description="a sweep every 5 s: the reaper's lag after a lease expires, and an idle heartbeat"
    )
    announce_grace_s: float = Field(
        10.0, ge=0, description="a job without an announcement waits this long for its submitter to announce it"
    )
    announce_stale_s: float = Field(
        120.0, gt=0, description="an announcement this old whose queue is empty is taken as lost"
    )
    on_sigterm: Literal["finish", "release"] | None = Field(
        None,
        description="on SIGTERM, finish the job in hand or hand it back; unset: the profile's [worker] on_sigterm, "
        "else finish",
    )

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'farm.db'}"

    def backoff_s(self, attempt: int) -> float:
        """The back-off before a host retries a job it failed in `attempt` (1-based): doubled per attempt."""
        return min(self.retry_backoff_max_s, self.retry_backoff_s * 2.0 ** max(0, attempt - 1))
