"""Attention checks: each SDPA backend, forced through sdpa_kernel, on a small causal GQA case."""

import math
import os
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
import torch.nn.functional as F

from bringup.probes.capabilities.numerics import all_finite, relative_error, seeded_randn
from bringup.probes.capabilities.result import error_text, supported, unsupported
from bringup.probes.ops.placement import KINETO_QUIET
from bringup.profiles.attention_kinds import SDPA_BACKENDS

ATTENTION_DTYPES = ("float32", "bfloat16", "float16")
TOLERANCE = {"float32": 1e-4, "bfloat16": 3e-2, "float16": 5e-3}
BATCH, Q_HEADS, KV_HEADS, SEQ, HEAD_DIM = 1, 4, 2, 37, 64
# The aten op each SDPBackend member runs as (a prefix: the host's and MPS's variants add a suffix). A device with
# no kernel for the member may run another one anyway (torch's sdpa takes the math path on a PrivateUse1 device
# that registers no kernel choice, whatever sdpa_kernel asked), so a check passes only where this op ran.
SDPA_KERNEL_PREFIX = "aten::_scaled_dot_product"
SDPA_KERNELS = {
    "MATH": "aten::_scaled_dot_product_attention_math",
    "FLASH_ATTENTION": "aten::_scaled_dot_product_flash_attention",
    "EFFICIENT_ATTENTION": "aten::_scaled_dot_product_efficient_attention",
    "CUDNN_ATTENTION": "aten::_scaled_dot_product_cudnn_attention",
}


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Plain matmul-softmax causal attention in float64 with KV heads repeated for GQA."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(-1) @ v


def sdpa_gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    try:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    except TypeError:  # torch < 2.5 has no enable_gqa
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


@contextmanager
def dispatched_ops() -> Iterator[Counter]:
    """The names of the ops the block dispatched (nested calls included), filled when it ends."""
    os.environ.setdefault("KINETO_LOG_LEVEL", KINETO_QUIET)  # read when kineto starts, on the first session
    names: Counter = Counter()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as recorded:
        yield names
    names.update(event.name for event in recorded.events())


def kernel_ran(member: str, dispatched: Counter) -> tuple[str | None, str]:
    """(the member's own op as dispatched, or None where it did not run; what ran, for the reason)."""
    own = next((name for name in sorted(dispatched) if name.startswith(SDPA_KERNELS[member])), None)
    ran = sorted(name for name in dispatched if name.startswith(SDPA_KERNEL_PREFIX)) or ["no SDPA kernel"]
    return own, ", ".join(ran)


def try_backend(device: torch.device, member: str, dtype_name: str) -> dict[str, Any]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backend = getattr(SDPBackend, member, None)
    if backend is None:
        return {"ok": False, "why": f"this torch has no SDPBackend.{member}"}
    dtype = getattr(torch, dtype_name)
    q32 = seeded_randn(BATCH, Q_HEADS, SEQ, HEAD_DIM, seed=11)
    k32 = seeded_randn(BATCH, KV_HEADS, SEQ, HEAD_DIM, seed=12)
    v32 = seeded_randn(BATCH, KV_HEADS, SEQ, HEAD_DIM, seed=13)
    q, k, v = (t.to(dtype) for t in (q32, k32, v32))
    expected = reference_attention(*(t.to(torch.float64) for t in (q, k, v)))
    try:
        q, k, v = q.to(device), k.to(device), v.to(device)
        with sdpa_kernel([backend]), dispatched_ops() as dispatched:
            out = sdpa_gqa(q, k, v)
    except Exception as exc:
        return {"ok": False, "why": error_text(exc)}
    own, ran = kernel_ran(member, dispatched)
    if own is None:
        return {"ok": False, "why": f"torch ran {ran} instead of {SDPA_KERNELS[member]}: the device has no "
                                    f"SDPBackend.{member} kernel"}
    return {**judge(out, expected, dtype_name), "kernel": own}


def judge(out: torch.Tensor, expected: torch.Tensor, dtype_name: str) -> dict[str, Any]:
    """One dtype's result against the float64 reference: finite, and within that dtype's tolerance."""
    if not all_finite(out):
        return {"ok": False, "why": "non-finite output"}
    _, max_rel = relative_error(out, expected)
    tol = TOLERANCE[dtype_name]
    if max_rel > tol:
        return {"ok": False, "why": f"error {max_rel:.3g} > tolerance {tol:g}", "max_rel": max_rel}
    return {"ok": True, "max_rel": max_rel}


def summarize(per_dtype: dict[str, dict[str, Any]], case: str, compared: str, **extra: Any) -> dict[str, Any]:
    """The capability from one implementation's per-dtype results: supported when any dtype passed."""
    passed = {n: r for n, r in per_dtype.items() if r["ok"]}
    details = {
        "case": case,
        "dtypes": {n: ("pass" if r["ok"] else "fail: " + r["why"]) for n, r in per_dtype.items()},
        **extra,
    }
    if not passed:
        first_reason = next(iter(per_dtype.values()))["why"]
        return unsupported(f"no dtype ran correctly (float32: {first_reason})", **details)
    evidence = ", ".join(f"{n} max_rel {r['max_rel']:.2e}" for n, r in passed.items())
    return supported(f"{compared}: {evidence}", **details)


def check_sdpa(device: torch.device, member: str) -> dict[str, Any]:
    per_dtype = {name: try_backend(device, member, name) for name in ATTENTION_DTYPES}
    case = f"causal GQA B={BATCH} Hq={Q_HEADS} Hkv={KV_HEADS} L={SEQ} D={HEAD_DIM}"
    kernels = sorted({r["kernel"] for r in per_dtype.values() if r.get("ok") and r.get("kernel")})
    ran = f" ({', '.join(kernels)} ran)" if kernels else ""
    return summarize(per_dtype, case, f"{case}{ran} vs fp64 matmul-softmax", kernels=kernels)


def attention_checks() -> dict[str, Callable[[torch.device], dict[str, Any]]]:
    return {name: (lambda device, m=member: check_sdpa(device, m)) for name, member in SDPA_BACKENDS.items()}
