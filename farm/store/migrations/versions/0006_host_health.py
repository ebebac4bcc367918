"""What a worker's heartbeat says about its health besides being alive: whether its broker answers, and how many
results its spool holds in memory because the disk refused them.

Revision ID: 0006_host_health
Revises: 0005_run_signatures
Create Date: 2026-12-01

- hosts.broker_ok: the worker's last check of its wake-up channel (None: embedded mode, no broker). A worker
  whose broker does not answer cannot receive messages: it does not count as another live host of its class
  (a retry is not held back for it) and `farm workers` shows it apart.
- hosts.spool_held: results the worker could not write to its spool's disk (full or read-only) and holds in
  memory until it can deliver or write them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006_host_health"
down_revision: str | None = "0005_run_signatures"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("hosts") as batch:
        batch.add_column(sa.Column("broker_ok", sa.Boolean(), nullable=True))
        batch.add_column(sa.Column("spool_held", sa.Integer(), server_default="0", nullable=False))


def downgrade() -> None:
    for column in ("spool_held", "broker_ok"):
        op.drop_column("hosts", column)
