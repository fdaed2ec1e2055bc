"""The machine a benchmark ran on, printed at the top of its output: speed figures are only comparable between
runs when each names its CPU, the vector features that change the picture, torch, the device and the plan.

    from benchmarks.machine import machine_facts, header_lines
    print("\\n".join(header_lines(machine_facts("cpu"))))
"""

from __future__ import annotations

import os
import platform
from typing import Any

import torch

from bringup.backends.cpu import cpuinfo_field, isa_level
from bringup.backends.selection.select import resolve_explicit
from bringup.errors import BringupError

# the x86 features that decide how fast bfloat16 / int8 matmuls and the host kernels can be
ISA_FEATURES = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")


def cpu_model() -> str:
    """`model name` of /proc/cpuinfo, with its family and model numbers (a VM often hides the generation)."""
    name = cpuinfo_field("model name") or platform.processor() or platform.machine() or "unknown CPU"
    family = cpuinfo_field("cpu family")
    model = cpuinfo_field("model\t")  # the tab keeps "model name" from matching
    return f"{name} (family {family}, model {model})" if family and model else name


def isa_features() -> dict[str, bool] | None:
    """Which of ISA_FEATURES the kernel reports; None where /proc/cpuinfo has no flags line (not Linux x86)."""
    flags = cpuinfo_field("flags")
    if flags is None:
        return None
    present = set(flags.split())
    return {feature: feature in present for feature in ISA_FEATURES}


def usable_cores() -> int | None:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


def device_name(device: str | None) -> str | None:
    """The accelerator's name as bringup's backends report it; None for the CPU or an unknown (remote) device."""
    if device is None or torch.device(device).type == "cpu":
        return None
    try:
        return resolve_explicit(device, "benchmark device")[0].name
    except BringupError as exc:
        return f"not usable here ({exc})"


def machine_facts(device: str | None = "cpu") -> dict[str, Any]:
    """CPU, cores, ISA features, torch and its CPU capability, and the device (None: not known to this process)."""
    return {
        "cpu": cpu_model(),
        "usable_cores": usable_cores(),
        "logical_cores": os.cpu_count(),
        "system": f"{platform.system()} {platform.machine()}",
        "isa": isa_features(),
        "torch": torch.__version__,
        "torch_cpu_capability": isa_level(),
        "torch_threads": torch.get_num_threads(),
        "device": device,
        "device_name": device_name(device),
    }


def isa_text(isa: dict[str, bool] | None) -> str:
    if isa is None:
        return "unknown (no /proc/cpuinfo flags on this system)"
    present = [name for name, has in isa.items() if has]
    absent = [name for name, has in isa.items() if not has]
    return f"{' '.join(present) or 'none of the listed'}; absent: {' '.join(absent) or 'none'}"


def device_text(facts: dict[str, Any]) -> str:
    if facts["device"] is None:
        return "not known to this process"
    return f"{facts['device']} ({facts['device_name']})" if facts["device_name"] else str(facts["device"])


def header_lines(facts: dict[str, Any]) -> list[str]:
    return [
        f"machine: {facts['cpu']}, {facts['usable_cores']} usable of {facts['logical_cores']} logical cores, "
        f"{facts['system']}",
        f"isa:     {isa_text(facts['isa'])}",
        f"torch:   {facts['torch']}, CPU capability {facts['torch_cpu_capability']}, "
        f"{facts['torch_threads']} intra-op threads",
        f"device:  {device_text(facts)}",
    ]


def plan_facts(plan: dict[str, Any]) -> dict[str, Any]:
    """dtype, weight layout, attention implementations and compile setting from a plan's to_dict() (or /v1/plan)."""
    def value(name: str) -> Any:
        choice = plan.get(name)
        return choice.get("value") if isinstance(choice, dict) else None

    return {"dtype": value("dtype"), "weight_layout": value("weight_layout"), "attention": value("attention"),
            "compiled": value("compiled"), "decode_layers": value("decode_layers")}


def plan_line(facts: dict[str, Any]) -> str:
    attention = facts["attention"]
    attention_text = " > ".join(attention) if isinstance(attention, list) else str(attention)
    compiled = f"compiled ({facts['compiled']})" if facts["compiled"] else "eager"
    return (f"plan:    dtype {facts['dtype']}, weight layout {facts['weight_layout']}, "
            f"attention {attention_text}, {compiled}, decode layers {facts.get('decode_layers')}")


def cpu_times() -> list[int] | None:
    """The machine's CPU time counters from /proc/stat (user, nice, system, idle, iowait, irq, softirq, steal),
    in clock ticks; None where there is no /proc/stat."""
    try:
        with open("/proc/stat") as f:
            return [int(v) for v in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None


def steal_share(before: list[int] | None, after: list[int] | None) -> float | None:
    """The share of the CPU time between two cpu_times() readings that the hypervisor gave to other guests (steal):
    0 on a machine of one's own; a share above a few percent means a neighbour ran on these cores."""
    if before is None or after is None or len(before) < 8 or len(after) < 8:
        return None
    elapsed = sum(after) - sum(before)
    return (after[7] - before[7]) / elapsed if elapsed > 0 else None
