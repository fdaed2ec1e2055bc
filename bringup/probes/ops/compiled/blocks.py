"""Composite blocks compared eager vs compiled: the pieces an LLM decoder is made of.

`llama_decoder_layer` is a Llama-style layer assembled from the same pieces here;
`runner_decoder_layer` is the runner's own layer (bringup.runner.model.decoder), see runner_layer.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from bringup.probes.ops.catalog.attention import apply_rotary, attention_reference, rotary_tables
from bringup.probes.ops.catalog.reduce import rms_norm_composite
from bringup.probes.ops.compiled import runner_layer
from bringup.probes.ops.inputs import randn, uniform

DECODER_LAYER_NOTE = ("runner_decoder_layer runs layer 0 of the runner's built-in model through "
                      "DecoderModel.forward (paged KV write + attention); llama_decoder_layer is the same "
                      "architecture assembled from the catalog's pieces")


@dataclass(frozen=True)
class Block:
    name: str
    description: str
    inputs: Callable[[torch.Generator], list[Any]]
    fn: Callable[..., torch.Tensor] | None = None
    ref: Callable[..., torch.Tensor] | None = None
    # build(dtype, device) -> fn, for blocks whose weights live inside (the runner's model); the
    # reference is build(float64, cpu). Their inputs are integer tensors (token ids, positions).
    build: Callable[[torch.dtype, torch.device], Callable[..., torch.Tensor]] | None = None


def _rms_norm_linear_inputs(g: torch.Generator) -> list[Any]:
    hidden, out = 512, 1024
    return [randn(g, 4, 37, hidden), uniform(g, hidden, low=0.5, high=1.5),
            randn(g, out, hidden, scale=1 / math.sqrt(hidden))]


def rms_norm_linear(x: torch.Tensor, norm_w: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return F.linear(rms_norm_composite(x, norm_w), w)


def _rotary_attention_inputs(g: torch.Generator) -> list[Any]:
    seq, dim = 64, 64
    cos, sin = rotary_tables(torch.arange(seq), dim)
    return [randn(g, 1, 8, seq, dim), randn(g, 1, 2, seq, dim), randn(g, 1, 2, seq, dim), cos, sin]


def rotary_attention(q, k, v, cos, sin) -> torch.Tensor:
    q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def rotary_attention_ref(q, k, v, cos, sin) -> torch.Tensor:
    return attention_reference(apply_rotary(q, cos, sin), apply_rotary(k, cos, sin), v, causal=True)


def _swiglu_inputs(g: torch.Generator) -> list[Any]:
    hidden, inter = 256, 688
    return [randn(g, 4, 37, hidden), randn(g, inter, hidden, scale=1 / math.sqrt(hidden)),
            randn(g, inter, hidden, scale=1 / math.sqrt(hidden)), randn(g, hidden, inter, scale=1 / math.sqrt(inter))]


def swiglu_mlp(x, w_gate, w_up, w_down) -> torch.Tensor:
    return F.linear(F.silu(F.linear(x, w_gate)) * F.linear(x, w_up), w_down)


def _decoder_inputs(g: torch.Generator) -> list[Any]:
    hidden, heads, kv_heads, head_dim, inter, seq = 256, 4, 2, 64, 688, 37
    cos, sin = rotary_tables(torch.arange(seq), head_dim)
    s_h, s_i = 1 / math.sqrt(hidden), 1 / math.sqrt(inter)
    return [
        randn(g, 2, seq, hidden), uniform(g, hidden, low=0.5, high=1.5), uniform(g, hidden, low=0.5, high=1.5),
        randn(g, heads * head_dim, hidden, scale=s_h), randn(g, kv_heads * head_dim, hidden, scale=s_h),
        randn(g, kv_heads * head_dim, hidden, scale=s_h), randn(g, hidden, heads * head_dim, scale=s_h),
        randn(g, inter, hidden, scale=s_h), randn(g, inter, hidden, scale=s_h), randn(g, hidden, inter, scale=s_i),
        cos, sin,
    ]


def _decoder_layer(x, ln1, ln2, wq, wk, wv, wo, w_gate, w_up, w_down, cos, sin, attention) -> torch.Tensor:
    b, s, _ = x.shape
    head_dim = cos.shape[-1]
    h = rms_norm_composite(x, ln1)
    q = F.linear(h, wq).view(b, s, -1, head_dim).transpose(1, 2)
    k = F.linear(h, wk).view(b, s, -1, head_dim).transpose(1, 2)
    v = F.linear(h, wv).view(b, s, -1, head_dim).transpose(1, 2)
    attn = attention(q, k, v, cos, sin).transpose(1, 2).reshape(b, s, -1)
    x = x + F.linear(attn, wo)
    return x + swiglu_mlp(rms_norm_composite(x, ln2), w_gate, w_up, w_down)


def llama_decoder_layer(*args) -> torch.Tensor:
    return _decoder_layer(*args, attention=rotary_attention)


def llama_decoder_layer_ref(*args) -> torch.Tensor:
    return _decoder_layer(*args, attention=rotary_attention_ref)


BLOCKS: dict[str, Block] = {
    b.name: b
    for b in (
        Block("rms_norm_linear", "RMSNorm [4,37,512] then linear 512->1024", _rms_norm_linear_inputs,
              rms_norm_linear),
        Block("rotary_attention", "rotary on q/k then causal SDPA, q8/kv2 heads [1,8,64,64]",
              _rotary_attention_inputs, rotary_attention, rotary_attention_ref),
        Block("swiglu_mlp", "SwiGLU MLP 256->688->256 on [4,37,256]", _swiglu_inputs, swiglu_mlp),
        Block("llama_decoder_layer", "Llama-style layer: RMSNorm, q/k/v, rotary, causal GQA SDPA (4q/2kv heads), "
              "o_proj, residual, RMSNorm, SwiGLU, residual on [2,37,256]", _decoder_inputs, llama_decoder_layer,
              llama_decoder_layer_ref),
        Block("runner_decoder_layer", "the runner's DecoderModel with its first layer: 37-token prefill with "
              "paged KV writes, 8q/4kv heads, hidden 256", runner_layer.inputs, build=runner_layer.build),
    )
}
