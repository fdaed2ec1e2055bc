"""attention: scaled_dot_product_attention per SDPA backend the profile marks supported, over
sequence lengths (causal prefill, batch 1), reported as TFLOP/s."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bringup.probes.bench.accounting import sdpa_work
from bringup.probes.bench.context import BenchContext
from bringup.probes.bench.records import measured, not_measured, short_error
from bringup.probes.bench.sizing import RateTracker, too_big_reason, too_slow_reason
from bringup.profiles.attention_kinds import SDPA_ALIASES, SDPA_BACKENDS, SDPA_MATH
from bringup.profiles.sections.bench import BenchGroup, BenchRecord

# capability name (bringup probe) -> torch.nn.attention.SDPBackend member name, with the names a profile may alias
SDPA_BACKENDS = SDPA_BACKENDS | {alias: SDPA_BACKENDS[name] for alias, name in SDPA_ALIASES.items()}
DTYPE_PREFERENCE = ("bfloat16", "float16", "float32")


def backends_to_measure(ctx: BenchContext, notes: list[str]) -> tuple[list[str], list[BenchRecord]]:
    supported = ctx.supported("attention")
    if supported is None:
        notes.append("no capabilities in the profile: measuring the math SDPA backend only "
                     "(run `bringup probe` to measure every supported backend)")
        return [SDPA_MATH], []
    unknown = [not_measured(name, name, "skipped", "not an SDPA backend this benchmark knows")
               for name in supported if name not in SDPA_BACKENDS]
    return [name for name in supported if name in SDPA_BACKENDS], unknown


def attention_dtype(ctx: BenchContext, backend: str) -> str:
    """The lowest-precision floating dtype the profile supports and this backend's check passed
    (its capability details list per-dtype results); float32 without capabilities."""
    supported = ctx.supported("dtypes")
    if supported is None:
        return "float32"
    capability = ctx.profile.capabilities.attention.get(backend) if ctx.profile.capabilities else None
    per_dtype = (capability.details.get("dtypes") if capability else None) or {}
    passed = [d for d in DTYPE_PREFERENCE if d in supported and (not per_dtype or per_dtype.get(d) == "pass")]
    return passed[0] if passed else "float32"


def sdpa_kernel(backend: str):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    return sdpa_kernel([getattr(SDPBackend, SDPA_BACKENDS[backend])])


def measure(ctx: BenchContext, backend: str, dtype: str, seq: int, rates: RateTracker) -> BenchRecord:
    heads, head_dim = ctx.preset.attention_heads, ctx.preset.attention_head_dim
    torch_dtype = getattr(torch, dtype)
    work = sdpa_work(1, heads, seq, seq, head_dim, torch_dtype.itemsize, causal=True)
    key = f"{backend} {dtype} seq={seq}"
    params = {"batch": 1, "heads": heads, "head_dim": head_dim, "q_len": seq, "kv_len": seq, "causal": True}
    # the math backend materialises the [heads, seq, seq] score matrix (float32)
    scores = heads * seq * seq * 4 if backend == SDPA_MATH else 0
    reason = too_big_reason(int(work.bytes) + scores, ctx.memory_budget_bytes()) or too_slow_reason(
        rates.estimate_s(backend, work.flops), ctx.preset.max_call_s)
    if reason:
        return not_measured(key, backend, "skipped", reason, dtype=dtype, params=params)
    ctx.on_step(f"attention {key}")
    try:
        q, k, v = (torch.randn(1, heads, seq, head_dim, device=ctx.device).to(torch_dtype) for _ in range(3))
        with sdpa_kernel(backend):
            timing = ctx.harness.measure(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    except Exception as exc:  # the backend refuses this dtype/shape here: record why
        return not_measured(key, backend, "error", short_error(exc), dtype=dtype, params=params)
    rates.note(backend, work.flops, timing.median_s)
    return measured(key, backend, timing, work, dtype=dtype, params=params)


def run(ctx: BenchContext) -> BenchGroup:
    notes: list[str] = []
    backends, records = backends_to_measure(ctx, notes)
    if not backends:
        return BenchGroup(status="skipped", reason="the profile marks no SDPA backend supported",
                          notes=notes, records=records)
    notes.append("FLOPs count QK^T and PV (4·S²·D per head), halved for the causal mask; dtype per backend: "
                 "the lowest precision that passed its capability check")
    rates = RateTracker()
    for backend in backends:
        dtype = attention_dtype(ctx, backend)
        for seq in ctx.preset.attention_seq:
            records.append(measure(ctx, backend, dtype, seq, rates))
    status = "measured" if any(r.status == "ok" for r in records) else "skipped"
    return BenchGroup(status=status, reason=None if status == "measured" else "nothing measured",
                      notes=notes, records=records)
