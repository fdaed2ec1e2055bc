"""Catalog: rotary embedding (composite) and scaled_dot_product_attention per SDPA backend."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bringup.probes.ops.inputs import randint, randn
from bringup.probes.ops.spec import CaseSpec, OpSpec, op

SDPA_BACKENDS: dict[str, str] = {
    "sdpa_math": "MATH",
    "sdpa_flash": "FLASH_ATTENTION",
    "sdpa_efficient": "EFFICIENT_ATTENTION",
    "sdpa_cudnn": "CUDNN_ATTENTION",
}


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


def rotary_ops() -> list[OpSpec]:
    def make(batch: int, heads: int, seq: int, dim: int, start: int = 0):
        def build(g: torch.Generator) -> list:
            cos, sin = rotary_tables(torch.arange(start, start + seq), dim)
            return [randn(g, batch, heads, seq, dim), cos, sin]
        return build

    def fused_qkv_view(args: list) -> list:
        x = args[0]
        # x generated as [b, s, 3*h, d]: take the q slice and move heads -> a strided [b, h, s, d] view
        h = x.shape[2] // 3
        return [x[:, :, :h].transpose(1, 2), *args[1:]]

    def make_fused(g: torch.Generator) -> list:
        cos, sin = rotary_tables(torch.arange(0, 37), 64)
        return [randn(g, 1, 37, 3 * 4, 64), cos, sin]

    return [op("rotary", "attention", [
        CaseSpec("q [1,8,128,128]", make(1, 8, 128, 128), apply_rotary, accum=2),
        CaseSpec("gqa k [2,2,37,64]", make(2, 2, 37, 64), apply_rotary, accum=2),
        CaseSpec("odd head dim [1,3,11,80]", make(1, 3, 11, 80), apply_rotary, accum=2),
        CaseSpec("strided view of fused qkv [1,4,37,64]", make_fused, apply_rotary, layout=fused_qkv_view, accum=2),
        CaseSpec("decode at position 8191 [4,8,1,64]", make(4, 8, 1, 64, start=8191), apply_rotary, accum=2),
        CaseSpec("empty seq [1,2,0,64]", make(1, 2, 0, 64), apply_rotary, accum=2),
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


def sdpa_ops() -> list[OpSpec]:
    ops = []
    for name, backend in SDPA_BACKENDS.items():
        def case(label, make, kv_len, causal=False, layout=None, backend=backend):
            def ref(q, k, v, mask=None, _causal=causal):
                return attention_reference(q, k, v, mask, _causal)
            return CaseSpec(label, make, _sdpa(backend, causal), ref=ref, layout=layout, accum=kv_len)

        cases = [
            case("causal prefill gqa q8/kv2 [1,8,128,64]", _qkv(1, 8, 2, 128, 128, 64), 128, causal=True),
            case("bool mask odd [2,4,37,64]", _qkv(2, 4, 4, 37, 37, 64, "bool"), 37),
            case("additive float mask [1,4,33,80]", _qkv(1, 4, 4, 33, 33, 80, "float"), 33),
            case("decode q_len=1 gqa kv=513 [4,8,1,128]", _qkv(4, 8, 2, 1, 513, 128), 513),
            case("long kv 8192 [1,2,1,64]", _qkv(1, 2, 2, 1, 8192, 64), 8192),
            case("transposed q/k/v layout [1,4,64,64]", _qkv(1, 64, 64, 4, 4, 64), 64,
                 layout=lambda a: [t.transpose(1, 2) for t in a]),
        ]
        ops.append(op(name, "attention", cases, note=f"SDPBackend.{backend} only (torch.nn.attention.sdpa_kernel)"))
    return ops
