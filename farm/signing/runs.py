"""Signing a run where it was measured, and checking a run against its signature (no I/O).

The worker signs its RunResult before delivery (`sign_result`); the store checks it at delivery, `farm verify`
checks stored runs, and `farm import` checks every run of a bundle, all through `check`, on the parts a
`RunContent` holds: figure documents, the sha256 of each repeat's stored sample bytes, the provenance, and the
sha256 of each artifact's text (the engine log).
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from farm.domain import Artifact, Figure, RunResult, RunSignature
from farm.signing import canonical
from farm.signing.keys import HostKey, PublicKey
from farm.store.encode_once import EncodeOnce


class Verdict(enum.StrEnum):
    """What a check of one run found."""

    VERIFIED = "verified"
    """The run matches its signature and the key is trusted."""
    UNTRUSTED = "untrusted"
    """The run matches its signature; the key is known but not trusted here."""
    UNKNOWN_KEY = "unknown_key"
    """The signature names a key this farm does not know: the run cannot be checked (not tampering)."""
    CHANGED = "changed"
    """The run's figures, samples or provenance no longer match its signature."""
    UNSIGNED = "unsigned"
    """Nobody signed the run (measured before signing, or by a farm that does not sign)."""

    @property
    def failed(self) -> bool:
        """Whether `farm verify` names the run and exits non-zero for it."""
        return self in (Verdict.CHANGED, Verdict.UNKNOWN_KEY)


@dataclass(frozen=True)
class RunContent:
    """What a run's signature covers, in the shapes the canonical form takes."""

    job_id: str
    attempt: int
    worker_id: str
    figures: tuple[dict[str, Any], ...]
    sample_digests: dict[str, list[str]]
    provenance: dict[str, Any]
    failed_requests: int
    total_requests: int
    artifacts: tuple[tuple[str, str, str], ...] = ()
    """(name, media type, sha256 of its text) of each artifact (farm.signing.canonical.artifacts_sha256)."""
    figures_v2: str | None = None
    """Optional: the v2 figures part a reader computed from the store's own text (farm.store.signatures), used
    only when it is the one expected (then the stored figures are, byte for byte, what was signed); otherwise
    computed from `figures`."""
    figures_json: bytes | None = None
    """Optional: bytes a reader built from the stored text of the figures (farm.store.signatures), which are
    the figures' canonical JSON when the store kept the values' numbers as they were written. `parts` uses them
    only when their sha256 is the one expected (then they are, byte for byte, what was signed); otherwise the
    figures are canonicalized from `figures`, as always."""

    def parts(
        self, expected_figures_sha256: str | None = None, scheme: str = canonical.SCHEME_V1
    ) -> tuple[str, str, str]:
        """(figures, samples, provenance) sha256 under `scheme`."""
        figures = None
        if scheme == canonical.SCHEME_V2:
            fast = self.figures_v2 if self.figures_v2 == expected_figures_sha256 else None
            figures = fast or canonical.figures_v2_sha256(self.figures)
        elif self.figures_json is not None and expected_figures_sha256 is not None:
            candidate = canonical.sha256_hex(self.figures_json)
            figures = candidate if candidate == expected_figures_sha256 else None
        return (
            figures or canonical.figures_sha256(self.figures),
            canonical.samples_sha256(self.sample_digests),
            canonical.provenance_sha256(self.provenance),
        )

    def artifacts_part(self) -> str:
        """The artifacts' sha256 (of `[]` for a run without any)."""
        return canonical.artifacts_sha256(self.artifacts)

    def digest(
        self, parts: tuple[str, str, str] | None = None, *, artifacts: bool = True, scheme: str = canonical.SCHEME_V1
    ) -> bytes:
        """The statement's digest; `artifacts` False for a signature made before artifacts were signed (its
        statement has no artifacts part)."""
        figures, samples, provenance = parts or self.parts(scheme=scheme)
        return canonical.digest(
            canonical.statement(
                job_id=self.job_id,
                attempt=self.attempt,
                worker_id=self.worker_id,
                figures=figures,
                samples=samples,
                provenance=provenance,
                failed_requests=self.failed_requests,
                total_requests=self.total_requests,
                artifacts=self.artifacts_part() if artifacts else None,
                scheme=scheme,
            )
        )


