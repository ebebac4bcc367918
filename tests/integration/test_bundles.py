"""Signed results bundles between two real stores (SQLite and PostgreSQL): export, import checked before anything
is stored, a changed byte refused with nothing stored, idempotent imports, exchanges both ways, origin kept."""

from __future__ import annotations

import gzip
import json
import re
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from farm_harness import POSTGRES_URL, admin
from sqlalchemy.engine import make_url
from test_signing import KEYS, deliver, private_forms

from farm.bundles import export_bundle, import_bundle
from farm.domain import Artifact, RunResult
from farm.errors import BundleRefused
from farm.filters import ResultFilter
from farm.recipes.model import Recipe
from farm.signing.keys import HostKey
from farm.signing.runs import Verdict
from farm.store import Store
from farm.store.models import RunSignatureRow, RunSummary

ALL = ResultFilter()
TABLES = ("recipes", "jobs", "runs", "measurements", "samples", "run_summaries", "group_stats", "run_signatures")


@pytest.fixture
def other_store(backend: str, tmp_path: Path) -> Iterator[Store]:
    """A second, empty store on the same kind of database: another farm."""
    if backend == "sqlite":
        opened = Store.open(f"sqlite:///{tmp_path / 'other' / 'farm.db'}", auto_upgrade=True)
        try:
            yield opened
        finally:
            opened.close()
        return
    schema = f"farm_test_{secrets.token_hex(6)}"
    admin(f'CREATE SCHEMA "{schema}"')
    url = make_url(POSTGRES_URL).update_query_dict({"options": f"-csearch_path={schema}"})
    opened = Store.open(url.render_as_string(hide_password=False), auto_upgrade=True)
    try:
        yield opened
    finally:
        opened.close()
        admin(f'DROP SCHEMA "{schema}" CASCADE')


def counts(store: Store) -> dict[str, int]:
    with store._read("count") as conn:
        return {t: int(conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one()) for t in TABLES}  # noqa: S608


def job_ids(store: Store) -> set[str]:
    with store._read("jobs") as conn:
        return set(conn.execute(sa.select(RunSummary.job_id)).scalars())


def origins(store: Store) -> dict[str, str | None]:
    with store._read("origins") as conn:
        rows = conn.execute(
            sa.select(RunSummary.job_id, RunSignatureRow.origin_farm).join(
                RunSignatureRow, RunSignatureRow.run_id == RunSummary.run_id
            )
        )
        return {job_id: origin for job_id, origin in rows}


def failures(store: Store) -> list[str]:
    return [f"{c.job_id}: {c.verdict}: {c.reason}" for c in store.verify() if c.verdict.failed]


def test_a_bundle_moves_signed_runs_and_a_second_import_changes_nothing(
    store: Store,
    other_store: Store,
    tmp_path: Path,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
) -> None:
    """Export (gzip) from one farm, import into another: every run arrives with its figures, samples, summary and
    signature, checks clean there (its key known from the bundle, untrusted until trusted), keeps its origin;
    importing again stores nothing more. An unsigned run is left out of the bundle, and says so."""
    key = HostKey.generate()
    signed = [deliver(store, make_recipe(), make_result(dict.fromkeys(KEYS, (270.0, 276.0))), key) for _ in range(2)]
    unsigned = deliver(store, make_recipe(), make_result(), None)
    path = tmp_path / "out" / "a.jsonl.gz"
    report = export_bundle(store, path, ALL, farm_name="farm-a")
    assert report.exported == 2
    assert [why.split(":")[0] for why in report.left_out] == [f"{unsigned} attempt 1"]
    first = import_bundle(other_store, path)
    assert (first.imported, first.already, first.origin_farm) == (2, 0, "farm-a")
    assert job_ids(other_store) == set(signed)
    assert origins(other_store) == dict.fromkeys(signed, "farm-a")
    assert failures(other_store) == []
    assert {c.verdict for c in other_store.verify()} == {Verdict.UNTRUSTED}
    before = counts(other_store)
    again = import_bundle(other_store, path)
    assert (again.imported, again.already) == (0, 2)
    assert counts(other_store) == before
    other_store.trust_key(key.key_id)
    assert {c.verdict for c in other_store.verify()} == {Verdict.VERIFIED}
    assert store.results(signed[0]) == other_store.results(signed[0])
    assert store.samples(signed[0]) == other_store.samples(signed[0])


