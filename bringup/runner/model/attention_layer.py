"""Self-attention over the paged KV cache, for tokens of many sequences flattened into one [T] batch.

Each layer writes its new K/V into the cache (by slot) and reads each sequence's context back through
its slots, so the same forward serves prefill, decode and a mix of both. What a family changes in
attention (q/k norms, scale, sliding window, logit soft-cap) is data in its AttentionSpec. The cache is head-major
([kvH, slots, hd]): one index_select gathers every sequence's context contiguously, and attention runs
batched over (kv head, sequence) with the grouped query heads folded into the query rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from bringup.runner.model.checkpoint import ATTENTION_PROJECTIONS
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.kv_cache import PagedKVCache
from bringup.runner.model.norm import OffsetRMSNorm, RMSNorm
from bringup.runner.model.rope import apply_rope
from bringup.runner.weights.checkpoint_reader import CheckpointReader
from bringup.runner.weights.layout_linear import LayoutLinear

# attend(q [kvH, B, G*Q, hd], k [kvH, B, L, hd], v [kvH, B, L, hd], mask [1, B, G*Q, L] | None, scale,
#        softcap | None): softcap, when given, maps the scores to cap * tanh(scores / cap) before the mask
AttendFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, "torch.Tensor | None", float, "float | None"],
                    torch.Tensor]
# decode_attend(q [B, H, hd], k_cache, v_cache, context_slots [B, L], context_lens [B], scale) -> [B, H*hd],
# or None to take the gather path this time
DecodeAttendFn = Callable[..., "torch.Tensor | None"]
# causal_attend(q [1, H, n, hd], k [1, H, n, hd], v [1, H, n, hd], scale) -> [1, H, n, hd]: one prompt with nothing
# cached, each query attending to the keys up to its own, or None to take the masked path
CausalAttendFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, float], "torch.Tensor | None"]
# context_attend(each prompt's q [1, H, n, hd], context k and v [1, kvH, c, hd], each prompt's own (k, v)
# [1, H, n, hd], scale) -> each prompt's [1, H, n, hd]: prompts behind the same c cached tokens, each query attending to
# all of them and causally to its prompt's own keys (context_attention.py), or None to take the masked path
ContextAttendFn = Callable[[list[torch.Tensor], torch.Tensor, torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]],
                            float], "list[torch.Tensor] | None"]


@dataclass
class AttentionMetadata:
    """Where the step's tokens go in the cache and which cached slots each sequence reads."""

    slot_mapping: torch.Tensor  # [T] cache slot of each new token
    context_slots: torch.Tensor  # [B, L] cache slots of each sequence's context (padded)
    mask: torch.Tensor | None  # [1, B, G*Q, L] True = attend; None when no masking is needed
    query_index: torch.Tensor | None  # [B, Q] flat token index of each query (None: all seqs have Q)
    output_index: torch.Tensor | None  # [T] row of each token in the [B*Q] attention output
    num_queries: int  # Q
    context_lens: torch.Tensor | None = None  # [B] context length of each sequence (int64)
    window_mask: torch.Tensor | None = None  # like mask, for the sliding layers; None: no key is outside the window
    parts: list[AttentionPart] | None = None  # a mixed step: attention runs per part (the rest of the fields unused)
    # each sequence's new tokens, in order, when none has a cached context (each prompt's queries are its whole
    # context: causal attention over the step's own K/V, no gather, no mask); None otherwise
    fresh: list[int] | None = None
    # (cached, new) tokens of each sequence, in order, when some has a cached context and the step is a prompt step
    # (more than one query): each attends to its cached context, unmasked, and to its own keys causally
    spans: list[tuple[int, int]] | None = None


@dataclass
class AttentionPart:
    """Tokens [first, end) of a mixed step (batch_inputs.build_mixed_inputs), which attend with their own metadata:
    decodes apart from prompt chunks, so each runs its own path while every linear layer reads its weights once."""

    first: int
    end: int
    meta: AttentionMetadata


