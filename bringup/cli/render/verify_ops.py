"""Tables for `bringup verify-ops`: the catalog listing, the op x dtype matrix, failing cases, compiled."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.table import Table

from bringup.cli.output import plain
from bringup.cli.render.check_results import result_cell
from bringup.cli.render.placement import runs_on_cell
from bringup.probes.ops.compiled.blocks import BLOCKS, DECODER_LAYER_NOTE
from bringup.probes.ops.judge.tolerances import ACCUM_REASON, EXACT_REASON, TABLE
from bringup.probes.ops.spec import Catalog
from bringup.profiles.sections.graph_replay import GraphReplayRecord
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord, VerifyOpsRecord
from bringup.profiles.verdict import Check
from bringup.profiles.verdict.host_fallback import op_placements


def catalog_rows(catalog: Catalog) -> list[dict[str, Any]]:
    rows = []
    for spec in catalog.ops.values():
        rows.append({"op": spec.name, "family": spec.family, "dtypes": list(spec.dtypes),
                     "cases": [c.label for c in spec.cases], "note": spec.note})
    return rows


def catalog_json(catalog: Catalog) -> dict[str, Any]:
    return {
        "ops": catalog_rows(catalog),
        "blocks": {b.name: b.description for b in BLOCKS.values()},
        "block_notes": [DECODER_LAYER_NOTE],
        "tolerances": {r.dtype: {"rtol": r.rtol, "atol": r.atol, "compiled_tol": r.compiled_tol,
                                 "reason": r.reason} for r in TABLE.values()},
        "tolerance_rules": {"accumulation": ACCUM_REASON, "exact": EXACT_REASON},
    }


def catalog_tables(catalog: Catalog, verbose: bool) -> list[Table]:
    ops = Table(title=f"verify-ops catalog: {len(catalog.ops)} ops, "
                      f"{sum(len(s.cases) for s in catalog.ops.values())} cases", title_justify="left")
    for col in ("op", "family", "dtypes", "cases"):
        ops.add_column(col, overflow="fold")
    for row in catalog_rows(catalog):
        cases = "\n".join(row["cases"]) if verbose else f"{len(row['cases'])}: {row['cases'][0]}, ..."
        ops.add_row(row["op"], row["family"], " ".join(row["dtypes"]), cases)
    blocks = Table(title="compiled blocks (--compiled)", title_justify="left")
    blocks.add_column("block")
    blocks.add_column("what")
    for b in BLOCKS.values():
        blocks.add_row(b.name, b.description)
    blocks.add_row("[dim](note)[/]", f"[dim]{DECODER_LAYER_NOTE}[/]")
    tols = Table(title="tolerances (floor per dtype)", title_justify="left")
    for col in ("dtype", "rtol", "atol", "compiled tol", "why"):
        tols.add_column(col, overflow="fold")
    for r in TABLE.values():
        tols.add_row(r.dtype, f"{r.rtol:g}", f"{r.atol:g}", f"{r.compiled_tol:g}", r.reason)
    tols.add_row("(K-term sums)", "", "", "", ACCUM_REASON)
    tols.add_row("(exact ops)", "0", "0", "", EXACT_REASON)
    return [ops, blocks, tols]


def matrix_table(graded: list[tuple[OpCaseRecord, Check]]) -> Table:
    """op x dtype: 'passed/run' per cell, with the fails in red and the warns/skips counted; dim when nothing ran;
    then, where it was decided, where the op ran (device, or host n/m: n of its m cases went through the host)."""
    cells: dict[tuple[str, str], list[str]] = defaultdict(list)
    ops: dict[str, None] = {}
    dtypes: dict[str, None] = {}
    for r, check in graded:
        ops.setdefault(r.op, None)
        dtypes.setdefault(r.dtype, None)
        cells[(r.op, r.dtype)].append(check.result)
    placements = {p.op: p for p in op_placements([r for r, _ in graded])}
    table = Table(title="op x dtype (passed/run)", title_justify="left")
    table.add_column("op")
    for dt in dtypes:
        table.add_column(plain(dt), justify="center")
    if placements:  # nothing is decided on the host itself
        table.add_column("runs on", justify="center")
    for name in ops:
        row: list[Any] = [plain(name)]
        for dt in dtypes:
            row.append(_cell(cells.get((name, dt), [])))
        if placements:
            row.append(runs_on_cell(placements.get(name)))
        table.add_row(*row)
    return table


def _cell(results: list[str]) -> str:
    if not results:
        return "[dim]-[/]"
    passed, fails = results.count("pass"), results.count("fail")
    if fails:
        return f"[bold red]{passed}/{len(results)}, {fails} fail[/]"
    for result in ("warn", "skip"):
        if results.count(result) == len(results):
            return result_cell(result)
    others = ", ".join(f"{results.count(r)} {r}" for r in ("warn", "skip") if r in results)
    return f"[green]{passed}/{len(results)}[/]" + (f" [yellow]({others})[/]" if others else "")


def _fmt(x: Any) -> str:
    return "" if x is None else f"{x:.2g}" if isinstance(x, float) else str(x)


def failing_table(failing: list[VerifyOpsRecord]) -> Table:
    """The failing cases (every one grades `fail`; what the profile records, e.g. crashed, leads the message)."""
    table = Table(title=f"failing cases ({len(failing)})", title_justify="left")
    for col in ("case", "result", "max_abs", "max_rel", "nmse", "worst index", "tolerance", "message"):
        table.add_column(col, overflow="fold")
    for r in failing:
        if isinstance(r, OpCaseRecord):
            name = f"{r.op}[{r.dtype}] {r.case}"
            tol = f"rtol={_fmt(r.rtol)} atol={_fmt(r.atol)}" if r.rtol is not None else ""
            table.add_row(plain(name), result_cell("fail"), _fmt(r.max_abs), _fmt(r.max_rel),
                          _fmt(r.nmse), plain(_fmt(r.worst_index)), tol, plain(f"{r.status}: {r.message or ''}"))
        elif isinstance(r, GraphReplayRecord):
            table.add_row(plain(f"graph replay {r.target}[{r.dtype}]"), result_cell("fail"), "", "", "", "",
                          f"allowed RMSE {_fmt(r.allowed)}",
                          plain(f"{r.status}: {r.message or ''} first op off: {r.first_bad_op or 'none found'}"))
        else:
            name = f"compiled {r.target}[{r.dtype}] {r.case or ''} ({r.backend})"
            table.add_row(plain(name), result_cell("fail"), "", "", "", "",
                          f"allowed RMSE {_fmt(r.allowed)}",
                          plain(f"{r.status}: {r.message or ''} first failing rung: {r.failing_backend}"))
    return table


def compiled_table(graded: list[tuple[CompiledRecord, Check]]) -> Table:
    table = Table(title="eager vs compiled (RMSE against float64)", title_justify="left")
    for col in ("target", "dtype", "backend", "result", "eager", "compiled", "allowed", "compile s",
                "speedup", "breaks at"):
        table.add_column(col, overflow="fold")
    for r, check in graded:
        name = r.target + (f" {r.case}" if r.case else "")
        table.add_row(plain(name), plain(r.dtype), plain(r.backend), result_cell(check.result), _fmt(r.eager_err),
                      _fmt(r.compiled_err), _fmt(r.allowed), _fmt(r.compile_s),
                      _fmt(r.speedup), plain(r.failing_backend or ""))
    return table


def replay_table(graded: list[tuple[GraphReplayRecord, Check]]) -> Table:
    table = Table(title="eager vs graph replay (RMSE against float64, worst replay)", title_justify="left")
    for col in ("target", "dtype", "graph API", "result", "replays", "eager", "replay", "allowed", "first op off",
                "reason"):
        table.add_column(col, overflow="fold")
    for r, check in graded:
        reason = "" if r.status == "pass" else (r.message or r.status)
        table.add_row(plain(r.target), plain(r.dtype), plain(r.api or "none"), result_cell(check.result),
                      str(r.replays), _fmt(r.eager_err), _fmt(r.replay_err), _fmt(r.allowed),
                      plain(r.first_bad_op or ""), plain(reason[:200]))
    return table


def not_verified_table(graded: list[tuple[VerifyOpsRecord, Check]]) -> Table | None:
    """One row per op x dtype with cases graded warn (unsupported, a compile error) or skip (not applicable to
    this device): how many, and the first case's reason."""
    groups: dict[tuple[str, str, str], list[Check]] = defaultdict(list)
    for r, check in graded:
        if check.result in ("warn", "skip"):
            name = r.op if isinstance(r, OpCaseRecord) else \
                f"graph replay {r.target}" if isinstance(r, GraphReplayRecord) else f"compiled {r.target}"
            groups[(name, r.dtype, check.result)].append(check)
    if not groups:
        return None
    table = Table(title="warn and skip (not counted as verified)", title_justify="left")
    for col in ("op", "dtype", "result", "cases", "reason (first case)"):
        table.add_column(col, overflow="fold")
    for (name, dtype, result), checks in groups.items():
        table.add_row(plain(name), plain(dtype), result_cell(result), str(len(checks)), plain(checks[0].reason[:160]))
    return table
