"""Paged decode attention for host memory (kernels/paged_decode.cpp, built by host_build).

A decode step attends one query token per sequence over its whole context. The gather path copies every
sequence's K/V out of the paged cache each step and layer; this kernel reads them in place through the
slots. It is the first entry of the plan's attention list (decode steps only) when it builds here, matches
the plain matmul-softmax path on a check, and measured faster than gather + matmul-softmax at start-up.
Under torch.compile it is an opaque custom op (`bringup::paged_decode`).
"""

from __future__ import annotations

import ctypes
import functools
import time

import torch

from bringup.runner.attention import PAGED_DECODE as NAME
from bringup.runner.config import ModelConfig
from bringup.runner.host_build import check_host_kernel, load
from bringup.runner.layout import MARGIN  # the same 90 % rule as the weight layouts
from bringup.runner.model import matmul_softmax_attention
from bringup.runner.plan import Choice


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    lib = load("paged_decode.cpp")
    fn = lib.bringup_paged_decode
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    fn.argtypes = [ptr, i64, i64, i64, i64, ptr, ptr, i64, ptr, i64, ptr, ctypes.c_float, ptr]
    fn.restype = None
    return lib


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_slots: torch.Tensor,
        context_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """q [B, H, D] against caches [KV, S, D] through context_slots [B, L] (first context_lens[b]) → [B, H*D]."""
    q = q.contiguous()
    B, H, D = q.shape
    KV, S, _ = k_cache.shape
    if context_slots.stride(-1) != 1:
        context_slots = context_slots.contiguous()
    out = torch.empty(B, H * D, dtype=q.dtype, device=q.device)
    library().bringup_paged_decode(q.data_ptr(), B, H, KV, D, k_cache.data_ptr(), v_cache.data_ptr(), S,
                                   context_slots.data_ptr(), context_slots.stride(0), context_lens.data_ptr(),
                                   scale, out.data_ptr())
    return out


@torch.library.custom_op("bringup::paged_decode", mutates_args=())
def paged_decode_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_slots: torch.Tensor,
                    context_lens: torch.Tensor, scale: float) -> torch.Tensor:
    return run(q, k_cache, v_cache, context_slots, context_lens, scale)


@paged_decode_op.register_fake
def _paged_decode_shape(q, k_cache, v_cache, context_slots, context_lens, scale):  # type: ignore[no-untyped-def]
    return q.new_empty(q.shape[0], q.shape[1] * q.shape[2])


def attend(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_slots: torch.Tensor,
           context_lens: torch.Tensor, scale: float) -> torch.Tensor:
    if torch.compiler.is_compiling():
        return paged_decode_op(q, k_cache, v_cache, context_slots, context_lens, scale)
    return run(q, k_cache, v_cache, context_slots, context_lens, scale)


def gather_reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_slots: torch.Tensor,
                     context_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """The same result by the gather path: index_select the context, masked matmul-softmax."""
    B, H, D = q.shape
    KV, L = k_cache.shape[0], context_slots.shape[1]
    flat = context_slots.reshape(-1)
    keys = k_cache.index_select(1, flat).view(KV, B, L, D)
    values = v_cache.index_select(1, flat).view(KV, B, L, D)
    qg = q.view(B, KV, H // KV, D).transpose(0, 1)
    mask = (torch.arange(L, device=q.device) < context_lens.view(B, 1)).view(1, B, 1, L)
    out = matmul_softmax_attention(qg, keys, values, mask, scale)  # [KV, B, G, D]
    return out.transpose(0, 1).reshape(B, H * D)


def _case(heads: int, kv_heads: int, head_dim: int, batch: int, length: int, slots: int, seed: int,
          device: torch.device) -> tuple:
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, head_dim, generator=gen)
    k, v = torch.randn(kv_heads, slots, head_dim, generator=gen), torch.randn(kv_heads, slots, head_dim, generator=gen)
    context = torch.stack([torch.randperm(slots, generator=gen)[:length] for _ in range(batch)])
    lens = torch.randint(1, length + 1, (batch,), generator=gen)
    lens[0] = length
    return tuple(t.to(device) for t in (q, k, v, context, lens))


def check(device: torch.device, dtype: torch.dtype, heads: int, kv_heads: int, head_dim: int) -> str | None:
    """None when the kernel builds, runs here and matches the gather path; otherwise why not."""

    def worst_error() -> float:
        worst = 0.0
        for seed, (batch, length) in enumerate(((1, 1), (3, 37), (5, 130))):
            args = _case(heads, kv_heads, head_dim, batch, length, 256, seed, device)
            with torch.inference_mode():
                worst = max(worst, (attend(*args, head_dim**-0.5) - gather_reference(*args, head_dim**-0.5)
                                    ).abs().max().item())
        return worst

    return check_host_kernel(device, dtype, worst_error, "paged decode differs from matmul-softmax")


def time_against_gather(device: torch.device, heads: int, kv_heads: int, head_dim: int, batch: int = 8,
                        length: int = 256, reps: int = 20) -> tuple[float, float]:
    """Best seconds per call (kernel, gather path) on a decode step of `batch` sequences of `length` tokens."""
    args = _case(heads, kv_heads, head_dim, batch, length, 8 * batch * length, 99, device)
    args[4].fill_(length)
    scale = head_dim**-0.5
    best = {"kernel": float("inf"), "gather": float("inf")}
    with torch.inference_mode():
        for _ in range(reps):
            for name, fn in (("kernel", attend), ("gather", gather_reference)):
                start = time.perf_counter()
                fn(*args, scale)
                best[name] = min(best[name], time.perf_counter() - start)
    return best["kernel"], best["gather"]


@functools.lru_cache(maxsize=16)
def _verdict(device: torch.device, dtype: torch.dtype, heads: int, kv_heads: int, head_dim: int
             ) -> tuple[bool, str]:
    why = check(device, dtype, heads, kv_heads, head_dim)
    if why is not None:
        return False, why
    kernel, gather = time_against_gather(device, heads, kv_heads, head_dim)
    timing = f"{kernel * 1e6:.0f}us vs gather + matmul-softmax {gather * 1e6:.0f}us on an 8 x 256-token decode step"
    if kernel < MARGIN * gather:
        return True, f"reads K/V in place; matches matmul-softmax on a check; {timing}"
    return False, f"not faster: {timing}"


def with_paged_decode(attention: Choice, device: torch.device, dtype: torch.dtype, config: ModelConfig) -> Choice:
    """The plan's attention list with paged_decode first (decode steps) when it checked out and is faster."""
    use, why = _verdict(device, dtype, config.num_heads, config.num_kv_heads, config.head_dim)
    if use:
        return Choice([NAME, *attention.value], f"{NAME} for decode steps: {why}; {attention.evidence}")
    return Choice(attention.value, f"{attention.evidence}; {NAME} not used: {why}")
