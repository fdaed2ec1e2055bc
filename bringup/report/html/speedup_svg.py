"""The baseline speed-up chart as inline SVG: per measurement, baseline time / this time on a log axis around 1x,
with the two runs' noise band (from their spreads) behind each bar."""

from __future__ import annotations

import math
from html import escape
from typing import Any

WIDTH, ROW, LEFT, RIGHT, TOP, BOTTOM = 760, 18, 260, 30, 10, 30
SHOWN_AT_MOST = 30
SPEED_CARD_GROUP = "serve"


def chosen_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The speed card's measurements, then those that moved furthest beyond noise."""
    timed = [r for r in rows if r.get("ratio")]
    card = [r for r in timed if r["group"] == SPEED_CARD_GROUP]
    moved = sorted((r for r in timed if r["group"] != SPEED_CARD_GROUP and r.get("significant")),
                   key=lambda r: -abs(math.log(r["ratio"])))
    return (card + moved)[:SHOWN_AT_MOST]


def speedup_svg(rows: list[dict[str, Any]]) -> str:
    """Empty when no measurement both runs timed."""
    chosen = chosen_rows(rows)
    if not chosen:
        return ""
    speedups = [1.0 / r["ratio"] for r in chosen]
    reach = max(2.0, *(max(s, 1.0 / s) for s in speedups)) * 1.1
    span = WIDTH - LEFT - RIGHT
    height = TOP + ROW * len(chosen) + BOTTOM

    def x(value: float) -> float:
        return LEFT + (math.log(value) / math.log(reach) + 1.0) / 2.0 * span

    parts = [f'<svg id="speedup-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
             f'width="{WIDTH}" height="{height}" role="img" aria-label="speed-up against the baseline">']
    for i, (row, speedup) in enumerate(zip(chosen, speedups)):
        y = TOP + i * ROW
        noise = 1.0 + row.get("noise_pct", 0.0) / 100.0
        parts.append(f'<rect class="noise" x="{x(1 / noise):.1f}" y="{y + 2}" width="{x(noise) - x(1 / noise):.1f}" '
                     f'height="{ROW - 4}" fill="#eaeef2"/>')
        colour = "#2da44e" if speedup > noise else "#cf222e" if speedup < 1 / noise else "#8c959f"
        left, right = sorted((x(1.0), x(speedup)))
        label = f"{row['group']} {row['key']}"
        parts.append(f'<rect class="bar" x="{left:.1f}" y="{y + 4}" width="{max(right - left, 1):.1f}" '
                     f'height="{ROW - 8}" fill="{colour}"><title>{escape(label)}: {speedup:.3f}x '
                     f'(noise ±{noise - 1:.1%})</title></rect>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + ROW - 5}" text-anchor="end">{escape(label[:40])}</text>')
    axis_y = TOP + ROW * len(chosen)
    parts.append(f'<line class="frame" x1="{x(1.0):.1f}" x2="{x(1.0):.1f}" y1="{TOP}" y2="{axis_y}" stroke="#57606a"/>')
    for tick in (1 / reach, 0.5, 1.0, 2.0, reach):
        parts.append(f'<text x="{x(tick):.1f}" y="{axis_y + 16}" text-anchor="middle">{tick:.2g}x</text>')
    parts.append(f'<text x="{LEFT}" y="{axis_y + 28}">speed-up = baseline time / this time; '
                 "grey band: the two runs' noise</text></svg>")
    return "".join(parts)
