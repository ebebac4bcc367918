"""PostgreSQL storage: a hot-updated `group_stats` leaves room on its pages, run provenance is compressed with LZ4.

Revision ID: 0004_postgres_storage
Revises: 0003_host_retries
Create Date: 2026-11-30

Both change how PostgreSQL stores rows, not what they hold; SQLite has neither setting, and there this revision
changes nothing.

- group_stats fillfactor 50: every stored run updates one row per figure key of its group (about 60). With full
  pages, an update that finds no room on its row's page goes to a new page at the table's end, updates both
  indexes, and leaves its dead row until a VACUUM; the table grew to 5x its live rows at 10,000 runs with
  autovacuum off. Half-empty pages keep updates on their page (HOT: no index update, and the dead row is pruned
  by the next update, without a VACUUM).
- runs.provenance with LZ4: PostgreSQL's default TOAST compression (pglz) gives up on JSONB whose first kilobyte
  does not repeat (its offset table), so a run's 5.6 KB of provenance was stored whole; LZ4 stores 4.5 KB (on a
  server built with LZ4, as Debian's and the official images are; elsewhere the column keeps pglz). Only rows
  written from now on are compressed so; older rows are read as they are.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004_postgres_storage"
down_revision: str | None = "0003_host_retries"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GROUP_STATS_FILLFACTOR = 50


def _server_version(bind: sa.Connection) -> tuple[int | str, ...]:
    return bind.dialect.server_version_info or (0,)


def _lz4_available(bind: sa.Connection) -> bool:
    """Whether this server can compress TOAST with LZ4 (PostgreSQL 14 and later, built --with-lz4)."""
    if _server_version(bind) < (14,):
        return False
    choices = bind.execute(sa.text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"))
    return "lz4" in (choices.scalar() or [])


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute(f"ALTER TABLE group_stats SET (fillfactor = {GROUP_STATS_FILLFACTOR})")
    if _lz4_available(bind):
        op.execute("ALTER TABLE runs ALTER COLUMN provenance SET COMPRESSION lz4")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE group_stats RESET (fillfactor)")
    if _server_version(bind) >= (14,):
        op.execute("ALTER TABLE runs ALTER COLUMN provenance SET COMPRESSION default")
