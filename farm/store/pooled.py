"""The pooled table `group_stats` checked against the runs it pools, and rebuilt from them (issue 25).

`group_stats` is derived at delivery (Store.complete adds each run's figures: count, sum, min, max per sweep
group and figure key) and the leaderboard reads it alone when no filter selects runs by time or job. Nothing
signs it: a figure changed there would show on the leaderboard while every run verifies. `farm verify` (the
whole store) therefore derives it again, in the database (a GROUP BY over `run_summaries` × `measurements`, the
rows whose figures and six summary numbers a v2 signature covers), and compares it there too, in the same
statement (one snapshot; a FULL JOIN with what is stored, only the rows that differ come back):

- n, runs, requested, min and max exactly (integers, and floats taken unchanged from one run's figure);
- total (the sum of every value) within `TOTAL_TOLERANCE` of the values' magnitude: delivery sums each run's
  values and pools runs in delivery order, the derivation sums `mean × n` per run in the database's order, so
  the last bits differ (docs/signing.md says how far);
- the names a reader shows (recipe, model, hardware, engine version, kind, point, metric, unit) against those
  of the group's runs.

A group stored and not derived, or derived and not stored, is reported as well. `rebuild` replaces the table
with the derivation (`farm verify --repair-pooled`, after every run has verified).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, insert, text

from farm.store.models import GroupFigureStat

TOTAL_TOLERANCE = 1e-9
"""How far a stored total may lie from the derived one, relative to the sum of the values' magnitudes: float
sums in another order differ by a few units in the last place (~1e-16 each, at most runs + values of them,
far under 1e-9 at any store size this farm keeps), while a change that moves any figure a reader sees (a mean
printed to 6 significant digits) moves the total by more than 1e-7 of it."""

KEY = ("recipe_sha256", "hardware_class", "engine_name", "engine_version_key", "origin", "key")
"""What names one row of `group_stats` (its unique key)."""
NAMES = ("recipe_id", "model_id", "model_name", "hardware_id", "engine_version", "kind", "point", "metric", "unit")
"""The columns of a row that name what it pools: each must be the value of one of the group's runs."""
EXACT = ("n", "runs", "requested", "min", "max")


@dataclass(frozen=True)
class PooledCheck:
    """One group of `group_stats` that does not match the runs it pools."""

    recipe_id: str
    model_id: str
    hardware_class: str
    engine: str
    origin: str
    key: str
    kind: str
    """`changed` (the stored row differs), `missing` (runs pool to a row not stored), `extra` (a stored row no
    run pools to)."""
    reason: str

    @property
    def group(self) -> str:
        """The group, as `farm verify` names it."""
        return f"{self.recipe_id} ({self.model_id}) on {self.hardware_class}, {self.engine}, {self.origin}: {self.key}"


_GROUPS = """
groups AS (
    SELECT run_id, requested_repeats, DENSE_RANK() OVER (
        ORDER BY recipe_sha256, hardware_class, engine_name, COALESCE(engine_version, ''), origin) AS g
    FROM run_summaries),
group_names AS (
    SELECT DENSE_RANK() OVER (
            ORDER BY recipe_sha256, hardware_class, engine_name, COALESCE(engine_version, ''), origin) AS g,
        recipe_sha256, hardware_class, engine_name, COALESCE(engine_version, '') AS engine_version_key, origin,
        MIN(recipe_id) AS recipe_id_low, MAX(recipe_id) AS recipe_id_high,
        MIN(model_id) AS model_id_low, MAX(model_id) AS model_id_high,
        MIN(model_name) AS model_name_low, MAX(model_name) AS model_name_high,
        MIN(hardware_id) AS hardware_id_low, MAX(hardware_id) AS hardware_id_high,
        MIN(engine_version) AS engine_version_low, MAX(engine_version) AS engine_version_high
    FROM run_summaries
    GROUP BY recipe_sha256, hardware_class, engine_name, COALESCE(engine_version, ''), origin),
pooled AS (
    SELECT groups.g, m.key,
        MIN(m.kind) AS kind_low, MAX(m.kind) AS kind_high, MIN(m.point) AS point_low, MAX(m.point) AS point_high,
        MIN(m.metric) AS metric_low, MAX(m.metric) AS metric_high, MIN(m.unit) AS unit_low, MAX(m.unit) AS unit_high,
        SUM(m.n) AS n, SUM(m.mean * m.n) AS total, SUM(ABS(m.mean) * m.n) AS magnitude,
        MIN(m.min) AS min, MAX(m.max) AS max, COUNT(*) AS runs,
        SUM(COALESCE(m.requested_repeats, groups.requested_repeats, m.n)) AS requested
    FROM groups JOIN measurements m ON m.run_id = groups.run_id
    WHERE m.n > 0
    GROUP BY groups.g, m.key),
derived AS (
    SELECT group_names.*, pooled.*
    FROM pooled JOIN group_names ON group_names.g = pooled.g)
"""
"""`group_stats` as the stored runs pool to, in the database: each run's group numbered first (a rank over the
10,000-odd run rows), so the GROUP BY over every figure row keys on that number and the figure key alone."""

_DERIVED_COLUMNS = (
    *(f"d.{name}" for name in KEY),
    *(f"d.{name}_{end}" for name in NAMES for end in ("low", "high")),
    *(f"d.{name}" for name in ("n", "total", "magnitude", "min", "max", "runs", "requested")),
)


