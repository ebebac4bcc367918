"""Run summaries, the figure point as a column, and compact raw samples.

Revision ID: 0002_run_summaries
Revises: 0001
Create Date: 2026-11-30

- `group_stats`: every figure key pooled per sweep group (count, sum, min, max), kept by `Store.complete`;
  backfilled here.
- `run_summaries`: one row per succeeded run (identity, origin, short provenance) in indexed columns, so that
  leaderboards, aggregates and comparisons are SQL over summaries. Backfilled here for the runs already stored,
  with the same function `Store.complete` uses (farm.store.summaries.run_summary_values, pure).
- `measurements.point`: the middle part of the key, backfilled in SQL; `measurements.params` becomes compact
  bytes (farm.store.params_codec), older rows keeping their JSON.
- `samples.data`: the compact form of new raw samples (farm.store.sample_codec); `samples.samples` (JSON) becomes
  nullable and keeps the rows written before, which are still read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from farm.store import params_codec
from farm.store.summaries import run_summary_values

revision: str = "0002_run_summaries"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_TYPE = sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")
BACKFILL_BATCH = 500


def upgrade() -> None:
    bind = op.get_bind()
    op.add_column("measurements", sa.Column("point", sa.String(length=64), nullable=True))
    if bind.dialect.name == "postgresql":
        op.execute("UPDATE measurements SET point = split_part(key, '/', 2) WHERE key LIKE '%/%/%'")
    else:
        op.execute(
            "UPDATE measurements SET point = substr(substr(key, instr(key, '/') + 1), 1, "
            "instr(substr(key, instr(key, '/') + 1), '/') - 1) WHERE key LIKE '%/%/%'"
        )
    op.execute("UPDATE measurements SET point = '' WHERE point IS NULL")
    # The parameters become compact bytes (farm.store.params_codec); the JSON of older rows stays as it was and
    # is still read (as text on SQLite, as its UTF-8 bytes on PostgreSQL).
    if bind.dialect.name == "postgresql":
        op.execute("ALTER TABLE measurements ALTER COLUMN params TYPE bytea USING convert_to(params::text, 'UTF8')")
    else:
        with op.batch_alter_table("measurements") as batch:
            batch.alter_column("params", existing_type=JSON_TYPE, type_=sa.LargeBinary(), existing_nullable=False)

    with op.batch_alter_table("samples") as batch:
        batch.add_column(sa.Column("data", sa.LargeBinary(), nullable=True))
        batch.alter_column("samples", existing_type=JSON_TYPE, nullable=True)

    op.create_table(
        "run_summaries",
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("worker_id", sa.String(length=200), nullable=False),
        sa.Column("sweep_name", sa.String(length=255), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("recipe_id", sa.String(length=255), nullable=False),
        sa.Column("recipe_sha256", sa.String(length=64), nullable=False),
        sa.Column("model_id", sa.String(length=255), nullable=False),
        sa.Column("model_name", sa.String(length=255), nullable=False),
        sa.Column("hardware_id", sa.String(length=255), nullable=False),
        sa.Column("hardware_count", sa.Integer(), nullable=False),
        sa.Column("hardware_class", sa.String(length=255), nullable=False),
        sa.Column("engine_name", sa.String(length=64), nullable=False),
        sa.Column("engine_version", sa.String(length=255), nullable=True),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.Column("simulated", sa.Boolean(), nullable=False),
        sa.Column("requested_repeats", sa.Integer(), nullable=True),
        sa.Column("host", sa.String(length=255), nullable=True),
        sa.Column("provenance_summary", JSON_TYPE, nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_summaries_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", name=op.f("pk_run_summaries")),
    )
    op.create_index(
        "ix_run_summaries_group",
        "run_summaries",
        ["origin", "recipe_sha256", "hardware_class", "engine_name", "engine_version"],
        unique=False,
    )
    op.create_index("ix_run_summaries_finished_at", "run_summaries", ["finished_at"], unique=False)
    op.create_index("ix_run_summaries_job_id", "run_summaries", ["job_id"], unique=False)
    op.create_index("ix_run_summaries_recipe_id", "run_summaries", ["recipe_id"], unique=False)
    op.create_table(
        "group_stats",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("recipe_id", sa.String(length=255), nullable=False),
        sa.Column("recipe_sha256", sa.String(length=64), nullable=False),
        sa.Column("model_id", sa.String(length=255), nullable=False),
        sa.Column("model_name", sa.String(length=255), nullable=False),
        sa.Column("hardware_id", sa.String(length=255), nullable=False),
        sa.Column("hardware_class", sa.String(length=255), nullable=False),
        sa.Column("engine_name", sa.String(length=64), nullable=False),
        sa.Column("engine_version", sa.String(length=255), nullable=True),
        sa.Column("engine_version_key", sa.String(length=255), nullable=False),
        sa.Column("origin", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("point", sa.String(length=64), nullable=False),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("unit", sa.String(length=32), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("total", sa.Float(), nullable=False),
        sa.Column("min", sa.Float(), nullable=False),
        sa.Column("max", sa.Float(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("requested", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_group_stats")),
        sa.UniqueConstraint(
            "recipe_sha256",
            "hardware_class",
            "engine_name",
            "engine_version_key",
            "origin",
            "key",
            name=op.f("uq_group_stats_group_figure"),
        ),
    )
    _backfill(bind)
    _backfill_stats(bind)


def _backfill(bind: sa.Connection) -> None:
    """A summary for every succeeded run of a succeeded job already stored."""
    meta = sa.MetaData()
    runs = sa.Table("runs", meta, autoload_with=bind)
    jobs = sa.Table("jobs", meta, autoload_with=bind)
    recipes = sa.Table("recipes", meta, autoload_with=bind)
    summaries = sa.Table("run_summaries", meta, autoload_with=bind)
    query = (
        sa.select(
            runs.c.id,
            runs.c.job_id,
            runs.c.attempt,
            runs.c.worker_id,
            runs.c.finished_at,
            runs.c.started_at,
            runs.c.provenance,
            jobs.c.sweep_name,
            jobs.c.hardware_class,
            jobs.c.simulated,
            jobs.c.plan,
            recipes.c.recipe_id,
            recipes.c.sha256,
            recipes.c.model_id,
            recipes.c.hardware_id,
            recipes.c.hardware_count,
            recipes.c.engine_name,
            recipes.c.engine_version,
        )
        .join(jobs, jobs.c.id == runs.c.job_id)
        .join(recipes, recipes.c.sha256 == jobs.c.recipe_sha256)
        .where(runs.c.state == "succeeded", jobs.c.state == "succeeded")
        .order_by(runs.c.id)
    )
    batch: list[dict[str, object]] = []
    for row in bind.execute(query):
        batch.append(
            run_summary_values(
                run_id=row.id,
                job_id=row.job_id,
                attempt=row.attempt,
                worker_id=row.worker_id,
                sweep_name=row.sweep_name,
                finished_at=row.finished_at or row.started_at,
                simulated_job=bool(row.simulated),
                plan=row.plan,
                provenance=row.provenance,
                recipe_id=row.recipe_id,
                recipe_sha256=row.sha256,
                model_id=row.model_id,
                hardware_id=row.hardware_id,
                hardware_count=row.hardware_count,
                hardware_class=row.hardware_class,
                recipe_engine_name=row.engine_name,
                recipe_engine_version=row.engine_version,
            )
        )
        if len(batch) >= BACKFILL_BATCH:
            bind.execute(sa.insert(summaries), batch)
            batch = []
    if batch:
        bind.execute(sa.insert(summaries), batch)


def _backfill_stats(bind: sa.Connection) -> None:
    """The pooled figures of the runs already stored (the same sums Store.complete keeps)."""
    meta = sa.MetaData()
    summaries = sa.Table("run_summaries", meta, autoload_with=bind)
    measurements = sa.Table("measurements", meta, autoload_with=bind)
    stats = sa.Table("group_stats", meta, autoload_with=bind)
    identity = (
        summaries.c.recipe_id,
        summaries.c.recipe_sha256,
        summaries.c.model_id,
        summaries.c.model_name,
        summaries.c.hardware_id,
        summaries.c.hardware_class,
        summaries.c.engine_name,
        summaries.c.engine_version,
        summaries.c.origin,
        measurements.c.key,
        measurements.c.kind,
        measurements.c.point,
        measurements.c.metric,
    )
    query = (
        sa.select(
            *identity,
            sa.func.max(measurements.c.unit),
            sa.func.sum(measurements.c.n),
            sa.func.sum(measurements.c.mean * measurements.c.n),
            sa.func.min(measurements.c.min),
            sa.func.max(measurements.c.max),
            sa.func.count(),
            sa.func.sum(sa.func.coalesce(measurements.c.requested_repeats, summaries.c.requested_repeats, measurements.c.n)),
        )
        .join(measurements, measurements.c.run_id == summaries.c.run_id)
        .where(measurements.c.n > 0)
        .group_by(*identity)
    )
    names = [column.name for column in identity]
    rows = [
        {
            **dict(zip(names, row[:13], strict=True)),
            "point": row[11] or "",
            "engine_version_key": row[7] or "",
            "unit": row[13],
            "n": int(row[14] or 0),
            "total": float(row[15] or 0.0),
            "min": float(row[16]),
            "max": float(row[17]),
            "runs": int(row[18]),
            "requested": int(row[19] or 0),
        }
        for row in bind.execute(query)
    ]
    for start in range(0, len(rows), BACKFILL_BATCH):
        bind.execute(sa.insert(stats), rows[start : start + BACKFILL_BATCH])


def downgrade() -> None:
    op.drop_table("group_stats")
    op.drop_index("ix_run_summaries_recipe_id", table_name="run_summaries")
    op.drop_index("ix_run_summaries_job_id", table_name="run_summaries")
    op.drop_index("ix_run_summaries_finished_at", table_name="run_summaries")
    op.drop_index("ix_run_summaries_group", table_name="run_summaries")
    op.drop_table("run_summaries")
    op.execute("DELETE FROM samples WHERE samples IS NULL")
    with op.batch_alter_table("samples") as batch:
        batch.alter_column("samples", existing_type=JSON_TYPE, nullable=False)
        batch.drop_column("data")
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    for row_id, data in bind.execute(sa.text("SELECT id, params FROM measurements")).all():
        if isinstance(data, bytes | memoryview) and bytes(data[:1]) == params_codec.VERSION_1:
            text = json.dumps(params_codec.decode(bytes(data)))
            bind.execute(
                sa.text("UPDATE measurements SET params = :p WHERE id = :i"),
                {"p": text.encode("utf-8") if postgres else text, "i": row_id},
            )
    if postgres:
        op.execute("ALTER TABLE measurements ALTER COLUMN params TYPE jsonb USING convert_from(params, 'UTF8')::jsonb")
    with op.batch_alter_table("measurements") as batch:
        batch.drop_column("point")
        if not postgres:
            batch.alter_column("params", existing_type=sa.LargeBinary(), type_=JSON_TYPE, existing_nullable=False)
