"""The self-contained report page: inline CSS and SVG, no external references, readable without JavaScript."""

from __future__ import annotations

from bringup.report.html.checks import (
    capability_section,
    compiled_section,
    environment_section,
    identity_section,
    ops_section,
)
from bringup.report.html.css import STYLE
from bringup.report.html.deploy import deploy_section
from bringup.report.html.evals import eval_section
from bringup.report.html.graph_replay import replay_section
from bringup.report.html.parts import Html, e
from bringup.report.html.perf import bench_section, plan_section, roofline_section
from bringup.report.html.runs import (
    baseline_section,
    baseline_summary,
    collectives_section,
    fallback_section,
    selftest_section,
    soak_section,
)
from bringup.report.html.speed_card import speed_card_section
from bringup.report.html.verdict import verdict_block
from bringup.report.model import Report
from bringup.report.text import MISSING, number

SECTIONS = (("baseline", "Baseline"), ("speed", "LLM speed"), ("device", "Device"), ("environment", "Environment"),
            ("capabilities", "Capabilities"), ("ops", "Ops × dtypes"), ("compiled", "Eager vs compiled"),
            ("replay", "Eager vs graph replay"),
            ("roofline", "Roofline"), ("bench", "Benchmarks"), ("plan", "Plan"), ("deploy", "Deploy with"),
            ("fallbacks", "Fallbacks"),
            ("selftest", "Selftest"), ("evals", "Model evals"), ("soak", "Soak"), ("collectives", "Collectives"))
# opens a <details> drill-down when a matrix link targets it; without JavaScript the link still scrolls there
OPEN_TARGET = ("<script>function openTarget(){var t=location.hash&&document.getElementById(location.hash.slice(1));"
               "if(t&&t.tagName==='DETAILS'){t.open=true;}}addEventListener('hashchange',openTarget);"
               "openTarget();</script>")


def tile(label: str, value: str, css: str = "") -> str:
    return f'<div class="tile {e(css)}"><span>{e(label)}</span><b>{e(value)}</b></div>'


def summary_tiles(report: Report) -> str:
    caps = report.capabilities
    supported = sum(c.status == "supported" for c in caps)
    not_applicable = sum(c.status == "unsupported" and c.not_applicable for c in caps)
    failing = len(report.ops.failing)
    compiled_failing = sum(r.record.failing for r in report.compiled)
    selftest = next((f.value for f in report.selftest if f.label == "status"), "not measured")
    best = max((c for c in report.roofline.ceilings if c.source == "measured"), default=None,
               key=lambda c: max(c.compute.values(), default=0.0))
    peak = f"{number(max(best.compute.values(), default=None))} TFLOP/s" if best and best.compute else MISSING
    tiles = [
        tile("capabilities supported", f"{supported} / {len(caps) - not_applicable}" if caps else "not measured"),
        tile("not applicable here", str(not_applicable) if caps else "not measured"),
        tile("op cases failing", f"{failing} of {sum(report.ops.totals.values())}" if report.ops.measured
             else "not measured", "bad" if failing else "ok"),
        tile("compiled mismatches", f"{compiled_failing} of {len(report.compiled)}" if report.compiled
             else "not measured", "bad" if compiled_failing else ""),
        tile("selftest", selftest, "ok" if selftest == "pass" else "bad" if selftest == "fail" else ""),
        tile("best matmul (measured)", peak),
        tile("bandwidth (measured)", f"{number(best.bandwidth_gbps)} GB/s" if best and best.bandwidth_gbps
             else MISSING),
    ]
    return f'<div class="tiles" id="summary">{"".join(tiles)}</div>'


def navigation(report: Report) -> str:
    links = [(i, t) for i, t in SECTIONS if i != "baseline" or report.baseline is not None]
    return "<nav><ul>" + "".join(f'<li><a href="#{i}">{e(t)}</a></li>' for i, t in links) + "</ul></nav>"


def render_html(report: Report) -> str:
    with_baseline = report.baseline is not None
    body = [
        baseline_section(report.baseline),
        speed_card_section(report.speed),
        '<div class="columns">' + identity_section(report) + environment_section(report) + "</div>",
        capability_section(report.capabilities, with_baseline),
        ops_section(report.ops),
        compiled_section(report.compiled),
        replay_section(report.graph_replay),
        roofline_section(report.roofline),
        bench_section(report.bench, with_baseline),
        plan_section(report.plan, with_baseline),
        deploy_section(report.deploy),
        fallback_section(report.fallbacks),
        selftest_section(report.selftest),
        eval_section(report.evals),
        soak_section(report.soak),
        collectives_section(report.collectives),
    ]
    comparison = baseline_summary(report.baseline)
    header = (f"<header><h1>{e(report.title)}</h1><p class=\"note\">profile: {e(report.source)}"
              + (f"<br>{comparison}" if comparison else "") + "</p>"
              f"{verdict_block(report.verdict)}{summary_tiles(report)}{navigation(report)}"
              "</header>")
    return Html(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(report.title)}</title><style>{STYLE}</style></head><body>"
        + header + "<main>" + "".join(body) + "</main>" + OPEN_TARGET + "</body></html>\n"
    )