def matmul_softmax_attention(q, k, v, mask, scale, softcap=None):  # type: ignore[no-untyped-def]
    """Plain attention: matmul, (soft-capped,) masked softmax in float32, matmul."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if softcap is not None:
        scores = torch.tanh(scores / softcap) * softcap
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype), v)


@dataclass
class AttentionOps:
    """The attention implementations every layer calls; the executor swaps them (op fallback), so all layers
    share one instance."""

    attend: AttendFn = matmul_softmax_attention
    decode_attend: DecodeAttendFn | None = None  # decode steps straight from the cache (None: gather path)
    causal_attend: CausalAttendFn | None = None  # prompts with nothing cached, unmasked (None: the masked path)
    context_attend: ContextAttendFn | None = None  # prompts behind a cached context, unmasked (None: masked path)


@dataclass(frozen=True)
class AttentionSpec:
    """What one layer's attention does beyond Llama's; a family builds it per layer (DecoderModel.attention_spec)."""

    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False  # RMSNorm over head_dim on q and k before rope (Qwen3: q_norm, k_norm)
    qk_norm_offset: float = 0.0  # those norms scale by (offset + weight) (Gemma 3: 1)
    scale: float | None = None  # None: head_dim ** -0.5
    window: int | None = None  # a query at p attends to keys in (p - window, p]; None: every earlier key
    softcap: float | None = None  # attention scores -> cap * tanh(scores / cap)
    fused_checkpoint: bool = False  # the checkpoint stores q, k, v fused as qkv_proj (Phi-3)


class Attention(nn.Module):
    """Fused q/k/v projection, rotary embedding, the paged cache write, attention and the output projection."""

    def __init__(self, config: ModelConfig, ops: AttentionOps, spec: AttentionSpec) -> None:
        super().__init__()
        c = config
        self.num_heads, self.num_kv_heads, self.head_dim = c.num_heads, c.num_kv_heads, c.head_dim
        self.spec, self.scale = spec, c.head_dim**-0.5 if spec.scale is None else spec.scale
        self.ops = ops
        self.qkv_proj = LayoutLinear(c.hidden_size, (c.num_heads + 2 * c.num_kv_heads) * c.head_dim, spec.qkv_bias)
        self.o_proj = LayoutLinear(c.num_heads * c.head_dim, c.hidden_size, spec.o_bias)
        self.q_norm = _head_norm(c, spec) if spec.qk_norm else None
        self.k_norm = _head_norm(c, spec) if spec.qk_norm else None
        self.cache = PagedKVCache()

    def load_hf(self, reader: CheckpointReader, prefix: str, kinds: list[str]) -> None:
        """Fill from the checkpoint's `prefix` (`...self_attn.`)."""
        fused = {"qkv_proj": ("qkv_proj",), "o_proj": ("o_proj",)}
        for name, parts in (fused if self.spec.fused_checkpoint else ATTENTION_PROJECTIONS).items():
            reader.fill(getattr(self, name), prefix, parts, kinds)
        if self.q_norm is not None and self.k_norm is not None:
            self.q_norm.load(reader.tensor(prefix + "q_norm.weight"))
            self.k_norm.load(reader.tensor(prefix + "k_norm.weight"))

    def forward(self, x: torch.Tensor, kind: str, cos: torch.Tensor, sin: torch.Tensor,
                meta: AttentionMetadata) -> torch.Tensor:
        T, H, KV, D = x.shape[0], self.num_heads, self.num_kv_heads, self.head_dim
        qkv = self.qkv_proj(x, kind)
        qk = qkv[:, : (H + KV) * D].view(T, H + KV, D)
        if self.q_norm is not None and self.k_norm is not None:
            qk = torch.cat((self.q_norm(qk[:, :H]), self.k_norm(qk[:, H:])), dim=1)
        qk = apply_rope(qk, cos, sin)  # q and k rotated together
        q, k, v = qk[:, :H], qk[:, H:], qkv[:, (H + KV) * D:]
        self.cache.write(meta.slot_mapping, k, v.view(T, KV, D))
        return self.o_proj(self._attend(q, k, v.view(T, KV, D), meta), kind)

    def _attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        """Attention output [T, H*hd] of the queries q [T, H, hd] over each sequence's cached context (k and v
        [T, KV, hd]: the step's own keys and values, already in the cache)."""
        if meta.parts is not None:
            return torch.cat([self._attend(q[part.first:part.end], k[part.first:part.end], v[part.first:part.end],
                                           part.meta) for part in meta.parts])
        T, H, KV, D = q.shape[0], self.num_heads, self.num_kv_heads, self.head_dim
        decode_attend, Q = self.ops.decode_attend, meta.num_queries
        windowed = self.spec.window is not None and meta.window_mask is not None
        plain = not windowed and self.spec.softcap is None  # all the paged decode kernel can compute
        if meta.fresh is not None and plain and self.ops.causal_attend is not None \
                and not torch.compiler.is_compiling():
            out = self._attend_causal(q, k, v, meta.fresh)
            if out is not None:
                return out
        if meta.spans is not None and plain and self.ops.causal_attend is not None \
                and not torch.compiler.is_compiling():
            out = self._attend_spans(q, k, v, meta.spans, meta.context_slots)
            if out is not None:
                return out
        if decode_attend is not None and plain and Q == 1 and meta.query_index is None and \
                meta.context_lens is not None:
            out = decode_attend(q.reshape(T, H, D), self.cache.k, self.cache.v, meta.context_slots,
                                meta.context_lens, self.scale)
            if out is not None:
                return out
        keys, values = self.cache.gather(meta.context_slots)
        B, G = meta.context_slots.shape[0], H // KV
        qb = q.view(B, Q, H, D) if meta.query_index is None else q[meta.query_index]
        qg = qb.view(B, Q, KV, G, D).permute(2, 0, 3, 1, 4).reshape(KV, B, G * Q, D)
        out = self.ops.attend(qg, keys, values, meta.window_mask if windowed else meta.mask, self.scale,
                              self.spec.softcap)
        out = out.view(KV, B, G, Q, D).permute(1, 3, 0, 2, 4).reshape(B * Q, H * D)
        return out if meta.output_index is None else out[meta.output_index]

    def _attend_causal(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: list[int]
                       ) -> torch.Tensor | None:
        """Each prompt of `lengths` tokens (in order in q, k, v) over its own keys, causally: no padding to the
        longest, no gather from the cache, no mask; the kv heads repeated for their query heads (a prompt's K/V is
        small beside its attention). None: the implementation declined, take the masked path."""
        H, D, G = self.num_heads, self.head_dim, self.num_heads // self.num_kv_heads
        assert self.ops.causal_attend is not None
        outs, first = [], 0
        for n in lengths:
            end = first + n
            qs = q[first:end].transpose(0, 1).unsqueeze(0)
            ks = k[first:end].transpose(0, 1).repeat_interleave(G, dim=0).unsqueeze(0)
            vs = v[first:end].transpose(0, 1).repeat_interleave(G, dim=0).unsqueeze(0)
            out = self.ops.causal_attend(qs, ks, vs, self.scale)
            if out is None:
                return None
            outs.append(out[0].transpose(0, 1).reshape(n, H * D))
            first = end
        return torch.cat(outs)


    def _attend_spans(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, spans: list[tuple[int, int]],
                      context_slots: torch.Tensor) -> torch.Tensor | None:
        """Each sequence's `new` tokens (in order in q, k, v) over its `cached` context straight from the cache and
        over its own keys causally, no mask: a context no longer than the prompt as causal attention over context and
        prompt with the context's rows padded in as queries too (dropped after: a cached prefix costs its own rows),
        longer ones merged by log-sum-exp (context_attend) where they share one context -- the step's only prompt, or
        prompts that hit one cached prefix, whose queries attend it in one call (prompts behind several long contexts
        run faster batched under the mask: docs/runner.md). None: the masked path."""
        H, D, G = self.num_heads, self.head_dim, self.num_heads // self.num_kv_heads
        causal, merged = self.ops.causal_attend, self.ops.context_attend
        assert causal is not None
        behind = [b for b, (cached, n) in enumerate(spans) if cached > n]  # merged: they must share one context
        if behind and (merged is None or not _one_context(behind, spans, context_slots)):
            return None
        outs: dict[int, torch.Tensor | None] = {}
        sharing: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
        first = 0
        for b, (cached, n) in enumerate(spans):
            end = first + n
            qs = q[first:end].transpose(0, 1).unsqueeze(0)
            ks = k[first:end].transpose(0, 1).repeat_interleave(G, dim=0).unsqueeze(0)
            vs = v[first:end].transpose(0, 1).repeat_interleave(G, dim=0).unsqueeze(0)
            first = end
            if cached > n:
                sharing.append((qs, ks, vs))
                continue
            context_k, context_v = (t.index_select(1, context_slots[b, :cached]).unsqueeze(0)
                                    for t in (self.cache.k, self.cache.v)) if cached else (None, None)
            if context_k is None or context_v is None:
                outs[b] = causal(qs, ks, vs, self.scale)
            else:
                padded = torch.cat((qs.new_zeros(1, H, cached, D), qs), dim=2)
                every_k, every_v = (torch.cat((t.repeat_interleave(G, dim=1), own), dim=2)
                                    for t, own in ((context_k, ks), (context_v, vs)))
                out = causal(padded, every_k, every_v, self.scale)
                outs[b] = None if out is None else out[:, :, cached:]
        if sharing:
            assert merged is not None
            cached = spans[behind[0]][0]
            context_k, context_v = (t.index_select(1, context_slots[behind[0], :cached]).unsqueeze(0)
                                    for t in (self.cache.k, self.cache.v))
            shared = merged([qs for qs, _, _ in sharing], context_k, context_v, [(ks, vs) for _, ks, vs in sharing],
                            self.scale)
            outs.update(zip(behind, shared or [None] * len(behind), strict=True))
        if any(out is None for out in outs.values()):
            return None
        return torch.cat([outs[b][0].transpose(0, 1).reshape(n, H * D) for b, (_, n) in enumerate(spans)])


def _one_context(behind: list[int], spans: list[tuple[int, int]], context_slots: torch.Tensor) -> bool:
    """Whether the sequences `behind` have the same cached context: as long, in the same slots (one cached prefix)."""
    cached = spans[behind[0]][0]
    return all(spans[b][0] == cached and torch.equal(context_slots[b, :cached], context_slots[behind[0], :cached])
               for b in behind[1:])


def _head_norm(config: ModelConfig, spec: AttentionSpec) -> RMSNorm:
    """The RMSNorm over head_dim that q or k goes through before rope."""
    if spec.qk_norm_offset:
        return OffsetRMSNorm(config.head_dim, config.rms_norm_eps, offset=spec.qk_norm_offset)
    return RMSNorm(config.head_dim, config.rms_norm_eps)
