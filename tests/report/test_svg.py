"""The roofline chart: log-log placement, one mark per point, solid measured and dashed datasheet ceilings."""

from __future__ import annotations

import re

from bringup.report.html.svg import roofline_svg
from bringup.report.sections.roofline import Ceilings, Point, Roofline, roofline
from tests.report.sample import bench_section


def marks(svg: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(r'class="point"[^>]*?cx="([\d.]+)" cy="([\d.]+)"', svg)]


def test_points_sit_by_intensity_and_rate_on_log_axes():
    chart = Roofline(points=[Point("matmul", "a", "float32", 1.0, 0.1), Point("matmul", "b", "float32", 10.0, 1.0),
                             Point("matmul", "c", "float32", 100.0, 10.0)])
    (x1, y1), (x2, y2), (x3, y3) = marks(roofline_svg(chart))
    assert x1 < x2 < x3 and y1 > y2 > y3  # SVG y grows downwards
    assert abs((x2 - x1) - (x3 - x2)) < 0.2 and abs((y1 - y2) - (y2 - y3)) < 0.2  # equal decades, equal steps


def test_ceilings_measured_solid_datasheet_dashed_and_labelled_axes():
    svg = roofline_svg(roofline(bench_section()))
    assert svg.count('class="point"') == 4
    measured = re.findall(r'<polyline class="ceiling measured"[^>]*>', svg)
    datasheet = re.findall(r'<polyline class="ceiling datasheet"[^>]*>', svg)
    assert len(measured) == 2 and len(datasheet) == 2  # float32 and bfloat16; the datasheet's tf32 is not drawn
    assert all("stroke-dasharray" in line for line in datasheet)
    assert not any("stroke-dasharray" in line for line in measured)
    assert "arithmetic intensity (FLOP/byte" in svg and "TFLOP/s (log scale)" in svg


def test_roof_has_a_ridge_where_bandwidth_meets_compute():
    chart = Roofline(points=[Point("matmul", "a", "float32", 1.0, 0.05)],
                     ceilings=[Ceilings("measured", {"float32": 1.0}, 100.0, "measured")])
    line = re.search(r'<polyline class="ceiling measured" points="([^"]+)"', roofline_svg(chart)).group(1)
    corners = [tuple(map(float, pair.split(","))) for pair in line.split()]
    assert len(corners) == 3 and corners[1][1] == corners[2][1]  # rises, then flat at the compute peak


def test_nothing_to_draw_gives_no_chart():
    assert roofline_svg(Roofline()) == ""
    assert roofline(None).points == []


def test_a_point_above_its_roof_is_drawn_at_the_roof_naming_the_ceiling():
    from tests.report.roof_geometry import drawn_above_a_roof, marks

    chart = Roofline(points=[Point("matmul", "big", "float32", 100.0, 3.0),  # above the 1 TFLOP/s compute peak
                             Point("matmul", "M=1", "float32", 0.5, 0.2),  # above the 100 GB/s slope (0.05)
                             Point("matmul", "under", "float32", 10.0, 0.5)],
                     ceilings=[Ceilings("measured", {"float32": 1.0}, 100.0, "measured", bandwidth_kernel="triad")])
    svg = roofline_svg(chart)
    big, matvec, under = marks(svg)
    assert big.above_roof == "float32 1 TFLOP/s, measured in this run"
    assert matvec.above_roof == "triad 100 GB/s, measured in this run"
    assert under.above_roof is None
    assert drawn_above_a_roof(svg) == []
    line = re.search(r'<polyline class="ceiling measured"[^>]*points="([^"]+)"', svg).group(1)
    flat_y = float(line.split()[-1].split(",")[1])
    assert big.y == flat_y  # on the flat top, not at 3 TFLOP/s
    assert "3 TFLOP/s at 100 FLOP/byte, above its roof (float32 1 TFLOP/s, measured in this run)" in svg
    assert svg.count('class="above-roof-arrow"') == 2 + 1  # the two points and the legend's sample


def test_the_reference_profiles_charts_have_no_point_above_a_roof():
    from pathlib import Path

    from bringup.profiles.store import load_profile
    from tests.report.roof_geometry import drawn_above_a_roof, marks

    clamped = 0
    for path in sorted((Path(__file__).parents[2] / "reference" / "profiles").glob("*.yaml")):
        svg = roofline_svg(roofline(load_profile(path).bench))
        assert drawn_above_a_roof(svg) == [], path.stem
        named = [m.above_roof for m in marks(svg) if m.above_roof]
        assert all(re.search(r"\d (GB|TFLOP)/s, measured in this run$", n) for n in named), named
        clamped += len(named)
    assert clamped > 0  # the M=1 matmuls these CPUs run from cache beat the bandwidth measured from memory
