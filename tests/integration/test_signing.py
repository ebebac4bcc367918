"""Signed runs on real SQLite and PostgreSQL: checked at delivery, by `Store.verify` after changes made behind the
store's back, trusted keys making runs verified, an unknown key reported as such, and the private key nowhere."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from farm.domain import RunResult
from farm.recipes.model import Recipe
from farm.signing.keys import HostKey
from farm.signing.runs import Verdict, sign_result
from farm.store import Store
from farm.store.models import MeasurementRow, Run, RunSignatureRow, RunSummary, Sample

WORKER = "host-a-w1"
KEYS = ("decode/code/decode_tok_s", "prefill/8192/prefill_tok_s")


@pytest.fixture
def raw(store_url: str) -> Iterator[sa.Engine]:
    """A second connection to the same database, to change rows behind the store's back."""
    engine = sa.create_engine(store_url)
    try:
        yield engine
    finally:
        engine.dispose()


def deliver(
    store: Store,
    recipe: Recipe,
    result: RunResult,
    key: HostKey | None,
    *,
    worker: str = WORKER,
    register: bool = True,
    scheme: str | None = None,
) -> str:
    """Submit, claim and complete one job with `result` signed by `key` (None: unsigned); returns the job id."""
    [job_id] = store.submit(recipe, "sweep", {"repeats": 3}, "ab" * 32, 3, simulated=False)
    store.register_worker(
        worker, "host-a", [recipe.hardware_class], public_key=key.public if key and register else None
    )
    claimed = store.claim_job(job_id, worker, [recipe.hardware_class], 60)
    assert claimed is not None
    provenance = {
        **result.provenance,
        "argv": ["vllm", "serve", "org/model", "--tensor-parallel-size", "2"],
        "engine": {"name": "vllm", "version": "0.11.0", "image_digest": "sha256:" + "a" * 64},
        "model_id": "org/model",
        "model_revision": "0123456789abcdef0123456789abcdef01234567",
        "worker_id": worker,
        "attempt": claimed.attempt,
        "gpus": {"power_limit_w": [600.0, 600.0], "count": 2},
    }
    result = replace(result, provenance=provenance)
    if key is not None:
        result = sign_result(job_id, claimed.attempt, worker, result, key, scheme=scheme)
    store.complete(job_id, claimed.attempt, worker, result)
    return job_id


def verdicts(store: Store, job_ids: list[str] | None = None) -> dict[str, tuple[Verdict, str]]:
    return {check.job_id: (check.verdict, check.reason) for check in store.verify(job_ids)}


def verified_flag(raw: sa.Engine, job_id: str) -> bool:
    with raw.connect() as conn:
        return bool(conn.execute(sa.select(RunSummary.verified).where(RunSummary.job_id == job_id)).scalar_one())


def run_id_of(raw: sa.Engine, job_id: str) -> int:
    with raw.connect() as conn:
        return int(conn.execute(sa.select(Run.id).where(Run.job_id == job_id)).scalar_one())


