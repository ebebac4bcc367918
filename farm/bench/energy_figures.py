"""The energy, power and cost figures of a sweep, from its request samples and its cards' telemetry (pure).

Each measurement point of the sweep (`decode/code`, `prefill/107016`, `concurrency/16`, ...) gets, per repeat
window (farm.bench.energy.window_of), and with one value per repeat so they carry a spread like every figure:
- `energy/<point>/...`: energy_j, avg_power_w (all cards together), j_per_output_token, j_per_total_token,
  output_tokens_per_j;
- `power/<point>.gpu<i>/...`: avg_power_w and peak_power_w of each card;
- `cost/<point>/...`: per_m_output_tokens, per_m_total_tokens, where the host profile states prices (named in
  the figure's params).
`<point>` is the measurement's point with a dot (`decode.code`). Every figure is GPU-only and says so in its
params. A repeat whose window cannot be measured is left out with its reason (`absent_in`); a figure no repeat
could measure is absent with the reason. Speculative-decoding points share the decode windows and get none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from farm.bench import energy
from farm.bench.energy import EnergySample, Prices, Unmeasured, WindowEnergy
from farm.bench.metrics import summarize
from farm.domain import (
    COST_METRICS,
    ENERGY_METRICS,
    KIND_COST,
    KIND_ENERGY,
    KIND_POWER,
    KIND_SPEC_DECODE,
    POWER_METRICS,
    Figure,
    figure_key,
)

UNITS = {
    "energy_j": "J",
    "avg_power_w": "W",
    "peak_power_w": "W",
    "j_per_output_token": "J/tok",
    "j_per_total_token": "J/tok",
    "output_tokens_per_j": "tok/J",
}
SKIPPED_KINDS = frozenset({KIND_SPEC_DECODE})
"""Points whose samples are another point's (spec decode shares decode's): their windows are already counted."""


@dataclass(frozen=True)
class EnergyOutcome:
    """The figures and the reasons for those absent."""

    figures: tuple[Figure, ...] = ()
    absent: dict[str, str] = field(default_factory=dict)


def energy_point(point: str) -> str:
    """`decode/code` → `decode.code`: a measurement's point as the point of its energy figures."""
    return point.replace("/", ".")


def _window_values(we: WindowEnergy, prices: Prices) -> dict[tuple[str, str], float | None]:
    """(kind, metric or card:metric) → value for one window (None where undefined: no tokens, no energy)."""
    values: dict[tuple[str, str], float | None] = {
        (KIND_ENERGY, "energy_j"): we.energy_j,
        (KIND_ENERGY, "avg_power_w"): we.avg_power_w,
        (KIND_ENERGY, "j_per_output_token"): we.joules_per_output_token(),
        (KIND_ENERGY, "j_per_total_token"): we.joules_per_total_token(),
        (KIND_ENERGY, "output_tokens_per_j"): we.output_tokens_per_joule(),
    }
    for index, card in enumerate(we.cards):
        values[(KIND_POWER, f"gpu{index}:avg_power_w")] = card.avg_power_w
        values[(KIND_POWER, f"gpu{index}:peak_power_w")] = card.peak_power_w
    if prices.stated:
        duration, joules = we.window.duration_s, we.energy_j
        values[(KIND_COST, "per_m_output_tokens")] = energy.cost_per_million(
            prices, joules, duration, we.window.output_tokens
        )
        values[(KIND_COST, "per_m_total_tokens")] = energy.cost_per_million(
            prices, joules, duration, we.window.total_tokens
        )
    return values


def _names(kind: str, point: str, name: str) -> tuple[str, str]:
    """The figure's point and metric for a value's (kind, name)."""
    if kind == KIND_POWER:
        card, metric = name.split(":")
        return f"{point}.{card}", metric
    return point, name