def figure_document(figure: Figure, codec: EncodeOnce | None = None) -> dict[str, Any]:
    """A figure as it is signed (its values normalized, its params by the sha256 of the bytes the store keeps)."""
    encode_params = (codec or EncodeOnce()).params
    return canonical.figure_document(
        key=figure.key,
        kind=figure.kind,
        metric=figure.metric,
        unit=figure.unit,
        workload=figure.workload,
        values=canonical.normalized_floats(figure.values),
        params_sha256=hashlib.sha256(encode_params(figure.params)).hexdigest(),
        requested_repeats=figure.requested_repeats,
        summary=summary_document(figure),
    )


def summary_document(figure: Figure) -> dict[str, float]:
    """A figure's summary as v2 signs it: n and canonical.SUMMARY_FIELDS."""
    summary = figure.summary
    return {
        "n": summary.n,
        "mean": summary.mean,
        "median": summary.median,
        "min": summary.min,
        "max": summary.max,
        "stdev": summary.stdev,
        "spread": summary.spread,
    }


def summary_problems(figures: Sequence[Mapping[str, Any]]) -> list[str]:
    """The figures (documents with a `summary`) whose summary does not follow from their values: n the count,
    min and max exact, mean within 1e-9 of fsum/n. Checked where a v2 run arrives (delivery, import): its
    signature covers the summary, so `farm verify` need not derive it again."""
    out = []
    for figure in figures:
        summary, values = figure.get("summary"), list(figure["values"])
        if summary is None:
            continue
        n = summary["n"]
        if n != len(values) or (
            values
            and (
                summary["min"] != min(values)
                or summary["max"] != max(values)
                or not math.isclose(summary["mean"], math.fsum(values) / n, rel_tol=1e-9)
            )
        ):
            out.append(f"figure {figure['key']}: its stored summary does not follow from its values")
    return out


def sample_digests(
    samples: Mapping[str, Sequence[Sequence[Any]]], codec: EncodeOnce | None = None
) -> dict[str, list[str]]:
    """The sha256 of each repeat's samples as the store keeps them (farm.store.sample_codec's bytes)."""
    encode = (codec or EncodeOnce()).samples
    return {key: [hashlib.sha256(encode(repeat)).hexdigest() for repeat in repeats] for key, repeats in samples.items()}


def artifact_digests(artifacts: Sequence[Artifact]) -> tuple[tuple[str, str, str], ...]:
    """(name, media type, sha256 of the text) of each artifact, as RunContent holds them."""
    return tuple((item.name, item.media_type, canonical.artifact_digest(item.content)) for item in artifacts)


def content_of(
    job_id: str, attempt: int, worker_id: str, result: RunResult, codec: EncodeOnce | None = None
) -> RunContent:
    """A result's signed content, as the worker has it and as the store will keep it (`codec`: one shared by
    calls over results whose parts never change, so each part is encoded once)."""
    codec = codec or EncodeOnce()
    return RunContent(
        job_id=job_id,
        attempt=attempt,
        worker_id=worker_id,
        figures=tuple(figure_document(figure, codec) for figure in result.figures),
        sample_digests=sample_digests(result.samples, codec),
        provenance=dict(result.provenance),
        failed_requests=result.failed_requests,
        total_requests=result.total_requests,
        artifacts=artifact_digests(result.artifacts),
    )


def sign(content: RunContent, key: HostKey, scheme: str | None = None) -> RunSignature:
    """Sign under `scheme`: by default v2, or v1 for figures that have no v2 form (canonical.v2_eligible)."""
    if scheme is None:
        scheme = canonical.SCHEME_V2 if canonical.v2_eligible(content.figures) else canonical.SCHEME_V1
    parts = content.parts(scheme=scheme)
    digest = content.digest(parts, scheme=scheme)
    signature = key.sign(canonical.signed_prefix(scheme) + digest)
    return RunSignature(
        key_id=key.key_id,
        signature=base64.b64encode(signature).decode("ascii"),
        digest=digest.hex(),
        figures_sha256=parts[0],
        samples_sha256=parts[1],
        provenance_sha256=parts[2],
        scheme=scheme,
        artifacts_sha256=content.artifacts_part(),
    )