def _check_sql(dialect: str) -> str:
    """One statement, so one snapshot on either database: derive, join to what is stored (a FULL JOIN: a group
    on one side only is found too), and return only the rows that differ."""
    greatest = "GREATEST" if dialect == "postgresql" else "MAX"
    stored = ", ".join(
        f"s.{name} AS stored_{name}" for name in (*KEY, *NAMES, "n", "total", "min", "max", "runs", "requested")
    )
    names = " OR ".join(
        f"(s.{name} IS NOT d.{name}_low AND s.{name} IS NOT d.{name}_high)"
        if dialect != "postgresql"
        else f"(s.{name} IS DISTINCT FROM d.{name}_low AND s.{name} IS DISTINCT FROM d.{name}_high)"
        for name in NAMES
    )
    return f"""WITH {_GROUPS}
SELECT {", ".join(_DERIVED_COLUMNS)}, {stored}
FROM derived d FULL OUTER JOIN group_stats s
    ON s.recipe_sha256 = d.recipe_sha256 AND s.hardware_class = d.hardware_class
    AND s.engine_name = d.engine_name AND s.engine_version_key = d.engine_version_key
    AND s.origin = d.origin AND s.key = d.key
WHERE d.key IS NULL OR s.key IS NULL
    OR s.n <> d.n OR s.runs <> d.runs OR s.requested <> d.requested OR s.min <> d.min OR s.max <> d.max
    OR NOT (ABS(s.total - d.total) <= {TOTAL_TOLERANCE!r} * {greatest}(d.magnitude, ABS(d.total)))
    OR {names}
"""  # noqa: S608 - this module's column names, no input


def derived(conn: Connection) -> list[dict[str, Any]]:
    """`group_stats` as the stored runs pool to (derived in the database), one mapping per group and key."""
    sql = f"WITH {_GROUPS} SELECT {', '.join(_DERIVED_COLUMNS)} FROM derived d"  # noqa: S608 - constants
    return [dict(row._mapping) for row in conn.execute(text(sql))]


def _name_of(row: Mapping[str, Any], side: str, kind: str, reason: str) -> PooledCheck:
    def get(name: str) -> Any:
        return row[f"stored_{name}"] if side == "stored" else row.get(name, row.get(f"{name}_low"))

    key = [get(name) for name in KEY]
    engine = f"{key[2]} {key[3]}" if key[3] else str(key[2])
    return PooledCheck(
        str(get("recipe_id")), str(get("model_id")), str(key[1]), engine, str(key[4]), str(key[5]), kind, reason
    )


def _differences(row: Mapping[str, Any]) -> list[str]:
    problems = []
    for name in EXACT:
        want = float(row[name]) if name in ("min", "max") else int(row[name])
        if row[f"stored_{name}"] != want:
            problems.append(f"{name} {row[f'stored_{name}']!r} stored, {want!r} from its runs")
    total, derived_total = float(row["stored_total"]), float(row["total"] or 0.0)
    bound = TOTAL_TOLERANCE * max(float(row["magnitude"] or 0.0), abs(derived_total))
    if not abs(total - derived_total) <= bound:  # a NaN stored differs too
        problems.append(f"total {total!r} stored, {derived_total!r} from its runs")
    for name in NAMES:
        if row[f"stored_{name}"] not in (row[f"{name}_low"], row[f"{name}_high"]):
            problems.append(f"{name} {row[f'stored_{name}']!r} stored, {row[f'{name}_low']!r} in its runs")
    return problems


def check(conn: Connection) -> list[PooledCheck]:
    """Every group of `group_stats` that differs from what the stored runs pool to, in group key order."""
    problems: list[PooledCheck] = []
    for found in conn.execute(text(_check_sql(conn.dialect.name))):
        row = dict(found._mapping)
        if row["stored_key"] is None:
            problems.append(_name_of(row, "derived", "missing", "its runs pool to a row that is not stored"))
        elif row["key"] is None:
            problems.append(_name_of(row, "stored", "extra", "stored, but no stored run pools to it"))
        else:
            problems.append(_name_of(row, "stored", "changed", "; ".join(_differences(row)) or "differs"))
    return sorted(problems, key=lambda p: (p.recipe_id, p.hardware_class, p.engine, p.origin, p.key, p.kind))


def rebuild(conn: Connection) -> int:
    """Replace `group_stats` with what the stored runs pool to (in this transaction); returns the rows written."""
    rows: list[dict[str, Any]] = []
    for d in derived(conn):
        rows.append(
            {
                **{name: d[name] for name in KEY},
                **{name: d[f"{name}_low"] for name in NAMES},
                "point": d["point_low"] or "",
                "n": int(d["n"]),
                "total": float(d["total"] or 0.0),
                "min": float(d["min"]),
                "max": float(d["max"]),
                "runs": int(d["runs"]),
                "requested": int(d["requested"] or 0),
            }
        )
    conn.execute(delete(GroupFigureStat))
    for begin in range(0, len(rows), 1000):
        chunk: Sequence[dict[str, Any]] = rows[begin : begin + 1000]
        conn.execute(insert(GroupFigureStat), list(chunk))
    return len(rows)