def test_a_delivered_run_is_signed_and_verified_once_its_key_is_trusted(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """The store checks the signature at delivery; the worker's key is known but not trusted until `trust_key`,
    after which the run reads verified (run_summaries.verified) without a new delivery."""
    key = HostKey.generate()
    job_id = deliver(store, make_recipe(), make_result(dict.fromkeys(KEYS, (270.0, 276.0, 282.0))), key)
    assert verdicts(store) == {job_id: (Verdict.UNTRUSTED, "")}
    assert not verified_flag(raw, job_id)
    [known] = store.keys()
    assert (known.key_id, known.trusted, known.source) == (key.key_id, False, "worker")
    key_id, checks = store.trust_key(key.key_id)
    assert key_id == key.key_id
    assert [(c.job_id, c.verdict) for c in checks] == [(job_id, Verdict.VERIFIED)]
    assert verified_flag(raw, job_id)
    assert verdicts(store) == {job_id: (Verdict.VERIFIED, "")}


def _change_figure(conn: sa.Connection, run_id: int) -> None:
    conn.execute(
        sa.update(MeasurementRow)
        .where(MeasurementRow.run_id == run_id, MeasurementRow.key == KEYS[0])
        .values(values=[270.0, 276.0, 282.5])
    )


def _change_summary(conn: sa.Connection, run_id: int) -> None:
    conn.execute(
        sa.update(MeasurementRow)
        .where(MeasurementRow.run_id == run_id, MeasurementRow.key == KEYS[0])
        .values(mean=999.0)
    )


def _summary_column(column: str, value: float | str) -> Callable[[sa.Connection, int], None]:
    """One stored summary column of the first figure set to `value` (each is checked by its own column-wise
    pass in farm.store.signatures._summary_problems)."""

    def apply(conn: sa.Connection, run_id: int) -> None:
        conn.execute(
            sa.update(MeasurementRow)
            .where(MeasurementRow.run_id == run_id, MeasurementRow.key == KEYS[0])
            .values({column: value})
        )

    return apply


def _change_sample(conn: sa.Connection, run_id: int) -> None:
    from farm.store.sample_codec import encode

    other = encode([{"started_ns": 0, "first_token_ns": 11, "last_token_ns": 90, "completion_tokens": 8}])
    conn.execute(
        sa.update(Sample)
        .where(Sample.run_id == run_id, Sample.figure_key == KEYS[1], Sample.repeat_index == 1)
        .values(data=other)
    )


def _provenance_change(change: Callable[[dict[str, Any]], None]) -> Callable[[sa.Connection, int], None]:
    def apply(conn: sa.Connection, run_id: int) -> None:
        provenance = dict(conn.execute(sa.select(Run.provenance).where(Run.id == run_id)).scalar_one())
        change(provenance)
        conn.execute(sa.update(Run).where(Run.id == run_id).values(provenance=provenance))

    return apply


def _argv(p: dict[str, Any]) -> None:
    p["argv"] = [*p["argv"][:-1], "4"]


def _image(p: dict[str, Any]) -> None:
    p["engine"] = {**p["engine"], "image_digest": "sha256:" + "b" * 64}


def _revision(p: dict[str, Any]) -> None:
    p["model_revision"] = "main"


def _attempt(conn: sa.Connection, run_id: int) -> None:
    conn.execute(sa.update(Run).where(Run.id == run_id).values(total_requests=1))


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (_change_figure, "figures changed"),
        (_change_summary, f"figure {KEYS[0]}: its stored summary"),
        (_summary_column("n", 2), f"figure {KEYS[0]}: its stored summary"),
        (_summary_column("min", 269.0), f"figure {KEYS[0]}: its stored summary"),
        (_summary_column("max", 282.5), f"figure {KEYS[0]}: its stored summary"),
        (_summary_column("median", 275.0), "figures changed"),
        (_summary_column("stdev", 1.5), "figures changed"),
        (_summary_column("spread", 0.5), "figures changed"),
        (_summary_column("unit", "tok/min"), "figures changed"),
        (_change_sample, "samples changed"),
        (_provenance_change(_argv), "provenance changed"),
        (_provenance_change(_image), "provenance changed"),
        (_provenance_change(_revision), "provenance changed"),
        (_attempt, "identity or request counts changed"),
    ],
    ids=[
        "figure",
        "summary",
        "summary-n",
        "summary-min",
        "summary-max",
        "summary-median",
        "summary-stdev",
        "summary-spread",
        "unit",
        "sample",
        "argv",
        "image-digest",
        "revision",
        "request-counts",
    ],
)
def test_a_change_behind_the_store_is_caught_by_verify(
    store: Store,
    raw: sa.Engine,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
    change: Callable[[sa.Connection, int], None],
    named: str,
) -> None:
    """A figure, a stored summary, one repeat's samples, the argv, the image digest, the model revision or the
    request counts changed in the database after delivery: `verify` names the run changed, says what, and it is
    no longer verified; an untouched run beside it still is."""
    key = HostKey.generate()
    recipe = make_recipe()
    result = make_result(dict.fromkeys(KEYS, (270.0, 276.0, 282.0)))
    changed, untouched = deliver(store, recipe, result, key), deliver(store, recipe, result, key)
    store.trust_key(key.key_id)
    assert verified_flag(raw, changed)
    with raw.begin() as conn:
        change(conn, run_id_of(raw, changed))
    found = verdicts(store)
    assert found[untouched] == (Verdict.VERIFIED, "")
    verdict, reason = found[changed]
    assert verdict is Verdict.CHANGED
    assert verdict.failed
    assert named in reason
    assert not verified_flag(raw, changed)
    assert verified_flag(raw, untouched)


