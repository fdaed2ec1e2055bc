"""C/C++ and device compilers on PATH, and the one torch.compile's C++ backend would use."""

import os
import re
import sys
from collections.abc import Callable, Mapping

from bringup.probes.env_facts.tools import (
    NOT_FOUND,
    TOOL_TIMEOUT_S,
    ToolResult,
    first_line,
    one_line,
    run_all,
    run_tool,
)

COMPILERS = ("gcc", "g++", "clang", "nvcc", "hipcc", "icpx")


def default_cxx() -> str:
    """Inductor's C++ compiler when `CXX` is not set."""
    return "clang++" if sys.platform == "darwin" else "g++"


def compiler_version(name: str, result: ToolResult) -> str:
    """The line naming the version: the first one for gcc/clang, the `release` line for nvcc."""
    if not result.ok:
        return result.reason or NOT_FOUND
    if name == "nvcc":
        match = re.search(r"^.*release.*$", result.output or "", re.MULTILINE)
        if match:
            return one_line(match.group(0))
    return first_line(result)


def compiler_facts(env: Mapping[str, str] | None = None, timeout: float = TOOL_TIMEOUT_S) -> dict[str, str]:
    env = os.environ if env is None else env
    cxx = env.get("CXX", "").strip()
    in_use = cxx.split()[0] if cxx else default_cxx()
    calls: dict[str, Callable[[], ToolResult]] = {
        name: (lambda name=name: run_tool([name, "--version"], timeout)) for name in COMPILERS
    }
    calls["CXX"] = lambda: run_tool([in_use, "--version"], timeout)
    results = run_all(calls)
    facts = {name: compiler_version(name, results[name]) for name in COMPILERS}
    source = f"CXX={cxx}" if cxx else "CXX not set, inductor default"
    facts["cxx_in_use"] = f"{in_use} ({source}): {compiler_version(in_use, results['CXX'])}"
    return facts