def energy_figures(
    samples: Mapping[str, Sequence[Sequence[Mapping[str, Any]]]],
    series: Sequence[Sequence[EnergySample]],
    *,
    source: str,
    unavailable: str | None = None,
    prices: Prices | None = None,
    workloads: Mapping[str, str | None] | None = None,
    sampled_every_s: float | None = None,
    simulated: bool = False,
) -> EnergyOutcome:
    """The energy, power and cost figures of every measurement point in `samples` (`SweepOutcome.samples`:
    point → one list of `RequestSample.to_json()` per repeat) from each card's readings (`series`).

    With no readings at all, each point's `energy_j` is absent with `unavailable` (why the probe saw none).
    `workloads` gives a point's workload; `source` says how the cards were read (the counter or power samples
    decide per card and window: see `energy.card_window_energy`)."""
    prices = prices or Prices()
    workloads = workloads or {}
    figures: list[Figure] = []
    absent: dict[str, str] = {}
    for point, repeats in samples.items():
        kind = point.split("/", 1)[0]
        if kind in SKIPPED_KINDS:
            continue
        epoint = energy_point(point)
        if not any(card for card in series):
            absent[figure_key(KIND_ENERGY, epoint, "energy_j")] = unavailable or "no card reported energy or power"
            continue
        collected: dict[tuple[str, str], list[float]] = {}
        undefined: dict[tuple[str, str], dict[str, str]] = {}
        skipped: dict[str, str] = {}
        sources: set[str] = set()
        for number, requests in enumerate(repeats, start=1):
            window = energy.window_of(requests)
            if window is None:
                continue
            measured = energy.window_energy(series, window)
            if isinstance(measured, Unmeasured):
                skipped[f"repeat {number}"] = measured.reason
                continue
            sources.update(card.source for card in measured.cards)
            for slot, value in _window_values(measured, prices).items():
                if value is None:
                    undefined.setdefault(slot, {})[f"repeat {number}"] = "no tokens or no energy in the window"
                else:
                    collected.setdefault(slot, []).append(value)
        params: dict[str, Any] = {
            "measurement": point,
            "gpu_only": True,
            "scope": energy.GPU_ONLY,
            "telemetry": source,
            "read_by": sorted(sources),
            "window": "each repeat: first request's start to the last token of its last request",
            "tokens": "from usage: output = completion tokens, total = prompt + completion tokens",
            "cards": len(series),
            "sampled_every_s": sampled_every_s,
            "max_gap_s": energy.MAX_GAP_S,
            "min_readings_in_window": energy.MIN_SAMPLES_IN_WINDOW,
            "simulated": simulated,
        }
        if skipped:
            params["absent_in"] = dict(skipped)
        if not collected:
            reason = "; ".join(sorted(set(skipped.values()))) or "no repeat had a window"
            absent[figure_key(KIND_ENERGY, epoint, "energy_j")] = reason
            continue
        wanted = [(KIND_ENERGY, metric) for metric in ENERGY_METRICS]
        wanted += [(KIND_POWER, f"gpu{i}:{metric}") for i in range(len(series)) for metric in POWER_METRICS]
        if prices.stated:
            wanted += [(KIND_COST, metric) for metric in COST_METRICS]
        for fkind, name in wanted:
            fpoint, metric = _names(fkind, epoint, name)
            key = figure_key(fkind, fpoint, metric)
            values = collected.get((fkind, name), [])
            if not values:
                reasons = {**skipped, **undefined.get((fkind, name), {})}
                absent[key] = "; ".join(sorted(set(reasons.values()))) or "not measured"
                continue
            figure_params = dict(params)
            if (fkind, name) in undefined:
                figure_params["absent_in"] = {**skipped, **undefined[(fkind, name)]}
            if fkind == KIND_POWER:
                figure_params["card"] = int(fpoint.rsplit(".gpu", 1)[1])
            if fkind == KIND_COST:
                figure_params["prices"] = prices.to_json()
                figure_params["cost"] = (
                    "the host's hourly cost over the window plus the electricity of the cards' energy (GPU-only), "
                    "per million tokens"
                )
            unit = f"{prices.currency}/Mtok" if fkind == KIND_COST else UNITS[metric]
            figures.append(
                Figure(
                    kind=fkind,
                    key=key,
                    metric=metric,
                    unit=unit,
                    values=tuple(values),
                    summary=summarize(values),
                    workload=workloads.get(point),
                    params=figure_params,
                    requested_repeats=len(repeats),
                )
            )
    return EnergyOutcome(figures=tuple(figures), absent=absent)


def workloads_of(figures: Sequence[Figure]) -> dict[str, str | None]:
    """Each measurement point's workload, from the sweep's figures (`decode/code/decode_tok_s` → `decode/code`)."""
    out: dict[str, str | None] = {}
    for figure in figures:
        out.setdefault(figure.key.rsplit("/", 1)[0], figure.workload)
    return out
