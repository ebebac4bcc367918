"""The pooled table the leaderboard reads (`group_stats`) checked by `farm verify` on real SQLite and PostgreSQL:
derived again from the runs, a changed, missing or extra group is named; an untouched store passes; the table is
rebuilt from the runs once they verify (issue 25)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from test_signing import deliver, raw, run_id_of

from farm.domain import RunResult
from farm.filters import ResultFilter
from farm.recipes.model import Recipe
from farm.signing.keys import HostKey
from farm.store import Store, reads
from farm.store.models import GroupFigureStat, MeasurementRow

__all__ = ["raw"]  # the fixture of test_signing: a second connection to change rows behind the store's back

DECODE = "decode/code/decode_tok_s"
PREFILL = "prefill/8192/prefill_tok_s"


def fill(store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]) -> HostKey:
    """Runs in two groups, with values whose float sums depend on their order (0.1-steps, many runs)."""
    key = HostKey.generate()
    for index in range(7):
        values = (270.1 + index * 0.7, 276.3 - index * 0.13, 0.1 * index + 1e-3)
        result = make_result({DECODE: values, PREFILL: (9001.7 / (index + 3), 8999.9)})
        deliver(store, make_recipe("recipe-a" if index % 2 else "recipe-b"), result, key)
    store.trust_key(key.key_id)
    return key


def decode_mean(store: Store, recipe_id: str) -> float:
    board = {row.recipe_id: row for row in reads.leaderboard(store, ResultFilter())}
    stat = board[recipe_id].decode_tok_s
    assert stat is not None
    return float(stat.mean)


def test_an_untouched_store_passes_and_its_derivation_needs_the_tolerance_only_for_totals(
    store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """The pooled table as delivered matches its runs derived again (n, runs, requested, min, max exactly)."""
    fill(store, make_recipe, make_result)
    assert store.check_pooled() == []
    assert all(c.verdict.value == "verified" for c in store.verify())


@pytest.mark.parametrize(
    ("column", "change", "named"),
    [
        ("total", GroupFigureStat.total * 1.000001, "total"),  # a mean moved by one part in a million
        ("n", GroupFigureStat.n + 1, "n "),
        ("max", GroupFigureStat.max + 1000.0, "max"),
        ("min", GroupFigureStat.min - 0.5, "min"),
        ("runs", GroupFigureStat.runs + 2, "runs"),
        ("model_name", sa.literal("Another Model"), "model_name"),
    ],
)
def test_a_changed_group_row_is_named_and_the_rest_pass(
    store: Store,
    raw: sa.Engine,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
    column: str,
    change: sa.ColumnElement[object],
    named: str,
) -> None:
    """One group's figure changed in `group_stats` (what the leaderboard shows): `check_pooled` names that group
    and figure key alone, `changed`, saying which column; every run still verifies."""
    fill(store, make_recipe, make_result)
    before = decode_mean(store, "recipe-a")
    with raw.begin() as conn:
        conn.execute(
            sa.update(GroupFigureStat)
            .where(GroupFigureStat.recipe_id == "recipe-a", GroupFigureStat.key == DECODE)
            .values({column: change})
        )
    if column == "total":
        assert decode_mean(store, "recipe-a") != before  # the leaderboard shows the changed figure
    [found] = store.check_pooled()
    assert (found.kind, found.recipe_id, found.key) == ("changed", "recipe-a", DECODE)
    assert found.reason.startswith(named)
    assert "recipe-a" in found.group
    assert DECODE in found.group
    assert all(not c.verdict.failed for c in store.verify())


def test_a_deleted_or_added_group_row_is_named(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """A group row deleted is `missing` (its runs pool to it), one added that no run pools to is `extra`."""
    fill(store, make_recipe, make_result)
    with raw.begin() as conn:
        row = conn.execute(
            sa.select(GroupFigureStat.__table__).where(
                GroupFigureStat.recipe_id == "recipe-b", GroupFigureStat.key == PREFILL
            )
        ).one()
        conn.execute(sa.delete(GroupFigureStat).where(GroupFigureStat.id == row.id))
        added = {**row._asdict(), "key": "decode/chat/decode_tok_s", "point": "chat"}
        del added["id"]
        conn.execute(sa.insert(GroupFigureStat).values(added))
    found = {(c.kind, c.recipe_id, c.key) for c in store.check_pooled()}
    assert found == {("missing", "recipe-b", PREFILL), ("extra", "recipe-b", "decode/chat/decode_tok_s")}


def test_a_rebuild_restores_the_table_from_the_runs(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """`rebuild_pooled` writes the table from the runs: it checks clean and the leaderboard shows its figures
    again (to the last bits of the sum's order)."""
    fill(store, make_recipe, make_result)
    before = decode_mean(store, "recipe-a")
    with raw.begin() as conn:
        conn.execute(sa.update(GroupFigureStat).values(total=GroupFigureStat.total * 2))
    assert len(store.check_pooled()) == 4
    assert store.rebuild_pooled() == 4
    assert store.check_pooled() == []
    assert decode_mean(store, "recipe-a") == pytest.approx(before, rel=1e-12)


def farm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "farm", *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_farm_verify_names_a_changed_group_exits_1_and_repairs_it(
    store: Store,
    store_url: str,
    raw: sa.Engine,
    tmp_path: Path,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
) -> None:
    """`farm verify` over the whole store: passes untouched; a changed group row makes it exit 1 naming the group
    (`pooled changed`) and saying how to rebuild; `--repair-pooled` is refused while a run does not verify, then
    rebuilds the table once they do; `farm verify JOB` checks runs only."""
    fill(store, make_recipe, make_result)
    env = {**os.environ, "FARM_DATABASE_URL": store_url, "FARM_DATA_DIR": str(tmp_path / "data")}
    clean = farm(env, "verify")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "pooled table checked" in clean.stdout
    assert "0 groups differ" in clean.stdout
    with raw.begin() as conn:
        conn.execute(
            sa.update(GroupFigureStat)
            .where(GroupFigureStat.recipe_id == "recipe-b", GroupFigureStat.key == PREFILL)
            .values(total=GroupFigureStat.total + 1.0)
        )
    caught = farm(env, "verify")
    assert caught.returncode == 1, caught.stdout + caught.stderr
    assert "pooled changed: recipe-b (deepseek-ai/DeepSeek-V4-Flash-0731) on" in caught.stdout
    assert PREFILL in caught.stdout
    assert "farm verify --repair-pooled" in caught.stdout
    job_id = next(iter(store.verify())).job_id
    runs_only = farm(env, "verify", job_id)
    assert runs_only.returncode == 0, runs_only.stdout + runs_only.stderr
    assert "pooled" not in runs_only.stdout
    with_job = farm(env, "verify", "--repair-pooled", job_id)
    assert with_job.returncode == 2
    assert "name no JOB with it" in with_job.stderr
    changed = (MeasurementRow.run_id == run_id_of(raw, job_id)) & (MeasurementRow.key == DECODE)
    with raw.begin() as conn:  # a run changed too: the rebuild would pool its changed figure, so it is refused
        kept = conn.execute(sa.select(MeasurementRow.max).where(changed)).scalar_one()
        conn.execute(sa.update(MeasurementRow).where(changed).values(max=kept + 1.0))
    refused = farm(env, "verify", "--repair-pooled")
    assert refused.returncode == 1
    assert "pooled table not rebuilt" in refused.stdout
    with raw.begin() as conn:
        conn.execute(sa.update(MeasurementRow).where(changed).values(max=kept))
    repaired = farm(env, "verify", "--repair-pooled")
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert "pooled table rebuilt from the stored runs: 4 rows" in repaired.stdout
    again = farm(env, "verify")
    assert again.returncode == 0, again.stdout + again.stderr
