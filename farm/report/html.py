"""`farm report`: one self-contained HTML page of aggregated results (pure: entries in, a string out).

No network: the CSS is inline, the charts are inline SVG made in Python (farm.report.charts), there is no
script. The page holds the leaderboard (real hardware ranked; simulated entries apart, ranked only among
themselves, and marked), decode tok/s by workload, the Pareto view of throughput per GPU against tok/s per user
over the concurrency levels, the energy view of GPU-only joules per output token against tok/s per user over the
same levels, TTFT against prompt length, every measurement, and the provenance of each sweep.
Numbers that a test checks carry data attributes (`data-decode-mean`, ...) with their full precision.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape

import farm
from farm.domain import (
    KIND_CONCURRENCY,
    KIND_DECODE,
    KIND_DEPTH,
    KIND_ENERGY,
    KIND_PREFILL,
    KIND_SHORT_TTFT,
    int_point,
)
from farm.filters import ResultFilter
from farm.report.aggregate import Entry, groups
from farm.report.charts import Bar, Series, bar_chart, line_chart
from farm.store.records import LeaderboardRow

TOP_GROUPS = 12
"""Sweep groups whose charts, measurements and provenance the page shows: the page stays a few hundred KB at
any store size; the leaderboard itself lists every row."""
PROVENANCE_RUNS = 5
"""Runs per group whose provenance the page lists (the latest); the rest are one command away."""
JOBS_PER_ROW = 5
"""Job ids a leaderboard row lists (the latest)."""


def group_label(entry: Entry) -> str:
    """`recipe · hardware class · engine version`: tells every sweep group apart in a legend."""
    version = (entry.engine_version or "").split("+")[0]
    hardware = entry.hardware_class.removeprefix("sim:")
    label = f"{entry.recipe.recipe_id} · {hardware} · {entry.engine_name} {version}".strip()
    return label + (" (simulated)" if entry.simulated else "")


def _int(point: str) -> int | None:
    return int_point(point)


def decode_bars(entries: Sequence[Entry]) -> list[Bar]:
    return [
        Bar(group=group_label(e), category=e.point, value=e.mean, low=e.min, high=e.max, simulated=e.simulated)
        for e in entries
        if e.kind == KIND_DECODE and e.metric == "decode_tok_s"
    ]


def pareto_series(entries: Sequence[Entry]) -> list[Series]:
    """Per group: (tok/s per user, aggregate tok/s per GPU) at each concurrency level."""
    out = []
    for members in groups(entries).values():
        by_key = {e.key: e for e in members}
        points = []
        for e in members:
            if e.kind == KIND_CONCURRENCY and e.metric == "aggregate_tok_s":
                per_stream = by_key.get(f"{KIND_CONCURRENCY}/{e.point}/per_stream_tok_s")
                if per_stream is not None:
                    points.append((per_stream.mean, e.mean / max(e.gpu_count, 1), f"concurrency {e.point}"))
        if points:
            out.append(Series(name=group_label(members[0]), points=tuple(points), simulated=members[0].simulated))
    return out


def energy_series(entries: Sequence[Entry]) -> list[Series]:
    """Per group: (tok/s per user, GPU-only joules per output token) at each concurrency level that measured both."""
    out = []
    for members in groups(entries).values():
        by_key = {e.key: e for e in members}
        points = []
        for e in members:
            if e.kind == KIND_CONCURRENCY and e.metric == "per_stream_tok_s":
                joules = by_key.get(f"{KIND_ENERGY}/{KIND_CONCURRENCY}.{e.point}/j_per_output_token")
                if joules is not None:
                    points.append((e.mean, joules.mean, f"concurrency {e.point}"))
        if points:
            out.append(Series(name=group_label(members[0]), points=tuple(points), simulated=members[0].simulated))
    return out


def ttft_series(entries: Sequence[Entry]) -> list[Series]:
    """Per group: (prompt tokens, TTFT ms) of the prefill and short-prompt measurements (cold cache)."""
    out = []
    for members in groups(entries).values():
        points = [
            (float(n), e.mean, f"{e.kind} {n} tokens")
            for e in members
            if e.kind in (KIND_PREFILL, KIND_SHORT_TTFT) and e.metric == "ttft_ms" and (n := _int(e.point))
        ]
        if points:
            out.append(Series(name=group_label(members[0]), points=tuple(points), simulated=members[0].simulated))
    return out


def depth_series(entries: Sequence[Entry], metric: str) -> list[Series]:
    """Per group: (context tokens, `metric`) of its `[plan.context_depth]` figures (decode_tok_s or ttft_ms)."""
    out = []
    for members in groups(entries).values():
        points = [
            (float(n), e.mean, f"depth {n} tokens")
            for e in members
            if e.kind == KIND_DEPTH and e.metric == metric and (n := _int(e.point)) is not None
        ]
        if points:
            out.append(
                Series(name=group_label(members[0]), points=tuple(sorted(points)), simulated=members[0].simulated)
            )
    return out


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}" if abs(value) >= 10 else f"{value:.3g}"


def _attr(value: float | int | None) -> str:
    return "" if value is None else repr(value)


def _sim_badge(simulated: bool) -> str:
    return ' <span class="badge sim">simulated</span>' if simulated else ""


def row_label(row: LeaderboardRow) -> str:
    version = (row.engine_version or "").split("+")[0]
    return f"{row.recipe_id} · {row.hardware_class.removeprefix('sim:')} · {row.engine_name} {version}".strip()


def _board_table(rows: Sequence[LeaderboardRow], caption: str, table_id: str) -> str:
    if not rows:
        return f'<p class="none" id="{table_id}-none">No {escape(caption.lower())} results.</p>'
    head = (
        "<tr><th>#</th><th>model</th><th>hardware</th><th>engine</th><th>workload</th><th>decode tok/s</th>"
        "<th>n</th><th>spread</th><th>prefill tok/s</th><th>short TTFT ms</th><th>GiB/card</th><th>accept</th>"
        '<th title="GPU-only: the cards\' energy per output token at this decode">J/tok (GPU)</th>'
        "<th title=\"GPU-only: all cards' average power at this decode (the highest card's peak)\">W (GPU)</th>"
        "<th>cost / M out</th><th>runs</th></tr>"
    )
    body = []
    for r in rows:
        d = r.decode_tok_s
        version = (r.engine_version or "").split("+")[0]
        incomplete = (
            f' <span class="badge warn" title="requested {r.requested}, got {d.n}">'
            f"incomplete {d.n}/{r.requested}</span>"
            if r.incomplete
            else ""
        )
        shown_jobs = r.job_ids[-JOBS_PER_ROW:]
        more = f" (+{len(r.job_ids) - len(shown_jobs)} more)" if len(r.job_ids) > len(shown_jobs) else ""
        classes = "board-row" + (" simulated" if r.simulated else "") + (" endpoint" if r.origin == "endpoint" else "")
        body.append(
            f'<tr class="{classes}" '
            f'data-recipe-id="{escape(r.recipe_id)}" '
            f'data-recipe-sha256="{r.recipe_sha256}" data-hardware-class="{escape(r.hardware_class)}" '
            f'data-engine-name="{escape(r.engine_name)}" data-engine-version="{escape(r.engine_version or "")}" '
            f'data-workload="{escape(r.workload)}" data-simulated="{str(r.simulated).lower()}" '
            f'data-origin="{escape(r.origin)}" '
            f'data-decode-mean="{_attr(d.mean)}" data-decode-n="{d.n}" data-decode-min="{_attr(d.min)}" '
            f'data-decode-max="{_attr(d.max)}" data-decode-spread="{_attr(d.spread)}" '
            f'data-prefill-tok-s="{_attr(r.prefill_tok_s)}" '
            f'data-prefill-prompt-tokens="{_attr(r.prefill_prompt_tokens)}" '
            f'data-short-ttft-ms="{_attr(r.short_ttft_ms)}" data-peak-memory-gib="{_attr(r.peak_memory_gib)}" '
            f'data-spec-acceptance-rate="{_attr(r.spec_acceptance_rate)}" data-runs="{r.runs}" '
            f'data-j-per-output-token="{_attr(r.j_per_output_token)}" data-avg-power-w="{_attr(r.avg_power_w)}" '
            f'data-peak-power-w="{_attr(r.peak_power_w)}" '
            f'data-cost-per-m-output-tokens="{_attr(r.cost_per_m_output_tokens)}" '
            f'data-job-ids="{escape(" ".join(shown_jobs))}">'
            f'<td class="rank">{r.rank or ""}</td>'
            f"<td>{escape(r.model_id)}</td>"
            f"<td>{escape(r.hardware_class)}{_sim_badge(r.simulated)}{_endpoint_badge(r.origin)}</td>"
            f"<td>{escape(r.engine_name)} {escape(version)}</td>"
            f"<td>{escape(r.workload)}</td>"
            f'<td class="num decode-mean">{_num(d.mean)}{incomplete}</td>'
            f'<td class="num">{d.n}</td>'
            f'<td class="num">{d.spread:.1%}</td>'
            f'<td class="num">{_num(r.prefill_tok_s)}'
            f"{f' @{r.prefill_prompt_tokens:,}' if r.prefill_prompt_tokens else ''}</td>"
            f'<td class="num">{_num(r.short_ttft_ms)}</td>'
            f'<td class="num">{_num(r.peak_memory_gib)}</td>'
            f'<td class="num">{f"{r.spec_acceptance_rate:.1%}" if r.spec_acceptance_rate is not None else "–"}</td>'
            f'<td class="num">{_num(r.j_per_output_token)}</td>'
            f'<td class="num">{_num(r.avg_power_w, 0)}'
            f"{f' ({r.peak_power_w:,.0f})' if r.peak_power_w is not None else ''}</td>"
            f'<td class="num">{_num(r.cost_per_m_output_tokens)}{_currency(r)}</td>'
            f'<td class="mono">{r.runs}: {escape(" ".join(shown_jobs))}{more}</td></tr>'
        )
    return (
        f'<table class="board" id="{table_id}"><caption>{escape(caption)}</caption><thead>{head}</thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _currency(row: LeaderboardRow) -> str:
    if row.cost_per_m_output_tokens is None or not row.cost_unit:
        return ""
    return " " + escape(row.cost_unit.removesuffix("/Mtok"))


def _endpoint_badge(origin: str) -> str:
    return ' <span class="badge endpoint">endpoint</span>' if origin == "endpoint" else ""


def _entries_table(entries: Sequence[Entry]) -> str:
    head = (
        "<tr><th>sweep</th><th>measurement</th><th>unit</th><th>n / requested</th><th>mean</th><th>median</th>"
        "<th>min</th><th>max</th><th>stdev</th><th>spread</th><th>rank</th></tr>"
    )
    body = [
        f'<tr class="entry{" simulated" if e.simulated else ""}" data-key="{escape(e.key)}" '
        f'data-group="{escape(group_label(e))}" data-mean="{_attr(e.mean)}" data-n="{e.n}" '
        f'data-requested="{e.requested}" data-incomplete="{str(e.incomplete).lower()}">'
        f'<td>{escape(group_label(e))}</td><td class="mono">{escape(e.key)}</td><td>{escape(e.unit)}</td>'
        f'<td class="num">{e.n} / {e.requested}{" ⚠" if e.incomplete else ""}</td>'
        f'<td class="num">{_num(e.mean, 2)}</td><td class="num">{_num(e.median, 2)}</td>'
        f'<td class="num">{_num(e.min, 2)}</td><td class="num">{_num(e.max, 2)}</td>'
        f'<td class="num">{_num(e.stdev, 2)}</td><td class="num">{e.spread:.1%}</td>'
        f'<td class="num">{e.rank or ""}{" (sim)" if e.simulated else ""}</td></tr>'
        for e in entries
    ]
    return f'<table class="entries" id="entries"><thead>{head}</thead><tbody>{"".join(body)}</tbody></table>'


def _provenance(entries: Sequence[Entry]) -> str:
    parts = []
    for members in groups(entries).values():
        first = members[0]
        runs = {(p.job_id, p.attempt): p for e in members for p in e.provenance}
        latest = sorted(runs.values(), key=lambda p: (p.measured_at, p.job_id))[-PROVENANCE_RUNS:]
        rows = []
        if len(runs) > len(latest):
            rows.append(
                f'<tr class="provenance-more"><td colspan="8">the latest {len(latest)} of {len(runs)} runs; '
                "<code>farm results JOB</code> or <code>GET /v1/jobs/JOB</code> shows any run</td></tr>"
            )
        for p in latest:
            gpus = f"{len(p.gpu_names)}× {p.gpu_names[0]}" if p.gpu_names else f"{p.gpu_count or '?'} GPU(s)"
            rows.append(
                f'<tr class="provenance-run" data-job-id="{escape(p.job_id)}">'
                f'<td class="mono">{escape(p.job_id)} #{p.attempt}</td><td>{escape(p.measured_at)}</td>'
                f"<td>{escape(p.worker_id)}</td><td>{escape(p.host or '?')}<br><small>{escape(p.cpu or '')} · "
                f"{escape(p.os or '')}</small></td><td>{escape(gpus)}<br>"
                f"<small>driver {escape(p.driver_version or '?')}"
                f" · CUDA {escape(p.cuda_version or '?')}</small></td>"
                f"<td>{escape(p.engine)} {escape(p.engine_version or '?')}<br>"
                f'<small class="mono">{escape(p.image_digest or "no image digest")}</small></td>'
                f'<td>farm {escape(p.farm_version or "?")}<br><small class="mono">{escape((p.farm_commit or "?")[:12])}'
                f"</small></td><td><small>{escape(p.cache_state or '')}</small></td></tr>"
            )
        parts.append(
            f'<section class="provenance{" simulated" if first.simulated else ""}">'
            f"<h3>{escape(group_label(first))}{_sim_badge(first.simulated)}</h3>"
            f'<p>recipe <span class="mono">{escape(first.recipe.recipe_id)}</span> '
            f'(sha256 <span class="mono">{first.recipe.recipe_sha256[:16]}…</span>)</p>'
            f'<pre class="command">{escape(shlex.join(first.recipe.argv))}</pre>'
            "<table><thead><tr><th>run</th><th>measured</th><th>worker</th><th>host</th><th>GPUs</th>"
            "<th>engine</th><th>farm</th><th>cache</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></section>"
        )
    return "".join(parts) or "<p>No runs.</p>"


STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px auto;max-width:1280px;color:#222;
padding:0 16px}
h1{margin-bottom:4px}h2{margin-top:36px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;font-size:13px;margin:8px 0;width:100%}
th,td{border-bottom:1px solid #eee;padding:4px 6px;text-align:left;vertical-align:top}
th{background:#f6f6f6}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
caption{text-align:left;font-weight:600;padding:6px 0}
tr.simulated td{background:#fbf7ee}.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12px}
.badge{display:inline-block;border-radius:3px;padding:0 5px;font-size:11px;font-weight:600}
.badge.sim{background:#f0ad4e;color:#fff}.badge.endpoint{background:#5b7db1;color:#fff}.badge.warn{background:#d9534f;color:#fff}
.note{background:#fbf7ee;border-left:4px solid #f0ad4e;padding:6px 10px}
svg.chart{background:#fff;border:1px solid #eee;max-width:100%;height:auto}
svg .grid{stroke:#eee}svg .tick,svg .legend,svg .axis-label,svg .empty{font-size:11px;fill:#444}
svg .series-line{stroke-width:2}svg .whisker{stroke:#333;stroke-width:1.5}
pre.command{white-space:pre-wrap;word-break:break-all;background:#f6f6f6;padding:6px;font-size:12px}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(620px,1fr));gap:16px}
figure{margin:0}figcaption{font-size:13px;color:#555;margin:4px 0}
"""


