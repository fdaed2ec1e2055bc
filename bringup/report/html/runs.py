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
from bringup.report.html.speedup_svg import speedup_svg
from bringup.report.sections.identity import Fact
from bringup.report.sections.runs import CollectivesView, FallbackRow
from bringup.report.text import MISSING, byte_size, number, one_line, seconds

OPEN_CHANGES = 25  # a section with more changes than this is folded into a <details>


def fallback_section(rows: list[FallbackRow]) -> Html:
    if not rows:
        return section("fallbacks", "Fallbacks", not_measured("fallback counts",
                                                             "Run `bringup selftest` or `bringup bench`."))
    total = sum(r.count for r in rows)
    if total == 0:  # a table of zeros says nothing the sentence does not
        runs = ", ".join(dict.fromkeys(r.where for r in rows))
        return section("fallbacks", "Fallbacks", paragraph("No fallback happened.", "ok")
                       + paragraph(f"counted in: {runs}", "note"))
    counted = [r for r in rows if r.count]
    return section("fallbacks", "Fallbacks", paragraph(f"{total} fallbacks counted.", "warn")
                   + table("fallbacks-table", ["run", "level", "count"], [[r.where, r.level, r.count] for r in counted],
                           ["bad"] * len(counted)))


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
    unit = view.bandwidth_unit
    headers = ["op", "dtype", "size", "status", "wrong", "ranks", "time", f"algbw {unit}", f"busbw {unit}", "error"]
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
    if not comparison.changes and not comparison.plan_changes:
        return section("baseline", "Differences from the baseline", body + paragraph("No differences.", "ok"))
    changed = comparison.sections(comparison.changed)
    body += paragraph(change_counts(comparison))
    chart = speedup_svg(list(comparison.bench.values()))
    if chart:
        body += Html(f"<h3>Speed-up against the baseline</h3><figure>{chart}</figure>")
    if comparison.plan_changes:
        body += change_table("plan", [[k, before, after, ""] for k, before, after in comparison.plan_changes])
    body += Html("<h3>Changed results</h3>") + ("".join(change_table(name, change_rows(found))
                                                       for name, found in changed.items())
                                               or paragraph("No result both profiles hold has changed.", "ok"))
    for title, changes in (("new cases (not in the baseline)", comparison.new),
                           ("no longer measured (only in the baseline)", comparison.gone)):
        if changes:
            found = table(f"baseline-{slug(title)}", ["section", "key", "result"],
                          [[c.section, c.key, shown(c.after if c.before is None else c.before)] for c in changes])
            body += details(f"{len(changes)} {title}", found, css="changes")
    return Html(f'<section id="baseline"><h2>Differences from the baseline</h2>'
                f'<div id="baseline-table">{body}</div></section>')


def change_counts(comparison: BaselineComparison) -> str:
    """`3 changed results (1 capabilities, 2 bench); 123 new cases; 0 no longer measured`."""
    by_section = ", ".join(f"{len(found)} {name}" for name, found in comparison.sections(comparison.changed).items())
    return (f"{len(comparison.changed)} changed results" + (f" ({by_section})" if by_section else "")
            + f"; {len(comparison.new)} new cases; {len(comparison.gone)} no longer measured")


def baseline_summary(comparison: BaselineComparison | None) -> str:
    if comparison is None:
        return ""
    changed = comparison.changed
    capabilities = sum(c.section == "capabilities" for c in changed)
    moved = sum(c.section == "bench" and c.note.startswith(("slower", "faster")) for c in changed)
    return e(f"vs baseline: {len(changed)} changed results ({capabilities} capability, {moved} bench "
             f"measurements beyond noise), {len(comparison.new)} new cases")
