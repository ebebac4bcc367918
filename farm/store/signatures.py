"""Signatures in the store: the farm's keys, each run's signature and the verdict of its last check.

- A worker registers its host key with its row (`register_key`): the key is known, not trusted.
- At delivery the store checks the run it is about to keep against the signature the worker made
  (`record_delivery`, in the transaction that stores the results) and keeps the signature and the verdict.
- `verify` re-reads stored runs (figures, the bytes of their samples, provenance) and checks them again: what a
  change made behind the store's back is caught by. It keeps each run's new verdict.
- `trust` marks a key trusted and re-checks the runs it signed, so they become verified.

Readers never check a signature: they read `run_summaries.verified`, which every check above keeps up to date.
"""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, LargeBinary, bindparam, select, type_coerce, update

from farm.domain import RunSignature
from farm.errors import SigningError
from farm.signing.keys import PublicKey, is_fingerprint
from farm.signing.runs import Check, RunContent, Verdict, check
from farm.store.db import upsert
from farm.store.models import Host, MeasurementRow, Run, RunSignatureRow, RunSummary, Sample, SigningKey
from farm.store.sample_codec import encode as encode_samples

VERIFY_BATCH = 250
"""Runs read and checked at a time by `verify`: bounds memory (a run's samples are ~135 KB) at any store size."""


@dataclass(frozen=True)
class KeyView:
    """A key of the farm, as `farm keys list` and the API show it (never a private key: the store has none)."""

    key_id: str
    public_key: str
    trusted: bool
    label: str | None
    source: str
    first_seen_at: datetime
    trusted_at: datetime | None


@dataclass(frozen=True)
class StoredSignature:
    """A succeeded run's signature as stored, with the verdict of its last check (what the API serves)."""

    job_id: str
    attempt: int
    worker_id: str
    status: str
    """farm.signing.runs.Verdict; `unsigned` when nobody signed the run."""
    key_id: str | None = None
    scheme: str | None = None
    signature: str | None = None
    digest: str | None = None
    figures_sha256: str | None = None
    samples_sha256: str | None = None
    provenance_sha256: str | None = None
    checked_at: datetime | None = None
    origin_farm: str | None = None


def stored_signature(conn: Connection, job_id: str) -> StoredSignature | None:
    """The signature of the job's succeeded run (None when it has none)."""
    row = conn.execute(
        select(RunSummary.job_id, RunSummary.attempt, RunSummary.worker_id, RunSignatureRow)
        .join(RunSignatureRow, RunSignatureRow.run_id == RunSummary.run_id, isouter=True)
        .where(RunSummary.job_id == job_id)
    ).first()
    if row is None:
        return None
    if row.key_id is None:
        return StoredSignature(row.job_id, row.attempt, row.worker_id, Verdict.UNSIGNED.value)
    return StoredSignature(
        job_id=row.job_id,
        attempt=row.attempt,
        worker_id=row.worker_id,
        status=row.status,
        key_id=row.key_id,
        scheme=row.scheme,
        signature=row.signature,
        digest=row.digest,
        figures_sha256=row.figures_sha256,
        samples_sha256=row.samples_sha256,
        provenance_sha256=row.provenance_sha256,
        checked_at=row.checked_at,
        origin_farm=row.origin_farm,
    )


@dataclass(frozen=True)
class RunCheck:
    """One stored run checked by `verify`."""

    run_id: int
    job_id: str
    attempt: int
    worker_id: str
    key_id: str | None
    verdict: Verdict
    reason: str = ""


def signature_of(row: Any) -> RunSignature:
    return RunSignature(
        key_id=row.key_id,
        signature=row.signature,
        digest=row.digest,
        figures_sha256=row.figures_sha256,
        samples_sha256=row.samples_sha256,
        provenance_sha256=row.provenance_sha256,
        scheme=row.scheme,
    )


# --- keys ------------------------------------------------------------------------------------------------------


def known_keys(conn: Connection, key_ids: Iterable[str] | None = None) -> dict[str, tuple[PublicKey, bool]]:
    """key id → (public key, trusted) of the keys this farm knows (those named, or all)."""
    query = select(SigningKey.key_id, SigningKey.public_key, SigningKey.trusted)
    if key_ids is not None:
        query = query.where(SigningKey.key_id.in_(sorted(set(key_ids))))
    return {key_id: (PublicKey.from_text(text), bool(trusted)) for key_id, text, trusted in conn.execute(query)}


