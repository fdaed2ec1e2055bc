"""The short Markdown report: what a GitHub issue needs (identity, environment, capabilities, failures, key
figures, the plan, baseline differences), well under 150 lines."""

from __future__ import annotations

from bringup.report.model import Report
from bringup.report.sections.bench_tables import BenchTable
from bringup.report.sections.evals import EVAL_HEADERS
from bringup.report.sections.identity import Fact
from bringup.report.text import MISSING, number, one_line, seconds
from bringup.terminal_text import shown

MAX_ROWS = 15  # per list; the HTML report has the rest
ENVIRONMENT_KEYS = ("bringup", "torch", "python", "driver", "OS")
MARKDOWN_SPECIALS = str.maketrans({"\\": "\\\\", "`": "\\`", "*": "\\*", "[": "\\[", "]": "\\]", "|": "\\|",
                                   "<": "&lt;", ">": "&gt;", "&": "&amp;"})


def md(text: object, limit: int = 160) -> str:
    """Profile text made inert in Markdown and on a terminal: one line, no markup, no HTML, no table breaks, control
    characters shown as escapes."""
    return shown(one_line("" if text is None else str(text), limit).translate(MARKDOWN_SPECIALS))


def md_table(headers: list[str], rows: list[list[object]]) -> list[str]:
    """A table, after the blank line Markdown needs before it."""
    lines = ["", "| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]


def more(total: int) -> list[str]:
    return [f"\n…and {total - MAX_ROWS} more (see the HTML report)"] if total > MAX_ROWS else []


def fact(facts: list[Fact], label: str) -> str:
    return next((f.value for f in facts if f.label == label), MISSING)


def identity_lines(report: Report) -> list[str]:
    if not report.device:
        return ["- **Device**: not measured"]
    device = " · ".join(md(f.value) for f in report.device if f.label in ("name", "id", "vendor", "arch",
                                                                            "memory total", "PCI bus id"))
    lines = [f"- **Device**: {device}"]
    if report.environment:
        env = " · ".join(f"{k} {md(fact(report.environment, k))}" for k in ENVIRONMENT_KEYS)
        runtimes = ", ".join(f"{md(f.label.removeprefix('runtime '))} {md(f.value, 60)}" for f in report.environment
                             if f.label.startswith("runtime ") and f.label != "runtime torch_git")
        lines.append(f"- **Environment**: {env}" + (f" · runtimes: {runtimes}" if runtimes else ""))
        accelerators = [f"{md(f.label.removeprefix('accelerators: '))} {md(f.value, 60)}" for f in report.environment
                        if f.label.startswith("accelerators: ")]
        if accelerators:
            lines.append(f"- **Accelerator stack**: {', '.join(accelerators[:8])}")
    return lines


def capability_lines(report: Report) -> list[str]:
    rows = report.capabilities
    if not rows:
        return ["### Capabilities", "not measured"]
    lines = ["### Capabilities"]
    groups = dict.fromkeys(r.group for r in rows)
    for group in groups:
        supported = [md(r.name) for r in rows if r.group == group and r.status == "supported"]
        lines.append(f"- {md(group)}: supported {', '.join(supported) or 'none'}")
    other = [r for r in rows if r.status != "supported"]
    if other:
        lines += md_table(["check", "status", "reason"],
                                 [[r.key, r.status, one_line(r.note, 120)] for r in other[:MAX_ROWS]])
        lines += more(len(other))
    return lines


def failing_lines(report: Report) -> list[str]:
    matrix = report.ops
    if not matrix.measured:
        return ["### Op verdicts", "not measured"]
    totals = ", ".join(f"{n} {s}" for s, n in sorted(matrix.totals.items(), key=lambda item: -item[1]))
    lines = ["### Op verdicts", f"{sum(matrix.totals.values())} cases vs the float64 CPU reference: {totals}"]
    if matrix.failing:
        rows = [[r.op, r.dtype, r.case, r.status, number(r.max_rel), f"rtol {number(r.rtol)} atol {number(r.atol)}",
                 one_line(r.message, 100)] for r in matrix.failing[:MAX_ROWS]]
        lines += md_table(["op", "dtype", "case", "status", "max rel", "tolerance", "message"], rows)
        lines += more(len(matrix.failing))
    if matrix.host_fallbacks:
        rows = [[p.op, "yes (warn)" if p.hot_path else "no (info)", p.runs_on(), one_line(p.evidence(), 110)]
                for p in matrix.host_fallbacks[:MAX_ROWS]]
        lines += ["", "Ran through the host (a CPU fallback):"]
        lines += md_table(["op", "hot path", "runs on", "evidence (first case)"], rows)
        lines += more(len(matrix.host_fallbacks))
    failing_compiled = [row.record for row in report.compiled if row.record.failing]
    if failing_compiled:
        rows = [[r.target, r.dtype, r.backend, r.status, r.failing_backend or MISSING, one_line(r.message, 100)]
                for r in failing_compiled[:MAX_ROWS]]
        lines += ["", "Eager vs compiled failures:"]
        lines += md_table(["target", "dtype", "backend", "status", "first failing rung", "message"], rows)
    return lines


def replay_lines(report: Report) -> list[str]:
    """Blocks wrong under graph replay (failures) and those whose capture the device refused (warnings)."""
    shown = [r for r in report.graph_replay if r.failing or r.status == "capture_unsupported"]
    if not shown:
        return []
    rows = [[r.target, r.dtype, r.status, r.first_bad_op or MISSING, one_line(r.message, 140)]
            for r in shown[:MAX_ROWS]]
    return ["### Eager vs graph replay, not passing",
            *md_table(["target", "dtype", "status", "first op off under replay", "message"], rows), *more(len(shown))]


def best_of(tables: list[BenchTable], group: str) -> list[str]:
    table = next((t for t in tables if t.group == group), None)
    return [f"{md(r.record.key)} {seconds(r.record.median_s)}" for r in table.rows if r.record.median_s][:6] \
        if table else []


def soak_lines(report: Report) -> list[str]:
    if not report.soak:
        return []
    findings = [f.value for f in report.soak if f.label == "finding"]
    return [f"- soak: {md(fact(report.soak, 'status'))}, {md(fact(report.soak, 'length'))}"
            + (f"; {md('; '.join(findings))}" if findings else "")]


def bench_lines(report: Report) -> list[str]:
    if not report.bench:
        return ["### Key bench figures", "not measured", *soak_lines(report)]
    lines = ["### Key bench figures"]
    for c in report.roofline.ceilings:
        compute = ", ".join(f"{md(d)} {number(v)}" for d, v in c.compute.items())
        lines.append(f"- {c.source} ceilings: TFLOP/s {compute or MISSING}; "
                     f"bandwidth {number(c.bandwidth_gbps)} GB/s")
    for group, label in (("dispatch", "dispatch"), ("e2e", "end to end (s per token)")):
        figures = best_of(report.bench, group)
        if figures:
            lines.append(f"- {label}: " + "; ".join(figures))
    rates = [f"{md(r.record.key)} {md(r.rate)}" for t in report.bench if t.group == "e2e" for r in t.rows if r.rate]
    if rates:
        lines.append("- tokens/s: " + "; ".join(rates[:6]))
    if report.speed is not None:
        card = "; ".join(f"{md(f.label)} {md(f.value)} ({md(f.spread)})" for f in report.speed.figures)
        lines.append(f"- LLM speed card ({md(report.speed.model)}): {card}")
    selftest = fact(report.selftest, "status")
    if report.selftest:
        lines.append(f"- selftest: {md(selftest)}, {md(fact(report.selftest, 'max abs error'))}")
    lines += soak_lines(report)
    fallbacks = sum(r.count for r in report.fallbacks)
    lines.append(f"- fallbacks: {fallbacks}" if report.fallbacks else "- fallbacks: not measured")
    return lines


def eval_lines(report: Report) -> list[str]:
    if not report.evals:
        return []
    rows = [row.cells for row in report.evals]
    return ["### Model evals", *md_table(EVAL_HEADERS, rows[:MAX_ROWS]), *more(len(rows))]


def plan_lines(report: Report) -> list[str]:
    plan = report.plan
    lines = ["### Runner plan"]
    if plan.refused:
        lines.append(f"no plan: {md(plan.refused)}")
    if plan.rows:
        lines.append(f"_{plan.note}_")
        lines += md_table(["setting", "value", "evidence"], [[r.setting, r.value, one_line(r.evidence, 110)]
                                                              for r in plan.rows])
    elif plan.ran_with:
        lines.append("the e2e bench ran with: " + ", ".join(f"{md(k)} {md(v)}" for k, v in plan.ran_with.items()))
    return lines


def deploy_lines(report: Report) -> list[str]:
    if not report.deploy:
        return []
    lines = ["### Deploy with", "_`bringup export --engine E` from this profile; it shows the evidence behind each "
             "flag_"]
    for view in report.deploy:
        if view.refused:
            lines.append(f"- {md(view.engine)}: no configuration: {md(view.refused)}")
            continue
        kept = [r for r in view.rows if r.value != "left out"]
        left = [r.name for r in view.rows if r.value == "left out"]
        lines += [f"- {md(view.engine)} ({md(view.version, 80)}): `{md(view.command, 400)}`",
                  *(f"  - {md(r.name)} {md(r.value)}: {md(r.reason, 120)}" for r in kept[:MAX_ROWS])]
        if left:
            lines.append(f"  - left out: {md(', '.join(left), 300)}")
    return lines


def baseline_lines(report: Report) -> list[str]:
    comparison = report.baseline
    if comparison is None:
        return []
    changes = sorted(comparison.changed, key=lambda c: c.section != "capabilities")
    lines = ["### Differences from the baseline", f"baseline: {md(comparison.source)}"]
    if not comparison.changes and not comparison.plan_changes:
        return [*lines, "no differences"]
    lines.append(f"{len(changes)} changed results; {len(comparison.new)} new cases (not in the baseline); "
                 f"{len(comparison.gone)} no longer measured")
    rows = [[f"plan {setting}", before, after, ""] for setting, before, after in comparison.plan_changes]
    rows += [[f"{c.section} {c.key}", c.before, c.after, c.note] for c in changes]
    if rows:
        lines += md_table(["what", "baseline", "now", "note"], rows[:MAX_ROWS]) + more(len(rows))
    return lines


def render_markdown(report: Report) -> str:
    verdict = report.verdict
    headline = f"**{md(verdict.headline())}**{md(verdict.line()[len(verdict.headline()):])}"
    sections = [[f"## {md(report.title)}", headline], identity_lines(report), capability_lines(report),
                failing_lines(report), replay_lines(report),
                bench_lines(report), eval_lines(report), plan_lines(report),
                deploy_lines(report), baseline_lines(report)]
    return "\n\n".join("\n".join(lines) for lines in sections if lines) + "\n"
