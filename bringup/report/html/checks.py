"""HTML sections for what was checked: identity, environment, capabilities, the op × dtype matrix, compiled."""

from __future__ import annotations

from bringup.profiles.sections.ops import OpCaseRecord
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
from bringup.report.model import Report
from bringup.report.sections.capabilities import CapabilityRow
from bringup.report.sections.compiled import CompiledRow
from bringup.report.sections.ops_matrix import MatrixCell, OpMatrix
from bringup.report.text import MISSING, number, one_line, seconds


def identity_section(report: Report) -> Html:
    body = (facts_table("device-table", report.device) if report.device
            else not_measured("device", "Run `bringup devices`."))
    return section("device", "Device", body)


def environment_section(report: Report) -> Html:
    body = (facts_table("environment-table", report.environment) if report.environment
            else not_measured("environment", "Run `bringup devices` (or `bringup env`)."))
    if report.stages:
        body += Html("<h3>Stages</h3>") + facts_table("stages-table", report.stages)
    return section("environment", "Environment", body)


def capability_section(rows: list[CapabilityRow], with_baseline: bool) -> Html:
    if not rows:
        return section("capabilities", "Capabilities", not_measured("capabilities", "Run `bringup probe`."))
    headers = ["check", "status", "evidence / reason", "time"] + (["baseline"] if with_baseline else [])
    cells = []
    for row in rows:
        line = [row.key, status_badge(row.status), row.note, seconds(row.seconds)]
        cells.append(line + ([f"was {row.before}" if row.before else ""] if with_baseline else []))
    classes = ["changed" if row.before else "" for row in rows]
    counts = {s: sum(r.status == s for r in rows) for s in ("supported", "unsupported", "unknown")}
    summary = paragraph(", ".join(f"{n} {s}" for s, n in counts.items()))
    return section("capabilities", "Capabilities", summary + table("capabilities-table", headers, cells, classes))


def matrix_cell(cell: MatrixCell | None) -> str:
    if cell is None:
        return '<td class="empty">—</td>'
    changed = " changed" if cell.changed else ""
    text = e(cell.summary())
    if cell.failing:
        text = f'<a href="#fail-{cell.failing[0]}">{text}</a>'
    return f'<td class="status-{slug(cell.status)}{changed}">{text}</td>'


def matrix_table(matrix: OpMatrix) -> Html:
    head = "<th>op</th>" + "".join(f"<th>{e(d)}</th>" for d in matrix.dtypes)
    rows = "".join(f"<tr><th scope=\"row\">{e(op)}</th>" + "".join(matrix_cell(cells.get(d)) for d in matrix.dtypes)
                   + "</tr>" for op, cells in matrix.rows)
    return Html(f'<table id="ops-matrix" class="matrix"><caption>cases passed / cases run, per op and dtype; a '
                f"cell's colour is its worst verdict</caption><thead><tr>{head}</tr></thead><tbody>{rows}</tbody>"
                "</table>")


def tolerance(record: OpCaseRecord) -> str:
    if record.rtol is None and record.atol is None:
        return MISSING
    return f"rtol {number(record.rtol)}, atol {number(record.atol)}"


def worst_index(record: OpCaseRecord) -> str:
    if record.worst_index is None:
        return MISSING
    where = f"[{', '.join(str(i) for i in record.worst_index)}]"
    return where + (f" of output {record.worst_output}" if record.worst_output is not None else "")


def case_details(index: int, record: OpCaseRecord) -> Html:
    rows = [("max abs error", number(record.max_abs)), ("max rel error", number(record.max_rel)),
            ("NMSE", number(record.nmse)), ("worst index", worst_index(record)), ("tolerance", tolerance(record)),
            ("time", seconds(record.seconds))]
    body = "".join(f'<tr><th scope="row">{e(k)}</th><td>{e(v)}</td></tr>' for k, v in rows)
    message = f"<pre>{e(record.message)}</pre>" if record.message else ""
    summary = f"{record.op} · {record.dtype} · {record.case} — {record.status}"
    return details(summary, f'<table class="facts"><tbody>{body}</tbody></table>{message}', f"fail-{index}",
                   f"case status-{slug(record.status)}")