@dataclass(frozen=True)
class ReportData:
    """What the page shows: the whole leaderboard, and the entries of the top groups only (bounded)."""

    board: tuple[LeaderboardRow, ...]
    entries: tuple[Entry, ...]
    run_count: int
    filters: ResultFilter
    groups_total: int
    groups_shown: int


def render_report(data: ReportData, *, now: datetime | None = None, store_label: str = "") -> str:
    """The whole page."""
    entries = list(data.entries)
    real = [r for r in data.board if r.origin == "launched"]
    endpoints = [r for r in data.board if r.origin == "endpoint"]
    simulated = [r for r in data.board if r.simulated]
    generated = (now or datetime.now(UTC)).isoformat(timespec="seconds")
    filters = {k: v for k, v in data.filters.as_json().items() if v not in (None, [], False)}
    charts = [
        (
            "decode",
            "Decode tok/s by workload (single stream; bar = mean of every repeat, whisker = min–max)",
            bar_chart("Decode tok/s by workload", decode_bars(entries), "decode tok/s", "chart-decode"),
        ),
        (
            "pareto",
            "Throughput per GPU against tok/s per user, one point per concurrency level (up and right is better)",
            line_chart(
                "Throughput per GPU vs tok/s per user",
                pareto_series(entries),
                "tok/s per user (per stream)",
                "aggregate tok/s per GPU",
                "chart-pareto",
            ),
        ),
        (
            "energy",
            "GPU-only energy per output token against tok/s per user, one point per concurrency level "
            "(down and right is better; the cards' board power only, not the host's)",
            line_chart(
                "GPU joules per output token vs tok/s per user",
                energy_series(entries),
                "tok/s per user (per stream)",
                "J per output token (GPU-only)",
                "chart-energy",
            ),
        ),
        (
            "ttft",
            "Time to first token against prompt length (cold cache; log scale)",
            line_chart(
                "TTFT vs prompt tokens", ttft_series(entries), "prompt tokens", "TTFT ms", "chart-ttft", log_x=True
            ),
        ),
    ]
    if any(e.kind == KIND_DEPTH for e in entries):
        charts += [
            (
                "depth-decode",
                "Decode tok/s against context depth (two-point decode on a warm prefix of that many tokens)",
                line_chart(
                    "Decode tok/s vs context depth",
                    depth_series(entries, "decode_tok_s"),
                    "context tokens",
                    "decode tok/s",
                    "chart-depth-decode",
                ),
            ),
            (
                "depth-ttft",
                "Time to first token against context depth (cold cache)",
                line_chart(
                    "TTFT vs context depth",
                    depth_series(entries, "ttft_ms"),
                    "context tokens",
                    "TTFT ms",
                    "chart-depth-ttft",
                ),
            ),
        ]
    chart_html = "".join(
        f'<figure id="figure-{name}"><figcaption>{escape(caption)}</figcaption>{svg}</figure>'
        for name, caption, svg in charts
    )
    incomplete = sum(1 for e in entries if e.incomplete)
    source = f" from {escape(store_label)}" if store_label else ""
    bounded = (
        f'<p class="note" id="bounded">Charts, measurements and provenance show the top {data.groups_shown} of '
        f"{data.groups_total} sweep groups (by decode rank); <code>farm aggregate --json</code>, <code>farm export"
        "</code> and the API have every one.</p>"
        if data.groups_shown < data.groups_total
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>bench farm report</title><style>{STYLE}</style></head>
<body>
<h1>bench farm report</h1>
<p>Generated {escape(generated)} by farm {escape(farm.__version__)}{source}
· <span id="run-count" data-value="{data.run_count}">{data.run_count}</span> succeeded run(s),
<span id="entry-count" data-value="{len(entries)}">{len(entries)}</span> measurement(s) shown
{f"· {incomplete} incomplete" if incomplete else ""}
{f'· filters <span class="mono">{escape(str(filters))}</span>' if filters else ""}</p>
<p class="note">Failed and cancelled runs never count. Rows marked <span class="badge sim">simulated</span> were
measured on the simulator: they are shown apart and never ranked with real hardware. Rows marked
<span class="badge endpoint">endpoint</span> were measured on a server the farm did not launch. Spread =
(max − min) / mean of every repeat of every run.</p>
{bounded}
<h2 id="leaderboard">Leaderboard</h2>
{_board_table(real, "Real hardware", "board-real")}
{_board_table(endpoints, "Endpoints (servers the farm did not launch)", "board-endpoint") if endpoints else ""}
{_board_table(simulated, "Simulated (ranked among simulated only)", "board-simulated")}
<h2 id="charts">Charts</h2>
<div class="charts">{chart_html}</div>
<h2 id="measurements">Every measurement</h2>
<details><summary>{len(entries)} measurements with n, mean, median, min, max, stdev, spread and rank</summary>
{_entries_table(entries)}</details>
<h2 id="provenance">Provenance</h2>
{_provenance(entries)}
</body></html>
"""