def _normalized_figure(figure: Figure) -> Figure:
    """The figure with its values normalized; itself when they already are (most are: a new Figure re-checks
    everything it holds, which is most of what signing a run costs)."""
    values = canonical.normalized(list(figure.values))
    if all(
        type(now) is type(was) and now == was and (now or repr(now) == repr(was))
        for now, was in zip(values, figure.values, strict=True)
    ):
        return figure
    return replace(figure, values=tuple(values))


def sign_result(
    job_id: str,
    attempt: int,
    worker_id: str,
    result: RunResult,
    key: HostKey,
    *,
    codec: EncodeOnce | None = None,
    scheme: str | None = None,
) -> RunResult:
    """The result, normalized (canonical.normalized: what every store gives back unchanged; each artifact's
    NUL made U+FFFD, as the store keeps it), with its signature over all of it, artifacts included.
    CanonicalError (a ValueError) for a result with no canonical form (UnicodeEncodeError, also a ValueError,
    for an artifact whose text cannot be UTF-8)."""
    normal = replace(
        result,
        provenance=canonical.normalized(dict(result.provenance)),
        figures=tuple(_normalized_figure(figure) for figure in result.figures),
        artifacts=tuple(
            replace(item, content=canonical.normalized(item.content), name=canonical.normalized(item.name))
            for item in result.artifacts
        ),
    )
    return replace(normal, signature=sign(content_of(job_id, attempt, worker_id, normal, codec), key, scheme))


@dataclass(frozen=True)
class Check:
    """One run checked: the verdict and, when it changed, what no longer matches."""

    verdict: Verdict
    problems: tuple[str, ...] = ()

    @property
    def reason(self) -> str:
        return "; ".join(self.problems)


def check(
    content: RunContent,
    signature: RunSignature | None,
    key: PublicKey | None,
    *,
    trusted: bool,
    extra_problems: Sequence[str] = (),
) -> Check:
    """Check a run's content against its signature and the key it names (None: the key is unknown here).

    `extra_problems` are what the caller found already (a stored summary that no longer matches its values):
    any makes the run changed."""
    if signature is None:
        return Check(Verdict.UNSIGNED)
    scheme = signature.scheme
    if scheme not in canonical.SCHEMES:
        return Check(Verdict.CHANGED, (f"unknown signature scheme {scheme!r}",))
    parts = content.parts(signature.figures_sha256, scheme)
    problems = list(extra_problems)
    covers_artifacts = signature.artifacts_sha256 is not None  # None: signed before artifacts were
    for name, now, signed in zip(
        ("figures", "samples", "provenance", "artifacts"),
        (*parts, content.artifacts_part() if covers_artifacts else None),
        (signature.figures_sha256, signature.samples_sha256, signature.provenance_sha256, signature.artifacts_sha256),
        strict=True,
    ):
        if now != signed:
            problems.append(f"its {name} changed")
    digest = content.digest(parts, artifacts=covers_artifacts, scheme=scheme)
    if digest.hex() != signature.digest and not problems:
        problems.append("its identity or request counts changed (or the record of its signature)")
    if key is None:
        return Check(Verdict.UNKNOWN_KEY, (f"signed by unknown key {signature.key_id}",))
    if key.key_id != signature.key_id:
        return Check(Verdict.UNKNOWN_KEY, (f"signed by {signature.key_id}, checked against {key.key_id}",))
    try:
        raw = base64.b64decode(signature.signature, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not key.verifies(raw, canonical.signed_prefix(scheme) + digest):
        if not problems:
            problems.append("its signature does not match its content")
        return Check(Verdict.CHANGED, tuple(problems))
    if problems:  # the signature covers today's content but the parts it names do not: the record was edited
        return Check(Verdict.CHANGED, tuple(problems))
    return Check(Verdict.VERIFIED if trusted else Verdict.UNTRUSTED)
