"""Export to local-ai-registry/v1 speed sweeps: one document per recipe × hardware class × engine version (pure).

The rows follow the registry's own sweeps (`data/registry/speed-sweep/*.json` in 0xSero/local-ai-registry):
- one decode row per workload: concurrency 1, `output_tokens` the long point of the two-point decode,
  `decode_tok_s` the pooled mean, `content_class` the workload, `spec_accept_len` / `spec_acceptance_rate` from
  the engine's speculative-decoding counters;
- one row per concurrency level: `decode_tok_s` the aggregate rate, `decode_tok_s_per_stream`, `ttft_ms_p50`,
  `context_tokens` the prompt length;
- one row per prefill prompt length (`prefill_tok_s`, `ttft_ms_p50` the median TTFT), the short-prompt TTFT
  and the prefix-cache repeat (`cache: "warm"`);
- one row per context depth (`[plan.context_depth]`): `context_tokens` the depth, `decode_tok_s` the two-point
  decode at that depth, `prefill_tok_s` and `ttft_ms_p50` of the cold send (`depth: true`).
`peak_vram_gb` is the peak per card in GiB (the largest card), as the seed's page ("peakVramGb is PER CARD")
and the registry's sweeps give it. `samples` is the number of pooled values. A row's `status` is `measured`,
or `simulated` for results from the simulator; a row with fewer samples than asked also says `incomplete:
true` with `requested`. The top-level `source` (a free-form object in the schema) carries the farm's
provenance: jobs, workers, hosts, GPUs, farm version and commit, the method.

`metrics.peak_memory_bytes` is the sum over the cards of their peaks, in bytes (the whole deployment).

The schema's `metrics` has no field for energy, power or cost (and admits no others); its rows admit more, so
the decode and concurrency rows carry the farm's GPU-only figures where the run measured them:
`gpu_j_per_output_token`, `gpu_j_per_total_token`, `gpu_avg_power_w` (all cards), `gpu_peak_power_w` (the
highest card) and, where the host stated prices, `cost_per_m_output_tokens` with `cost_unit`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Any

from farm.bench.records import (
    KIND_CONCURRENCY,
    KIND_DECODE,
    KIND_DEPTH,
    KIND_MEMORY,
    KIND_PREFILL,
    KIND_PREFIX_CACHE,
    KIND_SHORT_TTFT,
    KIND_SPEC_DECODE,
)
from farm.domain import KIND_COST, KIND_ENERGY, KIND_POWER
from farm.report.aggregate import Entry, groups
from farm.report.registry_schema import SCHEMA_VERSION

GIB = 2**30
TTFT32K_TOKENS = 32_768
"""The registry's `ttft32k_*` metrics: TTFT of a 32k-token prompt, filled when the sweep measured exactly that."""


def _iso(entries: Sequence[Entry]) -> str:
    return max(e.measured_at for e in entries).isoformat().replace("+00:00", "Z")


def sweep_id(entries: Sequence[Entry]) -> str:
    """`<recipe id>-farm-<8 hex>[-sim]-sweep`: stable for the same recipe content, hardware and engine version."""
    first = entries[0]
    identity = "|".join(str(part) for part in first.group)
    digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:8]
    return f"{first.recipe.recipe_id}-farm-{digest}{'-sim' if first.simulated else ''}-sweep"


def _int_point(entry: Entry) -> int | None:
    try:
        return int(entry.point)
    except ValueError:
        return None


def _int_param(entry: Entry | None, name: str) -> int | None:
    if entry is None:
        return None
    value = entry.params.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _row(entry: Entry, **fields: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "concurrency": 1,
        "context_tokens": None,
        "output_tokens": None,
        "prefill_tok_s": None,
        "decode_tok_s": None,
        "decode_tok_s_per_stream": None,
        "ttft_ms_p50": None,
        "peak_vram_gb": None,
        "samples": entry.n,
        "status": entry.status,
        "measurement": entry.key,
        "spread": entry.spread,
        "stdev": entry.stdev,
        "job_ids": list(entry.job_ids),
    }
    row.update(fields)
    if entry.incomplete:
        row["incomplete"] = True
        row["requested"] = entry.requested
    return row


