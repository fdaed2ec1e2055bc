"""Paged decode attention for host memory (kernels/paged_decode.cpp, built by host_build).

A decode step attends one query token per sequence over its whole context. The gather path copies every
sequence's K/V out of the paged cache each step and layer; this kernel reads them in place through the
slots. The plan (plan/host_kernels.py) puts it first in the attention list (decode steps only) when it builds here,
matches the plain matmul-softmax path on a check, and measured faster than gather + matmul-softmax at start-up.
Under torch.compile it is an opaque custom op (`bringup::paged_decode`).
"""

from __future__ import annotations

import ctypes
import functools
import time
from pathlib import Path

import torch

from bringup.errors import StrictFallbackError, exception_line
from bringup.fallbacks import FallbackRecorder
from bringup.profiles.attention_kinds import PAGED_DECODE as NAME
from bringup.runner.host.kernel_check import KernelCheck, against_float64
from bringup.runner.model.attention_layer import matmul_softmax_attention
from bringup.runner.weights.kernels.build import HostKernelInputError, check_host_kernel, load, require_host_tensor

CHECK_CASES = ((1, 1), (3, 37), (5, 130))  # (sequences, context): one token, and ragged contexts
HOST_KERNELS = Path(__file__).parent / "kernels"  # the model's own host kernels (the weights' are in weights/kernels)


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    lib = load("paged_decode.cpp", HOST_KERNELS)
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    for fn in (lib.bringup_paged_decode, lib.bringup_paged_decode_bf16):
        fn.argtypes = [ptr, i64, i64, i64, i64, ptr, ptr, i64, ptr, i64, ptr, ctypes.c_float, ptr]
        fn.restype = None
    return lib


ENTRY_POINTS = {torch.float32: "bringup_paged_decode", torch.bfloat16: "bringup_paged_decode_bf16"}


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_slots: torch.Tensor,
        context_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """q [B, H, D] against caches [KV, S, D] through context_slots [B, L] (first context_lens[b]) → [B, H*D]."""
    check_inputs(q, k_cache, v_cache, context_slots, context_lens)  # before the library loads or a pointer leaves
    q, context_lens = q.contiguous(), context_lens.contiguous()
    B, H, D = q.shape
    KV, S, _ = k_cache.shape
    if context_slots.stride(-1) != 1:
        context_slots = context_slots.contiguous()
    out = torch.empty(B, H * D, dtype=q.dtype, device=q.device)
    getattr(library(), ENTRY_POINTS[q.dtype])(q.data_ptr(), B, H, KV, D, k_cache.data_ptr(), v_cache.data_ptr(), S,
                                              context_slots.data_ptr(), context_slots.stride(0),
                                              context_lens.data_ptr(), scale, out.data_ptr())
    return out


def check_inputs(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_slots: torch.Tensor,
                 context_lens: torch.Tensor) -> None:
    """HostKernelInputError unless the kernel can read every argument safely: host memory, the dtypes the C++
    reads (float32 or bfloat16 data, all one dtype; int64 slots and lengths), shapes that agree, and only slots inside
    the caches."""
    dtype = q.dtype if q.dtype in ENTRY_POINTS else torch.float32
    require_host_tensor("q", q, dtype, dims=3)
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if cache.dtype != dtype and cache.dtype in ENTRY_POINTS:
            raise HostKernelInputError(f"{name} is {cache.dtype} but q is {dtype}; the kernel reads one dtype for both")
        require_host_tensor(name, cache, dtype, dims=3, contiguous=True)
    require_host_tensor("context_slots", context_slots, torch.int64, dims=2)
    require_host_tensor("context_lens", context_lens, torch.int64, dims=1)
    _check_shapes(q, k_cache, v_cache, context_slots, context_lens)
    check_context(context_slots, context_lens, k_cache.shape[1])


def _check_shapes(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_slots: torch.Tensor,
                  context_lens: torch.Tensor) -> None:
    (batch, heads, head_dim), (kv_heads, _, cache_dim) = q.shape, k_cache.shape
    if v_cache.shape != k_cache.shape:
        raise HostKernelInputError(f"v_cache has shape {list(v_cache.shape)}; expected the k_cache shape "
                                   f"{list(k_cache.shape)}")
    if head_dim != cache_dim:
        raise HostKernelInputError(f"q has head_dim {head_dim} but the caches have head_dim {cache_dim}")
    if kv_heads < 1 or heads % kv_heads:
        raise HostKernelInputError(f"q has {heads} heads, not a multiple of the caches' {kv_heads} kv heads")
    if context_slots.shape[0] != batch:
        raise HostKernelInputError(f"context_slots has {context_slots.shape[0]} rows for {batch} queries in q")
    if context_lens.shape[0] != batch:
        raise HostKernelInputError(f"context_lens has {context_lens.shape[0]} lengths for {batch} queries in q")