def test_an_unknown_key_is_reported_as_unknown_not_as_tampering(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """A run signed by a key the farm never saw is `unknown_key` (it cannot be checked), naming the key, at
    delivery and at verify; trusting that key given whole (its one-line form) then checks and verifies it."""
    key = HostKey.generate()
    job_id = deliver(store, make_recipe(), make_result(), key, register=False)
    verdict, reason = verdicts(store)[job_id]
    assert verdict is Verdict.UNKNOWN_KEY
    assert verdict.failed
    assert reason == f"signed by unknown key {key.key_id}"
    assert not verified_flag(raw, job_id)
    key_id, checks = store.trust_key(key.public.line("host-a"))
    assert key_id == key.key_id
    assert [c.verdict for c in checks] == [Verdict.VERIFIED]


def test_an_unsigned_run_is_reported_unsigned_and_never_verified(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """A run delivered without a signature is `unsigned`: not a failure of verify, never verified."""
    job_id = deliver(store, make_recipe(), make_result(), None)
    verdict, _ = verdicts(store)[job_id]
    assert verdict is Verdict.UNSIGNED
    assert not verdict.failed
    assert not verified_flag(raw, job_id)


def test_a_spooled_result_keeps_its_signature(
    store: Store, tmp_path: Path, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """The spool writes the signature with the result, so a result delivered after an outage is still signed."""
    from farm.worker.spool import Spool

    key = HostKey.generate()
    signed = sign_result("j-1", 1, WORKER, make_result(), key)
    spool = Spool(tmp_path / "spool")
    spool.put("j-1", 1, WORKER, signed)
    [item] = spool.pending()
    assert item.result.signature == signed.signature


def test_the_private_key_is_never_in_the_store(
    store: Store, store_url: str, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """Every table of the store, dumped as text, holds the public key but no form of the private one."""
    from cryptography.hazmat.primitives import serialization

    key = HostKey.generate()
    deliver(store, make_recipe(), make_result(), key)
    private = key._private
    forms = private_forms(private, serialization)
    engine = sa.create_engine(store_url)
    dumped = []
    try:
        with engine.connect() as conn:
            for table in sa.inspect(conn).get_table_names():
                for row in conn.execute(sa.text(f'SELECT * FROM "{table}"')):  # noqa: S608 - the store's own tables
                    dumped.append(repr(tuple(row)))
    finally:
        engine.dispose()
    text = "\n".join(dumped)
    assert key.public.text in text
    for form in forms:
        assert form not in text


def private_forms(private: Any, serialization: Any) -> list[str]:
    """The private key as text in every form it could leak in: its PEM body, its raw bytes in hex and base64."""
    import base64

    raw = private.private_bytes(
        serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
    )
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    body = "".join(line for line in pem.splitlines() if not line.startswith("-----"))
    return [body, raw.hex(), base64.b64encode(raw).decode(), repr(raw)[2:-1]]


def test_the_leaderboard_marks_verified_rows_and_can_show_only_them(
    store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """A group whose runs are all verified is marked verified; `verified_only` leaves out the runs that are not,
    whichever table the leaderboard reads (group_stats unfiltered, the runs when filtered)."""
    from farm.filters import ResultFilter
    from farm.store import reads

    trusted, other = HostKey.generate(), HostKey.generate()
    verified_job = deliver(store, make_recipe("recipe-a"), make_result(), trusted)
    store.trust_key(trusted.key_id)
    untrusted_job = deliver(store, make_recipe("recipe-b"), make_result(), other, worker="host-b-w1")
    fast = make_result({"decode/code/decode_tok_s": (100.0, 110.0)})
    slow = make_result({"decode/code/decode_tok_s": (10.0, 20.0)})
    mixed_verified = deliver(store, make_recipe("recipe-c"), fast, trusted)
    deliver(store, make_recipe("recipe-c"), slow, other, worker="host-b-w1")
    board = {row.recipe_id: row for row in reads.leaderboard(store, ResultFilter())}
    assert board["recipe-a"].verified
    assert board["recipe-a"].to_json()["verified"] is True
    assert not board["recipe-b"].verified
    assert (board["recipe-c"].verified, board["recipe-c"].verified_runs, board["recipe-c"].runs) == (False, 1, 2)
    only = {row.recipe_id: row for row in reads.leaderboard(store, ResultFilter(verified_only=True))}
    assert sorted(only) == ["recipe-a", "recipe-c"]
    assert only["recipe-a"].job_ids == (verified_job,)
    assert only["recipe-c"].job_ids == (mixed_verified,)
    assert only["recipe-c"].decode_tok_s.mean == 105.0  # the verified run's values alone
    assert only["recipe-c"].verified
    assert untrusted_job not in {job for row in only.values() for job in row.job_ids}


def test_aggregated_entries_are_marked_verified_and_can_be_only_those(
    store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """`aggregate`, `results` and the exports read entries: an entry pooling only verified runs is marked
    verified (in its JSON too); the `verified` filter keeps only those runs."""
    from farm.filters import ResultFilter
    from farm.report.aggregate import entry_json
    from farm.store import reads

    trusted = HostKey.generate()
    deliver(store, make_recipe("recipe-a"), make_result(), trusted)
    store.trust_key(trusted.key_id)
    deliver(store, make_recipe("recipe-b"), make_result(), None)
    entries = {e.recipe.recipe_id: e for e in reads.iter_entries(store, ResultFilter())}
    assert entries["recipe-a"].verified
    assert entry_json(entries["recipe-a"])["verified"] is True
    assert not entries["recipe-b"].verified
    only = list(reads.iter_entries(store, ResultFilter(verified_only=True)))
    assert {e.recipe.recipe_id for e in only} == {"recipe-a"}


def test_the_localmaxxing_export_carries_signature_verified_and_validated(
    store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """A LocalMaxxing submission carries the latest run's signature (key id, digest, Ed25519 signature), whether
    it is verified, and the registry's rules one by one: this recipe has no digest-pinned image, so it is not
    validated though its run is verified and its revision is pinned."""
    from farm.report import service

    key = HostKey.generate()
    job_id = deliver(store, make_recipe(), make_result(), key)
    store.trust_key(key.key_id)
    [submission] = service.localmaxxing_submissions(store)
    signature = submission["signature"]
    assert signature["keyId"] == key.key_id
    assert signature["status"] == "verified"
    assert signature["digest"] == store.signature(job_id).digest
    assert submission["verified"] is True
    assert submission["validatedRules"] == {
        "digest-pinned image": True,  # the run's provenance names a sha256 image digest (deliver's provenance)
        "full model revision": True,
        "acceptance run": True,
        "no eager mode": True,
    }
    assert submission["validated"] is True
    assert submission["promptHashes"] == {}


def test_verify_in_several_processes_finds_what_one_finds(
    store: Store,
    raw: sa.Engine,
    monkeypatch: pytest.MonkeyPatch,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
) -> None:
    """Checked by two processes a batch of one run each, the runs get the verdicts one process gives them, kept
    by the store, which goes on working afterwards (no connection crossed the fork)."""
    from farm.store import signatures

    monkeypatch.setattr(signatures, "VERIFY_BATCH", 1)
    key = HostKey.generate()
    jobs = [deliver(store, make_recipe(), make_result(dict.fromkeys(KEYS, (270.0, 276.0))), key) for _ in range(4)]
    store.trust_key(key.key_id)
    with raw.begin() as conn:
        _change_figure(conn, run_id_of(raw, jobs[2]))
    one = {c.job_id: (c.verdict, c.reason) for c in store.verify(workers=1)}
    with raw.begin() as conn:  # the check kept its verdict: put it back to verified to see two processes keep it
        conn.execute(sa.update(RunSummary).values(verified=True))
        conn.execute(sa.update(RunSignatureRow).values(status="verified"))
    two = {c.job_id: (c.verdict, c.reason) for c in store.verify(workers=2)}
    assert one == two
    assert one[jobs[2]][0] is Verdict.CHANGED
    assert [one[job][0] for job in jobs] == [Verdict.VERIFIED, Verdict.VERIFIED, Verdict.CHANGED, Verdict.VERIFIED]
    assert not verified_flag(raw, jobs[2])
    assert verified_flag(raw, jobs[0])
    assert len(store.keys()) == 1


def test_figures_stored_as_other_text_of_the_same_numbers_still_verify(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """`verify` first hashes the figures' canonical JSON written from the stored numbers' own text; a store that
    keeps the same numbers as other text (`282.00`) is not tampered with: the figures are then
    canonicalized from their decoded values and the run still verifies, while a changed number is still caught."""
    key = HostKey.generate()
    result = make_result(dict.fromkeys(KEYS, (270.0, 276.0, 282.0)))
    same, other = deliver(store, make_recipe(), result, key), deliver(store, make_recipe(), result, key)
    store.trust_key(key.key_id)
    cast = "CAST(:text AS jsonb)" if raw.dialect.name == "postgresql" else ":text"
    statement = sa.text(f'UPDATE measurements SET "values" = {cast} WHERE run_id = :run AND key = :key')  # noqa: S608
    with raw.begin() as conn:
        conn.execute(statement, {"text": "[270.0,276.0, 282.00]", "run": run_id_of(raw, same), "key": KEYS[0]})
        conn.execute(statement, {"text": "[270.0, 276.0, 282.001]", "run": run_id_of(raw, other), "key": KEYS[0]})
    found = verdicts(store)
    assert found[same] == (Verdict.VERIFIED, "")
    assert found[other][0] is Verdict.CHANGED
    assert "figures changed" in found[other][1]


def test_the_figures_text_verify_hashes_first_is_their_canonical_json(
    store: Store, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """The bytes a v1 check builds from the values' stored text are exactly the figures' v1 canonical JSON (their
    documents without the summary v2 signs) on both databases, even for a number jsonb wrote otherwise
    (1e-07 as 0.0000001): since 0009 the store keeps the values as their canonical text, not as jsonb."""
    from farm.signing import canonical
    from farm.store.signatures import stored_contents

    plain = deliver(store, make_recipe(), make_result(dict.fromkeys(KEYS, (270.0, 276.5, 282.25))), HostKey.generate())
    tiny = deliver(store, make_recipe(), make_result(dict.fromkeys(KEYS, (270.0, 276.0, 1e-07))), HostKey.generate())
    with store._read("test") as conn:
        ids = {job: int(conn.execute(sa.select(Run.id).where(Run.job_id == job)).scalar_one()) for job in (plain, tiny)}
        contents = stored_contents(conn, list(ids.values()))
    for run_id in ids.values():
        content, problems = contents[run_id]
        assert problems == []
        documents = [{k: v for k, v in f.items() if k != "summary"} for f in content.figures]
        expected = canonical.canonical_json(sorted(documents, key=lambda f: str(f["key"])))
        assert content.figures_json == expected
        assert content.parts(canonical.sha256_hex(expected))[0] == canonical.sha256_hex(expected)
        assert canonical.figures_sha256(content.figures) == canonical.sha256_hex(expected)


def test_a_check_decodes_the_figures_only_of_runs_whose_stored_text_is_not_what_was_signed(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """(farm-run/v1) Given the signed figures sha256 of each run (what `verify` passes), stored_contents leaves
    out the decoded figure documents of a run whose figures' text hashes to it (those bytes are what was
    signed), and gives them all for a run whose text does not (a changed value, or a wrong signed hash): the
    check then hashes those."""
    from farm.store.signatures import stored_contents

    key = HostKey.generate()
    result = make_result(dict.fromkeys(KEYS, (270.0, 276.5, 282.25)))
    same, changed = (
        deliver(store, make_recipe(), result, key, scheme="farm-run/v1"),
        deliver(store, make_recipe(), result, key, scheme="farm-run/v1"),
    )
    with raw.begin() as conn:
        _change_figure(conn, run_id_of(raw, changed))
    ids = {job: run_id_of(raw, job) for job in (same, changed)}
    with store._read("test") as conn:
        signed = {
            run_id: str(
                conn.execute(
                    sa.text("SELECT figures_sha256 FROM run_signatures WHERE run_id = :id"), {"id": run_id}
                ).scalar()
            )
            for run_id in ids.values()
        }
        contents = stored_contents(conn, list(ids.values()), signed)
        wrong = stored_contents(conn, [ids[same]], {ids[same]: "0" * 64})
    if store.url.startswith("sqlite"):  # PostgreSQL's jsonb text of these numbers is the canonical one too
        assert contents[ids[same]][0].figures == ()
    assert contents[ids[same]][0].parts(signed[ids[same]])[0] == signed[ids[same]]
    assert {f["key"] for f in contents[ids[changed]][0].figures} == set(KEYS)
    assert contents[ids[changed]][0].parts(signed[ids[changed]])[0] != signed[ids[changed]]
    assert {f["key"] for f in wrong[ids[same]][0].figures} == set(KEYS)
    assert wrong[ids[same]][0].parts(signed[ids[same]])[0] == signed[ids[same]]


def test_v2_runs_verify_from_the_text_the_database_writes_and_v1_runs_beside_them_still_verify(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """A run signed farm-run/v2 (the default) has its figures part computed by the database's own joined text
    (v2_figure_parts) equal to the one signed, so verify reads no figure row for it, on SQLite and PostgreSQL,
    with numbers jsonb would have rewritten (1e-07); a run signed farm-run/v1 in the same store still verifies
    by the v1 path; a changed value makes the v2 part differ and the run changed."""
    from farm.store.signatures import v2_figure_parts

    key = HostKey.generate()
    result = make_result(dict.fromkeys(KEYS, (270.0, 276.123456789, 1e-07)))
    v2, v1 = (
        deliver(store, make_recipe(), result, key),
        deliver(store, make_recipe(), result, key, scheme="farm-run/v1"),
    )
    changed = deliver(store, make_recipe(), result, key)
    store.trust_key(key.key_id)
    ids = {job: run_id_of(raw, job) for job in (v2, v1, changed)}
    with raw.connect() as conn:
        schemes = dict(conn.execute(sa.select(RunSignatureRow.run_id, RunSignatureRow.scheme)).all())
        signed = dict(conn.execute(sa.select(RunSignatureRow.run_id, RunSignatureRow.figures_sha256)).all())
    assert (schemes[ids[v2]], schemes[ids[v1]]) == ("farm-run/v2", "farm-run/v1")
    with raw.begin() as conn:
        _change_figure(conn, ids[changed])
    with store._read("test") as conn:
        parts = v2_figure_parts(conn, list(ids.values()))
    assert parts[ids[v2]] == signed[ids[v2]]
    assert parts[ids[changed]] != signed[ids[changed]]
    found = verdicts(store)
    assert found[v2] == (Verdict.VERIFIED, "")
    assert found[v1] == (Verdict.VERIFIED, "")
    assert found[changed][0] is Verdict.CHANGED
    assert "figures changed" in found[changed][1]


def test_a_v2_value_stored_as_other_text_of_the_same_number_takes_the_slow_path_and_still_verifies(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """A v2 run whose values text is no longer the canonical one but holds the same numbers (`282.00`) misses
    the database-text path and is checked from its decoded rows, like v1: what readers read (the numbers) is
    what was signed, so it verifies; a changed number the same way is caught."""
    from farm.store.signatures import v2_figure_parts

    key = HostKey.generate()
    result = make_result(dict.fromkeys(KEYS, (270.0, 276.0, 282.0)))
    same, other = deliver(store, make_recipe(), result, key), deliver(store, make_recipe(), result, key)
    store.trust_key(key.key_id)
    statement = sa.text('UPDATE measurements SET "values" = :text WHERE run_id = :run AND key = :key')
    with raw.begin() as conn:
        conn.execute(statement, {"text": "[270.0,276.0,282.00]", "run": run_id_of(raw, same), "key": KEYS[0]})
        conn.execute(statement, {"text": "[270.0,276.0,282.001]", "run": run_id_of(raw, other), "key": KEYS[0]})
        signed = str(
            conn.execute(
                sa.select(RunSignatureRow.figures_sha256).where(RunSignatureRow.run_id == run_id_of(raw, same))
            ).scalar_one()
        )
    with store._read("test") as conn:
        assert v2_figure_parts(conn, [run_id_of(raw, same)])[run_id_of(raw, same)] != signed
    found = verdicts(store)
    assert found[same] == (Verdict.VERIFIED, "")
    assert found[other][0] is Verdict.CHANGED
    assert "figures changed" in found[other][1]