def energy_fields(entries: Sequence[Entry], by_key: dict[str, Entry], point: str) -> dict[str, Any]:
    """The GPU-only energy, power and cost of one measurement point (`decode.code`), for a row; {} when unmeasured."""
    fields: dict[str, Any] = {}
    for name, key in (
        ("gpu_j_per_output_token", f"{KIND_ENERGY}/{point}/j_per_output_token"),
        ("gpu_j_per_total_token", f"{KIND_ENERGY}/{point}/j_per_total_token"),
        ("gpu_avg_power_w", f"{KIND_ENERGY}/{point}/avg_power_w"),
    ):
        if key in by_key:
            fields[name] = by_key[key].mean
    peaks = [
        e.max
        for e in entries
        if e.kind == KIND_POWER and e.metric == "peak_power_w" and e.point.startswith(f"{point}.gpu")
    ]
    if peaks:
        fields["gpu_peak_power_w"] = max(peaks)
    cost = by_key.get(f"{KIND_COST}/{point}/per_m_output_tokens")
    if cost is not None:
        fields["cost_per_m_output_tokens"] = cost.mean
        fields["cost_unit"] = cost.unit
    return fields


def speed_sweep(entries: Sequence[Entry]) -> dict[str, Any]:
    """The speed-sweep document of one group's entries."""
    by_key = {e.key: e for e in entries}
    first = entries[0]
    memory = [e for e in entries if e.kind == KIND_MEMORY and e.metric == "peak_memory_gib"]
    peak_card_gib = max((e.max for e in memory), default=None)
    peak_vram_gb = round(peak_card_gib, 2) if peak_card_gib is not None else None
    rows: list[dict[str, Any]] = []

    for e in sorted((e for e in entries if e.kind == KIND_DECODE and e.metric == "decode_tok_s"), key=_workload):
        workload = e.point
        accept_len = by_key.get(f"{KIND_SPEC_DECODE}/{workload}/mean_acceptance_length")
        accept_rate = by_key.get(f"{KIND_SPEC_DECODE}/{workload}/acceptance_rate")
        rows.append(
            _row(
                e,
                output_tokens=_int_param(e, "long_output_tokens"),
                decode_tok_s=e.mean,
                decode_tok_s_per_stream=e.mean,
                peak_vram_gb=peak_vram_gb,
                content_class=workload,
                spec_accept_len=accept_len.mean if accept_len else None,
                spec_acceptance_rate=accept_rate.mean if accept_rate else None,
                **energy_fields(entries, by_key, f"{KIND_DECODE}.{workload}"),
            )
        )
    levels = sorted({level for e in entries if e.kind == KIND_CONCURRENCY and (level := _int_point(e)) is not None})
    for level in levels:
        aggregate = by_key.get(f"{KIND_CONCURRENCY}/{level}/aggregate_tok_s")
        if aggregate is None:
            continue
        per_stream = by_key.get(f"{KIND_CONCURRENCY}/{level}/per_stream_tok_s")
        ttft = by_key.get(f"{KIND_CONCURRENCY}/{level}/ttft_ms_p50")
        rows.append(
            _row(
                aggregate,
                concurrency=level,
                context_tokens=_int_param(aggregate, "prompt_tokens"),
                output_tokens=_int_param(aggregate, "output_tokens"),
                decode_tok_s=aggregate.mean,
                decode_tok_s_per_stream=per_stream.mean if per_stream else None,
                decode_tok_s_total=aggregate.mean,
                ttft_ms_p50=ttft.mean if ttft else None,
                peak_vram_gb=peak_vram_gb,
                content_class=aggregate.workload,
                **energy_fields(entries, by_key, f"{KIND_CONCURRENCY}.{level}"),
            )
        )
    for e in sorted((e for e in entries if e.kind == KIND_PREFILL and e.metric == "prefill_tok_s"), key=_point):
        ttft = by_key.get(f"{KIND_PREFILL}/{e.point}/ttft_ms")
        rows.append(
            _row(
                e,
                context_tokens=_int_point(e),
                output_tokens=_int_param(e, "output_tokens"),
                prefill_tok_s=e.mean,
                ttft_ms_p50=ttft.median if ttft else None,
                peak_vram_gb=peak_vram_gb,
            )
        )
    for kind, extra in ((KIND_SHORT_TTFT, {}), (KIND_PREFIX_CACHE, {"cache": "warm"})):
        for e in sorted((e for e in entries if e.kind == kind and e.metric == "ttft_ms"), key=_point):
            rows.append(
                _row(
                    e,
                    context_tokens=_int_point(e),
                    output_tokens=_int_param(e, "output_tokens"),
                    ttft_ms_p50=e.median,
                    peak_vram_gb=peak_vram_gb,
                    **extra,
                )
            )

    for e in sorted((e for e in entries if e.kind == KIND_DEPTH and e.metric == "decode_tok_s"), key=_point):
        prefill = by_key.get(f"{KIND_DEPTH}/{e.point}/prefill_tok_s")
        ttft = by_key.get(f"{KIND_DEPTH}/{e.point}/ttft_ms")
        rows.append(
            _row(
                e,
                context_tokens=_int_point(e),
                output_tokens=_int_param(e, "long_output_tokens"),
                decode_tok_s=e.mean,
                decode_tok_s_per_stream=e.mean,
                prefill_tok_s=prefill.mean if prefill else None,
                ttft_ms_p50=ttft.median if ttft else None,
                peak_vram_gb=peak_vram_gb,
                content_class=e.workload,
                depth=True,
            )
        )

    decode_rates = [r["decode_tok_s"] for r in rows if r["decode_tok_s"] is not None]
    prefill_rows = [r for r in rows if r["prefill_tok_s"] is not None]
    peak_generation = max(decode_rates, default=None)
    peak_row = next((r for r in rows if r["decode_tok_s"] == peak_generation), None)
    ttft32k = by_key.get(f"{KIND_PREFILL}/{TTFT32K_TOKENS}/ttft_ms") or by_key.get(
        f"{KIND_DEPTH}/{TTFT32K_TOKENS}/ttft_ms"
    )
    metrics: dict[str, Any] = {
        "inference_engine_version": first.engine_version,
        "concurrency": peak_row["concurrency"] if peak_row else None,
        "decode_mode": _decode_mode(by_key),
        "point_count": len(rows),
        "max_prompt_tokens": max((r["context_tokens"] for r in prefill_rows), default=None),
        "max_context_tokens": first.recipe.max_context_tokens,
        "peak_generation_tps": peak_generation,
        "peak_prompt_tps": max((r["prefill_tok_s"] for r in prefill_rows), default=None),
        "peak_memory_bytes": str(round(sum(e.max for e in memory) * GIB)) if memory else None,
        "latest_point_at": _iso(entries),
    }
    if ttft32k is not None:
        metrics["ttft32k_seconds"] = ttft32k.mean / 1000.0
        metrics["ttft32k_context_tokens"] = TTFT32K_TOKENS
    return {
        "schema_version": SCHEMA_VERSION,
        "id": sweep_id(entries),
        "recipe_id": first.recipe.recipe_id,
        "measured_at": _iso(entries),
        "accepted_at": None,
        "source": _source(entries),
        "metrics": metrics,
        "rows": rows,
    }