def test_a_bundle_with_one_changed_byte_in_a_figure_is_refused_with_nothing_stored(
    store: Store,
    other_store: Store,
    tmp_path: Path,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
) -> None:
    """One digit of one figure value changed in the bundle file: the import is refused naming that run, and the
    other farm's store holds nothing at all afterwards (not even the good run beside it)."""
    key = HostKey.generate()
    good = deliver(store, make_recipe(), make_result(dict.fromkeys(KEYS, (270.0, 276.0))), key)
    bad = deliver(store, make_recipe(), make_result(dict.fromkeys(KEYS, (311.0, 312.0))), key)
    path = tmp_path / "a.jsonl"
    export_bundle(store, path, ALL, farm_name="farm-a")
    lines = path.read_text(encoding="utf-8").splitlines()
    [index] = [i for i, line in enumerate(lines) if f'"id":"{bad}"' in line]
    changed, n = re.subn(r'"values":\[311', '"values":[313', lines[index], count=1)
    assert n == 1
    assert len(changed) == len(lines[index])
    assert sum(a != b for a, b in zip(changed, lines[index], strict=True)) == 1
    lines[index] = changed
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    empty = counts(other_store)
    with pytest.raises(BundleRefused) as refused:
        import_bundle(other_store, path)
    message = str(refused.value)
    assert f"job {bad} attempt 1" in message
    assert "its figures changed" in message
    assert good not in message
    assert counts(other_store) == empty
    assert other_store.keys() == []


def test_two_farms_exchange_bundles_both_ways_twice_and_both_verify(
    store: Store,
    other_store: Store,
    tmp_path: Path,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
) -> None:
    """Farm A and farm B each measure their own runs and send each other a bundle of everything they hold, twice
    over: both end with the same runs, nothing doubled, every run checking clean (and the pooled table against
    them), each run's origin kept (a run of A that came back from B is still A's own)."""
    key_a, key_b = HostKey.generate(), HostKey.generate()
    own_a = {deliver(store, make_recipe(), make_result(), key_a, worker="a-w1") for _ in range(2)}
    own_b = {deliver(other_store, make_recipe(), make_result(dict.fromkeys(KEYS, (5.0, 6.0))), key_b, worker="b-w1")}
    for round_ in range(2):
        a_out, b_out = tmp_path / f"a{round_}.jsonl", tmp_path / f"b{round_}.jsonl.gz"
        export_bundle(store, a_out, ALL, farm_name="farm-a")
        import_bundle(other_store, a_out)
        export_bundle(other_store, b_out, ALL, farm_name="farm-b")
        import_bundle(store, b_out)
    assert job_ids(store) == job_ids(other_store) == own_a | own_b
    assert counts(store)["runs"] == counts(other_store)["runs"] == 3
    assert failures(store) == []
    assert failures(other_store) == []
    assert store.check_pooled() == []  # the pooled table, added to at each import, matches the runs it pools
    assert other_store.check_pooled() == []
    assert origins(store) == {**dict.fromkeys(own_a), **dict.fromkeys(own_b, "farm-b")}
    assert origins(other_store) == {**dict.fromkeys(own_a, "farm-a"), **dict.fromkeys(own_b)}