def check_context(context_slots: torch.Tensor, context_lens: torch.Tensor, slots_total: int) -> None:
    """Every length in [1, L] and every slot the kernel reads (the first context_lens[b] of row b) in [0, S)."""
    if context_lens.numel() == 0:
        return
    shortest, longest = (int(v) for v in context_lens.aminmax())
    width = context_slots.shape[1]
    if shortest < 1 or longest > width:
        raise HostKernelInputError(f"context_lens holds lengths {shortest}..{longest}; each must be in [1, {width}] "
                                   f"(context_slots has {width} columns)")
    read = context_slots[:, :longest]
    low, high = (int(v) for v in read.aminmax())
    if low >= 0 and high < slots_total:  # the usual case: even the padding past shorter contexts is a valid slot
        return
    if shortest < longest:  # padding is never read: count it as the row's first slot, which is read anyway
        read = torch.where(torch.arange(longest) < context_lens.unsqueeze(1), read, read[:, :1])
    outside = (read < 0) | (read >= slots_total)
    if outside.any():
        row, column = outside.nonzero()[0].tolist()
        raise HostKernelInputError(f"context_slots row {row} reads slot {int(read[row, column])}; slots must be in "
                                   f"[0, {slots_total}) for caches of {slots_total} slots")


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
    """None when the float32 kernel builds, runs here and matches the gather path; otherwise why not (bfloat16 is
    judged against float64 instead: checked_bf16)."""

    def worst_error() -> float:
        worst = 0.0
        for seed, (batch, length) in enumerate(CHECK_CASES):
            args = _case(heads, kv_heads, head_dim, batch, length, 256, seed, device)
            with torch.inference_mode():
                worst = max(worst, (attend(*args, head_dim**-0.5) - gather_reference(*args, head_dim**-0.5)
                                    ).abs().max().item())
        return worst

    return check_host_kernel(device, dtype, worst_error, "paged decode differs from matmul-softmax")


def checked_bf16(heads: int, kv_heads: int, head_dim: int) -> KernelCheck:
    """The bfloat16 kernel and the bfloat16 gather path against float64 from the same inputs (host memory)."""
    cases = []
    for seed, (batch, length) in enumerate(CHECK_CASES):
        q, k, v, slots, lens = _case(heads, kv_heads, head_dim, batch, length, 256, seed, torch.device("cpu"))
        q, k, v = q.bfloat16(), k.bfloat16(), v.bfloat16()
        with torch.inference_mode():
            got = attend(q, k, v, slots, lens, head_dim**-0.5)
            plain = gather_reference(q, k, v, slots, lens, head_dim**-0.5)
            reference = gather_reference(q.double(), k.double(), v.double(), slots, lens, head_dim**-0.5)
        cases.append((got, plain, reference))
    return against_float64(cases)


def time_against_gather(device: torch.device, heads: int, kv_heads: int, head_dim: int, batch: int = 8,
                        length: int = 256, reps: int = 20, dtype: torch.dtype = torch.float32) -> tuple[float, float]:
    """Best seconds per call (kernel, gather path) on a decode step of `batch` sequences of `length` tokens."""
    args = _case(heads, kv_heads, head_dim, batch, length, 8 * batch * length, 99, device)
    args = (*(t.to(dtype) for t in args[:3]), *args[3:])
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


class DecodeAttention:
    """Decode steps straight from the paged cache; when the kernel raises, records an op fallback to the
    gather path (`instead`) and stays off."""

    def __init__(self, recorder: FallbackRecorder, instead: str) -> None:
        self.recorder, self.instead, self.enabled = recorder, instead, True

    def __call__(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, context_slots: torch.Tensor,
                 context_lens: torch.Tensor, scale: float) -> torch.Tensor | None:
        if not self.enabled:
            return None
        try:
            return attend(q, k_cache, v_cache, context_slots, context_lens, scale)
        except StrictFallbackError:
            raise
        except Exception as exc:
            why = exception_line(exc)
            self.enabled = False
            self.recorder.record("op", "decode attention", wanted=NAME, instead=self.instead, why=why)
            return None
