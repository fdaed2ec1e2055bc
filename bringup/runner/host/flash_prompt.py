"""Prompts' causal attention straight from the paged cache on AMX tiles (kernels/flash_prompt.cpp), bfloat16 only.

Each prompt's queries attend to its sequence's keys by slot -- the cached context, every key visible, then its own
keys up to each query's position -- in one call: no gather, no mask, no repeated kv heads, and no rows padded in for
a cached context. `checked` measures it against float64 on the model's head shapes before the fused prompt layers use
it (plan/host_kernels.prompt_flash_verdict); `run` returns None where the kernel declines.
"""

from __future__ import annotations

import ctypes
import functools

import torch

from bringup.runner.host.kernel_check import KernelCheck, against_float64
from bringup.runner.host.paged_decode import HOST_KERNELS
from bringup.runner.model.attention_layer import matmul_softmax_attention
from bringup.runner.weights.kernels.build import HostKernelInputError, KernelUnavailable, load, require_host_tensor

ABI = 1
DIM_MULTIPLE, MAX_DIM, MAX_GROUP = 64, 256, 16  # the head sizes and query heads per kv head the kernel takes
CHECK_CASES = ((0, 37), (48, 21), (0, 70), (100, 130))  # (cached, new): fresh, behind a context ending mid-block,
# across key blocks


@functools.lru_cache(maxsize=1)
def library() -> ctypes.CDLL:
    lib = load("flash_prompt.cpp", HOST_KERNELS)
    if lib.bringup_flash_prompt_abi() != ABI:
        raise KernelUnavailable(f"flash_prompt.cpp has ABI {lib.bringup_flash_prompt_abi()}, expected {ABI}")
    i64, ptr = ctypes.c_int64, ctypes.c_void_p
    fn = lib.bringup_flash_prompt_bf16
    fn.argtypes = [ptr, i64, i64, i64, i64, i64, ptr, ptr, i64, ptr, i64, i64, ctypes.c_float, ptr, i64]
    fn.restype = ctypes.c_int
    lib.bringup_flash_prompt_available.restype = ctypes.c_int
    return lib


def declines(heads: int, kv_heads: int, head_dim: int) -> str | None:
    """None where the kernel runs here for these head shapes; otherwise why not."""
    if head_dim % DIM_MULTIPLE or head_dim > MAX_DIM:
        return f"heads of {head_dim} dims; the kernel takes multiples of {DIM_MULTIPLE} up to {MAX_DIM}"
    if heads % kv_heads or heads // kv_heads > MAX_GROUP:
        return f"{heads} query heads over {kv_heads} kv heads; the kernel takes up to {MAX_GROUP} a kv head"
    try:
        lib = library()
    except (KernelUnavailable, OSError) as exc:
        return str(exc)
    if not lib.bringup_flash_prompt_available():
        return "no AMX-BF16 tiles here (the CPU lacks them, the build did not target them, or the OS refused them)"
    return None


def run(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor, scale: float,
        out: torch.Tensor | None = None) -> torch.Tensor | None:
    """Attention [n, H*D] of one prompt's queries q [n, H, D] (rows may be strided: a view of the step's q/k/v) over
    the keys and values at `slots` [L] of the cache [kvH, slots_total, D], written into `out` when given (rows of
    H*D, dense): query i sees keys 0 .. L - n + i. None where the kernel declines."""
    n, heads, dim = q.shape
    kv_heads, slots_total = k_cache.shape[0], k_cache.shape[1]
    require_host_tensor("q", q, torch.bfloat16, dims=3)
    for name, t in (("k cache", k_cache), ("v cache", v_cache)):
        require_host_tensor(name, t, torch.bfloat16, dims=3, contiguous=True)
        if list(t.shape) != [kv_heads, slots_total, dim]:
            raise HostKernelInputError(f"the {name} has shape {list(t.shape)}; expected [{kv_heads}, {slots_total}, "
                                       f"{dim}]")
    require_host_tensor("slots", slots, torch.int64, dims=1, contiguous=True)
    if q.stride(2) != 1 or q.stride(1) != dim:
        raise HostKernelInputError(f"q has strides {list(q.stride())}; each row's heads must be dense")
    keys = slots.shape[0]
    if n < 1 or keys < n or int(slots.min()) < 0 or int(slots.max()) >= slots_total:
        raise HostKernelInputError(f"{keys} slots for {n} queries, each in [0, {slots_total})")
    if out is None:
        out = torch.empty(n, heads * dim, dtype=torch.bfloat16)
    require_host_tensor("out", out, torch.bfloat16, dims=2)
    if list(out.shape) != [n, heads * dim] or out.stride(1) != 1:
        raise HostKernelInputError(f"out has shape {list(out.shape)}, strides {list(out.stride())}; expected "
                                   f"[{n}, {heads * dim}] with dense rows")
    try:
        lib = library()
    except (KernelUnavailable, OSError):
        return None  # declined: the verdict names why (declines)
    declined = lib.bringup_flash_prompt_bf16(
        q.data_ptr(), q.stride(0), n, heads, kv_heads, dim, k_cache.data_ptr(), v_cache.data_ptr(), slots_total,
        slots.data_ptr(), keys, keys - n, scale, out.data_ptr(), out.stride(0))
    return None if declined else out


def checked(heads: int, kv_heads: int, head_dim: int) -> KernelCheck:
    """The kernel and the plain bfloat16 path against float64 attention from the same bfloat16 inputs, over
    CHECK_CASES on these head shapes (keys from random slots of a cache)."""
    gen = torch.Generator().manual_seed(0)
    group, scale, slots_total = heads // kv_heads, head_dim ** -0.5, 512
    k_cache, v_cache = (torch.randn(kv_heads, slots_total, head_dim, generator=gen).bfloat16() for _ in range(2))
    cases = []
    for cached, new in CHECK_CASES:
        slots = torch.randperm(slots_total, generator=gen)[:cached + new]
        q = torch.randn(new, heads, head_dim, generator=gen).bfloat16()
        keys, values = (c[:, slots].repeat_interleave(group, dim=0) for c in (k_cache, v_cache))  # [H, L, D]
        mask = torch.arange(cached + new).view(1, -1) <= (cached + torch.arange(new)).view(-1, 1)
        queries = q.transpose(0, 1)
        reference = matmul_softmax_attention(queries.double(), keys.double(), values.double(), mask, scale)
        out = run(q, k_cache, v_cache, slots, scale)
        got = None if out is None else out.view(new, heads, head_dim).transpose(0, 1)
        cases.append((got, matmul_softmax_attention(queries, keys, values, mask, scale), reference))
    return against_float64(cases)
