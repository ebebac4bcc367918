"""Initial schema: hosts, recipes, jobs, runs, measurements, samples, artifacts.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

The types are written out here rather than imported from farm.store.models, so that this migration keeps
creating the same schema when the models change later. Datetimes are stored as timestamptz on PostgreSQL and as
naive UTC on SQLite (farm.store.models.UTCDateTime handles both); JSON is JSONB on PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_TYPE = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "hosts",
        sa.Column("worker_id", sa.String(length=200), nullable=False),
        sa.Column("host_name", sa.String(length=255), nullable=False),
        sa.Column("hardware_classes", JSON_TYPE, nullable=False),
        sa.Column("version", sa.String(length=64), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_heartbeat", sa.DateTime(timezone=True), nullable=False),
        sa.Column("current_job_id", sa.String(length=64), nullable=True),
        sa.Column("phase", sa.String(length=32), nullable=True),
        sa.PrimaryKeyConstraint("worker_id", name=op.f("pk_hosts")),
    )
    op.create_table(
        "recipes",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("recipe_id", sa.String(length=255), nullable=False),
        sa.Column("source_format", sa.String(length=64), nullable=False),
        sa.Column("source_sha256", sa.String(length=64), nullable=False),
        sa.Column("model_id", sa.String(length=255), nullable=False),
        sa.Column("hardware_id", sa.String(length=255), nullable=False),
        sa.Column("hardware_count", sa.Integer(), nullable=False),
        sa.Column("engine_name", sa.String(length=64), nullable=False),
        sa.Column("engine_version", sa.Text(), nullable=True),
        sa.Column("document", JSON_TYPE, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_recipes")),
    )
    op.create_index(op.f("ix_recipes_recipe_id"), "recipes", ["recipe_id"], unique=False)
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("recipe_sha256", sa.String(length=64), nullable=False),
        sa.Column("sweep_name", sa.String(length=255), nullable=False),
        sa.Column("spec_sha256", sa.String(length=64), nullable=False),
        sa.Column("plan", JSON_TYPE, nullable=False),
        sa.Column("hardware_class", sa.String(length=255), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("max_attempts", sa.Integer(), nullable=False),
        sa.Column("releases", sa.Integer(), nullable=False),
        sa.Column("owner", sa.String(length=200), nullable=True),
        sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("phase", sa.String(length=32), nullable=True),
        sa.Column("progress", sa.Float(), nullable=True),
        sa.Column("failure_class", sa.String(length=64), nullable=True),
        sa.Column("failure_message", sa.Text(), nullable=True),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["recipe_sha256"], ["recipes.sha256"], name=op.f("fk_jobs_recipe_sha256_recipes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index(
        "ix_jobs_claim", "jobs", ["state", "hardware_class", "priority", "created_at"], unique=False
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failure_class", sa.String(length=64), nullable=True),
        sa.Column("failure_message", sa.Text(), nullable=True),
        sa.Column("provenance", JSON_TYPE, nullable=True),
        sa.Column("failed_requests", sa.Integer(), nullable=True),
        sa.Column("total_requests", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_runs_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("job_id", "attempt", name=op.f("uq_runs_job_id_attempt")),
    )
    op.create_table(
        "artifacts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("media_type", sa.String(length=128), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_artifacts_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_artifacts")),
        sa.UniqueConstraint("run_id", "name", name=op.f("uq_artifacts_run_id_name")),
    )
    op.create_table(
        "measurements",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("workload", sa.String(length=64), nullable=True),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("unit", sa.String(length=32), nullable=False),
        sa.Column("params", JSON_TYPE, nullable=False),
        sa.Column("values", JSON_TYPE, nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("mean", sa.Float(), nullable=False),
        sa.Column("median", sa.Float(), nullable=False),
        sa.Column("min", sa.Float(), nullable=False),
        sa.Column("max", sa.Float(), nullable=False),
        sa.Column("stdev", sa.Float(), nullable=False),
        sa.Column("spread", sa.Float(), nullable=False),
        sa.Column("requested_repeats", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_measurements_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_measurements")),
        sa.UniqueConstraint("run_id", "key", name=op.f("uq_measurements_run_id_key")),
    )
    op.create_table(
        "samples",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("figure_key", sa.String(length=255), nullable=False),
        sa.Column("repeat_index", sa.Integer(), nullable=False),
        sa.Column("samples", JSON_TYPE, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_samples_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_samples")),
        sa.UniqueConstraint(
            "run_id", "figure_key", "repeat_index", name=op.f("uq_samples_run_id_figure_key_repeat_index")
        ),
    )


def downgrade() -> None:
    op.drop_table("samples")
    op.drop_table("measurements")
    op.drop_table("artifacts")
    op.drop_table("runs")
    op.drop_index("ix_jobs_claim", table_name="jobs")
    op.drop_table("jobs")
    op.drop_index(op.f("ix_recipes_recipe_id"), table_name="recipes")
    op.drop_table("recipes")
    op.drop_table("hosts")
