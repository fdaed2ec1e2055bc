"""Read the roofline chart back from SVG text (as written, or as Chromium rendered it): each point's drawn centre
and the roof lines of its dtype, to check that no point is drawn above its roof."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

TOLERANCE_PX = 0.15  # both ends are rounded to 0.1 px


@dataclass
class Mark:
    dtype: str
    x: float
    y: float
    above_roof: str | None  # the ceiling it exceeded, when drawn at its roof


def attributes(tag: str) -> dict[str, str]:
    return dict(re.findall(r'([\w:-]+)="([^"]*)"', tag))


def roofline_chart(page: str) -> str:
    start = page.index('<svg id="roofline-chart"')
    return page[start:page.index("</svg>", start)]


def marks(svg: str) -> list[Mark]:
    found = []
    for tag in re.findall(r'<(?:circle|rect|polygon)\b[^>]*\bclass="point"[^>]*>', svg):
        a = attributes(tag)
        x, y = map(float, a["data-at"].split(","))
        found.append(Mark(a["data-dtype"], x, y, a.get("data-above-roof")))
    return found


def roofs(svg: str) -> list[tuple[str, list[tuple[float, float]]]]:
    """(dtype, corners) per drawn ceiling; dtype "" for a bandwidth-only roof, which is over every dtype."""
    lines = []
    for tag in re.findall(r'<polyline\b[^>]*\bclass="ceiling [^"]*"[^>]*>', svg):
        a = attributes(tag)
        corners = [tuple(map(float, pair.split(","))) for pair in a["points"].split()]
        lines.append((a["data-dtype"], corners))
    return lines


def line_y(corners: list[tuple[float, float]], x: float) -> float | None:
    """The line's y at `x` (the roofs are straight between corners on log-log axes), None outside its span."""
    for (x0, y0), (x1, y1) in itertools.pairwise(corners):
        if x0 - TOLERANCE_PX <= x <= x1 + TOLERANCE_PX:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (min(max(x, x0), x1) - x0) / (x1 - x0)
    return None


def drawn_above_a_roof(svg: str) -> list[str]:
    """Every point drawn higher than a roof line of its dtype at its x (SVG y grows downwards)."""
    lines = roofs(svg)
    found = []
    for mark in marks(svg):
        for dtype, corners in lines:
            y = line_y(corners, mark.x) if dtype in (mark.dtype, "") else None
            if y is not None and mark.y < y - TOLERANCE_PX:
                found.append(f"{mark.dtype} point at ({mark.x}, {mark.y}) above the {dtype or 'bandwidth'} roof "
                             f"at y {y:.1f}")
    return found
