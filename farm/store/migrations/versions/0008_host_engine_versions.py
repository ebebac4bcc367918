"""The engine versions a worker runs, read from its executables at its start: what submit judges a recipe's
command against (each distinct version the workers of the recipe's engine and hardware run).

Revision ID: 0008_host_engine_versions
Revises: 0007_signed_artifacts
Create Date: 2026-12-02

- hosts.engine_versions: canonical engine name -> the version its executable said (or its profile named);
  None: a worker from before this column, or one that read none.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008_host_engine_versions"
down_revision: str | None = "0007_signed_artifacts"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


JSON_TYPE = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("hosts") as batch:
        batch.add_column(sa.Column("engine_versions", JSON_TYPE, nullable=True))


def downgrade() -> None:
    op.drop_column("hosts", "engine_versions")
