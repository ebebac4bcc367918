"""The pooled table `group_stats` checked against the runs it pools, and rebuilt from them (issue 25).

`group_stats` is derived at delivery (Store.complete adds each run's figures: count, sum, min, max per sweep
group and figure key) and the leaderboard reads it alone when no filter selects runs by time or job. Nothing
signs it: a figure changed there would show on the leaderboard while every run verifies. `farm verify` (the
whole store) therefore derives it again, in the database (one GROUP BY over `run_summaries` × `measurements`,
the rows whose figures and six summary numbers a v2 signature covers), and compares:

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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, delete, func, insert, select

from farm.store.models import GroupFigureStat, MeasurementRow, RunSummary

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


def _derived_query() -> Any:
    s, m = RunSummary, MeasurementRow
    version_key = func.coalesce(s.engine_version, "")
    keys: tuple[ColumnElement[Any], ...] = (
        s.recipe_sha256,
        s.hardware_class,
        s.engine_name,
        version_key,
        s.origin,
        m.key,
    )
    names: tuple[ColumnElement[Any], ...] = (
        s.recipe_id,
        s.model_id,
        s.model_name,
        s.hardware_id,
        s.engine_version,
        m.kind,
        m.point,
        m.metric,
        m.unit,
    )
    return (
        select(
            *(column.label(name) for column, name in zip(keys, KEY, strict=True)),
            *(func.min(column).label(f"{name}_low") for column, name in zip(names, NAMES, strict=True)),
            *(func.max(column).label(f"{name}_high") for column, name in zip(names, NAMES, strict=True)),
            func.sum(m.n).label("n"),
            func.sum(m.mean * m.n).label("total"),
            func.sum(func.abs(m.mean) * m.n).label("magnitude"),
            func.min(m.min).label("min"),
            func.max(m.max).label("max"),
            func.count().label("runs"),
            func.sum(func.coalesce(m.requested_repeats, s.requested_repeats, m.n)).label("requested"),
        )
        .join(m, m.run_id == s.run_id)
        .where(m.n > 0)
        .group_by(*keys)
    )


def derived(conn: Connection) -> dict[tuple[Any, ...], Any]:
    """`group_stats` as the stored runs pool to, by group key (derived in the database)."""
    return {tuple(row[:6]): row for row in conn.execute(_derived_query())}


def _stored(conn: Connection) -> dict[tuple[Any, ...], Any]:
    table = GroupFigureStat.__table__
    columns = [table.c[name] for name in (*KEY, *NAMES, "n", "total", "min", "max", "runs", "requested")]
    return {tuple(row[:6]): row for row in conn.execute(select(*columns))}


def _name_of(key: tuple[Any, ...], row: Any, kind: str, reason: str) -> PooledCheck:
    mapping = row._mapping
    recipe = mapping.get("recipe_id", mapping.get("recipe_id_low"))
    model = mapping.get("model_id", mapping.get("model_id_low"))
    engine = f"{key[2]} {key[3]}".strip() if key[3] else str(key[2])
    return PooledCheck(str(recipe), str(model), str(key[1]), engine, str(key[4]), str(key[5]), kind, reason)


def _differences(stored: Any, found: Any) -> list[str]:
    s, d = stored._mapping, found._mapping
    problems = []
    for name in EXACT:
        want = float(d[name]) if name in ("min", "max") else int(d[name])
        if s[name] != want:
            problems.append(f"{name} {s[name]!r} stored, {want!r} from its runs")
    total, derived_total = float(s["total"]), float(d["total"] or 0.0)
    bound = TOTAL_TOLERANCE * max(float(d["magnitude"] or 0.0), abs(derived_total))
    if not abs(total - derived_total) <= bound:  # a NaN stored differs too
        problems.append(f"total {total!r} stored, {derived_total!r} from its runs")
    for name in NAMES:
        if s[name] not in (d[f"{name}_low"], d[f"{name}_high"]):
            problems.append(f"{name} {s[name]!r} stored, {d[f'{name}_low']!r} in its runs")
    return problems


def check(conn: Connection) -> list[PooledCheck]:
    """Every group of `group_stats` that differs from what the stored runs pool to, in group key order."""
    stored, found = _stored(conn), derived(conn)
    problems: list[PooledCheck] = []
    for key in sorted(stored.keys() | found.keys(), key=lambda k: tuple(str(part) for part in k)):
        row, want = stored.get(key), found.get(key)
        if row is None:
            problems.append(_name_of(key, want, "missing", "its runs pool to a row that is not stored"))
        elif want is None:
            problems.append(_name_of(key, row, "extra", "stored, but no stored run pools to it"))
        else:
            differ = _differences(row, want)
            if differ:
                problems.append(_name_of(key, row, "changed", "; ".join(differ)))
    return problems


def rebuild(conn: Connection) -> int:
    """Replace `group_stats` with what the stored runs pool to (in this transaction); returns the rows written."""
    rows: list[dict[str, Any]] = []
    for key, row in derived(conn).items():
        d = row._mapping
        rows.append(
            {
                **dict(zip(KEY, key, strict=True)),
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
