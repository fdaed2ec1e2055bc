"""Which packages may import which (the layer order docs/development.md tabulates), and no import cycle, lazy
imports included.

Every module under bringup/ is parsed; every import counts: at module level, under `if TYPE_CHECKING:`, and
inside functions. A new edge that points up a layer, or any cycle, fails here with the modules that make it.
"""

from __future__ import annotations

import ast
import functools
from collections import defaultdict
from pathlib import Path

import bringup

PACKAGE_ROOT = Path(bringup.__file__).parent
CORE = {"bringup", "bringup.errors", "bringup.log", "bringup.fallbacks", "bringup.terminal_text", "bringup.json_depth",
        "bringup.number_rule", "bringup.bounded_file"}

# importer -> what it may import (besides itself and CORE); a target names a package or a single module.
# Imports point down: cli -> everything; serve -> runner; probes -> backends, profiles and the runner's model (the
# e2e and serve bench groups run the runner through throughput.py and serving_latency.py); runner -> backends,
# profiles. The runner never imports probes; backends never import profiles (profiles store the device record
# backends fill). report reads profiles, fleet results (probes/fleet) and drafts a plan from a profile through the
# runner's torch-free planning modules; export (other engines' launch flags from a profile) reads profiles and the
# same planning modules (graphs_evidence: what graph_replay records say), and report shows its result; a
# placement's export names devices as the peers do through the backends' torch-free naming modules.
LAYERS: dict[str, set[str]] = {
    "bringup.__main__": {"bringup.cli"},
    "bringup.cli": {"bringup.serve", "bringup.report", "bringup.export", "bringup.probes", "bringup.runner",
                    "bringup.profiles", "bringup.backends"},
    "bringup.serve": {"bringup.runner", "bringup.profiles", "bringup.backends"},
    "bringup.report": {"bringup.export", "bringup.probes.fleet", "bringup.runner.plan.plan",
                       "bringup.runner.plan.profile_facts", "bringup.runner.plan.settings",
                       "bringup.runner.model.config.builtin", "bringup.profiles"},
    "bringup.export": {"bringup.runner.plan.plan", "bringup.runner.plan.profile_facts",
                       "bringup.runner.plan.graphs_evidence", "bringup.profiles",
                       "bringup.backends.host", "bringup.backends.peer_names"},  # torch-free: family names
    "bringup.probes": {"bringup.runner.model", "bringup.runner.sources.builtin_model", "bringup.runner.model_files",
                       "bringup.runner.draws",
                       "bringup.runner.throughput", "bringup.runner.serving_latency", "bringup.profiles",
                       "bringup.backends"},
    "bringup.runner": {"bringup.profiles", "bringup.backends"},
    "bringup.profiles": {"bringup.backends.device_info"},  # the one device record type, which backends fill
    "bringup.backends": set(),
}
# inside the runner, top to bottom: eval (over selftest's float64 reference), start-up and the step loop, the plan
# (from the profile and start-up measurements, and every host-kernel choice), the model's host kernels, where a model
# comes from (sources: the built-in model, a directory, a GGUF file), the text side (tokenizer, chat template), the
# model's forward math, how its linear weights are stored and applied (weights), the model-file jail, the sampling
# parameters
RUNNER_LAYERS: dict[str, set[str]] = {
    "bringup.runner.eval": {"bringup.runner.selftest", "bringup.runner.engine", "bringup.runner.sources",
                            "bringup.runner.model"},
    "bringup.runner.selftest": {"bringup.runner.engine", "bringup.runner.plan", "bringup.runner.sources",
                                "bringup.runner.model", "bringup.runner.weights"},
    "bringup.runner.throughput": {"bringup.runner.engine", "bringup.runner.sampling_params"},
    "bringup.runner.serving_latency": {"bringup.runner.engine", "bringup.runner.sampling_params"},
    "bringup.runner.engine": {"bringup.runner.plan", "bringup.runner.host", "bringup.runner.sources",
                              "bringup.runner.text", "bringup.runner.model", "bringup.runner.weights",
                              "bringup.runner.sampling_params", "bringup.runner.draws"},
    "bringup.runner.plan": {"bringup.runner.host", "bringup.runner.model", "bringup.runner.weights",
                            "bringup.runner.sampling_params"},
    "bringup.runner.host": {"bringup.runner.model", "bringup.runner.weights", "bringup.runner.sampling_params"},
    "bringup.runner.sources": {"bringup.runner.text", "bringup.runner.model", "bringup.runner.weights",
                               "bringup.runner.model_files"},
    "bringup.runner.text": {"bringup.runner.model.config", "bringup.runner.model_files",
                            "bringup.runner.sampling_params"},
    "bringup.runner.model": {"bringup.runner.weights", "bringup.runner.sampling_params"},
    "bringup.runner.weights": set(),
    "bringup.runner.model_files": set(),
    "bringup.runner.sampling_params": set(),
    "bringup.runner.draws": set(),
}


