"""The tree's shape, measured statically (issue 49's figures): no long function bodies outside the op catalog's case
tables, `EngineOptions` built in at most two places, no rename table, each attention kind spelled in at most two
modules. Each fails with the places that break it."""

from __future__ import annotations

import ast
from pathlib import Path

import bringup

PACKAGE_ROOT = Path(bringup.__file__).parent
MAX_BODY_LINES = 60
CATALOG = PACKAGE_ROOT / "probes" / "ops" / "catalog"


def _modules() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(), filename=str(path))) for path in sorted(PACKAGE_ROOT.rglob("*.py"))]


def _is_case_table(path: Path, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A catalog module's `..._ops() -> list[OpSpec]`: a table of cases, long by nature."""
    return path.is_relative_to(CATALOG) and ast.unparse(function.returns or ast.Constant(None)) == "list[OpSpec]"


def test_no_function_body_is_over_60_lines():
    long = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_case_table(path, node):
                lines = node.end_lineno - node.body[0].lineno + 1
                if lines > MAX_BODY_LINES:
                    long.append(f"{path.relative_to(PACKAGE_ROOT)}:{node.lineno} {node.name}: {lines} lines")
    assert not long, "function bodies over 60 lines:\n" + "\n".join(long)


def test_engine_options_is_built_in_at_most_two_places():
    sites = [f"{path.relative_to(PACKAGE_ROOT)}:{node.lineno}" for path, tree in _modules() for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "EngineOptions"]
    assert len(sites) <= 2, f"EngineOptions(...) is built at {len(sites)} places: {sites}"


def test_no_rename_table_remains():
    tables = [str(path.relative_to(PACKAGE_ROOT)) for path in PACKAGE_ROOT.rglob("*rename*")]
    assert not tables, f"rename tables: {tables}"


def test_each_attention_kind_is_spelled_in_at_most_two_modules():
    from bringup.profiles import attention_kinds

    names = {backend.name for backend in attention_kinds.SDPA} | set(attention_kinds.SDPA_ALIASES) | {
        attention_kinds.PLAIN_ATTENTION, attention_kinds.PAGED_DECODE}
    spelled: dict[str, set[str]] = {name: set() for name in names}
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in spelled:
                spelled[node.value].add(str(path.relative_to(PACKAGE_ROOT)))
    wide = {name: sorted(modules) for name, modules in spelled.items() if len(modules) > 2}
    assert not wide, f"attention kinds spelled in more than 2 modules: {wide}"
