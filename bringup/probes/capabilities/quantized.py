"""Quantized matmul capabilities (features group): proven by running the kernel's own verify-ops cases — one at
decode and one at prefill shapes, against the float64 reference of the dequantized math — on the device.
`fp8_scaled_mm` is `_scaled_mm` with one scale per tensor and a float32 result; `fp8_scaled_mm_rowwise` the same
kernel with a scale per row of a and per column of b and a bfloat16 result (the form CUDA's row-wise kernels take).

A capability is `supported` when one of its kernels passed both cases in one activation dtype on the device itself
(the evidence names the kernel, dtype and errors); `unsupported` when none did, with each kernel's reason: a case
that passed through the backend's CPU fallback (verify-ops' placement, `runs_on: host_fallback`) proves the host's
kernel, not the device's, so it counts as a rejection too. A kernel that computes
wrong numbers refuses the capability outright: no other dtype or kernel is tried after it.
"""

from collections.abc import Callable
from typing import Any

import torch

from bringup.probes.capabilities.result import supported, unsupported
from bringup.probes.ops.catalog import load_catalog
from bringup.probes.ops.catalog.quantized import ROWWISE
from bringup.probes.ops.execute import run_case
from bringup.probes.ops.spec import CaseKey
from bringup.profiles.sections.ops import HOST_FALLBACK, OpCaseRecord

# capability -> the kernels that provide it, each with the activation dtypes tried (first that passes wins)
KERNELS: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "int8_weight_only_matmul": [("_weight_int8pack_mm", ("float32", "bfloat16"))],
    "int4_weight_only_matmul": [("_weight_int4pack_mm_for_cpu", ("float32", "bfloat16")),
                                ("_weight_int4pack_mm", ("bfloat16", "float32"))],
    "fp8_scaled_mm": [("_scaled_mm", ("float8_e4m3fn",))],
    "fp8_scaled_mm_rowwise": [("_scaled_mm", ("float8_e4m3fn",))],
}
ROLES = ("decode", "prefill")
# a capability proven by the op's cases that carry this parameter (the others' cases are those without it)
CASE_PARAMS = {"fp8_scaled_mm_rowwise": f"scales={ROWWISE}"}


def capability_of(kernel: str) -> str | None:
    """The capability a kernel provides (None for kernels outside these checks)."""
    return next((name for name, options in KERNELS.items() if any(op == kernel for op, _ in options)), None)


def probe_cases(op: str, capability: str = "") -> list[str]:
    """The first decode and the first prefill case of the op that carry the capability's parameter (CASE_PARAMS),
    or, for the others, no such parameter."""
    wanted = CASE_PARAMS.get(capability)
    labels = [case.label for case in load_catalog().get(op).cases
              if (wanted in case.label if wanted else not any(p in case.label for p in CASE_PARAMS.values()))]
    return [next(label for label in labels if label.startswith(role)) for role in ROLES]


def _describe(record: OpCaseRecord) -> str:
    return f"{record.op}[{record.dtype}] {record.case}"


def check_kernels(device: torch.device, capability: str) -> dict[str, Any]:
    """Kernels and dtypes in order: the first that passes both cases proves the capability; one that computes
    wrong numbers (or fails otherwise) refuses it at once; a rejection moves on to the next."""
    catalog = load_catalog()
    rejections: list[str] = []
    for op, dtypes in KERNELS[capability]:
        for dtype in dtypes:
            records = [run_case(CaseKey(op, dtype, label), catalog, device) for label in probe_cases(op, capability)]
            wrong = [r for r in records if r.status not in ("pass", "unsupported")]
            if wrong:
                return unsupported(f"{_describe(wrong[0])}: {wrong[0].status} ({(wrong[0].message or '')[:200]})",
                                   kernel=op, activations=dtype)
            rejected = [r for r in records if r.status == "unsupported"]
            if rejected:
                rejections.append(f"{_describe(rejected[0])}: unsupported ({(rejected[0].message or '')[:160]})")
                continue
            hosted = [r for r in records if r.runs_on == HOST_FALLBACK]
            if hosted:
                rejections.append(f"{_describe(hosted[0])}: passed through the host, not on the device "
                                  f"({(hosted[0].runs_on_evidence or '')[:160]})")
                continue
            errors = "; ".join(f"{r.case.split(' ')[0]} {r.case.split(' ')[1]}: max_abs {r.max_abs:.2e} "
                               f"(atol {r.atol:.1e}, rtol {r.rtol:.1e})" for r in records)
            return supported(f"{op}[{dtype}] vs float64 dequantized reference: {errors}", kernel=op,
                             activations=dtype, max_abs=max(r.max_abs or 0.0 for r in records))
    return unsupported("; ".join(rejections))


def quantized_checks() -> dict[str, Callable[[torch.device], dict[str, Any]]]:
    return {name: (lambda device, n=name: check_kernels(device, n)) for name in KERNELS}
