"""A figure's values kept as text on both databases: the canonical JSON that farm-run/v2 signs (issue 25).

Revision ID: 0009_figure_values_text
Revises: 0008_host_engine_versions
Create Date: 2026-12-02

- measurements.values: text (was JSON on SQLite, JSONB on PostgreSQL). A v2 signature covers the values' text
  exactly as stored, so a check hashes what the database hands back without decoding it; PostgreSQL's jsonb
  writes numbers back in its own form (1e-07 as 0.0000001, a space after each comma) and could not be.
  Existing PostgreSQL rows become their jsonb text (`"values"::text`), which every reader and a v1 check read
  as before; SQLite's rows keep their text.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_figure_values_text"
down_revision: str | None = "0008_host_engine_versions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("measurements") as batch:
        batch.alter_column("values", type_=sa.Text(), existing_nullable=False, postgresql_using='"values"::text')


def downgrade() -> None:
    from sqlalchemy.dialects import postgresql

    json_type = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
    with op.batch_alter_table("measurements") as batch:
        batch.alter_column("values", type_=json_type, existing_nullable=False, postgresql_using='"values"::jsonb')
