"""HTML sections for whole runs: fallbacks, selftest, collectives, and the differences from a baseline."""

from __future__ import annotations

from bringup.profiles.diff import Change
from bringup.report.baseline import BaselineComparison
from bringup.report.html.parts import (
    Html,
    details,
    e,
    facts_table,
    not_measured,
    paragraph,
    section,
    slug,
    status_badge,
    table,
)
from bringup.report.sections.identity import Fact
from bringup.report.sections.runs import CollectivesView, FallbackRow
from bringup.report.text import MISSING, byte_size, number, one_line, seconds

OPEN_CHANGES = 25  # a section with more changes than this is folded into a <details>


def fallback_section(rows: list[FallbackRow]) -> Html:
    if not rows:
        return section("fallbacks", "Fallbacks", not_measured("fallback counts",
                                                             "Run `bringup selftest` or `bringup bench`."))
    total = sum(r.count for r in rows)
    summary = paragraph("No fallback happened." if total == 0 else f"{total} fallbacks counted.",
                        "ok" if total == 0 else "warn")
    classes = ["bad" if r.count else "" for r in rows]
    return section("fallbacks", "Fallbacks", summary + table("fallbacks-table", ["run", "level", "count"],
                                                            [[r.where, r.level, r.count] for r in rows], classes))


def soak_section(facts: list[Fact]) -> Html:
    body = facts_table("soak-table", facts) if facts else not_measured("soak", "Run `bringup all --level 4` or "
                                                                                "`bringup soak`.")
    return section("soak", "Soak", body)


def selftest_section(facts: list[Fact]) -> Html:
    body = facts_table("selftest-table", facts) if facts else not_measured("selftest", "Run `bringup selftest`.")
    return section("selftest", "Selftest", body)


def collectives_section(view: CollectivesView | None) -> Html:
    if view is None:
        return section("collectives", "Collectives", not_measured("collectives", "Run `bringup verify-collectives`."))
    body = facts_table("collectives-facts", view.facts)
    headers = ["op", "dtype", "size", "status", "wrong", "ranks", "time", "algbw GB/s", "busbw GB/s", "error"]
    cells = [[c.op, c.dtype, byte_size(c.size_bytes), status_badge(c.status), number(c.wrong), c.ranks,
              seconds(c.time_us * 1e-6) if c.time_us is not None else MISSING, number(c.algbw_gbps),
              number(c.busbw_gbps), one_line(c.error, 300)] for c in view.cases]
    body += table("collectives-table", headers, cells)
    if view.faults:
        body += table("collectives-faults", ["rank", "kind", "culprit", "detail"],
                      [[MISSING if f.rank is None else f.rank, f.kind, "yes" if f.culprit else "no (consequence)",
                        f.detail] for f in view.faults])
    return section("collectives", "Collectives", body)


def shown(value: object) -> str:
    return "absent" if value is None else one_line(str(value), 200)


def change_rows(changes: list[Change]) -> list[list[object]]:
    return [[c.key, shown(c.before), shown(c.after), c.note] for c in changes]


def change_table(name: str, changes: list[list[object]]) -> Html:
    """One section's changes; a long list is folded so the page stays readable."""
    found = table(f"baseline-{slug(name)}", ["key", "baseline", "this profile", "note"], changes)
    if len(changes) <= OPEN_CHANGES:
        return Html(f"<h3>{e(name)} ({len(changes)})</h3>{found}")
    return details(f"{name}: {len(changes)} changes", found, css="changes")


def baseline_section(comparison: BaselineComparison | None) -> Html:
    if comparison is None:
        return Html("")
    body = paragraph(f"baseline: {comparison.source}. Changed rows are also highlighted in their sections.")
    grouped = comparison.sections()
    if not grouped and not comparison.plan_changes:
        return section("baseline", "Differences from the baseline", body + paragraph("No differences.", "ok"))
    body += paragraph("changes: " + ", ".join(f"{len(found)} {name}" for name, found in grouped.items()))
    if comparison.plan_changes:
        body += change_table("plan", [[k, before, after, ""] for k, before, after in comparison.plan_changes])
    body += "".join(change_table(name, change_rows(found)) for name, found in grouped.items())
    return Html(f'<section id="baseline"><h2>Differences from the baseline</h2>'
                f'<div id="baseline-table">{body}</div></section>')


def baseline_summary(comparison: BaselineComparison | None) -> str:
    if comparison is None:
        return ""
    capabilities = sum(c.section == "capabilities" for c in comparison.changes)
    moved = sum(c.section == "bench" and c.note.startswith(("slower", "faster")) for c in comparison.changes)
    return e(f"vs baseline: {len(comparison.changes)} changes ({capabilities} capability, {moved} bench "
             "measurements beyond noise)")
