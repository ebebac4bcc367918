"""The canonical form of a run that is signed (pure, no I/O): docs/signing.md specifies it for other programs.

A run's statement is a small JSON object that binds, by sha256, four parts:

- `figures`: every figure (key, kind, metric, unit, workload, values, params, requested repeats), by key;
- `samples`: the sha256 of each repeat's stored raw samples (farm.store.sample_codec's bytes), by figure key;
- `provenance`: the whole provenance document (host, GPUs, engine and image digest, canonical argv, recipe id
  and hash, model and revision, farm version, method, prompt and output hashes, worker, attempt, ...);
- `artifacts`: each artifact's name, media type and the sha256 of its text (the engine log, ...): in every
  statement signed since artifacts are (a signature without it, older, does not cover them);
- the run's identity (job, attempt, worker) and its request counts, written in the statement itself.

The digest is sha256 of the statement's canonical JSON; the signature is Ed25519 over `SIGNED_PREFIX` + digest.
Canonical JSON, so that any program can write the same bytes: keys sorted by code point, no whitespace,
ASCII only (`\\uXXXX`, lower-case hex, surrogate pairs beyond the BMP), integers as integers, floats as the
shortest decimal that reads back as the same binary64 in Python's `repr` form (`600.0`, `1e-07`); NaN and
infinities refused: what Python's `json.dumps(v, sort_keys=True, separators=(",", ":"))` writes. The signer
first normalizes the run (`normalized`) so that every store hands back exactly what was signed.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

SCHEME_V1 = "farm-run/v1"
"""The first form: figures as the canonical JSON list of their documents (values decoded to write it)."""
SCHEME_V2 = "farm-run/v2"
"""The form a database can hand back without decoding: figures as one line of stored text each, summaries
signed (`figures_v2_sha256`). What new signatures use."""
SCHEME = SCHEME_V2
"""The version of this canonical form new signatures get; a changed form gets a new name and old signatures
keep theirs (SCHEMES: those a check knows)."""
SCHEMES = (SCHEME_V1, SCHEME_V2)

SIGNED_PREFIX = b"farm-run/v1\n"
"""Prepended to the 32-byte digest before signing a v1 statement, so a run signature can never be taken for
another message (`signed_prefix`: each scheme's)."""

FIELD = "\x1f"
"""Between the fields of a v2 figure line (ASCII unit separator): no field may hold it (`v2_eligible`)."""
LINE = "\x1e"
"""After each v2 figure line (ASCII record separator): no field may hold it."""
SUMMARY_FIELDS = ("mean", "median", "min", "max", "stdev", "spread")
"""The float summary fields a v2 figure signs, in this order, as little-endian binary64 (n is in its line)."""


def signed_prefix(scheme: str) -> bytes:
    """What is prepended to the digest before signing under `scheme`: its name and a newline."""
    return scheme.encode("ascii") + b"\n"


class CanonicalError(ValueError):
    """A value that has no canonical form (NaN, infinity, a key that is not a string, an unknown type)."""


def normalized(value: Any) -> Any:
    """`value` as the signer keeps it, so that every store gives it back the same: every string's NUL made U+FFFD,
    -0.0 made 0.0 and a float with an integral value of magnitude 1e16 or more made that integer (PostgreSQL's
    JSONB keeps neither), tuples made lists. CanonicalError for NaN, infinities, non-string keys, other types."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise CanonicalError(f"{value!r} has no canonical form")
        if value == 0.0:
            return 0.0
        return int(value) if abs(value) >= 1e16 and value.is_integer() else value
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalError(f"a key {key!r} that is not a string has no canonical form")
            out[key.replace("\x00", "\ufffd")] = normalized(item)
        return out
    if isinstance(value, list | tuple):
        return [normalized(item) for item in value]
    raise CanonicalError(f"a {type(value).__name__} has no canonical form")


def normalized_floats(values: Iterable[float]) -> list[float | int]:
    """`normalized` of a figure's values (each made a float first), without walking a general value."""
    out: list[float | int] = []
    for value in values:
        number = float(value)
        if number == 0.0:
            out.append(0.0)
        elif abs(number) < 1e16:
            if not math.isfinite(number):
                raise CanonicalError(f"{number!r} has no canonical form")
            out.append(number)
        else:
            out.append(normalized(number))
    return out


def canonical_json(value: Any) -> bytes:
    """The canonical JSON bytes of a normalized JSON-like value (see the module docstring)."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise CanonicalError(str(exc)) from exc
    return text.encode("ascii")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def figure_document(
    *,
    key: str,
    kind: str,
    metric: str,
    unit: str,
    workload: str | None,
    values: Sequence[float],
    params_sha256: str,
    requested_repeats: int | None,
    summary: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """One figure as it is signed: its parameters by the sha256 of their stored bytes (farm.store.params_codec),
    as samples are, so a check need not decode them. `summary` (n and SUMMARY_FIELDS), signed by v2 only."""
    optional = {} if summary is None else {"summary": dict(summary)}
    return {
        **optional,
        "key": key,
        "kind": kind,
        "metric": metric,
        "unit": unit,
        "workload": workload,
        "values": list(values),
        "params_sha256": params_sha256,
        "requested_repeats": requested_repeats,
    }


def figures_sha256(figures: Iterable[Mapping[str, Any]]) -> str:
    """sha256 of the canonical JSON list of figure documents, ordered by key (v1: without their `summary`)."""
    documents = [
        {name: value for name, value in figure.items() if name != "summary"} if "summary" in figure else figure
        for figure in figures
    ]
    return sha256_hex(canonical_json(sorted(documents, key=lambda figure: str(figure["key"]))))


def samples_sha256(repeat_digests: Mapping[str, Sequence[str]]) -> str:
    """sha256 of the canonical JSON object: figure key → the sha256 of each repeat's stored samples, in order."""
    return sha256_hex(canonical_json({key: list(digests) for key, digests in repeat_digests.items()}))


def artifacts_sha256(artifacts: Iterable[tuple[str, str, str]]) -> str:
    """sha256 of the canonical JSON list of the run's artifacts, (name, media type, sha256 of the UTF-8 text)
    each, ordered by name, media type and hash (`[]` for a run with none)."""
    documents = [
        {"name": name, "media_type": media_type, "content_sha256": content}
        for name, media_type, content in sorted(artifacts)
    ]
    return sha256_hex(canonical_json(documents))


def artifact_digest(content: str) -> str:
    """The sha256 (hex) of an artifact's text as the store keeps it (UTF-8, NUL already made U+FFFD)."""
    return sha256_hex(content.encode("utf-8"))


def provenance_sha256(provenance: Mapping[str, Any] | None) -> str:
    return sha256_hex(canonical_json(dict(provenance or {})))


def statement(
    *,
    job_id: str,
    attempt: int,
    worker_id: str,
    figures: str,
    samples: str,
    provenance: str,
    failed_requests: int,
    total_requests: int,
    artifacts: str | None = None,
    scheme: str = SCHEME_V1,
) -> dict[str, Any]:
    """The statement a run's digest is taken over (its parts as their sha256). `artifacts` None: a statement
    of a signature made before artifacts were signed, which has no `artifacts_sha256` (and covers none)."""
    optional = {} if artifacts is None else {"artifacts_sha256": artifacts}
    return {
        **optional,
        "scheme": scheme,
        "job_id": job_id,
        "attempt": attempt,
        "worker_id": worker_id,
        "figures_sha256": figures,
        "samples_sha256": samples,
        "provenance_sha256": provenance,
        "failed_requests": failed_requests,
        "total_requests": total_requests,
    }


def digest(statement_document: Mapping[str, Any]) -> bytes:
    """The 32-byte sha256 of the statement's canonical JSON: what is signed (after SIGNED_PREFIX)."""
    return hashlib.sha256(canonical_json(statement_document)).digest()


# --- farm-run/v2: the figures as the store keeps them ------------------------------------------------------------


def values_text(values: Sequence[float | int]) -> str:
    """A figure's values as the store keeps them and v2 signs them: the canonical JSON of the normalized list
    (`normalized_floats`), e.g. `[270.0,276.5,1e-07]`."""
    return canonical_json(normalized_floats(values)).decode("ascii")


def figure_line(document: Mapping[str, Any]) -> str:
    """One v2 figure line: key, kind, metric, unit, workload ('' for none), the values' text (`values_text`),
    the params sha256, requested repeats ('' for none) and n (decimal), each followed by FIELD but the last,
    then LINE. `document` is a figure document with its `summary` (`figure_document`)."""
    workload = document["workload"]
    requested = document["requested_repeats"]
    return (
        FIELD.join(
            (
                document["key"],
                document["kind"],
                document["metric"],
                document["unit"],
                "" if workload is None else workload,
                values_text(document["values"]),
                document["params_sha256"],
                "" if requested is None else str(int(requested)),
                str(int(document["summary"]["n"])),
            )
        )
        + LINE
    )


def summaries_bytes(summaries: Iterable[Sequence[float]]) -> bytes:
    """The v2 summaries: each figure's SUMMARY_FIELDS as little-endian binary64, figure after figure."""
    packed = array("d", (float(value) for summary in summaries for value in summary))
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def figures_v2_part(lines_text: bytes, summaries: bytes) -> str:
    """The v2 figures part: sha256 of (sha256 of the lines' UTF-8 text) followed by (sha256 of the summaries)."""
    return sha256_hex(hashlib.sha256(lines_text).digest() + hashlib.sha256(summaries).digest())


def figures_v2_sha256(figures: Iterable[Mapping[str, Any]]) -> str:
    """The v2 figures part of figure documents (each with its `summary`), ordered by key (code point order)."""
    ordered = sorted(figures, key=lambda figure: str(figure["key"]))
    text = "".join(figure_line(figure) for figure in ordered).encode("utf-8")
    summaries = summaries_bytes([figure["summary"][name] for name in SUMMARY_FIELDS] for figure in ordered)
    return figures_v2_part(text, summaries)


def v2_eligible(figures: Iterable[Mapping[str, Any]]) -> bool:
    """Whether figure documents have a v2 form that every store hands back unchanged: no text field holds
    FIELD or LINE, no workload is '' (written as a missing one), every summary number is finite and none is
    -0.0 (SQLite keeps 0.0). A run whose figures have none is signed v1."""
    for figure in figures:
        texts = (figure["key"], figure["kind"], figure["metric"], figure["unit"], figure["workload"] or "x")
        if figure["workload"] == "" or any(FIELD in text or LINE in text for text in texts):
            return False
        summary = figure.get("summary")
        if summary is None:
            return False
        for name in SUMMARY_FIELDS:
            number = summary[name]
            if not math.isfinite(number) or (number == 0.0 and math.copysign(1.0, number) < 0):
                return False
    return True
