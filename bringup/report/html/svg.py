"""The roofline chart as inline SVG: log-log axes, measured points, measured (solid) and datasheet (dashed) ceilings.

A point measured above its roof (a matrix-vector product whose weights stay in cache beats the bandwidth measured
from memory) is drawn at the roof, hollow, with an arrow and a tooltip naming the ceiling it exceeded: the
chart never shows a point above a drawn ceiling, as the tables never show more than 100 % of one."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from bringup.report.sections.roofline import Ceilings, Point, Roofline
from bringup.report.text import number

WIDTH, HEIGHT = 760, 440
LEFT, RIGHT, TOP, BOTTOM = 70, 190, 20, 56
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
MARKERS = {"matmul": "circle", "bandwidth": "square", "attention": "diamond"}


@dataclass
class Axes:
    x_lo: int  # decades (log10) of the plotted range
    x_hi: int
    y_lo: int
    y_hi: int

    def x(self, value: float) -> float:
        return LEFT + (math.log10(value) - self.x_lo) / (self.x_hi - self.x_lo) * (WIDTH - LEFT - RIGHT)

    def y(self, value: float) -> float:
        return HEIGHT - BOTTOM - (math.log10(value) - self.y_lo) / (self.y_hi - self.y_lo) * (HEIGHT - TOP - BOTTOM)


def decades(values: list[float]) -> tuple[int, int]:
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    return lo, max(hi, lo + 1)


def datasheet_peak(compute: dict[str, float], dtype: str) -> float | None:
    if dtype.startswith("float8"):
        return compute.get(dtype) or compute.get("float8")
    return compute.get(dtype)


def drawn_compute(ceilings: Ceilings, dtypes: list[str]) -> dict[str, float]:
    """Measured: every dtype it has. Datasheet: only the dtypes measured here, so the chart compares like with like."""
    if ceilings.source == "measured":
        return {d: v for d, v in ceilings.compute.items() if v > 0}
    found = {d: datasheet_peak(ceilings.compute, d) for d in dtypes}
    return {d: v for d, v in found.items() if v}


@dataclass(frozen=True)
class Roof:
    tflops: float
    ceiling: str  # named as the bench tables name it: "triad 34.2 GB/s, measured in this run"


def roof_under(ceilings: Ceilings, dtype: str, intensity: float, dtypes: list[str]) -> Roof | None:
    """The roof these ceilings put over a point of `dtype` at `intensity`: the bandwidth slope or the compute peak."""
    peak = drawn_compute(ceilings, dtypes).get(dtype)
    gbps = ceilings.bandwidth_gbps
    slope = gbps * intensity / 1000.0 if gbps else None
    if slope is not None and (peak is None or slope < peak):
        return Roof(slope, f"{ceilings.bandwidth_kernel or 'bandwidth'} {number(gbps)} GB/s, {ceilings.where()}")
    return Roof(peak, f"{dtype} {number(peak)} TFLOP/s, {ceilings.where()}") if peak is not None else None


def above_roof(chart: Roofline, point: Point, dtypes: list[str]) -> Roof | None:
    """The lowest roof over `point` when the point's rate is above it, else None."""
    roofs = [r for c in chart.ceilings if (r := roof_under(c, point.dtype, point.intensity, dtypes)) is not None]
    lowest = min(roofs, key=lambda r: r.tflops, default=None)
    return lowest if lowest is not None and point.tflops > lowest.tflops * (1.0 + 1e-9) else None


def chart_dtypes(chart: Roofline) -> list[str]:
    """The dtypes drawn, in colour order: the points', then the measured ceilings' others."""
    return list(dict.fromkeys([p.dtype for p in chart.points]
                              + [d for c in chart.ceilings if c.source == "measured" for d in c.compute]))


def points_above_roof(chart: Roofline) -> list[tuple[Point, Roof]]:
    """The points drawn at their roof instead of where their rate is, with the ceiling each exceeded."""
    dtypes = chart_dtypes(chart)
    return [(p, roof) for p in chart.points if (roof := above_roof(chart, p, dtypes)) is not None]


def chart_axes(chart: Roofline, dtypes: list[str]) -> Axes:
    xs = [p.intensity for p in chart.points]
    ys = [p.tflops for p in chart.points]
    for ceilings in chart.ceilings:
        peaks = list(drawn_compute(ceilings, dtypes).values())
        ys += peaks
        if ceilings.bandwidth_gbps:
            xs += [peak * 1000.0 / ceilings.bandwidth_gbps for peak in peaks]
    return Axes(*decades(xs), *decades(ys))


