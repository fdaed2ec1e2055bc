"""Attention implementations a backend supplies (Backend.attention_implementations), each verified like the SDPA
backends: the runner's calling convention on a small causal GQA case, per dtype, against float64."""

from collections.abc import Callable
from typing import Any

import torch

from bringup.backends.base import AttentionFn
from bringup.backends.registry import all_backends
from bringup.probes.capabilities.attention import ATTENTION_DTYPES, attention_checks, judge, summarize
from bringup.probes.capabilities.numerics import seeded_randn
from bringup.probes.capabilities.result import error_text, unsupported

KV_HEADS, BATCH, GROUP, SEQ, HEAD_DIM = 2, 2, 2, 19, 64
CASE = f"runner layout, causal, kvH={KV_HEADS} B={BATCH} G={GROUP} L={SEQ} D={HEAD_DIM}"


def causal_mask() -> torch.Tensor:
    """[1, B, G*Q, L], True = attend: query row r (group-major) sits at position r % Q."""
    positions = torch.arange(GROUP * SEQ) % SEQ
    allowed = torch.arange(SEQ)[None, :] <= positions[:, None]
    return allowed.expand(1, BATCH, GROUP * SEQ, SEQ).contiguous()


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    scores = (q @ k.transpose(-1, -2)) * scale
    return scores.masked_fill(~mask, float("-inf")).softmax(-1) @ v


def try_implementation(fn: AttentionFn, device: torch.device, dtype_name: str) -> dict[str, Any]:
    dtype = getattr(torch, dtype_name)
    q = seeded_randn(KV_HEADS, BATCH, GROUP * SEQ, HEAD_DIM, seed=21).to(dtype)
    k = seeded_randn(KV_HEADS, BATCH, SEQ, HEAD_DIM, seed=22).to(dtype)
    v = seeded_randn(KV_HEADS, BATCH, SEQ, HEAD_DIM, seed=23).to(dtype)
    mask, scale = causal_mask(), HEAD_DIM ** -0.5
    expected = reference(*(t.to(torch.float64) for t in (q, k, v)), mask, scale)
    try:
        out = fn(q.to(device), k.to(device), v.to(device), mask.to(device), scale, None)
    except Exception as exc:
        return {"ok": False, "why": error_text(exc)}
    if tuple(out.shape) != tuple(expected.shape):
        return {"ok": False, "why": f"output shape {list(out.shape)}, expected {list(expected.shape)}"}
    return judge(out, expected, dtype_name)


def check_implementation(device: torch.device, family: str, device_type: str, fn: AttentionFn) -> dict[str, Any]:
    if device.type != device_type:
        return unsupported(f"supplied by the {family} backend for {device_type} devices, not {device.type}",
                           supplied_by=family)
    per_dtype = {name: try_implementation(fn, device, name) for name in ATTENTION_DTYPES}
    return summarize(per_dtype, CASE, f"{CASE} vs fp64 masked softmax", supplied_by=family)


def backend_attention_checks() -> dict[str, Callable[[torch.device], dict[str, Any]]]:
    """One check per implementation the present backends supply, under the name the backend gives it."""
    checks: dict[str, Callable[[torch.device], dict[str, Any]]] = {}
    for backend in all_backends():
        for name, fn in backend.attention_implementations().items():
            checks.setdefault(name, lambda device, b=backend, f=fn: check_implementation(
                device, b.family, b.torch_device_type, f))
    return checks


def all_attention_checks() -> dict[str, Callable[[torch.device], dict[str, Any]]]:
    """The SDPA backends, then the implementations the device families' backends supply."""
    sdpa = attention_checks()
    return sdpa | {name: check for name, check in backend_attention_checks().items() if name not in sdpa}
