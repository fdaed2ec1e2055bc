"""Catalog: rotary embedding (composite) and scaled_dot_product_attention per SDPA backend."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bringup.probes.ops.inputs import randint, randn
from bringup.probes.ops.spec import CaseSpec, OpSpec, op
from bringup.profiles.attention_kinds import SDPA_BACKENDS


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Llama/NeoX-style rotary embedding: x * cos + rotate_half(x) * sin."""
    return x * cos + rotate_half(x) * sin


def rotary_tables(positions: torch.Tensor, dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables [seq, dim] in float64 (cast to the dtype under test like any other input)."""
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


ROTARY_ACCUM = 2  # x * cos + rotate_half(x) * sin: two products summed


def rotary_case(shape: tuple[int, int, int, int], role: str = "", start: int = 0, base: float = 10000.0,
                params=()) -> CaseSpec:
    """x [batch, heads, seq, dim] rotated at positions start.. start+seq-1."""
    batch, heads, seq, dim = shape

    def build(g: torch.Generator) -> list:
        cos, sin = rotary_tables(torch.arange(start, start + seq), dim, base=base)
        return [randn(g, batch, heads, seq, dim), cos, sin]
    position = (("start", start),) if start else ()
    return CaseSpec(build, apply_rotary, shapes=(shape,), role=role, params=(*params, *position),
                    accum=ROTARY_ACCUM)


def rotary_ops() -> list[OpSpec]:
    def fused_qkv_view(args: list) -> list:
        x = args[0]
        # x generated as [b, s, 3*h, d]: take the q slice and move heads -> a strided [b, h, s, d] view
        h = x.shape[2] // 3
        return [x[:, :, :h].transpose(1, 2), *args[1:]]

    def make_fused(g: torch.Generator) -> list:
        cos, sin = rotary_tables(torch.arange(0, 37), 64)
        return [randn(g, 1, 37, 3 * 4, 64), cos, sin]

    return [op("rotary", "attention", [
        rotary_case((1, 8, 128, 128), "q"),
        rotary_case((2, 2, 37, 64), "gqa k"),
        rotary_case((1, 3, 11, 80), "odd head dim"),
        CaseSpec(make_fused, apply_rotary, shapes=((1, 37, 12, 64),), view="q slice of fused qkv, heads to dim 1",
                 layout=fused_qkv_view, accum=ROTARY_ACCUM),
        rotary_case((4, 8, 1, 64), "decode", start=8191),
        rotary_case((1, 2, 0, 64), "empty seq"),
    ], note="composite (the form model code runs)")]


def attention_reference(q, k, v, mask=None, causal: bool = False) -> torch.Tensor:
    """Plain float64 attention with grouped-query heads: softmax(q k^T / sqrt(d) + mask) v."""
    groups = q.shape[-3] // k.shape[-3]
    k = k.repeat_interleave(groups, dim=-3)
    v = v.repeat_interleave(groups, dim=-3)
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    lq, lk = q.shape[-2], k.shape[-2]
    if causal:
        allowed = torch.ones(lq, lk, dtype=torch.bool).tril()  # top-left aligned, as SDPA's is_causal
        scores = scores.masked_fill(~allowed, float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    return torch.softmax(scores, dim=-1) @ v


def _sdpa(backend_name: str, causal: bool):
    def call(q, k, v, mask=None):
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = getattr(SDPBackend, backend_name)
        gqa = q.shape[-3] != k.shape[-3]
        kwargs = {"enable_gqa": True} if gqa else {}
        with sdpa_kernel(backend):  # the reasons a kernel refuses arrive as warnings; run_case records them
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, **kwargs)
    return call


def _qkv(b: int, hq: int, hkv: int, lq: int, lk: int, d: int, mask: str | None = None):
    def make(g: torch.Generator) -> list:
        args = [randn(g, b, hq, lq, d), randn(g, b, hkv, lk, d), randn(g, b, hkv, lk, d)]
        if mask == "bool":
            m = randint(g, 4, b, 1, lq, lk) > 0
            m[..., 0] = True  # every query sees at least one key
            args.append(m)
        elif mask == "float":
            args.append(randn(g, b, 1, lq, lk))
        return args
    return make


def sdpa_case(backend: str, b: int, hq: int, hkv: int, lq: int, lk: int, d: int, role: str = "",
              causal: bool = False, mask: str | None = None, transposed: bool = False) -> CaseSpec:
    """q [b, hq, lq, d], k and v [b, hkv, lk, d]: every query sums lk keys."""
    def ref(q, k, v, attn_mask=None):
        return attention_reference(q, k, v, attn_mask, causal)
    shapes = ((b, hq, lq, d), (b, hkv, lk, d))
    params = (("causal", True),) if causal else ()
    return CaseSpec(_qkv(b, hq, hkv, lq, lk, d, mask), _sdpa(backend, causal), shapes=shapes, role=role,
                    view="q/k/v transposed (1,2)" if transposed else "",
                    params=(*params, *((("mask", mask),) if mask else ())), ref=ref,
                    layout=(lambda a: [t.transpose(1, 2) for t in a]) if transposed else None,
                    accum=hkv if transposed else lk)  # transposed: the keys run along dim 1 as generated


def sdpa_ops() -> list[OpSpec]:
    ops = []
    for name, backend in SDPA_BACKENDS.items():
        cases = [
            sdpa_case(backend, 1, 8, 2, 128, 128, 64, "prefill gqa", causal=True),
            sdpa_case(backend, 2, 4, 4, 37, 37, 64, "odd", mask="bool"),
            sdpa_case(backend, 1, 4, 4, 33, 33, 80, mask="float"),
            sdpa_case(backend, 4, 8, 2, 1, 513, 128, "decode gqa"),
            sdpa_case(backend, 1, 2, 2, 1, 8192, 64, "long kv"),
            sdpa_case(backend, 1, 64, 64, 4, 4, 64, transposed=True),
        ]
        ops.append(op(name, "attention", cases, note=f"SDPBackend.{backend} only (torch.nn.attention.sdpa_kernel)"))
    return ops