def unsupported_list(records: list[OpCaseRecord]) -> Html:
    items = "".join(f"<li>{e(r.op)} · {e(r.dtype)} · {e(r.case)}: {e(one_line(r.message, 300))}</li>"
                    for r in records)
    return details(f"{len(records)} unsupported cases (rejected by the device, not wrong results)",
                   f"<ul>{items}</ul>", "ops-unsupported")


def ops_section(matrix: OpMatrix) -> Html:
    if not matrix.measured:
        return section("ops", "Operators × dtypes", not_measured("op verdicts", "Run `bringup verify-ops`."))
    totals = ", ".join(f"{n} {s}" for s, n in sorted(matrix.totals.items(), key=lambda item: -item[1]))
    body = paragraph(f"{sum(matrix.totals.values())} cases against the float64 CPU reference: {totals}")
    body += matrix_table(matrix)
    if matrix.failing:
        body += Html(f'<h3 id="failing-cases">Failing cases ({len(matrix.failing)})</h3>')
        body += Html("".join(case_details(i, r) for i, r in enumerate(matrix.failing)))
    else:
        body += paragraph("No failing case.", "ok")
    if matrix.unsupported:
        body += unsupported_list(matrix.unsupported)
    if matrix.placed:
        body += host_fallback_table(matrix)
    return section("ops", "Operators × dtypes", body)


def host_fallback_table(matrix: OpMatrix) -> Html:
    """Where the ops ran: each op with a case that went through the host, a warning on the hot path, else info."""
    fallbacks = matrix.host_fallbacks
    hot = sum(p.hot_path for p in fallbacks)
    body = Html('<h3 id="host-fallback">Where ops ran</h3>')
    if not fallbacks:
        return body + paragraph(f"Every op ran on the device ({matrix.placed} cases decided).", "ok")
    others = "; the others are listed for information" if hot < len(fallbacks) else ""
    body += paragraph(f"{len(fallbacks)} ops ran through the host (a CPU fallback) in some case, {hot} of them on "
                      f"the runner's hot path (a warning each){others}.")
    cells = [[p.op, "yes (warn)" if p.hot_path else "no (info)", p.runs_on(), ", ".join(p.dtypes),
              p.evidence()] for p in fallbacks]
    return body + table("host-fallback-table", ["op", "hot path", "runs on", "dtypes", "evidence (first case)"],
                        cells, ["warn" if p.hot_path else "" for p in fallbacks])


def ladder_text(row: CompiledRow) -> str:
    return " → ".join(f"{rung}: {verdict}" for rung, verdict in row.ladder) or MISSING


def compiled_section(rows: list[CompiledRow]) -> Html:
    if not rows:
        return section("compiled", "Eager vs compiled", not_measured("eager vs compiled",
                                                                     "Run `bringup verify-ops --compiled`."))
    headers = ["target", "dtype", "backend", "status", "eager err", "compiled err", "allowed", "first failing rung",
               "ladder", "compile", "speed-up", "message"]
    cells = [[row.label, r.dtype, r.backend, status_badge(r.status), number(r.eager_err), number(r.compiled_err),
              number(r.allowed), r.failing_backend or MISSING, ladder_text(row), seconds(r.compile_s),
              f"{r.speedup:.2f}x" if r.speedup else MISSING, one_line(r.message, 300)]
             for row in rows for r in [row.record]]
    failing = sum(row.record.failing for row in rows)
    summary = paragraph(f"{len(rows)} comparisons, {failing} failing; errors are RMSE against the float64 "
                        "reference, accepted when compiled err ≤ allowed (k × eager err + tol/10)")
    return section("compiled", "Eager vs compiled", summary + table("compiled-table", headers, cells))
