"""Host-aware retries: a retry's back-off, each host's run of failed engine starts and its quarantine.

Revision ID: 0003_host_retries
Revises: 0002_run_summaries
Create Date: 2026-11-30

- jobs.retry_after: a requeued job is not claimed before this database time (the back-off of a retry).
- hosts.start_failures, quarantined_at, quarantine_reason: a host whose engine fails to start K times in a row
  stops claiming until it is released (`farm workers --release`) or passes a self-check.
- ix_runs_job_id_worker_id: a claim skips the jobs this host already failed (NOT EXISTS over runs).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003_host_retries"
down_revision: str | None = "0002_run_summaries"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("retry_after", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("hosts") as batch:
        batch.add_column(sa.Column("start_failures", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("quarantined_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("quarantine_reason", sa.Text(), nullable=True))
    op.create_index("ix_runs_job_id_worker_id", "runs", ["job_id", "worker_id"])


def downgrade() -> None:
    # Plain ALTER TABLE ... DROP COLUMN (SQLite 3.35+), not a batch: a batch recreates `jobs` on SQLite, and
    # dropping the old table would cascade to every run, measurement and sample through their foreign keys.
    op.drop_index("ix_runs_job_id_worker_id", table_name="runs")
    for column in ("quarantine_reason", "quarantined_at", "start_failures"):
        op.drop_column("hosts", column)
    op.drop_column("jobs", "retry_after")
