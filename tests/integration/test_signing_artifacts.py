"""What a run's signature covers besides figures, samples and provenance, on SQLite and PostgreSQL: its
artifacts (the engine log), through their digests; the registry's `validated` verdict kept with the run; the
bulk delivery path (Store.complete_many) storing and checking each run as `complete` does."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import pytest
import sqlalchemy as sa
from test_signing import KEYS, WORKER, deliver, verdicts, verified_flag

from farm.domain import Artifact, RunResult
from farm.errors import LeaseLost
from farm.recipes.model import Recipe
from farm.signing.keys import HostKey
from farm.signing.runs import Verdict, sign_result
from farm.store import Store
from farm.store.models import ArtifactRow, Run, RunSignatureRow, RunSummary

LOG = "INFO starting engine\nINFO ready on 127.0.0.1\n"


@pytest.fixture
def raw(store_url: str) -> Iterator[sa.Engine]:
    """A second connection to the same database, to change rows behind the store's back."""
    engine = sa.create_engine(store_url)
    try:
        yield engine
    finally:
        engine.dispose()


def validated_flag(raw: sa.Engine, job_id: str) -> bool:
    with raw.connect() as conn:
        return bool(conn.execute(sa.select(RunSummary.validated).where(RunSummary.job_id == job_id)).scalar_one())


def artifact_where(raw: sa.Engine, job_id: str) -> Any:
    with raw.connect() as conn:
        run_id = conn.execute(sa.select(Run.id).where(Run.job_id == job_id)).scalar_one()
    return ArtifactRow.run_id == run_id


