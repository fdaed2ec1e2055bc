"""A readable Llama-family decoder (Llama, Llama 3 rope scaling, Mistral, Qwen2 q/k/v bias).

Tokens of all sequences in a step are flattened into one [T] batch. Each layer writes its new K/V
into the paged cache (by slot) and reads each sequence's context back through its slots, so the
same forward serves prefill, decode and a mix of both. The cache is head-major ([kvH, slots, hd]):
one index_select gathers every sequence's context contiguously, and attention runs batched over
(kv head, sequence) with the grouped query heads folded into the query rows.

Weights may be stored `[out, in]` (F.linear), `[in, out]` (`x @ W`) or pre-packed (oneDNN); the
execution plan picks the layout that measured faster on the device, per step size.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.linear_kinds import apply as linear
from bringup.runner.model.linear_kinds import place, storage_key, to_out_in
from bringup.runner.model.rope import apply_rope, inverse_frequencies, rope_tables

# attend(q [kvH, B, G*Q, hd], k [kvH, B, L, hd], v [kvH, B, L, hd], mask [1, B, G*Q, L] | None, scale)
AttendFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, "torch.Tensor | None", float], torch.Tensor]


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


def matmul_softmax_attention(q, k, v, mask, scale):  # type: ignore[no-untyped-def]
    """Plain attention: matmul, masked softmax in float32, matmul."""
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype), v)




def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if x.dtype == torch.float32:  # the fused op: one call instead of eight, the same float32 arithmetic
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


@dataclass(frozen=True)
class WeightLayout:
    """Linear-weight layout per step size: `small` for steps of at most `switch_tokens` tokens, else `large`.

    "in_out" stores W as [in, out] and computes x @ W; "out_in" stores [out, in] for F.linear; "packed"
    pre-packs it for oneDNN. When the two differ, both copies are kept (twice the linear weights' memory)
    and each step uses the faster.
    """

    small: str = "out_in"
    large: str = "out_in"
    switch_tokens: int = 0

    @property
    def kinds(self) -> list[str]:
        return sorted({self.small, self.large})

    def for_tokens(self, tokens: int) -> str:
        return self.small if tokens <= self.switch_tokens else self.large

    def describe(self) -> str:
        if self.small == self.large:
            return self.small
        return f"{self.small} for steps of <= {self.switch_tokens} tokens, else {self.large}"


class DecoderModel(nn.Module):
    """Weights as plain buffers; forward over flattened tokens with a paged KV cache."""

    def __init__(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                 layout: WeightLayout | None = None) -> None:
        super().__init__()
        self.config, self.dtype, self.layout = config, dtype, layout or WeightLayout()
        self.device = torch.device(device)
        self.attend: AttendFn = matmul_softmax_attention
        # decode steps (one query per sequence) may attend straight from the cache: (q [B, H, D], k_cache,
        # v_cache, context_slots, context_lens, scale) -> [B, H*D], or None to use the gather path this time
        self.decode_attend: Callable[..., torch.Tensor | None] | None = None
        self.k_caches: list[torch.Tensor] = []
        self.v_caches: list[torch.Tensor] = []
        c = config
        cos, sin = rope_tables(inverse_frequencies(c.head_dim, c.rope_theta, c.rope_scaling),
                               c.max_position_embeddings)
        self.rope_cos, self.rope_sin = cos.to(self.device, dtype), sin.to(self.device, dtype)
        self.scale = c.head_dim**-0.5

    # ---------------------------------------------------------------- weights
    def load_hf_tensors(self, get: Callable[[str], torch.Tensor | None]) -> None:
        """Fill the weights from Hugging Face tensor names; `get(name)` returns None when absent."""
        c, kinds = self.config, self.layout.kinds

        def need(name: str) -> torch.Tensor:
            t = get(name)
            if t is None:
                raise KeyError(name)
            return t

        def proj(*names: str, bias: bool) -> dict[str, tuple[torch.Tensor, torch.Tensor | None]]:
            w = torch.cat([need(n + ".weight") for n in names], 0)
            b = self._place(torch.cat([need(n + ".bias") for n in names], 0)) if bias else None
            return {kind: (self._place(w, kind), b) for kind in kinds}

        self.layer_sets: dict[str, list[tuple]] = {kind: [] for kind in kinds}
        for i in range(c.num_layers):
            p = f"model.layers.{i}."
            a, m = p + "self_attn.", p + "mlp."
            qkv = proj(a + "q_proj", a + "k_proj", a + "v_proj", bias=c.qkv_bias)
            o = proj(a + "o_proj", bias=c.o_bias)
            gate_up = proj(m + "gate_proj", m + "up_proj", bias=c.mlp_bias)
            down = proj(m + "down_proj", bias=c.mlp_bias)
            n1 = self._place(need(p + "input_layernorm.weight"))
            n2 = self._place(need(p + "post_attention_layernorm.weight"))
            for kind in kinds:
                self.layer_sets[kind].append((n1, *qkv[kind], *o[kind], n2, *gate_up[kind], *down[kind]))
        embed = need("model.embed_tokens.weight")
        self.embed = self._place(embed)
        head = get("lm_head.weight")
        if head is None or c.tie_word_embeddings:
            head = embed
        self.heads = {kind: self.embed if (head is embed and kind == "out_in") else self._place(head, kind)
                      for kind in kinds}
        self.final_norm = self._place(need("model.norm.weight"))

    def add_kind(self, new: str, source: str) -> None:
        """Also keep the linear weights stored for `new`, converted from the copy stored for `source`."""
        if new in self.layer_sets:
            return
        weights = {1, 3, 6, 8}  # wqkv, wo, wgu, wd in each layer's tuple
        self.layer_sets[new] = [tuple(place(to_out_in(t, source), new) if i in weights else t
                                      for i, t in enumerate(layer)) for layer in self.layer_sets[source]]
        self.heads[new] = place(to_out_in(self.heads[source], source), new)

    def use_layout(self, layout: WeightLayout) -> None:
        """Serve with `layout` (its kinds must be stored) and free the copies it does not use."""
        missing = set(layout.kinds) - set(self.layer_sets)
        if missing:
            raise ValueError(f"weights are not stored as {sorted(missing)}")
        for kind in set(self.layer_sets) - set(layout.kinds):
            del self.layer_sets[kind], self.heads[kind]
        self.layout = layout

    def replace_kind(self, old: str, new: str) -> None:
        """Serve with `new` weights every step that `old` served (an op fallback from a faulting layout)."""
        self.add_kind(new, old)
        small, large = (new if k == old else k for k in (self.layout.small, self.layout.large))
        self.use_layout(WeightLayout(small, large, self.layout.switch_tokens if small != large else 0))

    def _place(self, t: torch.Tensor, kind: str | None = None) -> torch.Tensor:
        t = t.to(self.device, self.dtype)
        return t.contiguous() if kind is None else place(t, kind)

    def weight_bytes(self) -> int:
        seen: dict[int, int] = {}
        tensors = [self.embed, self.final_norm, *self.heads.values(),
                   *(x for layers in self.layer_sets.values() for layer in layers for x in layer)]
        for t in tensors:
            if t is not None:
                seen[storage_key(t)] = t.numel() * t.element_size()
        return sum(seen.values())

    # ---------------------------------------------------------------- forward
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata
                ) -> torch.Tensor:
        """Hidden states [T, hidden] for flattened tokens; writes their K/V into the cache."""
        c = self.config
        kind = self.layout.for_tokens(input_ids.shape[0])
        x = self.embed[input_ids]
        cos, sin = self.rope_cos[positions].unsqueeze(1), self.rope_sin[positions].unsqueeze(1)
        for i, (n1, wqkv, bqkv, wo, bo, n2, wgu, bgu, wd, bd) in enumerate(self.layer_sets[kind]):
            h = self._attention(rms_norm(x, n1, c.rms_norm_eps), wqkv, bqkv, kind, cos, sin, meta, i)
            x = x + linear(h, wo, bo, kind)
            gate, up = linear(rms_norm(x, n2, c.rms_norm_eps), wgu, bgu, kind).chunk(2, dim=-1)
            x = x + linear(F.silu(gate) * up, wd, bd, kind)
        return rms_norm(x, self.final_norm, c.rms_norm_eps)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        kind = self.layout.for_tokens(hidden.shape[0])
        return linear(hidden, self.heads[kind], None, kind)[:, : self.config.vocab_size].float()  # panels pad

    def _attention(self, x, wqkv, bqkv, kind, cos, sin, meta: AttentionMetadata, layer: int):  # type: ignore[no-untyped-def]
        c = self.config
        T, H, KV, D, G = x.shape[0], c.num_heads, c.num_kv_heads, c.head_dim, c.num_queries_per_kv
        qkv = linear(x, wqkv, bqkv, kind)
        qk = apply_rope(qkv[:, : (H + KV) * D].view(T, H + KV, D), cos, sin)  # q and k rotated together
        q, k, v = qk[:, :H], qk[:, H:], qkv[:, (H + KV) * D:]
        k_cache, v_cache = self.k_caches[layer], self.v_caches[layer]  # [KV, slots, D]
        k_cache.index_copy_(1, meta.slot_mapping, k.transpose(0, 1))
        v_cache.index_copy_(1, meta.slot_mapping, v.view(T, KV, D).transpose(0, 1))
        B, L, Q = meta.context_slots.shape[0], meta.context_slots.shape[1], meta.num_queries
        if self.decode_attend is not None and Q == 1 and meta.query_index is None and meta.context_lens is not None:
            out = self.decode_attend(q.reshape(T, H, D), k_cache, v_cache, meta.context_slots, meta.context_lens,
                                     self.scale)
            if out is not None:
                return out
        flat_slots = meta.context_slots.reshape(-1)
        keys = k_cache.index_select(1, flat_slots).view(KV, B, L, D)
        values = v_cache.index_select(1, flat_slots).view(KV, B, L, D)
        qb = q.view(B, Q, H, D) if meta.query_index is None else q[meta.query_index]
        qg = qb.view(B, Q, KV, G, D).permute(2, 0, 3, 1, 4).reshape(KV, B, G * Q, D)
        out = self.attend(qg, keys, values, meta.mask, self.scale)
        out = out.view(KV, B, G, Q, D).permute(1, 3, 0, 2, 4).reshape(B * Q, H * D)
        return out if meta.output_index is None else out[meta.output_index]


def hf_tensor_names(config: ModelConfig) -> list[str]:
    """Hugging Face names of every tensor the model reads (lm_head only when untied)."""
    names = ["model.embed_tokens.weight", "model.norm.weight"]
    if not config.tie_word_embeddings:
        names.append("lm_head.weight")
    for i in range(config.num_layers):
        p = f"model.layers.{i}."
        names += [p + "input_layernorm.weight", p + "post_attention_layernorm.weight"]
        for n in ("q_proj", "k_proj", "v_proj", "o_proj"):
            names.append(f"{p}self_attn.{n}.weight")
        for n in ("gate_proj", "up_proj", "down_proj"):
            names.append(f"{p}mlp.{n}.weight")
    return names

