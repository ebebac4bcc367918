"""Signed results bundles between farms: `farm export bundle` writes one, `farm import` checks and stores one.

A bundle is JSON Lines (gzip when its name ends `.gz`), self-contained: a header line, then the public keys
that signed its runs, the recipes they ran, and one line per run with its job, figures, raw samples (the
store's own bytes, base64), provenance, signature and origin (docs/signing.md). Only runs that match their
signatures are exported.

Import checks every run against its signature and the key the bundle carries for it before it stores anything;
one run that does not verify refuses the whole bundle, naming each such run, and nothing is stored. A run
already here with the same signature is skipped, so a second import of a bundle changes nothing. Imported runs
keep their origin: the farm the bundle named (or the farm it came from before that) and the host that signed it.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import json
import socket
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from sqlalchemy import Connection, LargeBinary, bindparam, insert, select, type_coerce

import farm
from farm.domain import Artifact, Figure, JobState, RunSignature, Summary, summarize
from farm.errors import BundleRefused, FarmError, InputError, OutputError
from farm.filters import ResultFilter
from farm.signing import canonical
from farm.signing.keys import PublicKey
from farm.signing.runs import RunContent, Verdict, artifact_digests, check, summary_problems
from farm.store import Store, signatures
from farm.store.models import (
    ArtifactRow,
    Job,
    MeasurementRow,
    RecipeRow,
    Run,
    RunSignatureRow,
    RunSummary,
    Sample,
)
from farm.store.params_codec import decode as decode_params
from farm.store.params_codec import encode as encode_params
from farm.store.records import RunState

BUNDLE_FORMAT = "farm-bundle/v1"


@dataclass(frozen=True)
class ExportReport:
    exported: int
    left_out: tuple[str, ...]
    """Runs the filters selected but the bundle does not carry, each with why (unsigned, changed, unknown key)."""


@dataclass(frozen=True)
class ImportReport:
    imported: int
    already: int
    verified: int
    origin_farm: str | None


def _open_text(path: Path, mode: str) -> IO[str]:
    if path.name.endswith(".gz"):
        return typing.cast(IO[str], gzip.open(path, mode + "t", encoding="utf-8"))
    return path.open(mode, encoding="utf-8")


def _recipe_hash(document: dict[str, Any]) -> str:
    """The store's recipe key (farm.store.store.recipe_sha256) of a stored recipe document."""
    return hashlib.sha256(json.dumps(document, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


# --- export ----------------------------------------------------------------------------------------------------


def export_bundle(store: Store, path: Path, filters: ResultFilter, *, farm_name: str | None = None) -> ExportReport:
    """Write the bundle of the signed runs the filters select that match their signatures."""
    from farm.store.reads import conditions

    name = farm_name or socket.gethostname()
    with store._read("cannot list the runs to export") as conn:
        query = select(RunSummary.run_id).order_by(RunSummary.run_id)
        where = conditions(filters)
        run_ids = list(conn.execute(query.where(*where) if where else query).scalars())
        keys = signatures.known_keys(conn)
    left_out: list[str] = []
    exported = 0
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = _open_text(path, "w")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}", path=path) from exc
    with handle:
        header = {
            "bundle": BUNDLE_FORMAT,
            "farm": name,
            "farm_version": farm.__version__,
            "exported_at": datetime.now(UTC).isoformat(),
        }
        handle.write(json.dumps(header) + "\n")
        written_keys: set[str] = set()
        written_recipes: set[str] = set()
        for start in range(0, len(run_ids), signatures.VERIFY_BATCH):
            batch = run_ids[start : start + signatures.VERIFY_BATCH]
            with store._read("cannot read the runs to export") as conn:
                for line, why in _export_lines(conn, batch, keys, written_keys, written_recipes):
                    if why is not None:
                        left_out.append(why)
                        continue
                    handle.write(json.dumps(line, separators=(",", ":")) + "\n")
                    exported += line["type"] == "run"
    return ExportReport(exported=exported, left_out=tuple(left_out))


def _export_lines(
    conn: Connection,
    run_ids: list[int],
    keys: dict[str, tuple[PublicKey, bool]],
    written_keys: set[str],
    written_recipes: set[str],
) -> Iterator[tuple[dict[str, Any], str | None]]:
    ids: Any = bindparam("run_ids", expanding=True)
    contents = signatures.stored_contents(conn, run_ids)
    signed = {
        row.run_id: row
        for row in conn.execute(select(RunSignatureRow).where(RunSignatureRow.run_id.in_(ids)), {"run_ids": run_ids})
    }
    jobs = {
        row.run_id: row
        for row in conn.execute(
            select(
                Run.id.label("run_id"),
                Run.started_at.label("run_started_at"),
                Run.finished_at.label("run_finished_at"),
                Job.id,
                Job.recipe_sha256,
                Job.sweep_name,
                Job.spec_sha256,
                Job.plan,
                Job.hardware_class,
                Job.simulated,
                Job.created_at,
            )
            .join(Job, Job.id == Run.job_id)
            .where(Run.id.in_(ids)),
            {"run_ids": run_ids},
        )
    }
    samples: dict[int, dict[str, dict[int, str]]] = {}
    for run_id, figure_key, index, data in conn.execute(
        select(Sample.run_id, Sample.figure_key, Sample.repeat_index, Sample.data).where(Sample.run_id.in_(ids)),
        {"run_ids": run_ids},
    ):
        if data is not None:
            samples.setdefault(run_id, {}).setdefault(figure_key, {})[index] = base64.b64encode(data).decode("ascii")
    artifacts: dict[int, list[dict[str, str]]] = {}
    for run_id, artifact_name, media_type, text in conn.execute(
        select(ArtifactRow.run_id, ArtifactRow.name, ArtifactRow.media_type, ArtifactRow.content)
        .where(ArtifactRow.run_id.in_(ids))
        .order_by(ArtifactRow.id),
        {"run_ids": run_ids},
    ):
        artifacts.setdefault(run_id, []).append({"name": artifact_name, "media_type": media_type, "content": text})
    params: dict[tuple[int, str], str] = {
        (run_id, key): base64.b64encode(data).decode("ascii")
        for run_id, key, data in conn.execute(
            select(MeasurementRow.run_id, MeasurementRow.key, type_coerce(MeasurementRow.params, LargeBinary)).where(
                MeasurementRow.run_id.in_(ids)
            ),
            {"run_ids": run_ids},
        )
    }
    for run_id in run_ids:
        content, problems = contents[run_id]
        name = f"{content.job_id} attempt {content.attempt}"
        row = signed.get(run_id)
        if row is None:
            yield {}, f"{name}: unsigned"
            continue
        found = keys.get(row.key_id)
        key, trusted = found if found is not None else (None, False)
        result = check(content, signatures.signature_of(row), key, trusted=trusted, extra_problems=problems)
        if result.verdict.failed or key is None:
            yield {}, f"{name}: {result.verdict.value}: {result.reason}"
            continue
        job = jobs[run_id]
        if key.key_id not in written_keys:
            written_keys.add(key.key_id)
            yield {"type": "key", "key_id": key.key_id, "public_key": key.text}, None
        if job.recipe_sha256 not in written_recipes:
            written_recipes.add(job.recipe_sha256)
            document = conn.execute(
                select(RecipeRow.document).where(RecipeRow.sha256 == job.recipe_sha256)
            ).scalar_one()
            yield {"type": "recipe", "sha256": job.recipe_sha256, "document": document}, None
        yield (
            {
                "type": "run",
                "origin_farm": row.origin_farm,
                "job": {
                    "id": job.id,
                    "recipe_sha256": job.recipe_sha256,
                    "sweep_name": job.sweep_name,
                    "spec_sha256": job.spec_sha256,
                    "plan": job.plan,
                    "hardware_class": job.hardware_class,
                    "simulated": job.simulated,
                    "created_at": _when(job.created_at),
                },
                "run": {
                    "attempt": content.attempt,
                    "worker_id": content.worker_id,
                    "started_at": _when(job.run_started_at),
                    "finished_at": _when(job.run_finished_at),
                    "failed_requests": content.failed_requests,
                    "total_requests": content.total_requests,
                },
                "figures": [_bundled_figure(f, params[(run_id, f["key"])], row.scheme) for f in content.figures],
                "samples": {
                    k: [by_index[i] for i in sorted(by_index)] for k, by_index in samples.get(run_id, {}).items()
                },
                "provenance": content.provenance,
                "artifacts": artifacts.get(run_id, []),
                "signature": signatures.signature_of(row).__dict__,
            },
            None,
        )


def _bundled_figure(document: dict[str, Any], params_bytes: str, scheme: str) -> dict[str, Any]:
    """A figure as a bundle carries it: its signed document and its params bytes; its summary only for a v2 run
    (which signs it), so a v1 run's figures are exactly what a farm that knows only v1 checks."""
    out = {**document, "params_bytes": params_bytes}
    if scheme != canonical.SCHEME_V2:
        out.pop("summary", None)
    return out


# --- import ----------------------------------------------------------------------------------------------------


@dataclass
class _BundleRun:
    line: int
    job: dict[str, Any]
    run: dict[str, Any]
    figures: list[dict[str, Any]]
    params: dict[str, bytes]
    """Each figure's params as the store keeps them (farm.store.params_codec), by key."""
    samples: dict[str, list[bytes]]
    provenance: dict[str, Any]
    signature: RunSignature
    origin_farm: str | None
    artifacts: tuple[Artifact, ...] = ()

    @property
    def name(self) -> str:
        return f"job {self.job.get('id')} attempt {self.run.get('attempt')} (line {self.line})"

    def content(self) -> RunContent:
        return RunContent(
            job_id=str(self.job["id"]),
            attempt=int(self.run["attempt"]),
            worker_id=str(self.run["worker_id"]),
            figures=tuple(self.figures),
            sample_digests={k: [hashlib.sha256(b).hexdigest() for b in blobs] for k, blobs in self.samples.items()},
            provenance=self.provenance,
            failed_requests=int(self.run.get("failed_requests") or 0),
            total_requests=int(self.run.get("total_requests") or 0),
            artifacts=artifact_digests(self.artifacts),
        )


@dataclass
class _Bundle:
    header: dict[str, Any]
    keys: dict[str, PublicKey]
    recipes: dict[str, dict[str, Any]]
    runs: list[_BundleRun]


def read_bundle(path: Path) -> _Bundle:
    """Parse a bundle; InputError naming the line of anything that is not one."""
    try:
        handle = _open_text(path, "r")
    except OSError as exc:
        raise InputError(f"cannot read the bundle: {exc.strerror or exc}", source=path) from exc
    keys: dict[str, PublicKey] = {}
    recipes: dict[str, dict[str, Any]] = {}
    runs: list[_BundleRun] = []
    header: dict[str, Any] = {}
    try:
        with handle:
            for number, text in enumerate(handle, start=1):
                if not text.strip():
                    continue
                try:
                    item = json.loads(text)
                except ValueError as exc:
                    raise InputError(f"line {number} is not JSON: {exc}", source=path) from exc
                if not isinstance(item, dict):
                    raise InputError(f"line {number} is not a JSON object", source=path)
                if number == 1:
                    if item.get("bundle") != BUNDLE_FORMAT:
                        raise InputError(f"not a {BUNDLE_FORMAT} bundle (its first line)", source=path)
                    header = item
                    continue
                try:
                    kind = item["type"]
                    if kind == "key":
                        key = PublicKey.from_text(str(item["public_key"]))
                        if key.key_id != item["key_id"]:
                            raise InputError(f"line {number}: key {item['key_id']} is not that key's fingerprint")
                        keys[key.key_id] = key
                    elif kind == "recipe":
                        recipes[str(item["sha256"])] = dict(item["document"])
                    elif kind == "run":
                        runs.append(
                            _BundleRun(
                                line=number,
                                job=dict(item["job"]),
                                run=dict(item["run"]),
                                figures=[
                                    {k: v for k, v in dict(f).items() if k != "params_bytes"} for f in item["figures"]
                                ],
                                params={
                                    str(f["key"]): base64.b64decode(f["params_bytes"], validate=True)
                                    for f in item["figures"]
                                },
                                samples={
                                    str(k): [base64.b64decode(b, validate=True) for b in blobs]
                                    for k, blobs in dict(item["samples"]).items()
                                },
                                provenance=dict(item["provenance"]),
                                signature=RunSignature(**item["signature"]),
                                origin_farm=item.get("origin_farm"),
                                artifacts=tuple(
                                    Artifact(
                                        name=str(a["name"]), content=str(a["content"]), media_type=str(a["media_type"])
                                    )
                                    for a in item.get("artifacts") or ()
                                ),
                            )
                        )
                    else:
                        raise InputError(f"line {number}: unknown line type {kind!r}", source=path)
                except (KeyError, TypeError, ValueError, binascii.Error, FarmError) as exc:
                    if isinstance(exc, InputError):
                        raise
                    raise InputError(f"line {number}: {type(exc).__name__}: {exc}", source=path) from exc
    except (OSError, EOFError, gzip.BadGzipFile, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the bundle: {exc}", source=path) from exc
    if not header:
        raise InputError("an empty bundle", source=path)
    return _Bundle(header=header, keys=keys, recipes=recipes, runs=runs)


def _summary(figure: dict[str, Any]) -> Summary:
    """A bundled figure's summary: the one its run's signature covers (farm-run/v2), checked at import to follow
    from its values (`_run_problems`); derived from its values for a figure without one (v1)."""
    given = figure.get("summary")
    if given is None:
        return summarize([float(v) for v in figure["values"]])
    return Summary(
        n=int(given["n"]),
        mean=float(given["mean"]),
        median=float(given["median"]),
        min=float(given["min"]),
        max=float(given["max"]),
        stdev=float(given["stdev"]),
        spread=float(given["spread"]),
    )


def _run_problems(run: _BundleRun, bundle: _Bundle, trusted: set[str]) -> tuple[Verdict, list[str]]:
    """The verdict of one bundled run against the key the bundle carries, and what is wrong with it."""
    key = bundle.keys.get(run.signature.key_id)
    try:
        result = check(
            run.content(),
            run.signature,
            key,
            trusted=run.signature.key_id in trusted,
            extra_problems=summary_problems(run.figures),
        )
    except (ValueError, KeyError, TypeError) as exc:
        return Verdict.CHANGED, [f"{type(exc).__name__}: {exc}"]
    problems = list(result.problems) if result.verdict.failed else []
    for figure in run.figures:
        blob = run.params.get(str(figure.get("key")), b"")
        if hashlib.sha256(blob).hexdigest() != figure.get("params_sha256"):
            problems.append(f"figure {figure.get('key')}: its params do not hash to what was signed")
        elif encode_params(decode_params(blob)) != blob:
            problems.append(f"figure {figure.get('key')}: this farm would store its params as other bytes")
    sha = str(run.job.get("recipe_sha256"))
    document = bundle.recipes.get(sha)
    if document is None:
        problems.append(f"its recipe {sha} is not in the bundle")
    elif _recipe_hash(document) != sha:
        problems.append(f"its recipe does not hash to {sha}")
    signed_sha = run.provenance.get("recipe_sha256")
    if signed_sha is not None and signed_sha != sha:
        problems.append(f"its job names recipe {sha}, its signed provenance {signed_sha}")
    return result.verdict, problems


def import_bundle(store: Store, path: Path, *, now: datetime | None = None) -> ImportReport:
    """Check every run of the bundle, then store them all in one transaction, or refuse it whole (BundleRefused
    naming each run that does not verify). Runs already here with the same signature are skipped."""
    bundle = read_bundle(path)
    when = now or datetime.now(UTC)
    origin = bundle.header.get("farm")
    with store._read("cannot read the keys") as conn:
        trusted = {key_id for key_id, (_, is_trusted) in signatures.known_keys(conn).items() if is_trusted}
    refused: list[str] = []
    verdicts: list[Verdict] = []
    for run in bundle.runs:
        verdict, problems = _run_problems(run, bundle, trusted)
        verdicts.append(verdict)
        if problems:
            refused.append(f"{run.name}: {'; '.join(problems)}")
    if refused:
        raise BundleRefused(
            f"{path}: {len(refused)} of {len(bundle.runs)} runs do not verify; nothing was imported:\n  "
            + "\n  ".join(refused)
        )
    imported = already = verified = 0
    with store._write(f"cannot import {path}") as conn:
        for run, verdict in zip(bundle.runs, verdicts, strict=True):
            if _already_here(conn, run):
                already += 1
                continue
            _store_run(conn, bundle, run, verdict, origin, when)
            imported += 1
            verified += verdict is Verdict.VERIFIED
    return ImportReport(imported=imported, already=already, verified=verified, origin_farm=origin)


def _already_here(conn: Connection, run: _BundleRun) -> bool:
    """True when this run is here with this signature; BundleRefused when its job is here with other content."""
    job_id = str(run.job["id"])
    found = conn.execute(
        select(Run.id, Run.attempt, RunSignatureRow.digest)
        .join(RunSignatureRow, RunSignatureRow.run_id == Run.id, isouter=True)
        .where(Run.job_id == job_id)
    ).all()
    if not found and conn.execute(select(Job.id).where(Job.id == job_id)).first() is None:
        return False
    for _, attempt, digest in found:
        if attempt == int(run.run["attempt"]) and digest == run.signature.digest:
            return True
    raise BundleRefused(f"{run.name}: job {job_id} is already here with other runs; nothing was imported")


def _time(value: Any, fallback: datetime) -> datetime:
    if not value:
        return fallback
    parsed = datetime.fromisoformat(str(value))
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def _store_run(
    conn: Connection, bundle: _Bundle, run: _BundleRun, verdict: Verdict, origin: str | None, now: datetime
) -> None:
    from farm.store.db import upsert
    from farm.store.store import Store as StoreClass

    job = run.job
    sha = str(job["recipe_sha256"])
    document = bundle.recipes[sha]
    conn.execute(
        upsert(conn, RecipeRow)
        .values(
            sha256=sha,
            recipe_id=str(document["id"]),
            source_format=str((document.get("provenance") or {}).get("source_format") or "unknown"),
            source_sha256=str((document.get("provenance") or {}).get("content_sha256") or ""),
            model_id=str(document["model_id"]),
            hardware_id=str(document["hardware_id"]),
            hardware_count=int(document["hardware_count"]),
            engine_name=str((document.get("engine") or {}).get("name") or "unknown"),
            engine_version=(document.get("engine") or {}).get("version"),
            document=document,
            created_at=now,
        )
        .on_conflict_do_nothing(index_elements=["sha256"])
    )
    attempt = int(run.run["attempt"])
    worker_id = str(run.run["worker_id"])
    started = _time(run.run.get("started_at"), now)
    finished = _time(run.run.get("finished_at"), now)
    conn.execute(
        insert(Job).values(
            id=str(job["id"]),
            recipe_sha256=sha,
            sweep_name=str(job["sweep_name"]),
            spec_sha256=str(job["spec_sha256"]),
            plan=dict(job["plan"]),
            hardware_class=str(job["hardware_class"]),
            state=JobState.SUCCEEDED.value,
            priority=0,
            attempt=attempt,
            max_attempts=max(attempt, 1),
            releases=0,
            owner=worker_id,
            progress=1.0,
            simulated=bool(job["simulated"]),
            cancel_requested=False,
            created_at=_time(job.get("created_at"), started),
            updated_at=now,
            started_at=started,
            finished_at=finished,
        )
    )
    run_id = conn.execute(
        insert(Run)
        .values(
            job_id=str(job["id"]),
            attempt=attempt,
            worker_id=worker_id,
            state=RunState.SUCCEEDED.value,
            started_at=started,
            finished_at=finished,
            provenance=run.provenance,
            failed_requests=int(run.run.get("failed_requests") or 0),
            total_requests=int(run.run.get("total_requests") or 0),
        )
        .returning(Run.id)
    ).scalar_one()
    figures = tuple(
        Figure(
            kind=str(f["kind"]),
            key=str(f["key"]),
            metric=str(f["metric"]),
            unit=str(f["unit"]),
            values=tuple(float(v) for v in f["values"]),
            summary=_summary(f),
            workload=f.get("workload"),
            params=decode_params(run.params[str(f["key"])]),
            requested_repeats=f.get("requested_repeats"),
        )
        for f in run.figures
    )
    StoreClass._insert_figures(conn, run_id, figures)
    rows = [
        {"run_id": run_id, "figure_key": key, "repeat_index": index, "samples": None, "data": blob}
        for key, blobs in run.samples.items()
        for index, blob in enumerate(blobs)
    ]
    if rows:
        conn.execute(insert(Sample), rows)
    StoreClass._insert_artifacts(conn, run_id, run.artifacts)
    summary = StoreClass._insert_summary(conn, run_id, str(job["id"]), attempt, worker_id, finished, run.provenance)
    StoreClass._add_to_group_stats(conn, summary, figures)
    key = bundle.keys.get(run.signature.key_id)
    if key is not None:
        signatures.add_key(conn, key, label=f"{run.origin_farm or origin or '?'}/{worker_id}", source="bundle", now=now)
    signatures.insert_signature(
        conn, run_id, run.signature, verdict, now, origin_farm=run.origin_farm or origin, imported_at=now
    )
