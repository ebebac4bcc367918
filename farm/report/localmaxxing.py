"""Export to LocalMaxxing run submissions: one per recipe × hardware class × engine version (pure).

The field names follow the seed's run page (tests/fixtures/000_fb943dab8cb08842.txt), which names `tokSOut`
(single-stream decode, on the code workload to stay comparable), `tokSPrefill` (prompt tokens / TTFT at the
longest prompt measured), `TTFT` (short-prompt time to first token, ms) and `peakVramGb` ("PER CARD"; GiB as the
page measures it). The rest are named in the same style: `engineFlags` with `command` (the recipe's argv as a
shell line), `tensorParallel`, `specAcceptanceRate` and `specMeanAcceptedLength`, `promptHashes` and
`outputHashes` (sha256 per measurement, from the latest run), `engineCommit`; what makes a run verified
(docs/signing.md): `verified` (every run signed by a trusted host key and matching its signature),
`signature` (the latest run's: key id, digest, Ed25519 signature, scheme), and the registry's `validated`
(every rule of farm/signing/validated.toml, each in `validatedRules`).

Every field is always present; a value the farm does not know is null (for example `engineCommit` when the
engine's version carries no `+g<commit>` and the provenance names none — the image digest is then in
`engineImageDigest`).

The page has no energy fields; the farm's, in the same style, are GPU-only and at the headline workload's decode:
`gpuJoulesPerOutputToken`, `gpuAvgPowerW` (all cards), `gpuPeakPowerW` (the highest card), and at the host's
stated prices `costPerMOutputTokens` with `costUnit` (null where not measured or no prices were stated).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from farm.domain import KIND_DECODE, KIND_MEMORY, KIND_PREFILL, KIND_SHORT_TTFT, KIND_SPEC_DECODE
from farm.engines.registry import ENGINES
from farm.report.aggregate import Entry, GroupKey, group_of, groups
from farm.store.records import RunMeasurements

HEADLINE_WORKLOAD = "code"
"""The workload `tokSOut` reports, as the seed's page does ("tokSOut 276.0 is single-stream CODE generation")."""

_COMMIT = re.compile(r"(?:\+|\.)g([0-9a-f]{7,40})\b")

SUBMISSION_FIELDS = (
    "recipeId",
    "model",
    "hardware",
    "hardwareCount",
    "engine",
    "engineVersion",
    "engineCommit",
    "engineImageDigest",
    "tokSOut",
    "tokSOutWorkload",
    "tokSOutByWorkload",
    "tokSOutSpread",
    "samples",
    "tokSPrefill",
    "prefillPromptTokens",
    "TTFT",
    "ttftPromptTokens",
    "peakVramGb",
    "engineFlags",
    "command",
    "tensorParallel",
    "specAcceptanceRate",
    "specMeanAcceptedLength",
    "promptHashes",
    "outputHashes",
    "method",
    "simulated",
    "measuredAt",
    "jobIds",
    "verified",
    "validated",
    "validatedRules",
    "signature",
    "gpuJoulesPerOutputToken",
    "gpuAvgPowerW",
    "gpuPeakPowerW",
    "costPerMOutputTokens",
    "costUnit",
)
"""Every key of a submission, in order."""


def engine_commit(version: str | None, provenance_engine: dict[str, Any]) -> str | None:
    """The engine's source commit: named in the provenance, or the `+g<hex>` of a setuptools-scm version."""
    named = provenance_engine.get("commit")
    if isinstance(named, str) and named:
        return named
    match = _COMMIT.search(version or "")
    return match.group(1) if match else None


def engine_flags(argv: Sequence[str]) -> list[str]:
    """The argv after the executable, its `serve` subcommand and the model (the flags the engine got)."""
    args = list(argv)
    if args and not args[0].startswith("-"):
        args = args[1:]
    if args and args[0] == "serve":
        args = args[1:]
    if args and not args[0].startswith("-"):
        args = args[1:]
    return args


def tensor_parallel(argv: Sequence[str], declared: int | None) -> int | None:
    """The tensor-parallel size the argv gives in any spelling of the engine its launcher starts (the table's:
    vLLM's `--tensor-parallel-size N`, `-tp N`, `--tensor-parallel-size=N`; SGLang's `--tp-size N`, ...), else
    the recipe's."""
    kinds = [kind for kind in ENGINES.values() if tuple(argv[: len(kind.launcher)]) == kind.launcher]
    flags = kinds[0].parallel_flags.get("tensor", ()) if kinds else ()
    args = list(argv)
    for index, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in flags:
            text = value if eq else (args[index + 1] if index + 1 < len(args) else "")
            if text.isdigit():
                return int(text)
    return declared


