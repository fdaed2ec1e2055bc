"""HTML sections for speed: the roofline chart, bench tables with their spread, and the runner plan."""

from __future__ import annotations

from bringup.report.html.parts import (
    Html,
    details,
    e,
    not_measured,
    paragraph,
    section,
    slug,
    status_badge,
    table,
)
from bringup.report.html.svg import points_above_roof, roofline_svg
from bringup.report.sections.bench_tables import BenchRow, BenchTable
from bringup.report.sections.plan import PlanView
from bringup.report.sections.roofline import Roofline
from bringup.report.text import MISSING, number, one_line, seconds


def ceiling_list(chart: Roofline) -> Html:
    items = []
    for c in chart.ceilings:
        compute = ", ".join(f"{d} {number(v)} TFLOP/s" for d, v in c.compute.items())
        bandwidth = f"{number(c.bandwidth_gbps)} GB/s" if c.bandwidth_gbps else "no bandwidth"
        items.append(f"<li>{e(c.label)}: {e(compute or 'no compute peak')}; {e(bandwidth)}</li>")
    if chart.datasheet_note:
        items.append(f"<li>no datasheet ceiling: {e(chart.datasheet_note)}</li>")
    return Html(f'<ul class="ceilings">{"".join(items)}</ul>')


def above_roof_list(chart: Roofline) -> Html:
    """The points drawn at their roof, each with its real rate and the ceiling it exceeded."""
    found = points_above_roof(chart)
    if not found:
        return Html("")
    items = "".join(f"<li>{e(p.group)} {e(p.key)}: {e(number(p.tflops))} TFLOP/s at {e(number(p.intensity))} "
                    f"FLOP/byte, above its roof ({e(roof.ceiling)})</li>" for p, roof in found)
    return details(f"{len(found)} point(s) measured above their roof, drawn at it (hollow, with an arrow)",
                   f'<ul class="above-roof">{items}</ul>', "roofline-above-roof")


def roofline_section(chart: Roofline) -> Html:
    if not chart.drawable:
        return section("roofline", "Roofline", not_measured("roofline points (rate and intensity)",
                                                           "Run `bringup bench`."))
    caption = paragraph(f"{len(chart.points)} measured points (rate at arithmetic intensity) under the ceilings: "
                        "solid lines measured in this run, dashed lines the datasheet. Hover a point for its key.")
    return section("roofline", "Roofline", caption + Html(f'<figure>{roofline_svg(chart)}</figure>')
                   + above_roof_list(chart) + ceiling_list(chart))


def spread(row: BenchRow) -> str:
    r = row.record
    if r.median_s and r.iqr_s is not None:
        return f"IQR {seconds(r.iqr_s)} ({r.iqr_s / r.median_s:.1%})"
    return "not recorded"


def bench_cells(row: BenchRow, with_baseline: bool) -> list[object]:
    r = row.record
    pct = row.of_ceiling
    speedup = f"{r.speedup:.2f}x vs {r.baseline_key}" if r.speedup and r.baseline_key else MISSING
    cells: list[object] = [r.key, r.dtype or MISSING, status_badge(r.status) if r.status != "ok" else "ok",
                           seconds(r.median_s), spread(row), seconds(r.min_s), number(r.reps), row.rate or MISSING,
                           pct, speedup, ("noisy" if r.noisy else "") + (f" {one_line(r.reason)}" if r.reason else "")]
    return cells + ([row.change or ""] if with_baseline else [])


def skipped_details(bench: BenchTable) -> Html:
    parts = []
    for group in bench.skipped:
        keys = ", ".join(group.keys[:12]) + (f" and {len(group.keys) - 12} more" if len(group.keys) > 12 else "")
        parts.append(f"<li>{len(group.keys)} {e(group.status)}: {e(one_line(group.reason, 300))} "
                     f'<span class="keys">({e(keys)})</span></li>')
    count = sum(len(g.keys) for g in bench.skipped)
    return details(f"{count} not measured (skipped / not applicable), by reason", f"<ul>{''.join(parts)}</ul>")


def bench_group(bench: BenchTable, with_baseline: bool) -> Html:
    body = f'<h3 id="bench-{slug(bench.group)}">{e(bench.group)} {status_badge(bench.status)}</h3>'
    if bench.reason:
        body += paragraph(bench.reason)
    body += "".join(paragraph(note, "note") for note in bench.notes)
    if bench.settings:
        body += paragraph(bench.settings, "note")
    if bench.rows:
        headers = ["key", "dtype", "status", "median", "spread", "min", "reps", "rate", "% of ceiling",
                   "speed-up", "notes"] + (["vs baseline"] if with_baseline else [])
        classes = [f"changed {row.change_kind}" if row.change_kind else "" for row in bench.rows]
        body += table(f"bench-table-{slug(bench.group)}", headers,
                      [bench_cells(row, with_baseline) for row in bench.rows], classes)
    if bench.skipped:
        body += skipped_details(bench)
    return Html(body)


def bench_section(tables: list[BenchTable], with_baseline: bool) -> Html:
    if not tables:
        return section("bench", "Benchmarks", not_measured("benchmarks", "Run `bringup bench`."))
    intro = paragraph("Median time per call with its spread (interquartile range) and the fastest repetition; "
                      "% of ceiling is of the datasheet peak when known, else of this run's best.")
    return section("bench", "Benchmarks", intro + Html("".join(bench_group(t, with_baseline) for t in tables)))


def plan_section(plan: PlanView, with_baseline: bool) -> Html:
    body = ""
    if plan.refused:
        body += paragraph(f"No plan could be drafted from this profile: {plan.refused}", "bad")
    if plan.rows:
        headers = ["setting", "value", "evidence"] + (["baseline"] if with_baseline else [])
        cells = [[r.setting, r.value, r.evidence] + ([f"was {r.before}" if r.before else ""] if with_baseline else [])
                 for r in plan.rows]
        classes = ["changed" if r.before else "" for r in plan.rows]
        body += paragraph(plan.note, "note") + table("plan-table", headers, cells, classes)
    body += "".join(paragraph(w, "warn") for w in plan.warnings)
    if plan.ran_with:
        body += Html("<h3>Plan the end-to-end bench ran with</h3>")
        body += table("plan-ran-table", ["setting", "value"], [[k, v] for k, v in plan.ran_with.items()])
    return section("plan", "Runner plan", body or not_measured("plan", "Run `bringup all`."))
