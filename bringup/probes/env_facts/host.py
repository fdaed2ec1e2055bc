"""The host: CPU model and the ISA features kernels dispatch on, cores, memory, OS, kernel, C library, Python."""

import os
import platform
import sys
from pathlib import Path

import psutil

from bringup.number_rule import NumberRefused, whole_number
from bringup.probes.env_facts.tools import guarded, one_line

X86_FEATURES = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw", "avx512vl",
                "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "amx_fp16")
ARM_FEATURES = ("asimd", "asimdhp", "asimddp", "fphp", "bf16", "i8mm", "sve", "sve2", "sme")
MODEL_KEYS = ("model name", "Model Name", "Hardware", "Processor", "cpu model", "uarch")
GIB = 1024**3


def read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def cpuinfo_field(cpuinfo: str, keys: tuple[str, ...]) -> str | None:
    """The first value of the first of `keys` present (cpuinfo repeats fields once per logical CPU)."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() not in fields:
            fields[name.strip()] = value.strip()
    return next((fields[k] for k in keys if fields.get(k)), None)


def isa_features(cpuinfo: str) -> tuple[list[str], list[str]]:
    """(present, absent) among the features that matter, from x86 `flags` or ARM `Features`."""
    flags = set((cpuinfo_field(cpuinfo, ("flags", "Features")) or "").split())
    if not flags:
        return [], []
    wanted = ARM_FEATURES if "asimd" in flags or "fp" in flags else X86_FEATURES
    return [f for f in wanted if f in flags], [f for f in wanted if f not in flags]


def cpu_model(cpuinfo: str) -> str:
    model = cpuinfo_field(cpuinfo, MODEL_KEYS)
    if not model:
        implementer = cpuinfo_field(cpuinfo, ("CPU implementer",))
        part = cpuinfo_field(cpuinfo, ("CPU part",))
        model = f"implementer {implementer}, part {part}" if implementer else None
    return one_line(model or platform.processor() or "unknown")


def usable_cpus() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


def cgroup_cpu_quota(root: Path) -> str | None:
    quota, _, period = read_text(root / "sys/fs/cgroup/cpu.max").partition(" ")
    if not quota or quota.strip() == "max":
        return None
    return f"{int(quota) / int(period):g} CPUs"


def cgroup_memory_limit(root: Path) -> str | None:
    try:
        return f"{whole_number(read_text(root / 'sys/fs/cgroup/memory.max'), 'memory.max') / GIB:.1f} GiB"
    except NumberRefused:  # "max" (no limit), or not a number
        return None


def core_counts(root: Path) -> str:
    physical = psutil.cpu_count(logical=False)
    text = f"{os.cpu_count()} logical, {physical if physical else '?'} physical, {usable_cpus() or '?'} usable"
    quota = guarded(lambda: cgroup_cpu_quota(root), lambda reason: None)
    return text + (f", cgroup quota {quota}" if quota else "")


def cpu_facts(root: Path = Path("/")) -> dict[str, str]:
    cpuinfo = read_text(root / "proc/cpuinfo")
    present, absent = isa_features(cpuinfo)
    facts = {
        "model": cpu_model(cpuinfo),
        "architecture": platform.machine() or "unknown",
        "isa_features": " ".join(present) if present else ("none of those checked" if cpuinfo else "unknown"),
    }
    if absent:
        facts["isa_absent"] = " ".join(absent)
    facts["cores"] = guarded(lambda: core_counts(root), lambda reason: reason)
    nodes = list((root / "sys/devices/system/node").glob("node[0-9]*"))
    if nodes:
        facts["numa_nodes"] = str(len(nodes))
    return facts


def memory_text(root: Path) -> str:
    text = f"{psutil.virtual_memory().total / GIB:.1f} GiB"
    limit = guarded(lambda: cgroup_memory_limit(root), lambda reason: None)
    return text + (f", cgroup limit {limit}" if limit else "")


def os_name(root: Path) -> str:
    for line in read_text(root / "etc/os-release").splitlines():
        key, _, value = line.partition("=")
        if key == "PRETTY_NAME":
            return one_line(value.strip().strip('"'))
    mac = platform.mac_ver()[0]
    return f"macOS {mac}" if mac else platform.system()


def c_library() -> str:
    name, version = platform.libc_ver()
    return f"{name} {version}" if name else "unknown"


def system_facts(root: Path = Path("/")) -> dict[str, str]:
    return {
        "os": guarded(lambda: os_name(root), lambda reason: reason),
        "kernel": f"{platform.system()} {platform.release()}",
        "libc": guarded(c_library, lambda reason: reason),
        "python": one_line(f"{platform.python_implementation()} {sys.version}"),
        "memory": guarded(lambda: memory_text(root), lambda reason: reason),
    }