def submission(
    entries: Sequence[Entry], latest: Mapping[str, Any] | None, signed: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The submission of one group's entries; `latest` is the provenance of the group's latest run (hashes,
    engine); `signed` that run's signature, verdict and recipe document (reads.latest_signatures): `verified`,
    `validated` by the registry's rules (farm.signing.validated) and `signature` (None when unsigned)."""
    from farm.signing.validated import outcomes

    by_key = {e.key: e for e in entries}
    first = entries[0]
    decode = {e.point: e for e in entries if e.kind == KIND_DECODE and e.metric == "decode_tok_s"}
    workload = HEADLINE_WORKLOAD if HEADLINE_WORKLOAD in decode else min(decode, default=None)
    headline = decode.get(workload) if workload else None
    prefill = [e for e in entries if e.kind == KIND_PREFILL and e.metric == "prefill_tok_s"]
    longest = max(prefill, key=lambda e: int(e.point), default=None)
    short = [e for e in entries if e.kind == KIND_SHORT_TTFT and e.metric == "ttft_ms"]
    shortest = min(short, key=lambda e: int(e.point), default=None)
    memory = [e.max for e in entries if e.kind == KIND_MEMORY and e.metric == "peak_memory_gib"]
    rate = by_key.get(f"{KIND_SPEC_DECODE}/{workload}/acceptance_rate") if workload else None
    length = by_key.get(f"{KIND_SPEC_DECODE}/{workload}/mean_acceptance_length") if workload else None
    provenance = latest or {}
    engine = provenance.get("engine") or {}
    argv = first.recipe.argv
    method = provenance.get("method")
    return {
        "recipeId": first.recipe.recipe_id,
        "model": first.recipe.model_id,
        "hardware": first.recipe.hardware_id,
        "hardwareCount": first.recipe.hardware_count,
        "engine": first.engine_name,
        "engineVersion": first.engine_version,
        "engineCommit": engine_commit(first.engine_version, engine),
        "engineImageDigest": engine.get("image_digest"),
        "tokSOut": headline.mean if headline else None,
        "tokSOutWorkload": workload,
        "tokSOutByWorkload": {name: e.mean for name, e in sorted(decode.items())},
        "tokSOutSpread": headline.spread if headline else None,
        "samples": headline.n if headline else None,
        "tokSPrefill": longest.mean if longest else None,
        "prefillPromptTokens": int(longest.point) if longest else None,
        "TTFT": shortest.mean if shortest else None,
        "ttftPromptTokens": int(shortest.point) if shortest else None,
        "peakVramGb": round(max(memory), 2) if memory else None,
        "engineFlags": engine_flags(argv),
        "command": shlex.join(argv),
        "tensorParallel": tensor_parallel(argv, first.recipe.tensor_parallel),
        "specAcceptanceRate": rate.mean if rate else None,
        "specMeanAcceptedLength": length.mean if length else None,
        "promptHashes": dict(provenance.get("prompt_sha256") or {}),
        "outputHashes": dict(provenance.get("output_sha256") or {}),
        "method": method if isinstance(method, dict) else None,
        "simulated": first.simulated,
        "measuredAt": max(e.measured_at for e in entries).isoformat(),
        "jobIds": sorted({job for e in entries for job in e.job_ids}),
        **_verification(entries, provenance, signed, outcomes),
        **_energy(entries, workload),
    }


def _verification(
    entries: Sequence[Entry], provenance: Mapping[str, Any], signed: Mapping[str, Any] | None, outcomes: Any
) -> dict[str, Any]:
    verified = bool(signed and signed.get("verified")) and all(e.verified for e in entries)
    rules = outcomes((signed or {}).get("recipe") or {}, provenance, verified)
    return {
        "verified": verified,
        # As the store keeps it (run_summaries.validated, computed at the run's last check); the rules' outcomes
        # beside it say why, computed now from the same recipe and provenance.
        "validated": verified and bool((signed or {}).get("validated")),
        "validatedRules": rules,
        "signature": (signed or {}).get("signature"),
    }


def _energy(entries: Sequence[Entry], workload: str | None) -> dict[str, Any]:
    from farm.report.registry import energy_fields

    fields = energy_fields(entries, {e.key: e for e in entries}, f"{KIND_DECODE}.{workload}") if workload else {}
    return {
        "gpuJoulesPerOutputToken": fields.get("gpu_j_per_output_token"),
        "gpuAvgPowerW": fields.get("gpu_avg_power_w"),
        "gpuPeakPowerW": fields.get("gpu_peak_power_w"),
        "costPerMOutputTokens": fields.get("cost_per_m_output_tokens"),
        "costUnit": fields.get("cost_unit"),
    }


def submissions(entries: Iterable[Entry], runs: Iterable[RunMeasurements]) -> list[dict[str, Any]]:
    """One submission per recipe × hardware class × engine version (× simulated), from runs in memory."""
    latest: dict[GroupKey, Mapping[str, Any]] = {}
    for run in sorted(runs, key=lambda r: r.measured_at):
        latest[group_of(run)] = run.provenance
    return submissions_from(entries, latest)


def submissions_from(
    entries: Iterable[Entry],
    latest: Mapping[GroupKey, Mapping[str, Any]],
    signed: Mapping[GroupKey, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The same, given each group's latest provenance (what the store reads: one run's per group) and its
    signature (`reads.latest_signatures`)."""
    return [submission(members, latest.get(key), (signed or {}).get(key)) for key, members in groups(entries).items()]
