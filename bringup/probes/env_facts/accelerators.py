"""Accelerator drivers: the vendors' `*-smi` tools when present, and driver versions from /proc and /sys."""

import re
from collections.abc import Callable
from pathlib import Path

from bringup.probes.env_facts.tools import NOT_FOUND, TOOL_TIMEOUT_S, ToolResult, one_line, run_all, run_tool

MAX_DEVICE_LINES = 8

# tool name -> (arguments, the output lines worth keeping)
SMI_TOOLS: dict[str, tuple[list[str], str]] = {
    "nvidia-smi": (["--query-gpu=index,name,driver_version,pci.bus_id,memory.total", "--format=csv,noheader"], r"."),
    "rocm-smi": (["--showproductname", "--showdriverversion"], r"Card series|Card model|Driver version|GFX"),
    "xpu-smi": (["discovery"], r"Device Name|Driver Version|PCI BDF"),
    "npu-smi": (["info"], r"Version|^\|\s*\d+\s+\w"),
}
# file below the system root -> what it tells
DRIVER_FILES = {
    "proc/driver/nvidia/version": "nvidia",
    "sys/module/nvidia/version": "nvidia_module",
    "sys/module/amdgpu/version": "amdgpu",
    "opt/rocm/.info/version": "rocm",
    "usr/local/Ascend/driver/version.info": "ascend",
}
LOADED_MODULES = ("nvidia", "amdgpu", "i915", "xe", "habanalabs")


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


def driver_file_facts(root: Path) -> dict[str, str]:
    facts = {}
    for relative, name in DRIVER_FILES.items():
        line = read_first_line(root / relative)
        if line:
            facts[f"driver_{name}"] = line
    loaded = [m for m in LOADED_MODULES if (root / "sys" / "module" / m).is_dir()]
    facts["kernel_modules"] = " ".join(loaded) if loaded else "none of " + ", ".join(LOADED_MODULES)
    return facts


def accelerator_facts(root: Path = Path("/"), timeout: float = TOOL_TIMEOUT_S) -> dict[str, str]:
    calls: dict[str, Callable[[], ToolResult]] = {
        name: (lambda argv=(name, *args): run_tool(argv, timeout)) for name, (args, _) in SMI_TOOLS.items()
    }
    calls["nvidia-smi header"] = lambda: run_tool(["nvidia-smi"], timeout)
    results = run_all(calls)
    facts: dict[str, str] = {}
    for name, (_, pattern) in SMI_TOOLS.items():
        facts.update(smi_facts(name, results[name], pattern))
    facts.update(cuda_driver_api(results["nvidia-smi header"]))
    facts.update(driver_file_facts(root))
    return facts


def legacy_driver(facts: dict[str, str]) -> str | None:
    """The one-line `driver` field profiles have always had: the first vendor driver version found."""
    for key, label in (("driver_nvidia", "nvidia"), ("driver_amdgpu", "amdgpu")):
        if key in facts:
            return f"{label}: {facts[key]}"
    return None