@functools.lru_cache(maxsize=1)
def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE_ROOT.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The bringup module an import names: itself, or the nearest package above a name it imports from."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """module -> the bringup modules it imports, wherever in the file the import statement is (a fresh copy)."""
    return {name: set(targets) for name, targets in _parsed_graph().items()}


@functools.lru_cache(maxsize=1)
def _parsed_graph() -> dict[str, set[str]]:
    modules = module_names()
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                targets = [f"{base}.{alias.name}" for alias in node.names]  # a submodule, or a name in `base`
            for target in targets:
                found = _resolve(target, modules) if target.startswith("bringup") else None
                if found and found != name:
                    graph[name].add(found)
    return graph


def _unit(module: str, table: dict[str, set[str]]) -> str | None:
    """The table's entry `module` belongs to (the longest matching prefix), or None."""
    owners = [key for key in table if module == key or module.startswith(key + ".")]
    return max(owners, key=len) if owners else None


def _allowed(target: str, allowed: set[str]) -> bool:
    return any(target == a or target.startswith(a + ".") for a in allowed)


def upward_imports(graph: dict[str, set[str]], table: dict[str, set[str]], scope: str = "") -> list[str]:
    """Every import from one entry of `table` into another that the table does not allow."""
    wrong = []
    for importer, targets in sorted(graph.items()):
        if not importer.startswith(scope):
            continue
        unit = _unit(importer, table)
        for target in sorted(targets):
            if target in CORE or not target.startswith(scope):
                continue
            other = _unit(target, table)
            if unit is None or other is None:
                wrong.append(f"{importer} -> {target}: not in the layer table")
            elif other != unit and not _allowed(target, table[unit]):
                wrong.append(f"{importer} -> {target}")
    return wrong


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def sibling_package_pairs(graph: dict[str, set[str]]) -> list[str]:
    """Pairs of packages with the same parent that import each other (each through any of its modules)."""
    packages = {name for name, path in module_names().items() if path.name == "__init__.py"}
    edges: dict[tuple[str, str], str] = {}
    for importer, targets in graph.items():
        for target in targets:
            common = 0
            a, b = importer.split("."), target.split(".")
            while common < min(len(a), len(b)) and a[common] == b[common]:
                common += 1
            if common < len(a) - 1 or common < len(b) - 1:  # the first differing names, when both are packages
                left, right = ".".join(a[:common + 1]), ".".join(b[:common + 1])
                if left in packages and right in packages and left != right:
                    edges.setdefault((left, right), f"{importer} -> {target}")
    return sorted(f"{a} <-> {b} ({edges[(a, b)]}; {edges[(b, a)]})" for a, b in edges if (b, a) in edges and a < b)


def test_the_graph_sees_lazy_and_type_checking_imports():
    graph = import_graph()
    assert "bringup.runner.plan.plan" in graph["bringup.report.sections.plan"]  # module level
    assert "bringup.report.sections.plan" in graph["bringup.cli.render.profile_diff"]  # inside a function
    assert "bringup.runner.host.decode_layers" in graph["bringup.runner.engine.executor"]  # under TYPE_CHECKING
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_packages_import_only_down_the_layers():
    assert upward_imports(import_graph(), LAYERS) == []


def test_the_runner_imports_only_down_its_layers():
    assert upward_imports(import_graph(), RUNNER_LAYERS, scope="bringup.runner.") == []


def test_no_import_cycle_between_modules_lazy_imports_included():
    assert cycles(import_graph()) == []


def test_no_two_packages_import_each_other():
    assert sibling_package_pairs(import_graph()) == []


def test_a_new_upward_import_or_cycle_is_caught():
    graph = defaultdict(set, import_graph())
    graph["bringup.runner.model.decoder"].add("bringup.runner.engine.executor")
    assert upward_imports(graph, RUNNER_LAYERS, scope="bringup.runner.") == [
        "bringup.runner.model.decoder -> bringup.runner.engine.executor"]
    assert any("bringup.runner.model.decoder" in c for c in cycles(graph))
    assert sibling_package_pairs(graph)
    graph["bringup.backends.cpu"].add("bringup.profiles.schema")
    assert "bringup.backends.cpu -> bringup.profiles.schema" in upward_imports(graph, LAYERS)
