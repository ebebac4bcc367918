"""What a run's signature covers besides its figures, samples and provenance, and the registry's verdict on it.

Revision ID: 0007_signed_artifacts
Revises: 0006_host_health
Create Date: 2026-12-02

- run_signatures.artifacts_sha256: the sha256 of the run's artifacts (engine log, ...) its signature covers
  (docs/signing.md); None for a signature made before artifacts were signed, which covers none.
- run_summaries.validated: the registry's `validated` status of the run (farm/signing/validated.toml: a
  digest-pinned image, a full model revision, an acceptance run, no eager mode), kept with its verdict so
  readers need not compute it. Runs stored before this revision read as not validated until `farm verify`
  checks them again.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007_signed_artifacts"
down_revision: str | None = "0006_host_health"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run_signatures") as batch:
        batch.add_column(sa.Column("artifacts_sha256", sa.String(64), nullable=True))
    with op.batch_alter_table("run_summaries") as batch:
        batch.add_column(sa.Column("validated", sa.Boolean(), server_default="0", nullable=False))


def downgrade() -> None:
    op.drop_column("run_summaries", "validated")
    op.drop_column("run_signatures", "artifacts_sha256")