def roof_points(axes: Axes, peak: float | None, gbps: float | None) -> list[tuple[float, float]]:
    """The roof in data space, clipped to the axes: a diagonal (bandwidth), a flat top (compute), or both."""
    x_min, x_max, y_min, y_max = 10.0**axes.x_lo, 10.0**axes.x_hi, 10.0**axes.y_lo, 10.0**axes.y_hi
    if gbps is None:
        return [(x_min, peak), (x_max, peak)] if peak else []
    start = max(x_min, y_min * 1000.0 / gbps)
    if peak is None:
        end = min(x_max, y_max * 1000.0 / gbps)
        return [(start, gbps * start / 1000.0), (end, gbps * end / 1000.0)] if end > start else []
    ridge = peak * 1000.0 / gbps
    return [(start, gbps * start / 1000.0), (ridge, peak), (x_max, peak)]


def polyline(axes: Axes, points: list[tuple[float, float]], colour: str, dashed: bool, title: str,
             dtype: str = "") -> str:
    """One roof; `data-dtype` names the dtype whose roof it is ("" for a bandwidth-only roof, over every dtype)."""
    if len(points) < 2:
        return ""
    path = " ".join(f"{axes.x(x):.1f},{axes.y(y):.1f}" for x, y in points)
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    kind = "datasheet" if dashed else "measured"
    return (f'<polyline class="ceiling {kind}" points="{path}" data-dtype="{escape(dtype)}" fill="none" '
            f'stroke="{colour}" stroke-width="1.5"{dash}><title>{escape(title)}</title></polyline>')


def ceiling_lines(axes: Axes, chart: Roofline, colours: dict[str, str], dtypes: list[str]) -> list[str]:
    lines = []
    for ceilings in chart.ceilings:
        dashed = ceilings.source == "datasheet"
        gbps = ceilings.bandwidth_gbps
        compute = drawn_compute(ceilings, dtypes)
        for dtype, peak in compute.items():
            title = f"{ceilings.source} {dtype}: {number(peak)} TFLOP/s" + (f", {number(gbps)} GB/s" if gbps else "")
            lines.append(polyline(axes, roof_points(axes, peak, gbps), colours.get(dtype, "#555"), dashed, title,
                                  dtype))
        if not compute and gbps:
            lines.append(polyline(axes, roof_points(axes, None, gbps), "#555", dashed,
                                  f"{ceilings.source} bandwidth: {number(gbps)} GB/s"))
    return lines


def marker(kind: str, x: float, y: float, colour: str, attributes: str, title: str, hollow: bool = False) -> str:
    tip = f"<title>{escape(title)}</title>"
    if hollow:  # drawn at its roof: the outline in the dtype's colour, an arrow above saying "higher than this"
        attributes += f' stroke="{colour}" stroke-width="1.5"'
        arrow = f'<path class="above-roof-arrow" d="M{x:.1f},{y - 12:.1f} l-3.5,5 h7 z" fill="{colour}"/>'
        return arrow + marker(kind, x, y, "none", attributes, title)
    if kind == "square":
        return f'<rect {attributes} x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" fill="{colour}">{tip}</rect>'
    if kind == "diamond":
        shape = f"{x:.1f},{y - 5:.1f} {x + 5:.1f},{y:.1f} {x:.1f},{y + 5:.1f} {x - 5:.1f},{y:.1f}"
        return f'<polygon {attributes} points="{shape}" fill="{colour}">{tip}</polygon>'
    return f'<circle {attributes} cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}">{tip}</circle>'


def point_marks(axes: Axes, chart: Roofline, colours: dict[str, str]) -> list[str]:
    """One mark per point at (intensity, rate), or at its roof when the rate is above it (`data-above-roof`)."""
    above = {id(p): roof for p, roof in points_above_roof(chart)}
    marks = []
    for p in chart.points:
        roof = above.get(id(p))
        x, y = axes.x(p.intensity), axes.y(roof.tflops if roof else p.tflops)
        attributes = (f'class="point" data-group="{escape(p.group)}" data-dtype="{escape(p.dtype)}" '
                      f'data-at="{x:.1f},{y:.1f}"')
        title = f"{p.group} {p.key}: {number(p.tflops)} TFLOP/s at {number(p.intensity)} FLOP/byte"
        if roof is None:
            attributes += ' fill-opacity="0.8" stroke="#fff" stroke-width="0.5"'
        else:
            attributes += f' data-above-roof="{escape(roof.ceiling)}"'
            title += f", above its roof ({roof.ceiling}): drawn at the roof"
        marks.append(marker(MARKERS.get(p.group, "circle"), x, y, colours.get(p.dtype, "#555"), attributes, title,
                            hollow=roof is not None))
    return marks


