"""The design's first rule, enforced: nothing outside the backends branches on a device's name.

Every module under bringup/ is parsed. Outside bringup/backends/ (one module per family, where a family's name
belongs), no comparison, membership test, `match` case or prefix test may hold a device-type literal. The host
itself is asked through `bringup.backends.host.is_host`. Naming a non-host device type anywhere outside the
backends (even without comparing) is allowed only where the environment report reads torch's build facts.
"""

from __future__ import annotations

import ast
from pathlib import Path

import bringup

PACKAGE_ROOT = Path(bringup.__file__).parent
HOST_TYPE = "cpu"
DEVICE_TYPES = {HOST_TYPE, "cuda", "xpu", "mps", "npu", "hpu", "privateuseone", "privateuse1", "emu", "mtia",
                "xla", "hip", "rocm", "musa", "mlu", "maia", "ipu", "vulkan"}  # not "meta": shapes only
# torch.version.cuda / .hip / .xpu are facts of the torch build, reported under those names
BUILD_FACTS = {"probes/env_facts/torch_build.py"}


def _modules() -> list[tuple[str, ast.Module]]:
    found = []
    for path in sorted(PACKAGE_ROOT.rglob("*.py")):
        relative = path.relative_to(PACKAGE_ROOT).as_posix()
        if not relative.startswith("backends/"):
            found.append((relative, ast.parse(path.read_text(), filename=str(path))))
    return found


def _device_literals(node: ast.AST) -> list[str]:
    names = []
    for inner in ast.walk(node):
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            kind = inner.value.split(":", 1)[0].lower()
            if kind in DEVICE_TYPES:
                names.append(inner.value)
    return names


def _branches(tree: ast.Module) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            found += [(node.lineno, name) for name in _device_literals(node)]
        elif isinstance(node, ast.match_case):
            found += [(node.pattern.lineno, name) for name in _device_literals(node.pattern)]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("startswith", "endswith", "removeprefix")):
            found += [(node.lineno, name) for arg in node.args for name in _device_literals(arg)]
    return found


def test_no_module_outside_the_backends_branches_on_a_device_name() -> None:
    offenders = [f"bringup/{path}:{line}: {name!r}" for path, tree in _modules() for line, name in _branches(tree)]
    assert not offenders, "branch on a device name outside bringup/backends/ (ask the backend, or is_host):\n" + \
        "\n".join(offenders)


def test_no_module_outside_the_backends_names_an_accelerator() -> None:
    offenders = []
    for path, tree in _modules():
        if path in BUILD_FACTS:
            continue
        for node in ast.walk(tree):
            names = [n for n in _device_literals(node) if n.split(":", 1)[0].lower() != HOST_TYPE] \
                if isinstance(node, ast.Constant) else []
            offenders += [f"bringup/{path}:{node.lineno}: {name!r}" for name in names]
    assert not offenders, "an accelerator named outside bringup/backends/:\n" + "\n".join(offenders)


def test_the_scan_sees_a_branch_on_a_device_name() -> None:
    tree = ast.parse('if device.type == "cuda":\n    pass\nmatch kind:\n    case "xpu":\n        pass\n'
                     'ok = name.startswith("npu")\nfine = x.to("cpu")\n')
    assert [name for _, name in _branches(tree)] == ["cuda", "xpu", "npu"]
