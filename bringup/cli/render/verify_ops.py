"""Tables for `bringup verify-ops`: the catalog listing, the op x dtype matrix, failing cases, compiled."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich.table import Table

from bringup.cli.output import plain
from bringup.probes.ops.compiled.blocks import BLOCKS, DECODER_LAYER_NOTE
from bringup.probes.ops.judge.tolerances import ACCUM_REASON, EXACT_REASON, TABLE
from bringup.probes.ops.spec import Catalog
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord, VerifyOpsRecord


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


def matrix_table(cases: list[OpCaseRecord]) -> Table:
    """op x dtype: 'passed/total' per cell, red when anything failed, dim when nothing ran."""
    cells: dict[tuple[str, str], list[str]] = defaultdict(list)
    ops: dict[str, None] = {}
    dtypes: dict[str, None] = {}
    for r in cases:
        ops.setdefault(r.op, None)
        dtypes.setdefault(r.dtype, None)
        cells[(r.op, r.dtype)].append(r.status)
    table = Table(title="op x dtype (passed/run)", title_justify="left")
    table.add_column("op")
    for dt in dtypes:
        table.add_column(plain(dt), justify="center")
    for name in ops:
        row: list[Any] = [plain(name)]
        for dt in dtypes:
            statuses = cells.get((name, dt), [])
            row.append(_cell(statuses))
        table.add_row(*row)
    return table


def _cell(statuses: list[str]) -> str:
    if not statuses:
        return "[dim]-[/]"
    passed = statuses.count("pass")
    unsupported = statuses.count("unsupported")
    bad = len(statuses) - passed - unsupported
    if bad:
        kinds = sorted({s for s in statuses if s not in ("pass", "unsupported")})
        return f"[bold red]{passed}/{len(statuses)} {','.join(kinds)}[/]"
    if unsupported == len(statuses):
        return "[yellow]unsupported[/]"
    text = f"[green]{passed}/{len(statuses)}[/]"
    return text + (f" [yellow]({unsupported} unsup)[/]" if unsupported else "")


def _fmt(x: Any) -> str:
    return "" if x is None else f"{x:.2g}" if isinstance(x, float) else str(x)


def failing_table(failing: list[VerifyOpsRecord]) -> Table:
    table = Table(title=f"failing cases ({len(failing)})", title_justify="left")
    for col in ("case", "status", "max_abs", "max_rel", "nmse", "worst index", "tolerance", "message"):
        table.add_column(col, overflow="fold")
    for r in failing:
        if isinstance(r, OpCaseRecord):
            name = f"{r.op}[{r.dtype}] {r.case}"
            tol = f"rtol={_fmt(r.rtol)} atol={_fmt(r.atol)}" if r.rtol is not None else ""
            table.add_row(plain(name), f"[red]{r.status}[/]", _fmt(r.max_abs), _fmt(r.max_rel),
                          _fmt(r.nmse), plain(_fmt(r.worst_index)), tol, plain(r.message or ""))
        else:
            name = f"compiled {r.target}[{r.dtype}] {r.case or ''} ({r.backend})"
            table.add_row(plain(name), f"[red]{r.status}[/]", "", "", "", "",
                          f"allowed RMSE {_fmt(r.allowed)}",
                          plain(f"{r.message or ''} first failing rung: {r.failing_backend}"))
    return table


def compiled_table(compared: list[CompiledRecord]) -> Table:
    table = Table(title="eager vs compiled (RMSE against float64)", title_justify="left")
    for col in ("target", "dtype", "backend", "status", "eager", "compiled", "allowed", "compile s",
                "speedup", "breaks at"):
        table.add_column(col, overflow="fold")
    for r in compared:
        style = "green" if r.status == "pass" else "yellow" if r.status == "unsupported" else "red"
        name = r.target + (f" {r.case}" if r.case else "")
        table.add_row(plain(name), plain(r.dtype), plain(r.backend), f"[{style}]{r.status}[/]", _fmt(r.eager_err),
                      _fmt(r.compiled_err), _fmt(r.allowed), _fmt(r.compile_s),
                      _fmt(r.speedup), plain(r.failing_backend or ""))
    return table


def unsupported_table(results: list[VerifyOpsRecord]) -> Table | None:
    """One row per op x dtype with unsupported cases: how many, and the first reason given."""
    groups: dict[tuple[str, str], list[VerifyOpsRecord]] = defaultdict(list)
    for r in results:
        if r.status == "unsupported":
            name = r.op if isinstance(r, OpCaseRecord) else f"compiled {r.target}"
            groups[(name, r.dtype)].append(r)
    if not groups:
        return None
    table = Table(title="unsupported (not counted as verified)", title_justify="left")
    for col in ("op", "dtype", "cases", "reason (first case)"):
        table.add_column(col, overflow="fold")
    for (name, dtype), rows in groups.items():
        table.add_row(plain(name), plain(dtype), str(len(rows)), plain((rows[0].message or "")[:160]))
    return table