def _workload(entry: Entry) -> str:
    return entry.point


def _point(entry: Entry) -> int:
    return _int_point(entry) or 0


def _decode_mode(by_key: dict[str, Entry]) -> str | None:
    decode = next((e for e in by_key.values() if e.kind == KIND_DECODE), None)
    if decode is None:
        return None
    short, long = decode.params.get("short_output_tokens"), decode.params.get("long_output_tokens")
    temperature = decode.params.get("temperature")
    return (
        f"two-point decode ({short} vs {long} max_tokens on a prefix-warmed identical prompt), "
        f"temperature {temperature}, thinking {'on' if decode.params.get('thinking') else 'off'}, EOS ignored, "
        "tokens from the server's usage"
    )


def _source(entries: Sequence[Entry]) -> dict[str, Any]:
    provenance = {(p.job_id, p.attempt): p for e in entries for p in e.provenance}
    runs = [provenance[key] for key in sorted(provenance)]
    first = entries[0]
    return {
        "kind": "bench-farm",
        "simulated": first.simulated,
        "recipe_sha256": first.recipe.recipe_sha256,
        "hardware_class": first.hardware_class,
        "engine": first.engine_name,
        "jobs": sorted({p.job_id for p in runs}),
        "runs": [
            {
                "job_id": p.job_id,
                "attempt": p.attempt,
                "worker_id": p.worker_id,
                "measured_at": p.measured_at,
                "host": p.host,
                "gpus": list(p.gpu_names),
                "driver_version": p.driver_version,
                "image_digest": p.image_digest,
                "farm_version": p.farm_version,
                "farm_commit": p.farm_commit,
                "cache_state": p.cache_state,
            }
            for p in runs
        ],
        "methodology": (
            "bench farm sweep: greedy, thinking off, EOS ignored, token counts from the server's usage; "
            "two-point decode; prefill as prompt tokens / TTFT on prompts sized through /tokenize with a unique "
            "prefix; values pooled over every repeat of every run; peak_vram_gb per card (GiB)"
            + ("; MEASURED ON THE SIMULATOR, not on real hardware" if first.simulated else "")
        ),
    }


def speed_sweeps(entries: Iterable[Entry]) -> list[dict[str, Any]]:
    """One speed-sweep document per recipe × hardware class × engine version (× simulated); a group with no
    figure that makes a row (only memory, say) has no document, as the schema needs at least one row."""
    documents = [speed_sweep(members) for members in groups(entries).values()]
    return [document for document in documents if document["rows"]]