def add_key(conn: Connection, key: PublicKey, *, label: str | None, source: str, now: datetime) -> None:
    """Know a public key (once; a key already known keeps its trust and label)."""
    conn.execute(
        upsert(conn, SigningKey)
        .values(key_id=key.key_id, public_key=key.text, trusted=False, label=label, source=source, first_seen_at=now)
        .on_conflict_do_nothing(index_elements=["key_id"])
    )


def register_key(conn: Connection, worker_id: str, key: PublicKey, now: datetime) -> None:
    """A worker's host key: on its row, and known to the farm."""
    conn.execute(update(Host).where(Host.worker_id == worker_id).values(key_id=key.key_id, public_key=key.text))
    add_key(conn, key, label=worker_id, source="worker", now=now)


def list_keys(conn: Connection) -> list[KeyView]:
    rows = conn.execute(select(SigningKey).order_by(SigningKey.trusted.desc(), SigningKey.key_id)).all()
    return [
        KeyView(
            key_id=row.key_id,
            public_key=row.public_key,
            trusted=bool(row.trusted),
            label=row.label,
            source=row.source,
            first_seen_at=row.first_seen_at,
            trusted_at=row.trusted_at,
        )
        for row in rows
    ]


def trust_key(conn: Connection, what: str, now: datetime) -> tuple[str, list[int]]:
    """Trust a key named by its fingerprint (one the farm knows) or given whole (its one-line form, base64 or PEM).

    Returns its id and the runs it signed (to check again). SigningError for a fingerprint the farm does not
    know, or text that is no key."""
    text = what.strip()
    if is_fingerprint(text):
        key_id = text
        if conn.execute(select(SigningKey.key_id).where(SigningKey.key_id == key_id)).first() is None:
            raise SigningError(
                f"no key {key_id} is known here: give the key itself (a file of `farm keys show --public` "
                "on its host), or import a bundle it signed"
            )
    else:
        key = PublicKey.from_text(text)
        key_id = key.key_id
        add_key(conn, key, label=None, source="file", now=now)
    conn.execute(update(SigningKey).where(SigningKey.key_id == key_id).values(trusted=True, trusted_at=now))
    runs = conn.execute(select(RunSignatureRow.run_id).where(RunSignatureRow.key_id == key_id)).scalars().all()
    return key_id, sorted(runs)


# --- runs ------------------------------------------------------------------------------------------------------


def insert_signature(
    conn: Connection,
    run_id: int,
    signature: RunSignature,
    verdict: Verdict,
    now: datetime,
    *,
    origin_farm: str | None = None,
    imported_at: datetime | None = None,
) -> None:
    conn.execute(
        RunSignatureRow.__table__.insert().values(
            run_id=run_id,
            key_id=signature.key_id,
            scheme=signature.scheme,
            signature=signature.signature,
            digest=signature.digest,
            figures_sha256=signature.figures_sha256,
            samples_sha256=signature.samples_sha256,
            provenance_sha256=signature.provenance_sha256,
            status=verdict.value,
            checked_at=now,
            origin_farm=origin_farm,
            imported_at=imported_at,
        )
    )
    conn.execute(update(RunSummary).where(RunSummary.run_id == run_id).values(verified=verdict is Verdict.VERIFIED))


def check_with_keys(conn: Connection, content: RunContent, signature: RunSignature) -> Check:
    """Check a run's content against its signature with the farm's keys."""
    found = known_keys(conn, [signature.key_id]).get(signature.key_id)
    key, trusted = found if found is not None else (None, False)
    return check(content, signature, key, trusted=trusted)


def record_delivery(
    conn: Connection, run_id: int, content: RunContent, signature: RunSignature, now: datetime
) -> Check:
    """Keep a delivered run's signature with the verdict of checking what is being stored against it."""
    try:
        result = check_with_keys(conn, content, signature)
    except ValueError as exc:  # content with no canonical form: kept, and never verified
        result = Check(Verdict.CHANGED, (f"its content has no canonical form: {exc}",))
    insert_signature(conn, run_id, signature, result.verdict, now)
    return result


