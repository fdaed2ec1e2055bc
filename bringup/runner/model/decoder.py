"""The decoder shared by every family: embedding, layers (attention + SwiGLU MLP), final norm, LM head.

Tokens of all sequences in a step are flattened into one [T] batch (see attention_layer.py). Linear
weights may be stored `[out, in]` (F.linear), `[in, out]` (`x @ W`), pre-packed (oneDNN) and more; the
execution plan picks the layout that measured faster on the device, per step size (layout_linear.py).
A family (llama.py, qwen2.py) declares which projections carry biases; families.py builds the right one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bringup.runner.model.attention_layer import (
    AttendFn,
    Attention,
    AttentionMetadata,
    AttentionOps,
    DecodeAttendFn,
)
from bringup.runner.model.checkpoint import (
    ATTENTION_PROJECTIONS,
    EMBED,
    FINAL_NORM,
    LM_HEAD,
    MLP_PROJECTIONS,
    CheckpointReader,
    TensorGetter,
    layer_prefix,
)
from bringup.runner.model.checkpoint import hf_tensor_names as hf_tensor_names  # re-exported
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.kv_cache import PagedKVCache
from bringup.runner.model.layout_linear import LayoutLinear, WeightLayout
from bringup.runner.model.linear_kinds import storage_key
from bringup.runner.model.norm import RMSNorm
from bringup.runner.model.rope import inverse_frequencies, rope_tables


@dataclass(frozen=True)
class ProjectionBiases:
    """Which projections carry a bias in a family's checkpoints."""

    qkv: bool = False
    o: bool = False
    mlp: bool = False


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x)), with gate and up fused into one projection."""

    def __init__(self, config: ModelConfig, bias: bool) -> None:
        super().__init__()
        self.gate_up_proj = LayoutLinear(config.hidden_size, 2 * config.intermediate_size, bias)
        self.down_proj = LayoutLinear(config.intermediate_size, config.hidden_size, bias)

    def forward(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        gate, up = self.gate_up_proj(x, kind).chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up, kind)


class DecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, ops: AttentionOps, biases: ProjectionBiases) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = Attention(config, ops, qkv_bias=biases.qkv, o_bias=biases.o)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = MLP(config, biases.mlp)

    def forward(self, x: torch.Tensor, kind: str, cos: torch.Tensor, sin: torch.Tensor,
                meta: AttentionMetadata) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), kind, cos, sin, meta)
        return x + self.mlp(self.post_attention_layernorm(x), kind)

    def load_hf(self, reader: CheckpointReader, prefix: str, kinds: list[str]) -> None:
        self.input_layernorm.load(reader.tensor(prefix + "input_layernorm.weight"))
        self.post_attention_layernorm.load(reader.tensor(prefix + "post_attention_layernorm.weight"))
        for name, parts in ATTENTION_PROJECTIONS.items():
            reader.fill(getattr(self.self_attn, name), prefix + "self_attn.", parts, kinds)
        for name, parts in MLP_PROJECTIONS.items():
            reader.fill(getattr(self.mlp, name), prefix + "mlp.", parts, kinds)


class DecoderModel(nn.Module):
    """Forward over flattened tokens with a paged KV cache. Built empty (on the meta device) and filled by
    `load_hf_tensors`; subclasses are the families."""

    architectures: tuple[str, ...] = ()  # the Hugging Face architectures a family serves

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        raise NotImplementedError(f"{cls.__name__} does not declare its projection biases")

    def __init__(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                 layout: WeightLayout | None = None) -> None:
        super().__init__()
        c = config
        self.config, self.dtype, self.device, self.layout = c, dtype, torch.device(device), layout or WeightLayout()
        self.ops = AttentionOps()
        biases = self.projection_biases(c)
        self.embed = nn.Parameter(torch.empty(c.vocab_size, c.hidden_size, device="meta"), requires_grad=False)
        self.layers = nn.ModuleList(DecoderLayer(c, self.ops, biases) for _ in range(c.num_layers))
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = LayoutLinear(c.hidden_size, c.vocab_size, bias=False)
        cos, sin = rope_tables(inverse_frequencies(c.head_dim, c.rope_theta, c.rope_scaling),
                               c.max_position_embeddings)
        self.register_buffer("rope_cos", cos.to(self.device, dtype), persistent=False)
        self.register_buffer("rope_sin", sin.to(self.device, dtype), persistent=False)

    # ---------------------------------------------------------------- attention implementations (executor's)
    @property
    def attend(self) -> AttendFn:
        return self.ops.attend

    @attend.setter
    def attend(self, fn: AttendFn) -> None:
        self.ops.attend = fn

    @property
    def decode_attend(self) -> DecodeAttendFn | None:
        return self.ops.decode_attend

    @decode_attend.setter
    def decode_attend(self, fn: DecodeAttendFn | None) -> None:
        self.ops.decode_attend = fn

    # ---------------------------------------------------------------- KV cache (kv_cache.py allocates it)
    def kv_caches(self) -> list[PagedKVCache]:
        return [layer.self_attn.cache for layer in self.layers]

    @property
    def k_caches(self) -> list[torch.Tensor]:
        return [cache.k for cache in self.kv_caches()]

    @property
    def v_caches(self) -> list[torch.Tensor]:
        return [cache.v for cache in self.kv_caches()]

    # ---------------------------------------------------------------- weights
    def load_hf_tensors(self, get: TensorGetter) -> None:
        """Fill the weights from Hugging Face tensor names; `get(name)` returns None when absent."""
        reader, kinds = CheckpointReader(get, self.device, self.dtype), self.layout.kinds
        for i, layer in enumerate(self.layers):
            layer.load_hf(reader, layer_prefix(i), kinds)
        self.embed = nn.Parameter(reader.tensor(EMBED), requires_grad=False)
        head = None if self.config.tie_word_embeddings else reader.optional(LM_HEAD)
        self.lm_head.load(self.embed.detach() if head is None else head, None, kinds)  # out_in shares the table
        self.norm.load(reader.tensor(FINAL_NORM))

    def linear_layers(self) -> list[LayoutLinear]:
        return [m for m in self.modules() if isinstance(m, LayoutLinear)]

    @property
    def stored_kinds(self) -> list[str]:
        """The kinds the linear weights are stored for now."""
        return self.lm_head.kinds

    def add_kind(self, new: str, source: str) -> None:
        """Also keep the linear weights stored for `new`, converted from the copy stored for `source`."""
        if new in self.stored_kinds:
            return
        for linear in self.linear_layers():
            linear.add_kind(new, source)

    def use_layout(self, layout: WeightLayout) -> None:
        """Serve with `layout` (its kinds must be stored) and free the copies it does not use."""
        missing = set(layout.kinds) - set(self.stored_kinds)
        if missing:
            raise ValueError(f"weights are not stored as {sorted(missing)}")
        for kind in set(self.stored_kinds) - set(layout.kinds):
            for linear in self.linear_layers():
                linear.drop_kind(kind)
        self.layout = layout

    def replace_kind(self, old: str, new: str) -> None:
        """Serve with `new` weights every step that `old` served (an op fallback from a faulting layout)."""
        self.add_kind(new, old)
        small, large = (new if k == old else k for k in (self.layout.small, self.layout.large))
        self.use_layout(WeightLayout(small, large, self.layout.switch_tokens if small != large else 0))

    def weight_bytes(self) -> int:
        """Bytes of every stored weight (each layout's copy included), storage shared by two counted once."""
        tensors = [*self.parameters(), *(t for linear in self.linear_layers() for t in linear.buffers())]
        return sum({storage_key(t): t.numel() * t.element_size() for t in tensors}.values())

    # ---------------------------------------------------------------- forward
    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor, meta: AttentionMetadata) -> torch.Tensor:
        """Hidden states [T, hidden] for flattened tokens; writes their K/V into the cache."""
        kind = self.layout.for_tokens(input_ids.shape[0])
        x = self.embed[input_ids]
        cos, sin = self.rope_cos[positions].unsqueeze(1), self.rope_sin[positions].unsqueeze(1)
        for layer in self.layers:
            x = layer(x, kind, cos, sin, meta)
        return self.norm(x)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        kind = self.layout.for_tokens(hidden.shape[0])
        return self.lm_head(hidden, kind)[:, : self.config.vocab_size].float()  # panels pad the vocabulary
