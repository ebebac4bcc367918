"""Charts as inline SVG strings (pure): bars with min-max whiskers, and x/y point series with lines.

Every data mark carries its numbers in data attributes (`data-series`, `data-x`, `data-y`, `data-value`), so a
test or a script can read a chart back without parsing pixels. Simulated series are drawn dashed and named
"(simulated)" in the legend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH = 760
HEIGHT = 360
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 70, 20, 20, 50
LEGEND_LINE = 15
"""Pixels per legend line; the legend sits under the x axis label, one series a line, and the chart grows."""
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2")
"""Colour-blind friendlier than random picks; series beyond eight reuse colours (legend still names them)."""


@dataclass(frozen=True)
class Bar:
    """One bar: a category within a group, its mean and its range."""

    group: str
    category: str
    value: float
    low: float
    high: float
    simulated: bool = False


@dataclass(frozen=True)
class Series:
    """Points of one line, each (x, y, label)."""

    name: str
    points: tuple[tuple[float, float, str], ...]
    simulated: bool = False


def _fmt(value: float) -> str:
    if value == 0:
        return "0"
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:.3g}M"
    if abs(value) >= 1000:
        return f"{value / 1000:.3g}k"
    return f"{value:.3g}"


def _nice_max(value: float) -> float:
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if value <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)


def _frame(title: str, body: list[str], x_label: str, y_label: str, chart_id: str, legend_lines: int = 0) -> str:
    height = HEIGHT + LEGEND_LINE * legend_lines + (10 if legend_lines else 0)
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{escape(chart_id)}" role="img" '
            f'viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}">',
            f"<title>{escape(title)}</title>",
            *body,
            f'<text class="axis-label" x="{MARGIN_LEFT + (WIDTH - MARGIN_LEFT - MARGIN_RIGHT) / 2}" '
            f'y="{HEIGHT - 8}" text-anchor="middle">{escape(x_label)}</text>',
            f'<text class="axis-label" x="14" y="{MARGIN_TOP + (HEIGHT - MARGIN_TOP - MARGIN_BOTTOM) / 2}" '
            f'text-anchor="middle" transform="rotate(-90 14 {MARGIN_TOP + (HEIGHT - MARGIN_TOP - MARGIN_BOTTOM) / 2})">'
            f"{escape(y_label)}</text>",
            "</svg>",
        ]
    )


def _y_axis(y_max: float, plot_bottom: float, plot_height: float) -> list[str]:
    out = []
    for i in range(5):
        value = y_max * i / 4
        y = plot_bottom - plot_height * i / 4
        out.append(
            f'<line class="grid" x1="{MARGIN_LEFT}" x2="{WIDTH - MARGIN_RIGHT}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text class="tick" x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(value)}</text>'
        )
    return out


def empty_chart(title: str, message: str, chart_id: str) -> str:
    """A chart frame that says why it has nothing to draw."""
    body = [f'<text class="empty" x="{WIDTH / 2}" y="{HEIGHT / 2}" text-anchor="middle">{escape(message)}</text>']
    return _frame(title, body, "", "", chart_id)


def bar_chart(title: str, bars: Sequence[Bar], y_label: str, chart_id: str) -> str:
    """Grouped bars (one group per category, e.g. a workload; one bar per series), with min-max whiskers."""
    if not bars:
        return empty_chart(title, "no data", chart_id)
    categories = list(dict.fromkeys(bar.category for bar in bars))
    groups = list(dict.fromkeys(bar.group for bar in bars))
    y_max = _nice_max(max(bar.high for bar in bars) * 1.05)
    plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    bottom = MARGIN_TOP + plot_height
    slot = plot_width / len(categories)
    bar_width = max(4.0, slot * 0.8 / len(groups))
    body = _y_axis(y_max, bottom, plot_height)
    for c_index, category in enumerate(categories):
        x0 = MARGIN_LEFT + slot * c_index + slot * 0.1
        body.append(
            f'<text class="tick" x="{MARGIN_LEFT + slot * (c_index + 0.5):.1f}" y="{bottom + 16}" '
            f'text-anchor="middle">{escape(category)}</text>'
        )
        for bar in bars:
            if bar.category != category:
                continue
            g_index = groups.index(bar.group)
            colour = PALETTE[g_index % len(PALETTE)]
            x = x0 + bar_width * g_index
            height = plot_height * bar.value / y_max
            y = bottom - height
            y_low = bottom - plot_height * bar.low / y_max
            y_high = bottom - plot_height * bar.high / y_max
            centre = x + bar_width / 2
            body.append(
                f'<rect class="bar{" simulated" if bar.simulated else ""}" x="{x:.1f}" y="{y:.1f}" '
                f'width="{bar_width - 2:.1f}" height="{max(height, 1.0):.1f}" fill="{colour}" '
                f'data-series="{escape(bar.group)}" data-category="{escape(category)}" data-value="{bar.value!r}">'
                f"<title>{escape(bar.group)} · {escape(category)}: {bar.value:,.1f} "
                f"(min {bar.low:,.1f}, max {bar.high:,.1f})</title></rect>"
                f'<line class="whisker" x1="{centre - 1:.1f}" x2="{centre - 1:.1f}" y1="{y_low:.1f}" '
                f'y2="{y_high:.1f}"/>'
            )
    body.extend(_legend([(g, any(b.simulated for b in bars if b.group == g)) for g in groups]))
    return _frame(title, body, "", y_label, chart_id, legend_lines=len(groups))


def _legend(items: Sequence[tuple[str, bool]]) -> list[str]:
    out = []
    for index, (name, simulated) in enumerate(items):
        y = HEIGHT + 10 + LEGEND_LINE * index
        x = MARGIN_LEFT
        label = name + (" (simulated)" if simulated and "simulated" not in name else "")
        out.append(
            f'<rect class="legend-swatch" x="{x}" y="{y - 9}" width="10" height="10" '
            f'fill="{PALETTE[index % len(PALETTE)]}"/>'
            f'<text class="legend" x="{x + 14}" y="{y}">{escape(label[:120])}</text>'
        )
    return out


def line_chart(
    title: str,
    series: Sequence[Series],
    x_label: str,
    y_label: str,
    chart_id: str,
    *,
    log_x: bool = False,
) -> str:
    """Points joined in x order, one colour per series; simulated series dashed."""
    points = [p for s in series for p in s.points]
    if not points:
        return empty_chart(title, "no data", chart_id)

    def tx(value: float) -> float:
        return math.log10(value) if log_x and value > 0 else value

    xs = [tx(p[0]) for p in points]
    x_min, x_max = min(xs), max(xs)
    if log_x:
        x_min, x_max = math.floor(x_min), math.ceil(x_max)
    else:
        x_min, x_max = 0.0, _nice_max(x_max * 1.05)
    if x_max == x_min:
        x_max = x_min + 1
    y_max = _nice_max(max(p[1] for p in points) * 1.05)
    plot_width = WIDTH - MARGIN_LEFT - MARGIN_RIGHT
    plot_height = HEIGHT - MARGIN_TOP - MARGIN_BOTTOM
    bottom = MARGIN_TOP + plot_height

    def px(value: float) -> float:
        return MARGIN_LEFT + plot_width * (tx(value) - x_min) / (x_max - x_min)

    def py(value: float) -> float:
        return bottom - plot_height * value / y_max

    body = _y_axis(y_max, bottom, plot_height)
    ticks = (
        [10**e for e in range(int(x_min), int(x_max) + 1)]
        if log_x
        else [x_min + (x_max - x_min) * i / 4 for i in range(5)]
    )
    for tick in ticks:
        body.append(f'<text class="tick" x="{px(tick):.1f}" y="{bottom + 16}" text-anchor="middle">{_fmt(tick)}</text>')
    for index, s in enumerate(series):
        colour = PALETTE[index % len(PALETTE)]
        ordered = sorted(s.points)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y, _ in ordered)
        dash = ' stroke-dasharray="6 4"' if s.simulated else ""
        body.append(f'<polyline class="series-line" points="{path}" stroke="{colour}" fill="none"{dash}/>')
        for x, y, label in ordered:
            body.append(
                f'<circle class="point{" simulated" if s.simulated else ""}" cx="{px(x):.1f}" cy="{py(y):.1f}" '
                f'r="5" fill="{colour}" data-series="{escape(s.name)}" data-x="{x!r}" data-y="{y!r}" '
                f'data-label="{escape(label)}"><title>{escape(s.name)} · {escape(label)}: '
                f"x {x:,.1f}, y {y:,.1f}</title></circle>"
            )
    body.extend(_legend([(s.name, s.simulated) for s in series]))
    return _frame(title, body, x_label, y_label, chart_id, legend_lines=len(series))
