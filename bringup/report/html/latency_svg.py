"""Latency distributions as inline SVG: every stored sample as a tick on a linear time axis, p50/p90/p99 marked."""

from __future__ import annotations

from html import escape

from bringup.report.sections.speed_card import Distribution
from bringup.report.text import seconds

WIDTH, ROW, LEFT, RIGHT, TOP, BOTTOM = 760, 54, 150, 30, 10, 34
MARKS = (("p50", "#1f77b4"), ("p90", "#ff7f0e"), ("p99", "#d62728"))


def latency_svg(distributions: list[Distribution]) -> str:
    height = TOP + ROW * len(distributions) + BOTTOM
    top = max(max(d.samples_s) for d in distributions) or 1.0
    span = WIDTH - LEFT - RIGHT

    def x(value: float) -> float:
        return LEFT + value / top * span

    parts = [f'<svg id="latency-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" '
             f'width="{WIDTH}" height="{height}" role="img" aria-label="latency distributions">']
    for i, d in enumerate(distributions):
        y = TOP + i * ROW
        parts.append(f'<text x="{LEFT - 8}" y="{y + ROW / 2}" text-anchor="end">{escape(d.label)}</text>')
        parts += [f'<line class="sample" x1="{x(s):.1f}" x2="{x(s):.1f}" y1="{y + 12}" y2="{y + ROW - 12}" '
                  f'stroke="#8c959f" stroke-opacity="0.5"><title>{escape(seconds(s))}</title></line>'
                  for s in d.samples_s]
        for name, colour in MARKS:
            value = getattr(d, f"{name}_s")
            parts.append(f'<line class="{name}" x1="{x(value):.1f}" x2="{x(value):.1f}" y1="{y + 6}" '
                         f'y2="{y + ROW - 6}" stroke="{colour}" stroke-width="2"><title>{name} '
                         f'{escape(seconds(value))}</title></line>')
    axis_y = TOP + ROW * len(distributions)
    parts.append(f'<line class="frame" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{axis_y}" y2="{axis_y}"/>')
    for step in range(5):
        value = top * step / 4
        parts.append(f'<text x="{x(value):.1f}" y="{axis_y + 16}" text-anchor="middle">'
                     f'{escape(seconds(value) if value else "0")}</text>')
    legend = " · ".join(f'<tspan fill="{c}">{n}</tspan>' for n, c in MARKS)
    parts.append(f'<text x="{LEFT}" y="{axis_y + 30}">each grey tick a sample; {legend}</text></svg>')
    return "".join(parts)
