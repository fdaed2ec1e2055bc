"""Composite blocks compared eager vs compiled: the pieces an LLM decoder is made of.

A full decoder layer of the runner's model belongs here too once bringup.runner provides one; until
then `decoder_layer` is not in the list (see DECODER_LAYER_NOTE).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from bringup.probes.ops.catalog_attention import apply_rotary, attention_reference, rotary_tables
from bringup.probes.ops.catalog_reduce import rms_norm_composite
from bringup.probes.ops.inputs import randn, uniform

DECODER_LAYER_NOTE = "decoder_layer: needs bringup.runner's model (not available in this build)"


@dataclass(frozen=True)
class Block:
    name: str
    description: str
    inputs: Callable[[torch.Generator], list[Any]]
    fn: Callable[..., torch.Tensor]
    ref: Callable[..., torch.Tensor] | None = None


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


BLOCKS: dict[str, Block] = {
    b.name: b
    for b in (
        Block("rms_norm_linear", "RMSNorm [4,37,512] then linear 512->1024", _rms_norm_linear_inputs,
              rms_norm_linear),
        Block("rotary_attention", "rotary on q/k then causal SDPA, q8/kv2 heads [1,8,64,64]",
              _rotary_attention_inputs, rotary_attention, rotary_attention_ref),
        Block("swiglu_mlp", "SwiGLU MLP 256->688->256 on [4,37,256]", _swiglu_inputs, swiglu_mlp),
    )
}