def grid(axes: Axes) -> list[str]:
    parts = []
    bottom, right = HEIGHT - BOTTOM, WIDTH - RIGHT
    for k in range(axes.x_lo, axes.x_hi + 1):
        x = axes.x(10.0**k)
        parts.append(f'<line class="grid" x1="{x:.1f}" y1="{TOP}" x2="{x:.1f}" y2="{bottom}"/>')
        parts.append(f'<text class="tick" x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">{10.0**k:g}</text>')
    for k in range(axes.y_lo, axes.y_hi + 1):
        y = axes.y(10.0**k)
        parts.append(f'<line class="grid" x1="{LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}"/>')
        parts.append(f'<text class="tick" x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{10.0**k:g}</text>')
    parts.append(f'<rect class="frame" x="{LEFT}" y="{TOP}" width="{right - LEFT}" height="{bottom - TOP}" '
                 'fill="none"/>')
    parts.append(f'<text class="axis-label" x="{(LEFT + right) / 2:.0f}" y="{HEIGHT - 12}" text-anchor="middle">'
                 "arithmetic intensity (FLOP/byte, log scale)</text>")
    parts.append(f'<text class="axis-label" x="16" y="{(TOP + bottom) / 2:.0f}" text-anchor="middle" '
                 f'transform="rotate(-90 16 {(TOP + bottom) / 2:.0f})">TFLOP/s (log scale)</text>')
    return parts


def legend(colours: dict[str, str], groups: list[str], has_datasheet: bool, any_above: bool) -> list[str]:
    x, y = WIDTH - RIGHT + 14, TOP + 8
    parts = []
    for dtype, colour in colours.items():
        parts.append(f'<rect x="{x}" y="{y - 8}" width="10" height="10" fill="{colour}"/>'
                     f'<text class="legend" x="{x + 16}" y="{y + 1}">{escape(dtype)}</text>')
        y += 16
    y += 6
    for group in groups:
        parts.append(marker(MARKERS.get(group, "circle"), x + 5, y - 3, "#555", 'class="legend-mark"', group))
        parts.append(f'<text class="legend" x="{x + 16}" y="{y + 1}">{escape(group)}</text>')
        y += 16
    y += 6
    parts.append(f'<line x1="{x}" y1="{y - 3}" x2="{x + 12}" y2="{y - 3}" stroke="#555"/>'
                 f'<text class="legend" x="{x + 16}" y="{y + 1}">measured ceiling</text>')
    if has_datasheet:
        y += 16
        parts.append(f'<line x1="{x}" y1="{y - 3}" x2="{x + 12}" y2="{y - 3}" stroke="#555" stroke-dasharray="4 3"/>'
                     f'<text class="legend" x="{x + 16}" y="{y + 1}">datasheet ceiling</text>')
    if any_above:
        y += 22
        parts.append(marker("circle", x + 5, y - 3, "#555", 'class="legend-mark"', "above its roof", hollow=True))
        parts.append(f'<text class="legend" x="{x + 16}" y="{y + 1}">above its roof,</text>'
                     f'<text class="legend" x="{x + 16}" y="{y + 15}">drawn at it</text>')
    return parts


def roofline_svg(chart: Roofline) -> str:
    """The chart; '' when there is nothing to draw (no point has both a rate and an intensity)."""
    if not chart.drawable:
        return ""
    dtypes = chart_dtypes(chart)
    colours = {dtype: PALETTE[i % len(PALETTE)] for i, dtype in enumerate(dtypes)}
    axes = chart_axes(chart, dtypes)
    groups = list(dict.fromkeys(p.group for p in chart.points))
    body = (grid(axes) + ceiling_lines(axes, chart, colours, dtypes) + point_marks(axes, chart, colours)
            + legend(colours, groups, any(c.source == "datasheet" for c in chart.ceilings),
                     bool(points_above_roof(chart))))
    return (f'<svg id="roofline-chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}" '
            f'width="{WIDTH}" height="{HEIGHT}" aria-labelledby="roofline-title">'
            '<title id="roofline-title">Roofline: measured rates against measured and datasheet ceilings</title>'
            + "".join(body) + "</svg>")
