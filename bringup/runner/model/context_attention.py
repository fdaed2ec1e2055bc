"""A prompt whose sequence has a cached context (a prefix-cache hit, a later chunk of a chunked prefill), attended
without a mask: its queries over the cached keys, every one visible, and over its own keys, causally, each by a fused
kernel that also returns each query row's log-sum-exp (Backend.attention_with_lse), then merged exactly in float32:
out = (e^(l1 - m) o1 + e^(l2 - m) o2) / (e^(l1 - m) + e^(l2 - m)), m = max(l1, l2).

The masked path it replaces gathers the context and the prompt's own keys into one [L] and masks every score above
the diagonal; a flash kernel cannot skip blocks under an explicit mask, so it computes the whole square of the
prompt's own keys. The merge is checked against float64 on the model's head shapes before it serves
(`context_errors`), by the rule the start-up attention check uses for SDPA candidates.
"""

from __future__ import annotations

import torch

from bringup.backends.base import LseAttentionFn
from bringup.runner.model.attention_layer import matmul_softmax_attention

CHECK_CACHED, CHECK_NEW = 48, 37  # a cached context that ends mid-block, and a ragged prompt behind it


def merged_attention(attend: LseAttentionFn, q: torch.Tensor, context_k: torch.Tensor, context_v: torch.Tensor,
                     own_k: torch.Tensor, own_v: torch.Tensor, scale: float) -> torch.Tensor:
    """The queries over the context (each kv head's query heads folded into its rows: no mask, so rows of several
    heads may share the keys unrepeated) and over their own keys (causal), merged by their log-sum-exps."""
    return merged_sharing(attend, [q], context_k, context_v, [(own_k, own_v)], scale)[0]


def merged_sharing(attend: LseAttentionFn, queries: list[torch.Tensor], context_k: torch.Tensor,
                   context_v: torch.Tensor, owns: list[tuple[torch.Tensor, torch.Tensor]],
                   scale: float) -> list[torch.Tensor]:
    """merged_attention for prompts behind one shared context (a cached prefix they all hit): every prompt's queries
    over it in one call -- each query row's output and log-sum-exp are its own, whatever rows share the call -- and
    each over its own keys causally."""
    _, heads, _, dim = queries[0].shape
    kv_heads, sizes = context_k.shape[1], [q.shape[2] for q in queries]
    n = sum(sizes)
    folded = torch.cat(queries, dim=2).reshape(1, kv_heads, heads // kv_heads * n, dim)
    out_context, lse_context = attend(folded, context_k, context_v, False, scale)
    out_context, lse_context = out_context.reshape(1, heads, n, dim), lse_context.reshape(1, heads, n)
    merged, first = [], 0
    for q, (own_k, own_v), size in zip(queries, owns, sizes, strict=True):
        o1, l1 = out_context[:, :, first:first + size], lse_context[:, :, first:first + size]
        o2, l2 = attend(q, own_k, own_v, True, scale)
        top = torch.maximum(l1, l2)
        w1, w2 = (l1 - top).exp().unsqueeze(-1), (l2 - top).exp().unsqueeze(-1)
        merged.append(((o1.float() * w1 + o2.float() * w2) / (w1 + w2)).to(q.dtype))
        first += size
    return merged


def context_errors(attend: LseAttentionFn, num_heads: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype,
                   device: torch.device) -> tuple[float, float]:
    """(the merge's error, the masked plain path's) against float64 attention from the same inputs, each the largest
    absolute difference relative to the largest output (inf where an output is not finite): a CHECK_NEW-token
    prompt behind CHECK_CACHED cached tokens."""
    gen = torch.Generator().manual_seed(0)
    group, cached, new = num_heads // num_kv_heads, CHECK_CACHED, CHECK_NEW
    q64 = torch.randn(1, num_heads, new, head_dim, generator=gen, dtype=torch.float64)
    k64, v64 = (torch.randn(1, num_kv_heads, cached + new, head_dim, generator=gen, dtype=torch.float64)
                for _ in range(2))
    mask = torch.arange(cached + new).view(1, -1) <= (cached + torch.arange(new)).view(-1, 1)  # [new, cached + new]
    scale = head_dim ** -0.5
    repeated = [t.repeat_interleave(group, dim=1) for t in (k64, v64)]
    reference = matmul_softmax_attention(q64, *repeated, mask, scale)
    q, k, v = (t.to(dtype).to(device) for t in (q64, k64, v64))  # cast on the host: a device may refuse float64
    own_k, own_v = (t[:, :, cached:].repeat_interleave(group, dim=1) for t in (k, v))
    merged = merged_attention(attend, q, k[:, :, :cached], v[:, :, :cached], own_k, own_v, scale)
    plain = matmul_softmax_attention(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1),
                                     mask.to(device), scale)
    return _error(merged, reference), _error(plain, reference)


def _error(out: torch.Tensor, reference: torch.Tensor) -> float:
    got = out.cpu().double()
    if not bool(torch.isfinite(got).all()):
        return float("inf")
    return float((got - reference).abs().max() / reference.abs().max())