def test_a_changed_artifact_byte_is_caught_by_verify(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """The engine log is signed with the run (its sha256 in the statement): one byte of it changed in the store
    makes the run `changed`, naming its artifacts; the untouched run beside it stays verified."""
    key = HostKey.generate()
    recipe = make_recipe()
    result = make_result(artifacts=(Artifact("engine.log", LOG),))
    changed, untouched = deliver(store, recipe, result, key), deliver(store, recipe, result, key)
    store.trust_key(key.key_id)
    with raw.connect() as conn:
        signed = conn.execute(sa.select(RunSignatureRow.artifacts_sha256)).scalars().all()
    assert len(signed) == 2
    assert all(value is not None and len(value) == 64 for value in signed)
    with raw.begin() as conn:
        conn.execute(
            sa.update(ArtifactRow).where(artifact_where(raw, changed)).values(content=LOG.replace("r", "R", 1))
        )
    found = verdicts(store)
    assert found[untouched] == (Verdict.VERIFIED, "")
    verdict, reason = found[changed]
    assert verdict is Verdict.CHANGED
    assert reason == "its artifacts changed"
    assert not verified_flag(raw, changed)


@pytest.mark.parametrize("how", ["deleted", "added"])
def test_an_artifact_deleted_or_added_after_delivery_is_caught(
    store: Store,
    raw: sa.Engine,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
    how: str,
) -> None:
    """The signature covers the set of artifacts, not only their texts: one removed, or one added beside them
    (to a run signed with none, too), makes the run changed."""
    key = HostKey.generate()
    artifacts = (Artifact("engine.log", LOG),) if how == "deleted" else ()
    job_id = deliver(store, make_recipe(), make_result(artifacts=artifacts), key)
    store.trust_key(key.key_id)
    assert verdicts(store)[job_id] == (Verdict.VERIFIED, "")
    with raw.begin() as conn:
        if how == "deleted":
            conn.execute(sa.delete(ArtifactRow).where(artifact_where(raw, job_id)))
        else:
            run_id = conn.execute(sa.select(Run.id).where(Run.job_id == job_id)).scalar_one()
            conn.execute(
                sa.insert(ArtifactRow).values(run_id=run_id, name="note.txt", media_type="text/plain", content="hi")
            )
    assert verdicts(store)[job_id] == (Verdict.CHANGED, "its artifacts changed")


def test_a_signature_from_before_artifacts_were_signed_still_verifies(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """A run signed over the statement without an artifacts part (a signature made before they were signed:
    no artifacts_sha256) still verifies, its artifacts not covered; nulling the part in the record of a run
    signed with it is caught: the statement is no longer the one signed."""
    from farm.signing import canonical
    from farm.signing.runs import content_of

    key = HostKey.generate()
    recipe = make_recipe()
    [job_id] = store.submit(recipe, "sweep", {"repeats": 3}, "ab" * 32, 3, simulated=False)
    store.register_worker(WORKER, "host-a", [recipe.hardware_class], public_key=key.public)
    claimed = store.claim_job(job_id, WORKER, [recipe.hardware_class], 60)
    assert claimed is not None
    result = make_result(artifacts=(Artifact("engine.log", LOG),))
    result = replace(result, provenance={**result.provenance, "worker_id": WORKER, "attempt": claimed.attempt})
    content = content_of(job_id, claimed.attempt, WORKER, result)
    digest = content.digest(artifacts=False)
    made = sign_result(job_id, claimed.attempt, WORKER, result, key, scheme=canonical.SCHEME_V1).signature
    assert made is not None
    old = replace(
        made,
        digest=digest.hex(),
        signature=base64.b64encode(key.sign(canonical.SIGNED_PREFIX + digest)).decode("ascii"),
        artifacts_sha256=None,
    )
    store.complete(job_id, claimed.attempt, WORKER, replace(result, signature=old))
    store.trust_key(key.key_id)
    assert verdicts(store)[job_id] == (Verdict.VERIFIED, "")

    other = deliver(store, recipe, result, key)
    assert verdicts(store)[other] == (Verdict.VERIFIED, "")
    with raw.begin() as conn:
        run_id = conn.execute(sa.select(Run.id).where(Run.job_id == other)).scalar_one()
        conn.execute(sa.update(RunSignatureRow).where(RunSignatureRow.run_id == run_id).values(artifacts_sha256=None))
    verdict, reason = verdicts(store)[other]
    assert verdict is Verdict.CHANGED
    assert reason == "its identity or request counts changed (or the record of its signature)"


def test_validated_is_stored_with_the_run_and_follows_its_verdict(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """`validated` is kept per run (run_summaries.validated): false while the key is untrusted (no acceptance
    run), true once trusted for a run whose provenance meets the registry's rules (digest-pinned image, full
    revision, no eager mode), false for one in eager mode, and false again when the run is changed; the
    signature answer and `farm verify`'s checks carry it."""
    key = HostKey.generate()
    recipe = make_recipe()
    good = deliver(store, recipe, make_result(), key)
    plain = deliver(store, recipe, make_result(), key)
    assert not validated_flag(raw, good)
    store.trust_key(key.key_id)
    assert validated_flag(raw, good)
    assert store.signature(good).validated
    assert {c.job_id: c.validated for c in store.verify()}[good]
    # An eager run, signed as it ran: verified, not validated.
    [job_id] = store.submit(recipe, "sweep", {"repeats": 3}, "ab" * 32, 3, simulated=False)
    claimed = store.claim_job(job_id, WORKER, [recipe.hardware_class], 60)
    assert claimed is not None
    result = make_result()
    provenance = {
        **result.provenance,
        "argv": ["vllm", "serve", "org/model", "--enforce-eager"],
        "engine": {"name": "vllm", "version": "0.11.0", "image_digest": "sha256:" + "a" * 64},
        "model_revision": "0123456789abcdef0123456789abcdef01234567",
        "worker_id": WORKER,
        "attempt": claimed.attempt,
    }
    signed = sign_result(job_id, claimed.attempt, WORKER, replace(result, provenance=provenance), key)
    store.complete(job_id, claimed.attempt, WORKER, signed)
    assert verified_flag(raw, job_id)
    assert not validated_flag(raw, job_id)
    assert validated_flag(raw, plain)
    with raw.begin() as conn:
        run_id = conn.execute(sa.select(Run.id).where(Run.job_id == good)).scalar_one()
        conn.execute(sa.update(Run).where(Run.id == run_id).values(total_requests=1))
    assert verdicts(store)[good][0] is Verdict.CHANGED
    assert not validated_flag(raw, good)
    assert not store.signature(good).validated


def test_validated_is_set_by_verify_for_a_run_whose_flag_was_left_false(
    store: Store, raw: sa.Engine, make_recipe: Callable[..., Recipe], make_result: Callable[..., RunResult]
) -> None:
    """A verified run whose stored `validated` is false (stored before revision 0007 added it) is set by the
    next `farm verify`, without its verdict changing."""
    key = HostKey.generate()
    job_id = deliver(store, make_recipe(), make_result(), key)
    store.trust_key(key.key_id)
    with raw.begin() as conn:
        conn.execute(sa.update(RunSummary).where(RunSummary.job_id == job_id).values(validated=False))
    assert verdicts(store)[job_id] == (Verdict.VERIFIED, "")
    assert validated_flag(raw, job_id)


def _claimed_deliveries(
    store: Store, recipe: Recipe, result: RunResult, key: HostKey, count: int
) -> list[tuple[str, int, str, RunResult]]:
    store.register_worker(WORKER, "host-a", [recipe.hardware_class], public_key=key.public)
    out = []
    for job_id in store.submit(recipe, "sweep", {"repeats": 3}, "ab" * 32, 3, simulated=False, count=count):
        claimed = store.claim_job(job_id, WORKER, [recipe.hardware_class], 60)
        assert claimed is not None
        provenance = {**result.provenance, "worker_id": WORKER, "attempt": claimed.attempt}
        signed = sign_result(job_id, claimed.attempt, WORKER, replace(result, provenance=provenance), key)
        out.append((job_id, claimed.attempt, WORKER, signed))
    return out


def test_complete_many_stores_and_checks_each_run_as_complete_does(
    store: Store,
    raw: sa.Engine,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
    count_rows: Callable[[str], int],
) -> None:
    """Three runs sharing one result's samples delivered at once: each is stored with its figures, samples and
    artifacts, pooled into the group's statistics as three deliveries one by one would be, checked at delivery
    (untrusted, then verified once trusted), and reads back as `complete`
    stores it; a second delivery of the same runs changes nothing."""
    key = HostKey.generate()
    recipe = make_recipe()
    result = make_result(dict.fromkeys(KEYS, (270.0, 276.0, 282.0)))
    deliveries = _claimed_deliveries(store, recipe, result, key, 3)
    store.complete_many(deliveries)
    job_ids = [job_id for job_id, *_ in deliveries]
    with raw.connect() as conn:  # the batch's runs pooled into one group_stats row per key, as three `complete`s
        pooled = conn.execute(
            sa.text("SELECT n, total, min, max, runs, requested FROM group_stats WHERE key = :key"), {"key": KEYS[0]}
        ).all()
    assert [tuple(row) for row in pooled] == [(9, 3 * (270.0 + 276.0 + 282.0), 270.0, 282.0, 3, 9)]
    assert {job_id: verdict for job_id, (verdict, _) in verdicts(store).items()} == dict.fromkeys(
        job_ids, Verdict.UNTRUSTED
    )
    store.trust_key(key.key_id)
    assert all(verified_flag(raw, job_id) for job_id in job_ids)
    for job_id in job_ids:
        assert store.samples(job_id) == result.samples
        assert [a.content for a in store.artifacts(job_id, 1)] == ["INFO ready\n"]
    store.complete_many(deliveries)
    assert count_rows("run_summaries") == 3
    assert [c.verdict for c in store.verify()] == [Verdict.VERIFIED] * 3


def test_complete_many_stores_nothing_when_one_run_is_not_the_callers(
    store: Store,
    make_recipe: Callable[..., Recipe],
    make_result: Callable[..., RunResult],
    count_rows: Callable[[str], int],
) -> None:
    """All or nothing: one delivery for a job the caller does not own (another worker's) refuses the whole
    batch with LeaseLost, and no run of it is stored."""
    key = HostKey.generate()
    recipe = make_recipe()
    deliveries = _claimed_deliveries(store, recipe, make_result(), key, 2)
    job_id, attempt, _, result = deliveries[1]
    deliveries[1] = (job_id, attempt, "someone-else", result)
    with pytest.raises(LeaseLost):
        store.complete_many(deliveries)
    assert count_rows("run_summaries") == 0
    assert count_rows("measurements") == 0
