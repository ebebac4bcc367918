"""Signatures in the store: the farm's keys, each run's signature and the verdict of its last check.

- A worker registers its host key with its row (`register_key`): the key is known, not trusted.
- At delivery the store checks the run it is about to keep against the signature the worker made
  (`record_delivery`, in the transaction that stores the results) and keeps the signature and the verdict.
- `verify` re-reads stored runs (figures, the bytes of their samples, provenance) and checks them again: what a
  change made behind the store's back is caught by. It keeps each run's new verdict.
- `trust` marks a key trusted and re-checks the runs it signed, so they become verified.

Readers never check a signature: they read `run_summaries.verified`, which every check above keeps up to date,
and `run_summaries.validated` beside it (verified, and the recipe and provenance meet the registry's rules).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import struct
from array import array
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from itertools import compress, groupby, repeat
from json.encoder import encode_basestring_ascii
from operator import itemgetter, lt, ne, truediv
from typing import Any

from sqlalchemy import Connection, select, update

from farm.domain import RunSignature
from farm.errors import SigningError
from farm.signing import canonical
from farm.signing.keys import PublicKey, is_fingerprint
from farm.signing.runs import Check, RunContent, Verdict, check, summary_problems
from farm.store.db import upsert
from farm.store.models import Host, Job, RecipeRow, Run, RunSignatureRow, RunSummary, SigningKey
from farm.store.sample_codec import encode as encode_samples

VERIFY_BATCH = 250
"""Runs read and checked at a time by `verify`: bounds memory (a run's samples are ~135 KB) at any store size."""
MAX_VERIFY_WORKERS = 8
"""At most this many processes check runs at once (each holds one batch)."""


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
    artifacts_sha256: str | None = None
    checked_at: datetime | None = None
    origin_farm: str | None = None
    validated: bool = False
    """The registry's `validated` status (run_summaries.validated)."""


def stored_signature(conn: Connection, job_id: str) -> StoredSignature | None:
    """The signature of the job's succeeded run (None when it has none)."""
    row = conn.execute(
        select(RunSummary.job_id, RunSummary.attempt, RunSummary.worker_id, RunSummary.validated, RunSignatureRow)
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
        artifacts_sha256=row.artifacts_sha256,
        checked_at=row.checked_at,
        origin_farm=row.origin_farm,
        validated=bool(row.validated),
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
    validated: bool = False
    """Verified, and its recipe and provenance meet the registry's rules (farm.signing.validated)."""


Before = tuple[str, bool] | None
"""What a run's record said before a check: its verdict and `validated` (None for an unsigned run)."""


def signature_of(row: Any) -> RunSignature:
    return RunSignature(
        key_id=row.key_id,
        signature=row.signature,
        digest=row.digest,
        figures_sha256=row.figures_sha256,
        samples_sha256=row.samples_sha256,
        provenance_sha256=row.provenance_sha256,
        scheme=row.scheme,
        artifacts_sha256=row.artifacts_sha256,
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
            artifacts_sha256=signature.artifacts_sha256,
            status=verdict.value,
            checked_at=now,
            origin_farm=origin_farm,
            imported_at=imported_at,
        )
    )
    verified = verdict is Verdict.VERIFIED
    validated = verified and validated_runs(conn, [run_id]).get(run_id, False)
    conn.execute(update(RunSummary).where(RunSummary.run_id == run_id).values(verified=verified, validated=validated))


def validated_runs(conn: Connection, run_ids: Sequence[int]) -> dict[int, bool]:
    """Whether each of these runs, taken as verified, meets the registry's rules (farm.signing.validated) on its
    recipe document and its provenance. The caller keeps `validated` false for runs that are not verified."""
    from farm.signing.validated import validated

    out: dict[int, bool] = {}
    for begin in range(0, len(run_ids), VERIFY_BATCH):
        chunk = list(run_ids[begin : begin + VERIFY_BATCH])
        query = (
            select(Run.id, Run.provenance, RecipeRow.document)
            .join(Job, Job.id == Run.job_id)
            .join(RecipeRow, RecipeRow.sha256 == Job.recipe_sha256)
            .where(Run.id.in_(chunk))
        )
        for run_id, provenance, document in conn.execute(query):
            out[run_id] = validated(dict(document or {}), dict(provenance or {}), True)
    return out


def check_with_keys(conn: Connection, content: RunContent, signature: RunSignature) -> Check:
    """Check a run's content against its signature with the farm's keys; a figure whose summary does not
    follow from its values makes it changed (a v2 signature covers the summary: this is where it is derived)."""
    found = known_keys(conn, [signature.key_id]).get(signature.key_id)
    key, trusted = found if found is not None else (None, False)
    return check(content, signature, key, trusted=trusted, extra_problems=summary_problems(content.figures))


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


def _driver_rows(conn: Connection, sql: str) -> list[tuple[Any, ...]]:
    """The rows of a query on the driver's own cursor, in the connection's transaction: plain tuples, no
    SQLAlchemy row or type processing (a check of 10,000 runs reads a million rows). JSON columns come back as
    text on SQLite and parsed on PostgreSQL; `_json` takes either."""
    cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def _json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def _decoded_values(texts: Sequence[Any]) -> list[Any]:
    """Each figure's stored values, decoded. Texts that are each one flat array with no string (what the store
    writes) are decoded together, by one json.loads (a check reads 60 figures a run); anything else one by one."""
    try:  # each text starts with `[` and ends with `]`, and the whole has one of each per text: each is one array
        joined = ",".join(texts)
        flat = (
            all(map(str.startswith, texts, repeat("[")))
            and all(map(str.endswith, texts, repeat("]")))
            and joined.count("[") == len(texts) == joined.count("]")
            and '"' not in joined
        )
    except TypeError:  # a text that is not text (PostgreSQL hands JSON back decoded)
        flat = False
    if flat:
        try:
            decoded = json.loads("[" + joined + "]")
        except ValueError:
            decoded = None
        if isinstance(decoded, list) and len(decoded) == len(texts):
            return decoded
    return [_json(text) for text in texts]


def _figure_frame(
    key: Any, kind: Any, metric: Any, unit: Any, workload: Any, requested: Any
) -> tuple[str, str, str] | None:
    """A figure document's canonical JSON around its params sha256 and its values (farm.signing.canonical's
    figure_document, keys in code point order), for columns of the types the store keeps (None otherwise)."""
    texts = (key, kind, metric, unit)
    if not all(type(text) is str for text in texts) or not (workload is None or type(workload) is str):
        return None
    if not (requested is None or type(requested) is int):
        return None
    quote = encode_basestring_ascii
    head = f'{{"key":{quote(key)},"kind":{quote(kind)},"metric":{quote(metric)},"params_sha256":"'
    middle = f'","requested_repeats":{"null" if requested is None else requested},"unit":{quote(unit)},"values":'
    tail = f',"workload":{"null" if workload is None else quote(workload)}}}'
    return head, middle, tail


def _summary_problems(measured: Sequence[tuple[Any, ...]], decoded: Sequence[Any]) -> list[int]:
    """The rows (indexes) whose stored summary (n, mean, min, max) no longer follows from their values: n is
    the count, min and max exact, mean within 1e-9 of fsum/n. Column-wise, by C loops (map) over every row of
    a batch; the rows any of those finds suspicious are checked one by one."""
    fsum, isclose = math.fsum, math.isclose

    def bad(index: int) -> bool:
        n, mean, low, high = measured[index][9:13]
        values = decoded[index]
        return n != len(values) or bool(
            values and (low != min(values) or high != max(values) or not isclose(mean, fsum(values) / n, rel_tol=1e-9))
        )

    count = len(measured)
    if not count:
        return []
    try:
        ns, means, lows, highs = list(zip(*measured, strict=True))[9:13]
        lengths = list(map(len, decoded))
        if 0 in lengths:
            raise TypeError  # an empty figure: one by one
        suspects: set[int] = set()
        for stored, now in (
            (ns, lengths),
            (lows, list(map(min, decoded))),
            (highs, list(map(max, decoded))),
            (means, list(map(truediv, map(fsum, decoded), lengths))),
        ):
            if list(stored) != now:  # one compare in C; the rows that differ only when some do
                suspects.update(compress(range(count), map(ne, stored, now)))
    except (TypeError, ValueError):  # values that are not all numbers, or not lists: one by one
        return [index for index in range(count) if bad(index)]
    return sorted(index for index in suspects if bad(index))


def v2_figure_parts(conn: Connection, run_ids: Sequence[int]) -> dict[int, str]:
    """Each run's farm-run/v2 figures part, from the text the database itself writes (farm.signing.canonical's
    figures_v2_sha256 over what the store keeps): the database joins each run's figure lines and summary numbers
    in C (SQLite's group_concat, PostgreSQL's string_agg), so this reads one line text and one numbers text a
    run and decodes nothing (the summary numbers come as their binary64 bytes).

    A candidate: a caller uses it only when it equals the part the run's signature names (then the stored figures
    are, byte for byte, what was signed). SQLite's group_concat joins in the order it scans (the (run_id, key)
    index, key order, on every SQLite we know), which no document promises: a run it joined otherwise (or any
    changed row) only misses this path and is checked from its decoded rows."""
    if not run_ids:
        return {}
    listed = ",".join(str(int(run_id)) for run_id in run_ids)  # integers only: nothing to quote
    if conn.dialect.name == "postgresql":
        field, line = f"'{canonical.FIELD}'", f"'{canonical.LINE}'"
        columns: tuple[str, ...] = (
            "key",
            "kind",
            "metric",
            "unit",
            "coalesce(workload, '')",
            '"values"',
            "encode(sha256(params), 'hex')",
            "coalesce(requested_repeats::text, '')",
            "n::text",
        )
        lines = f"string_agg({f'||{field}||'.join(columns)}||{line}, '' ORDER BY key COLLATE \"C\")"
        # float8send: each double's 8 bytes (big-endian), so no number goes through text.
        numbers = "||".join(f"float8send({name})" for name in canonical.SUMMARY_FIELDS)
        numbers = f"string_agg({numbers}, ''::bytea ORDER BY key COLLATE \"C\")"
    else:
        driver = conn.connection.driver_connection
        driver.create_function("farm_sha256_hex", 1, _sha256_hex, deterministic=True)  # type: ignore[union-attr]
        driver.create_function("farm_binary64_hex", 6, _binary64_hex, deterministic=True)  # type: ignore[union-attr]
        # printf's %s writes NULL as '' and an integer in decimal. The summary numbers go out as the hex of their
        # binary64 bytes, made from the doubles SQLite hands the function: no number is written as text and
        # read back (SQLite's own float text is either inexact, quote()'s 15 digits, or slow, %!.17g).
        form = canonical.FIELD.join(["%s"] * 9) + canonical.LINE
        columns = ("key", "kind", "metric", "unit", "workload", '"values"', "farm_sha256_hex(params)")
        lines = f"group_concat(printf('{form}', {', '.join(columns)}, requested_repeats, n), '')"
        numbers = f"group_concat(farm_binary64_hex({', '.join(canonical.SUMMARY_FIELDS)}), '')"
    sql = (
        f"SELECT run_id, {lines}, {numbers} FROM measurements "  # noqa: S608 - integer ids, fixed columns
        f"WHERE run_id IN ({listed}) GROUP BY run_id"
    )
    out = {}
    postgres = conn.dialect.name == "postgresql"
    for run_id, joined, summaries in _driver_rows(conn, sql):
        try:
            if postgres:  # big-endian doubles: each 8 bytes reversed, whatever this host's order
                packed = array("d")
                packed.frombytes(bytes(summaries))
                packed.byteswap()
                binary = packed.tobytes()
            else:
                binary = bytes.fromhex(summaries)
        except (TypeError, ValueError):  # a NULL, or a number not as the store writes it: the slow path
            continue
        out[run_id] = canonical.figures_v2_part(joined.encode("utf-8"), binary)
    return out


_BINARY64 = struct.Struct("<6d")


def _binary64_hex(*numbers: Any) -> str | None:
    """The hex of six numbers as little-endian binary64 (None for a NULL or a text: the run takes the slow path)."""
    try:
        return _BINARY64.pack(*numbers).hex()
    except struct.error:
        return None


@functools.lru_cache(maxsize=1024)
def _sha256_hex(data: Any) -> str | None:
    """A figure's params sha256 for SQLite's query (a sweep's figures share a few parameter sets: each hashed
    once, every other row a lookup)."""
    return hashlib.sha256(data).hexdigest() if isinstance(data, bytes) else None


def stored_contents(
    conn: Connection,
    run_ids: Sequence[int],
    signed_figures: Mapping[int, str] | None = None,
    *,
    skip_figures: frozenset[int] = frozenset(),
) -> dict[int, tuple[RunContent, list[str]]]:
    """The signed content of stored runs as the store holds it now (figures, the sha256 of each repeat's sample
    bytes and of each figure's params bytes, provenance), with any stored summary (n, mean, min, max) that no
    longer follows from its figure's values.

    Where the store keeps the values as JSON text, each run also gets `figures_json`: its figures' canonical
    JSON written from the stored numbers' own text (no float is formatted again), which
    farm.signing.runs.check uses only when its sha256 is the signed one; a store that kept other text (or an
    edit) is checked from the decoded figures.

    `signed_figures` (run id → the figures sha256 its signature names), for a check: a run whose
    `figures_json` hashes to it gets no decoded figure documents (`figures` empty: those bytes are, byte for
    byte, what was signed, and `RunContent.parts` takes them); every other run gets them all.

    `skip_figures`: runs whose figures are not read at all (a v2 run whose `v2_figure_parts` matched its
    signature; the caller sets its `figures_v2`)."""
    if not run_ids:
        return {}
    listed = ",".join(str(int(run_id)) for run_id in run_ids)  # integers only: nothing to quote
    where = f"IN ({listed})"
    run_columns = "id, job_id, attempt, worker_id, provenance, failed_requests, total_requests"
    runs = _driver_rows(conn, f"SELECT {run_columns} FROM runs WHERE id {where}")  # noqa: S608 - integer ids
    problems: dict[int, list[str]] = defaultdict(list)
    sha256 = hashlib.sha256
    # The values as the text the store keeps (text on both databases since 0009: the canonical JSON for runs
    # stored since, SQLite's JSON text or PostgreSQL's jsonb text before), so a v1 run's canonical JSON is
    # written from that text and checked against the signed sha256 before it is used.
    figure_columns = (
        'run_id, key, kind, metric, unit, workload, "values", params, requested_repeats, n, mean, min, max, '
        "median, stdev, spread"
    )
    read = [run_id for run_id in run_ids if run_id not in skip_figures]
    measured = (
        _driver_rows(
            conn,
            f"SELECT {figure_columns} FROM measurements "  # noqa: S608 - integer ids
            f"WHERE run_id IN ({','.join(str(int(run_id)) for run_id in read)}) ORDER BY run_id",
        )
        if read
        else []
    )
    decoded = _decoded_values([row[6] for row in measured])
    for index in _summary_problems(measured, decoded):
        run_id, key = measured[index][0], measured[index][1]
        problems[run_id].append(f"figure {key}: its stored summary does not follow from its values")
    # Column-wise, by C loops: each row's params sha256 (a sweep's figures share a few parameter sets: each
    # hashed once a batch) and its canonical JSON text where its columns have the types the store keeps.
    columns: list[Any] = list(zip(*measured, strict=True)) if measured else [()] * 16
    run_col, key_col, stored_col, params_col = columns[0], columns[1], columns[6], columns[7]
    params_digests = {params: sha256(params).hexdigest() for params in set(params_col)}
    params_sha = list(map(params_digests.__getitem__, params_col))
    shapes = list(zip(key_col, columns[2], columns[3], columns[4], columns[5], columns[8], strict=True))
    frames = {shape: _figure_frame(*shape) for shape in set(shapes)}
    texts: list[str | None] = [None] * len(measured)
    if all(map(str.__instancecheck__, stored_col)):
        framed: list[Any] = list(map(frames.__getitem__, shapes))
        if None not in framed:
            texts = list(
                map(
                    "".join,
                    zip(
                        map(itemgetter(0), framed),
                        params_sha,
                        map(itemgetter(1), framed),
                        map(str.replace, stored_col, repeat(", "), repeat(",")),
                        map(itemgetter(2), framed),
                        strict=True,
                    ),
                )
            )
        else:
            texts = [
                None if frame is None else frame[0] + digest + frame[1] + text.replace(", ", ",") + frame[2]
                for frame, digest, text in zip(framed, params_sha, stored_col, strict=True)
            ]
    spans: dict[int, tuple[int, int]] = {}
    begin = 0
    for run_id, group in groupby(run_col):
        end = begin + len(list(group))
        spans[run_id] = (begin, end)
        begin = end
    repeats: dict[int, dict[str, dict[int, str]]] = defaultdict(lambda: defaultdict(dict))
    kept: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
    artifact_columns = "run_id, name, media_type, content"
    for run_id, name, media_type, text in _driver_rows(
        conn,
        f"SELECT {artifact_columns} FROM artifacts WHERE run_id {where}",  # noqa: S608 - integer ids
    ):
        kept[run_id].append((name, media_type, sha256(text.encode("utf-8")).hexdigest()))
    sample_columns = "run_id, figure_key, repeat_index, data, samples"
    sampled = _driver_rows(conn, f"SELECT {sample_columns} FROM samples WHERE run_id {where}")  # noqa: S608
    for run_id, key, index, data, legacy in sampled:
        blob = bytes(data) if data is not None else encode_samples(_json(legacy) or [])
        repeats[run_id][key][index] = sha256(blob).hexdigest()
    out = {}
    for run_id, job_id, attempt, worker_id, provenance, failed, total in runs:
        digests = {key: [by_index[i] for i in sorted(by_index)] for key, by_index in repeats[run_id].items()}
        first, last = spans.get(run_id, (0, 0))
        figures_json = _figures_json(key_col[first:last], texts[first:last])
        matches = (
            signed_figures is not None
            and figures_json is not None
            and sha256(figures_json).hexdigest() == signed_figures.get(run_id)
        )
        documents = () if matches else tuple(_documents(measured, decoded, params_sha, first, last))
        out[run_id] = (
            RunContent(
                job_id=job_id,
                attempt=attempt,
                worker_id=worker_id,
                figures=documents,
                sample_digests=digests,
                provenance=dict(_json(provenance) or {}),
                failed_requests=int(failed or 0),
                total_requests=int(total or 0),
                artifacts=tuple(kept.get(run_id, ())),
                figures_json=figures_json,
            ),
            problems[run_id],
        )
    return out


def _figures_json(keys: Sequence[Any], texts: Sequence[str | None]) -> bytes | None:
    """A run's figures' canonical JSON from each figure's text, ordered by key (None when a figure has none)."""
    if None in texts:
        return None
    ordered: Sequence[Any] = texts
    if not all(map(lt, keys[:-1], keys[1:])):  # not already in key order (or keys repeat): sort, stably
        ordered = [text for _, text in sorted(zip(keys, texts, strict=True), key=itemgetter(0))]
    return ("[" + ",".join(ordered) + "]").encode("utf-8")


def _documents(
    measured: Sequence[tuple[Any, ...]], decoded: Sequence[Any], params_sha: Sequence[str], first: int, last: int
) -> Iterator[dict[str, Any]]:
    """The figure documents of rows first..last (one run's), decoded."""
    for index in range(first, last):
        _, key, kind, metric, unit, workload, _, _, requested, n, mean, low, high, median, stdev, spread = measured[
            index
        ]
        yield {
            "summary": {
                "n": n,
                "mean": mean,
                "median": median,
                "min": low,
                "max": high,
                "stdev": stdev,
                "spread": spread,
            },
            "key": key,
            "kind": kind,
            "metric": metric,
            "unit": unit,
            "workload": workload,
            "values": decoded[index],
            "params_sha256": params_sha[index],
            "requested_repeats": requested,
        }


def check_batch(
    conn: Connection, run_ids: Sequence[int], keys: Mapping[str, tuple[PublicKey, bool]]
) -> list[tuple[RunCheck, Before]]:
    """Check stored runs (a batch) against their signatures, reading only: each run's check (with whether it is
    validated: farm.signing.validated, on its recipe document and provenance) and what its record said before
    (None for an unsigned run)."""
    from farm.signing.validated import validated as meets_rules

    listed = ",".join(str(int(run_id)) for run_id in run_ids)  # integers only: nothing to quote
    signature_columns = (
        "run_id, key_id, signature, digest, figures_sha256, samples_sha256, provenance_sha256, scheme, artifacts_sha256"
    )
    signed = (
        {
            row[0]: (RunSignature(*row[1:9]), row[9])
            for row in _driver_rows(
                conn,
                f"SELECT {signature_columns}, status FROM run_signatures WHERE run_id IN ({listed})",  # noqa: S608
            )
        }
        if run_ids
        else {}
    )
    signed_figures = {run_id: pair[0].figures_sha256 for run_id, pair in signed.items()}
    v2_runs = [run_id for run_id, pair in signed.items() if pair[0].scheme == canonical.SCHEME_V2]
    fast = {
        run_id: part
        for run_id, part in v2_figure_parts(conn, v2_runs).items()
        if part == signed_figures.get(run_id)  # the stored text is what was signed: no figure row is read
    }
    contents = stored_contents(conn, run_ids, signed_figures, skip_figures=frozenset(fast))
    for run_id, part in fast.items():
        content, problems = contents[run_id]
        contents[run_id] = (replace(content, figures_v2=part), problems)
    recipe_of, recipes = _recipes_of(conn, run_ids)
    was_validated = {
        run_id: bool(flag)
        for run_id, flag in _driver_rows(
            conn,
            f"SELECT run_id, validated FROM run_summaries WHERE run_id IN ({listed})",  # noqa: S608 - integer ids
        )
    }
    out: list[tuple[RunCheck, Before]] = []
    for run_id in run_ids:
        content, problems = contents[run_id]
        stored = signed.get(run_id)
        if stored is None:
            unsigned = RunCheck(run_id, content.job_id, content.attempt, content.worker_id, None, Verdict.UNSIGNED)
            out.append((unsigned, None))
            continue
        signature, status = stored
        found = keys.get(signature.key_id)
        key, trusted = found if found is not None else (None, False)
        result = check(content, signature, key, trusted=trusted, extra_problems=problems)
        validated = result.verdict is Verdict.VERIFIED and meets_rules(
            recipes.get(recipe_of.get(run_id, ""), {}), content.provenance, True
        )
        run_check = RunCheck(
            run_id,
            content.job_id,
            content.attempt,
            content.worker_id,
            signature.key_id,
            result.verdict,
            result.reason,
            validated,
        )
        out.append((run_check, (status, was_validated.get(run_id, False))))
    return out


def _recipes_of(conn: Connection, run_ids: Sequence[int]) -> tuple[dict[int, str], dict[str, dict[str, Any]]]:
    """Each run's recipe hash, and the documents of those recipes (a batch's runs share a few)."""
    if not run_ids:
        return {}, {}
    recipe_of = {
        run_id: sha
        for run_id, sha in conn.execute(
            select(Run.id, Job.recipe_sha256).join(Job, Job.id == Run.job_id).where(Run.id.in_(run_ids))
        )
    }
    found = conn.execute(
        select(RecipeRow.sha256, RecipeRow.document).where(RecipeRow.sha256.in_(sorted(set(recipe_of.values()))))
    )
    return recipe_of, {sha: dict(document or {}) for sha, document in found}


def keep_verdicts(conn: Connection, checked: Sequence[tuple[RunCheck, Before]], now: datetime) -> None:
    """Keep the verdicts of checked runs: the new verdict and `validated` where they changed (readers'
    `verified` and `validated`), the time of the check on every signed run."""
    changed: dict[Verdict, list[int]] = defaultdict(list)
    revalidated: dict[bool, list[int]] = defaultdict(list)
    signed = []
    for run_check, before in checked:
        if before is None:
            continue
        status, was_validated = before
        signed.append(run_check.run_id)
        if run_check.verdict.value != status:
            changed[run_check.verdict].append(run_check.run_id)
        if run_check.validated != was_validated:
            revalidated[run_check.validated].append(run_check.run_id)
    for verdict, ids in changed.items():
        conn.execute(update(RunSignatureRow).where(RunSignatureRow.run_id.in_(ids)).values(status=verdict.value))
        conn.execute(update(RunSummary).where(RunSummary.run_id.in_(ids)).values(verified=verdict is Verdict.VERIFIED))
    for validated, ids in revalidated.items():
        conn.execute(update(RunSummary).where(RunSummary.run_id.in_(ids)).values(validated=validated))
    for begin in range(0, len(signed), VERIFY_BATCH * 4):
        chunk = signed[begin : begin + VERIFY_BATCH * 4]
        conn.execute(update(RunSignatureRow).where(RunSignatureRow.run_id.in_(chunk)).values(checked_at=now))


def check_runs(
    conn: Connection, run_ids: Sequence[int], keys: Mapping[str, tuple[PublicKey, bool]], now: datetime
) -> list[RunCheck]:
    """Check stored runs (a batch) against their signatures and keep each new verdict."""
    checked = check_batch(conn, run_ids, keys)
    keep_verdicts(conn, checked, now)
    return [run_check for run_check, _ in checked]


_worker_engine: Any = None


def _open_worker_engine(url: str) -> None:
    """A process of the pool: its own engine (a forked engine's connections are the parent's, never used here)."""
    global _worker_engine  # one engine per pool process, made by the pool's initializer
    from farm.store.db import create_store_engine

    _worker_engine = create_store_engine(url)


def _check_in_worker(
    run_ids: Sequence[int], keys: Mapping[str, tuple[PublicKey, bool]]
) -> list[tuple[RunCheck, Before]]:
    from farm.store.db import READ_ONLY, translate_errors

    with (
        translate_errors("cannot verify runs"),
        _worker_engine.connect().execution_options(**READ_ONLY) as conn,
        conn.begin(),
    ):
        return check_batch(conn, run_ids, keys)


def check_in_processes(
    url: str, batches: Sequence[Sequence[int]], keys: Mapping[str, tuple[PublicKey, bool]], workers: int
) -> Iterator[list[tuple[RunCheck, Before]]]:
    """Check batches of runs in `workers` processes (reading only), in order: a check is CPU-bound (hashing,
    canonical JSON, Ed25519), so a host's cores share it."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else None)
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_open_worker_engine, initargs=(url,)) as pool:
        yield from pool.map(_check_in_worker, batches, [keys] * len(batches))


def verify_workers(runs: int) -> int:
    """How many processes check `runs` runs: one per CPU this process may use, none for a few batches."""
    import os

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cpus, MAX_VERIFY_WORKERS, runs // (VERIFY_BATCH * 2)))


def succeeded_run_ids(conn: Connection, job_ids: Sequence[str] | None) -> list[int]:
    """The succeeded runs of these jobs (every one when None), in run id order."""
    query = select(RunSummary.run_id).order_by(RunSummary.run_id)
    if job_ids is not None:
        query = query.where(RunSummary.job_id.in_(list(job_ids)))
    return list(conn.execute(query).scalars())
