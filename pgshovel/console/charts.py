"""Line charts as inline SVG, drawn on the server: the console's lag and throughput over an hour.

``line_chart`` draws one line per series over a fixed time window ending
now: a y axis from 0 with round tick values and the unit, an x axis labelled
in minutes before now, a legend. Points are (epoch seconds, value); points
outside the window are left out; a gap longer than ``gap`` seconds between two
points breaks the line (a process that was not writing its status). The
output is a complete ``<svg>`` element with every text escaped, so a page
embeds it as is, with no script and nothing fetched. Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WINDOW_SECONDS = 3600.0
#: colours of the lines, in order (distinguishable, and readable on white)
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf")
_LEFT, _RIGHT, _TOP, _BOTTOM = 58, 12, 30, 44


@dataclass(frozen=True)
class Series:
    """One line: its legend label and its points (epoch seconds, value)."""

    label: str
    points: Sequence[tuple[float, float]]


def nice_step(maximum: float, ticks: int = 4) -> float:
    """A round step (1, 2, 2.5 or 5 times a power of ten) giving about ``ticks`` ticks to
    ``maximum``."""
    if maximum <= 0:
        return 1.0
    raw = maximum / ticks
    power = 10.0 ** math.floor(math.log10(raw))
    for multiple in (1, 2, 2.5, 5, 10):
        if raw <= multiple * power:
            return multiple * power
    return 10 * power


def format_value(value: float, step: float) -> str:
    """A tick label: as many decimals as the step needs, thousands as k, millions as M."""
    if value >= 1_000_000 and step >= 100_000:
        return f"{value / 1_000_000:g}M"
    if value >= 1000 and step >= 100:
        return f"{value / 1000:g}k"
    decimals = next(
        (places for places in range(7) if abs(round(step, places) - step) < step * 1e-6), 6
    )
    return f"{value:.{decimals}f}"


def _segments(
    points: Sequence[tuple[float, float]], start: float, end: float, gap: float
) -> list[list[tuple[float, float]]]:
    """The points inside the window, in time order, cut where two are ``gap`` apart."""
    inside = sorted((t, v) for t, v in points if start <= t <= end and math.isfinite(v))
    segments: list[list[tuple[float, float]]] = []
    for point in inside:
        if not segments or point[0] - segments[-1][-1][0] > gap:
            segments.append([])
        segments[-1].append(point)
    return segments


def line_chart(
    series: Sequence[Series],
    *,
    title: str,
    unit: str,
    end: float,
    window: float = WINDOW_SECONDS,
    gap: float = 60.0,
    width: int = 640,
    height: int = 240,
) -> str:
    """An ``<svg>`` line chart of ``series`` over ``[end - window, end]``."""
    start = end - window
    plot_width = width - _LEFT - _RIGHT
    plot_height = height - _TOP - _BOTTOM
    drawn = [(item, _segments(item.points, start, end, gap)) for item in series]
    values = [v for _, segments in drawn for segment in segments for _, v in segment]
    step = nice_step(max(values, default=0.0))
    top = step * max(1, math.ceil(max(values, default=0.0) / step))

    def x(t: float) -> float:
        return _LEFT + (t - start) / window * plot_width

    def y(v: float) -> float:
        return _TOP + plot_height - max(0.0, v) / top * plot_height

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="{_LEFT}" y="16" font-size="13" font-weight="bold" fill="#222">'
        f"{escape(title)}</text>",
    ]
    # Horizontal grid lines and y tick labels, from 0 to the top.
    ticks = round(top / step)
    for number in range(ticks + 1):
        value = number * step
        level = y(value)
        parts.append(
            f'<line x1="{_LEFT}" y1="{level:.1f}" x2="{width - _RIGHT}" y2="{level:.1f}" '
            f'stroke="{"#888" if number == 0 else "#e3e3e3"}" stroke-width="1"/>'
        )
        parts.append(
            f'<text x="{_LEFT - 6}" y="{level + 4:.1f}" text-anchor="end" fill="#444">'
            f"{escape(format_value(value, step))}</text>"
        )
    parts.append(
        f'<text x="14" y="{_TOP + plot_height / 2:.1f}" text-anchor="middle" fill="#444" '
        f'transform="rotate(-90 14 {_TOP + plot_height / 2:.1f})">{escape(unit)}</text>'
    )
    # Vertical lines every quarter of the window, labelled in minutes before the end.
    parts.append(
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{_TOP + plot_height}" '
        'stroke="#888" stroke-width="1"/>'
    )
    for quarter in range(5):
        offset = window * (4 - quarter) / 4
        position = x(end - offset)
        label = "now" if offset == 0 else f"-{offset / 60:g} min"
        parts.append(
            f'<line x1="{position:.1f}" y1="{_TOP + plot_height}" x2="{position:.1f}" '
            f'y2="{_TOP + plot_height + 4}" stroke="#888" stroke-width="1"/>'
        )
        anchor = "start" if quarter == 0 else "end" if quarter == 4 else "middle"
        parts.append(
            f'<text x="{position:.1f}" y="{_TOP + plot_height + 16}" text-anchor="{anchor}" '
            f'fill="#444">{escape(label)}</text>'
        )
    if not values:
        parts.append(
            f'<text x="{_LEFT + plot_width / 2:.1f}" y="{_TOP + plot_height / 2:.1f}" '
            'text-anchor="middle" fill="#888">no samples in this window yet</text>'
        )
    legend_x = float(_LEFT)
    for index, (item, segments) in enumerate(drawn):
        colour = PALETTE[index % len(PALETTE)]
        for segment in segments:
            if len(segment) == 1:
                t, v = segment[0]
                parts.append(
                    f'<circle class="point" cx="{x(t):.1f}" cy="{y(v):.1f}" r="2.5" '
                    f'fill="{colour}"/>'
                )
                continue
            coordinates = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in segment)
            parts.append(
                f'<polyline class="line" points="{coordinates}" fill="none" '
                f'stroke="{colour}" stroke-width="1.8" stroke-linejoin="round"/>'
            )
        legend_y = height - 10
        parts.append(
            f'<rect x="{legend_x:.1f}" y="{legend_y - 8}" width="10" height="10" fill="{colour}"/>'
        )
        parts.append(
            f'<text x="{legend_x + 14:.1f}" y="{legend_y + 1}" fill="#222">'
            f"{escape(item.label)}</text>"
        )
        legend_x += 24 + 6.5 * len(item.label)
    parts.append("</svg>")
    return "\n".join(parts)
