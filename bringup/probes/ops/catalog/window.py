"""Catalog: sliding-window attention masks (Mistral, Gemma-2) and tanh soft-capping (Gemma-2).

The case builders take the shapes as arguments: the built-in catalog calls them at fixed odd shapes,
`verify-ops --model` at a model's own (catalog/model.py).
"""

from __future__ import annotations

import torch

from bringup.probes.ops.inputs import randn
from bringup.probes.ops.spec import CaseSpec, OpSpec, op


def window_mask(q_len: int, kv_len: int, window: int, device: torch.device) -> torch.Tensor:
    """[q_len, kv_len] bool: the last q_len positions of a kv_len sequence; query p sees keys in (p - window, p]."""
    q_pos = torch.arange(kv_len - q_len, kv_len, device=device)[:, None]
    k_pos = torch.arange(kv_len, device=device)[None, :]
    return (k_pos <= q_pos) & (k_pos > q_pos - window)


def window_mask_reference(q_len: int, kv_len: int, window: int) -> torch.Tensor:
    """The same mask element by element (no broadcasting arithmetic): the exact expectation."""
    mask = torch.zeros(q_len, kv_len, dtype=torch.bool)
    for i in range(q_len):
        p = kv_len - q_len + i
        mask[i, max(0, p - window + 1):p + 1] = True
    return mask


def windowed_softmax(scores: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The mask built on the scores' device, applied with masked_fill(-inf), then softmax: (mask, probs)."""
    q_len, kv_len = scores.shape[-2], scores.shape[-1]
    allowed = window_mask(q_len, kv_len, window, scores.device)
    return allowed, torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)


def windowed_softmax_reference(scores: torch.Tensor, window: int) -> tuple[torch.Tensor, torch.Tensor]:
    allowed = window_mask_reference(scores.shape[-2], scores.shape[-1], window)
    return allowed, torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)


def window_case(heads: int, q_len: int, kv_len: int, window: int, role: str = "", params=()) -> CaseSpec:
    """Scores [1, heads, q_len, kv_len]; a query sums at most `window` keys."""
    return CaseSpec(lambda g: [randn(g, 1, heads, q_len, kv_len, scale=3.0)],
                    lambda s: windowed_softmax(s, window), shapes=((1, heads, q_len, kv_len),), role=role,
                    params=(("window", window), *params), ref=lambda s: windowed_softmax_reference(s, window),
                    accum=min(window, kv_len))


def softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Gemma-2 style soft-capping: cap * tanh(x / cap)."""
    return cap * torch.tanh(x / cap)


SOFTCAP_STEPS = 3  # divide, tanh, multiply: each result rounded to the dtype


def softcap_case(shape: tuple[int, ...], cap: float, scale: float, role: str = "", params=()) -> CaseSpec:
    """Three ops (divide, tanh, multiply), each result rounded to the dtype: judged as 3 step roundings."""
    return CaseSpec(lambda g: [randn(g, *shape, scale=scale)], lambda x: softcap(x, cap), shapes=(shape,),
                    role=role, params=(("cap", cap), *params), accum=SOFTCAP_STEPS, step_rounding=True)


def window_ops() -> list[OpSpec]:
    sliding = op("sliding_window_mask", "attention", [
        window_case(4, 37, 37, 8, "prefill"),
        window_case(2, 16, 300, 64, "chunk of queries"),
        window_case(8, 1, 513, 128, "decode"),
        window_case(2, 33, 33, 4096, "window wider than the sequence"),
        window_case(2, 0, 16, 4, "empty queries"),
    ], note="query p attends keys in (p - window, p] (causal included): mask exact, softmax close")
    tanh_softcap = op("tanh_softcap", "attention", [
        softcap_case((1, 8, 128, 128), 50.0, 30.0, "attention scores"),
        softcap_case((2, 32000), 30.0, 25.0, "vocab logits"),
        softcap_case((3, 37, 131), 30.0, 60.0, "odd"),
        softcap_case((0, 16), 50.0, 1.0, "empty"),
    ], note="cap * tanh(x / cap) on attention scores and final logits (Gemma-2)")
    return [sliding, tanh_softcap]
