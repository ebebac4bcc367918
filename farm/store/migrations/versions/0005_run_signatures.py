"""Verified runs: host keys, run signatures, the farm's keys, and each run's verdict for the readers.

Revision ID: 0005_run_signatures
Revises: 0004_postgres_storage
Create Date: 2026-12-01

- hosts.key_id, hosts.public_key: the fingerprint and public half of the worker's Ed25519 host key.
- signing_keys: every public key the farm knows (its workers', and those bundles carried in), which are trusted.
- run_signatures: one run's signature (key id, digest and its parts' sha256), the verdict of its last check,
  and, for an imported run, the farm it came from.
- run_summaries.verified: the verdict as readers use it, so no reader checks a signature. Runs stored before
  this revision were never signed: they stay unverified.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005_run_signatures"
down_revision: str | None = "0004_postgres_storage"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN on both databases (SQLite takes it for a nullable column or one with a default), not a
    # batch, which would rebuild the tables on SQLite.
    op.add_column("hosts", sa.Column("key_id", sa.String(64), nullable=True))
    op.add_column("hosts", sa.Column("public_key", sa.String(64), nullable=True))
    op.add_column("run_summaries", sa.Column("verified", sa.Boolean(), server_default="0", nullable=False))
    op.create_table(
        "signing_keys",
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("public_key", sa.String(64), nullable=False),
        sa.Column("trusted", sa.Boolean(), server_default="0", nullable=False),
        sa.Column("label", sa.String(255), nullable=True),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("trusted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("key_id", name=op.f("pk_signing_keys")),
    )
    op.create_table(
        "run_signatures",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("key_id", sa.String(64), nullable=False),
        sa.Column("scheme", sa.String(32), nullable=False),
        sa.Column("signature", sa.String(128), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("figures_sha256", sa.String(64), nullable=False),
        sa.Column("samples_sha256", sa.String(64), nullable=False),
        sa.Column("provenance_sha256", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("origin_farm", sa.String(255), nullable=True),
        sa.Column("imported_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_signatures_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_signatures")),
    )
    op.create_index("ix_run_signatures_key_id", "run_signatures", ["key_id"])


def downgrade() -> None:
    op.drop_index("ix_run_signatures_key_id", table_name="run_signatures")
    op.drop_table("run_signatures")
    op.drop_table("signing_keys")
    op.drop_column("run_summaries", "verified")
    op.drop_column("hosts", "public_key")
    op.drop_column("hosts", "key_id")
