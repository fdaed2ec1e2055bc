"""Accelerator drivers: the vendors' `*-smi` tools when present, and driver versions from /proc and /sys.

Which tools, files and kernel modules to look at is each backend's declaration (smi_tools, driver_files,
kernel_modules)."""

import re
from collections.abc import Callable
from pathlib import Path

from bringup.backends.base import Backend
from bringup.backends.registry import registered
from bringup.probes.env_facts.tools import NOT_FOUND, TOOL_TIMEOUT_S, ToolResult, one_line, run_all, run_tool

MAX_DEVICE_LINES = 8



def smi_tools(backends: list[Backend]) -> dict[str, tuple[list[str], str]]:
    """tool name -> (arguments, the output lines worth keeping)."""
    return {t.name: (list(t.arguments), t.keep) for b in backends for t in b.smi_tools}


def driver_files(backends: list[Backend]) -> dict[str, str]:
    """file below the system root -> what it tells."""
    return {path: name for b in backends for path, name in b.driver_files.items()}


def loaded_modules(backends: list[Backend]) -> tuple[str, ...]:
    return tuple(m for b in backends for m in b.kernel_modules)



def kept_lines(output: str, pattern: str) -> list[str]:
    """Lines matching `pattern`, table borders and padding removed, at most MAX_DEVICE_LINES."""
    keep = []
    for raw in output.splitlines():
        line = one_line(raw.strip().strip("|+").replace("|", " "))
        if line and not set(line) <= set("=-+ ") and re.search(pattern, line):
            keep.append(line)
    return keep[:MAX_DEVICE_LINES]


def smi_facts(name: str, result: ToolResult, pattern: str) -> dict[str, str]:
    if not result.ok:
        return {name: result.reason or NOT_FOUND}
    lines = kept_lines(result.output or "", pattern)
    if not lines:
        return {name: "ran, no device lines"}
    if len(lines) == 1:
        return {name: lines[0]}
    return {f"{name}[{index}]": line for index, line in enumerate(lines)}


def cuda_driver_api(result: ToolResult) -> dict[str, str]:
    """The CUDA version the driver supports, from plain `nvidia-smi`'s header."""
    match = re.search(r"CUDA Version:\s*([\d.]+)", result.output or "")
    return {"nvidia_driver_cuda": match.group(1)} if match else {}


def read_first_line(path: Path) -> str | None:
    try:
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.strip():
                    return one_line(line)
    except OSError:
        return None
    return None


def driver_file_facts(root: Path, backends: list[Backend] | None = None) -> dict[str, str]:
    backends = registered() if backends is None else backends
    facts = {}
    for relative, name in driver_files(backends).items():
        line = read_first_line(root / relative)
        if line:
            facts[f"driver_{name}"] = line
    modules = loaded_modules(backends)
    loaded = [m for m in modules if (root / "sys" / "module" / m).is_dir()]
    facts["kernel_modules"] = " ".join(loaded) if loaded else "none of " + ", ".join(modules)
    return facts


def accelerator_facts(root: Path = Path("/"), timeout: float = TOOL_TIMEOUT_S,
                      backends: list[Backend] | None = None) -> dict[str, str]:
    backends = registered() if backends is None else backends
    tools = smi_tools(backends)
    calls: dict[str, Callable[[], ToolResult]] = {
        name: (lambda argv=(name, *args): run_tool(argv, timeout)) for name, (args, _) in tools.items()
    }
    calls["nvidia-smi header"] = lambda: run_tool(["nvidia-smi"], timeout)
    results = run_all(calls)
    facts: dict[str, str] = {}
    for name, (_, pattern) in tools.items():
        facts.update(smi_facts(name, results[name], pattern))
    facts.update(cuda_driver_api(results["nvidia-smi header"]))
    facts.update(driver_file_facts(root, backends))
    return facts


def legacy_driver(facts: dict[str, str]) -> str | None:
    """The one-line `driver` field profiles have always had: the first vendor driver version found."""
    for key, label in (("driver_nvidia", "nvidia"), ("driver_amdgpu", "amdgpu")):
        if key in facts:
            return f"{label}: {facts[key]}"
    return None
