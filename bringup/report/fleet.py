"""The fleet section: ranks x key figures with the outliers highlighted, the thresholds, the faults -- a page of
its own when `bringup report` is given a fleet folder (the --out of `bringup fleet`)."""

from __future__ import annotations

from pathlib import Path

from bringup.probes.fleet.result import FleetResult, load_result
from bringup.report.html.css import STYLE
from bringup.report.html.parts import Html, e, paragraph, section, table

FLEET_REPORT = "fleet"      # <folder>/fleet.html or fleet.md


def _stages(result: FleetResult, rank: int) -> str:
    summary = next(r for r in result.ranks if r.rank == rank)
    bad = [f"{n} {'unfinished' if s.exit_code == -1 else f'exit {s.exit_code}'}"
           for n, s in summary.stages.items() if s.exit_code != 0]
    return ", ".join(bad) if bad else f"{len(summary.stages)} ok"


def _links_backend(result: FleetResult) -> str:
    links = result.collectives
    return f" Links: {links['backend']} ({links.get('reason', '')})." if links.get("backend") else ""


def rows(result: FleetResult) -> tuple[list[str], list[list[object]], list[str]]:
    """Headers, one row per rank, and each row's class (`outlier` for a rank that is named)."""
    figures = sorted({name for r in result.ranks for name in r.figures})
    flagged: dict[int, list[str]] = {}
    for outlier in result.outliers:
        flagged.setdefault(outlier.rank, []).append(outlier.kind)
    headers = ["rank", "host", "device", "profile", "stages", "ops pass / not", "selftest", *figures,
               f"links {result.link_unit}", "outlier"]
    body, classes = [], []
    for summary in result.ranks:
        failing = sum(v not in ("pass", "unsupported") for v in summary.ops.values())
        ops = f"{len(summary.ops) - failing} / {failing}" if summary.ops else "-"
        figure_cells = [f"{summary.figures[name]:.4g}" if name in summary.figures else "-" for name in figures]
        links = ", ".join(f"{k}: {v:.3g}" for k, v in summary.links.items()) or "-"
        kinds = flagged.get(summary.rank, [])
        body.append([summary.rank, summary.host, summary.device, summary.profile, _stages(result, summary.rank), ops,
                     summary.selftest or "-", *figure_cells, links, ", ".join(kinds) or "-"])
        classes.append("outlier" if kinds else "")
    return headers, body, classes


def fleet_section(result: FleetResult) -> Html:
    headers, body, classes = rows(result)
    parts = [paragraph(f"{result.world_size} ranks ({result.launch}, {result.nnodes} node(s)), stages "
                       f"{', '.join(result.stages)}, {result.seconds:.1f} s. "
                       + (f"{len(result.outliers)} outlier(s)." if result.outliers else "No outlier.")
                       + _links_backend(result),
                       "bad" if result.outliers else "ok"),
             table("fleet-ranks", headers, body, classes, caption="ranks × key figures (bench: the fastest "
                   "repetition, measured one rank at a time); outlier rows highlighted")]
    if result.outliers:
        parts.append(table("fleet-outliers", ["rank", "host", "kind", "detail"],
                           [[o.rank, o.host, o.kind, o.detail] for o in result.outliers],
                           ["outlier"] * len(result.outliers), caption="outliers, with the figures"))
    if result.thresholds:
        parts.append(table("fleet-thresholds", ["figure", "median", "MAD", "limit", "rule"],
                           [[t.figure, f"{t.median:.4g}", f"{t.mad:.3g}", f"{t.limit:.4g}", t.rule]
                            for t in result.thresholds.values()], caption="thresholds"))
    if result.faults:
        parts.append(table("fleet-faults", ["rank", "host", "kind", "stage", "detail"],
                           [[f.rank if f.rank is not None else "?", f.host, f.kind, f.stage or "-", f.detail]
                            for f in result.faults], caption="faults: ranks that died or hung, and what others saw"))
    return section("fleet", "Fleet", "".join(parts))


OUTLIER_STYLE = "tr.outlier td { background: #ffebe9; color: #82071e; font-weight: 600; }"


def render_fleet_html(result: FleetResult, folder: Path) -> str:
    title = f"bringup fleet report: {result.world_size} ranks"
    return Html(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{e(title)}</title><style>{STYLE}{OUTLIER_STYLE}</style></head><body>"
        f"<header><h1>{e(title)}</h1><p class=\"note\">fleet folder: {e(folder)}; each rank's profile is an "
        "ordinary profile (bringup report -p FILE, bringup profile diff A B)</p></header>"
        f"<main>{fleet_section(result)}</main></body></html>\n")


def render_fleet_markdown(result: FleetResult, folder: Path) -> str:
    from bringup.report.markdown import md, md_table

    headers, body, _ = rows(result)
    links = _links_backend(result)
    lines = [f"## Fleet: {result.world_size} ranks ({result.launch}) — {folder}",
             (f"{len(result.outliers)} outlier(s)." if result.outliers else "No outlier.")
             + (f" {md(links.strip(), 400)}" if links else "")]
    lines += md_table(headers, body)
    if result.outliers:
        lines += ["", "**Outliers**", *(f"- rank {o.rank} on {md(o.host)} (**{o.kind}**): {md(o.detail, 400)}"
                                        for o in result.outliers)]
    if result.faults:
        lines += ["", "**Faults**", *(f"- rank {f.rank} ({f.kind}, stage {f.stage or '-'}): {md(f.detail, 300)}"
                                      for f in result.faults)]
    return "\n".join(lines) + "\n"


def render_fleet(folder: Path, fmt: str) -> str:
    result = load_result(folder)
    return render_fleet_html(result, folder) if fmt == "html" else render_fleet_markdown(result, folder)