def test_a_bundle_never_carries_the_private_key(
    store: Store, tmp_path: Path, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """The bundle carries the public key of the host that signed, and no form of its private key."""
    from cryptography.hazmat.primitives import serialization

    key = HostKey.generate()
    deliver(store, make_recipe(), make_result(), key)
    path = tmp_path / "a.jsonl.gz"
    export_bundle(store, path, ALL)
    text = gzip.decompress(path.read_bytes()).decode()
    assert key.public.text in text
    for form in private_forms(key._private, serialization):
        assert form not in text
    header = json.loads(text.splitlines()[0])
    assert header["bundle"] == "farm-bundle/v1"


def test_a_bundle_carries_artifacts_and_refuses_one_changed_in_it(
    store: Store,
    other_store: Store,
    tmp_path: Path,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
) -> None:
    """A run's engine log travels with it and is checked at import like its figures: it arrives byte for byte
    and verifies there (validated too, once trusted); one character of it changed in the bundle refuses the
    bundle, naming the run's artifacts, with nothing stored."""
    key = HostKey.generate()
    log = "INFO engine started\nINFO ready\n"
    job_id = deliver(store, make_recipe(), make_result(artifacts=(Artifact("engine.log", log),)), key)
    path = tmp_path / "a.jsonl"
    export_bundle(store, path, ALL, farm_name="farm-a")
    text = path.read_text(encoding="utf-8")
    import_bundle(other_store, path)
    assert [a.content for a in other_store.artifacts(job_id, 1)] == [log]
    other_store.trust_key(key.key_id)
    assert [c.verdict for c in other_store.verify()] == [Verdict.VERIFIED]
    assert other_store.signature(job_id).validated

    third = tmp_path / "b.jsonl"
    third.write_text(text.replace("engine started", "engine startet"), encoding="utf-8")
    fresh = tmp_path / "fresh"
    target = Store.open(f"sqlite:///{fresh / 'farm.db'}", auto_upgrade=True)
    try:
        empty = counts(target)
        with pytest.raises(BundleRefused) as refused:
            import_bundle(target, third)
        assert f"job {job_id} attempt 1" in str(refused.value)
        assert "its artifacts changed" in str(refused.value)
        assert counts(target) == empty
    finally:
        target.close()


def test_a_bundle_carries_v2_summaries_and_v1_runs_without_them_and_refuses_a_changed_summary(
    store: Store,
    other_store: Store,
    tmp_path: Path,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
) -> None:
    """A v2 run's bundled figures carry the summary its signature covers (stored as given: the other farm's
    run verifies with the same median), a v1 run's carry none; a bundled median changed is refused, naming
    the run, with nothing stored."""
    key = HostKey.generate()
    result = make_result(dict.fromkeys(KEYS, (270.0, 276.0, 290.0)))
    v2 = deliver(store, make_recipe(), result, key)
    v1 = deliver(store, make_recipe(), result, key, scheme="farm-run/v1")
    path = tmp_path / "a.jsonl"
    export_bundle(store, path, ALL, farm_name="farm-a")
    runs = {
        item["job"]["id"]: item
        for item in map(json.loads, path.read_text(encoding="utf-8").splitlines())
        if item.get("type") == "run"
    }
    assert all("summary" in figure for figure in runs[v2]["figures"])
    assert not any("summary" in figure for figure in runs[v1]["figures"])
    assert runs[v2]["signature"]["scheme"] == "farm-run/v2"
    report = import_bundle(other_store, path)
    assert report is not None
    other_store.trust_key(key.key_id)
    assert failures(other_store) == []
    assert other_store.results(v2) == store.results(v2)
    bad = tmp_path / "b.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    [index] = [i for i, line in enumerate(lines) if f'"id":"{v2}"' in line]
    changed, n = re.subn(r'"median":276\.0', '"median":275.0', lines[index], count=1)
    assert n == 1
    lines[index] = changed
    bad.write_text("\n".join(lines) + "\n", encoding="utf-8")
    third = tmp_path / "third"
    fresh = Store.open(f"sqlite:///{third / 'farm.db'}", auto_upgrade=True)
    try:
        empty = counts(fresh)
        with pytest.raises(BundleRefused) as refused:
            import_bundle(fresh, bad)
        assert f"job {v2} attempt 1" in str(refused.value)
        assert "its figures changed" in str(refused.value)
        assert counts(fresh) == empty
    finally:
        fresh.close()
