"""The API's response bodies as pydantic models over the farm's own records (the one source of their schema).

Each handler builds one of these models and sends `model_dump(mode="json")`; farm.api.openapi generates the
OpenAPI components from the same models, so the description cannot drift from the answers. The records inside
(JobView, RunView, Figure, LeaderboardRow) are the frozen dataclasses the store hands out.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from farm.domain import Figure, JobView
from farm.store.records import LeaderboardRow, RunView
from farm.store.signatures import KeyView, StoredSignature


class ApiModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Error(ApiModel):
    """Every answer other than 200."""

    error: str
    status: int
    parameter: str | None = Field(None, description="the query parameter that was wrong")


class Health(ApiModel):
    status: str
    schema_revision: str | None


class LeaderboardPage(ApiModel):
    """Leaderboard rows (as `farm leaderboard --json`), a page at a time."""

    filters: dict[str, Any]
    rows: list[LeaderboardRow]
    total: int
    next_cursor: str | None = Field(None, description="pass as `cursor` for the next page; null on the last")


class JobsPage(ApiModel):
    """Jobs, newest first, a page at a time."""

    jobs: list[JobView]
    next_cursor: str | None = Field(None, description="pass as `cursor` for the next page; null on the last")


class JobDetail(ApiModel):
    job: JobView
    runs: list[RunView]


class JobResults(ApiModel):
    job: JobView
    figures: list[Figure]


class Keys(ApiModel):
    """Every public key the farm knows (its workers' and those bundles carried in), trusted ones first. Public
    halves only: private keys never leave their hosts."""

    keys: list[KeyView]


class RunSignatureAnswer(ApiModel):
    """The signature of a job's succeeded run (docs/signing.md says how to check it) and its last verdict."""

    signature: StoredSignature


RESPONSE_MODELS: tuple[type[ApiModel], ...] = (
    Error,
    Health,
    LeaderboardPage,
    JobsPage,
    JobDetail,
    JobResults,
    Keys,
    RunSignatureAnswer,
)
"""Every body the API sends as JSON (exports aside): the OpenAPI components."""