def stored_contents(conn: Connection, run_ids: Sequence[int]) -> dict[int, tuple[RunContent, list[str]]]:
    """The signed content of stored runs as the store holds it now (figures, the sha256 of each repeat's sample
    bytes, provenance), with any stored summary that no longer follows from its figure's values."""
    if not run_ids:
        return {}
    ids: Any = bindparam("run_ids", expanding=True)
    runs = conn.execute(
        select(
            Run.id, Run.job_id, Run.attempt, Run.worker_id, Run.provenance, Run.failed_requests, Run.total_requests
        ).where(Run.id.in_(ids)),
        {"run_ids": list(run_ids)},
    ).all()
    m = MeasurementRow
    figures: dict[int, list[dict[str, Any]]] = defaultdict(list)
    problems: dict[int, list[str]] = defaultdict(list)
    params_bytes = type_coerce(m.params, LargeBinary)  # hashed as stored, never decoded
    for row in conn.execute(
        select(
            m.run_id,
            m.key,
            m.kind,
            m.metric,
            m.unit,
            m.workload,
            m.values,
            params_bytes.label("params"),
            m.requested_repeats,
            m.n,
            m.mean,
            m.min,
            m.max,
        ).where(m.run_id.in_(ids)),
        {"run_ids": list(run_ids)},
    ):
        values = row.values
        figures[row.run_id].append(
            {
                "key": row.key,
                "kind": row.kind,
                "metric": row.metric,
                "unit": row.unit,
                "workload": row.workload,
                "values": values,
                "params_sha256": hashlib.sha256(row.params).hexdigest(),
                "requested_repeats": row.requested_repeats,
            }
        )
        if (
            row.n != len(values)
            or (values and (row.min != min(values) or row.max != max(values)))
            or (values and not math.isclose(row.mean, math.fsum(values) / len(values), rel_tol=1e-9))
        ):
            problems[row.run_id].append(f"figure {row.key}: its stored summary does not follow from its values")
    repeats: dict[int, dict[str, dict[int, str]]] = defaultdict(lambda: defaultdict(dict))
    for run_id, key, index, data, legacy in conn.execute(
        select(Sample.run_id, Sample.figure_key, Sample.repeat_index, Sample.data, Sample.samples).where(
            Sample.run_id.in_(ids)
        ),
        {"run_ids": list(run_ids)},
    ):
        blob = data if data is not None else encode_samples(legacy or [])
        repeats[run_id][key][index] = hashlib.sha256(blob).hexdigest()
    out = {}
    for run in runs:
        digests = {key: [by_index[i] for i in sorted(by_index)] for key, by_index in repeats[run.id].items()}
        out[run.id] = (
            RunContent(
                job_id=run.job_id,
                attempt=run.attempt,
                worker_id=run.worker_id,
                figures=tuple(figures[run.id]),
                sample_digests=digests,
                provenance=dict(run.provenance or {}),
                failed_requests=int(run.failed_requests or 0),
                total_requests=int(run.total_requests or 0),
            ),
            problems[run.id],
        )
    return out


def check_runs(
    conn: Connection, run_ids: Sequence[int], keys: Mapping[str, tuple[PublicKey, bool]], now: datetime
) -> Iterator[RunCheck]:
    """Check stored runs (a batch) against their signatures; keep each new verdict; yield each run's check."""
    signed = {
        row.run_id: row
        for row in conn.execute(
            select(RunSignatureRow).where(RunSignatureRow.run_id.in_(bindparam("run_ids", expanding=True))),
            {"run_ids": list(run_ids)},
        )
    }
    contents = stored_contents(conn, run_ids)
    changed: dict[Verdict, list[int]] = defaultdict(list)
    for run_id in run_ids:
        content, problems = contents[run_id]
        row = signed.get(run_id)
        if row is None:
            yield RunCheck(run_id, content.job_id, content.attempt, content.worker_id, None, Verdict.UNSIGNED)
            continue
        found = keys.get(row.key_id)
        key, trusted = found if found is not None else (None, False)
        result = check(content, signature_of(row), key, trusted=trusted, extra_problems=problems)
        if result.verdict.value != row.status:
            changed[result.verdict].append(run_id)
        yield RunCheck(
            run_id, content.job_id, content.attempt, content.worker_id, row.key_id, result.verdict, result.reason
        )
    for verdict, changed_ids in changed.items():
        ids = list(changed_ids)
        conn.execute(update(RunSignatureRow).where(RunSignatureRow.run_id.in_(ids)).values(status=verdict.value))
        conn.execute(update(RunSummary).where(RunSummary.run_id.in_(ids)).values(verified=verdict is Verdict.VERIFIED))
    if signed:
        conn.execute(update(RunSignatureRow).where(RunSignatureRow.run_id.in_(list(signed))).values(checked_at=now))


def succeeded_run_ids(conn: Connection, job_ids: Sequence[str] | None) -> list[int]:
    """The succeeded runs of these jobs (every one when None), in run id order."""
    query = select(RunSummary.run_id).order_by(RunSummary.run_id)
    if job_ids is not None:
        query = query.where(RunSummary.job_id.in_(list(job_ids)))
    return list(conn.execute(query).scalars())
