"""Process settings from the environment (prefix FARM_). Every default is defined here once."""

from __future__ import annotations

from pathlib import Path

import platformdirs
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_data_dir() -> Path:
    """The user's data directory for the embedded store and worker spool."""
    return Path(platformdirs.user_data_dir("bench-farm", appauthor=False))


class Settings(BaseSettings):
    """Settings of one farm process."""

    model_config = SettingsConfigDict(env_prefix="FARM_", extra="ignore")

    data_dir: Path = Field(default_factory=default_data_dir, description="embedded store, spool, engine logs")
    database_url: str | None = Field(None, description="SQLAlchemy URL; unset means SQLite in data_dir")
    broker_url: str | None = Field(None, description="Celery broker (farm mode); unset means embedded polling")
    lease_s: float = Field(60.0, gt=0, description="a job lease; renewed every lease_s / 4 by the heartbeat")
    poll_interval_s: float = Field(1.0, gt=0, description="embedded mode: how often an idle worker polls")
    log_format: str = Field("auto", description="'json', 'console' or 'auto' (console on a terminal)")
    log_level: str = Field("info")
    max_input_bytes: int = Field(
        1_000_000, gt=0, description="the largest recipe or sweep spec file read (1 MB; the seed recipe is 40 KB)"
    )

    @property
    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.data_dir / 'farm.db'}"
