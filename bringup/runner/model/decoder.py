"""The decoder shared by every family: embedding, layers (attention + SwiGLU MLP), final norm, LM head.

Tokens of all sequences in a step are flattened into one [T] batch (see attention_layer.py). Linear
weights may be stored `[out, in]` (F.linear), `[in, out]` (`x @ W`), pre-packed (oneDNN) and more; the
execution plan picks the layout that measured faster on the device, per step size (layout_linear.py).
A family (llama.py, qwen2.py, qwen3.py, phi3.py, gemma2.py, gemma3.py) declares what differs as data and small
hooks: projection biases, its checkpoint's names, its attention per layer (AttentionSpec: q/k norms, scale, window,
soft-cap), its MLP per layer (`make_mlp`), its norm, its layer class, an embedding scale and a final logit
soft-cap; families/ builds the right one. Rope is one table, or two when the config gives some layers their own
base (`local_rope_layers`: Gemma 3's sliding layers), each layer handed its own.
"""

from __future__ import annotations

from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from bringup.runner.model.attention_layer import (
    AttendFn,
    Attention,
    AttentionMetadata,
    AttentionOps,
    AttentionSpec,
    CausalAttendFn,
    ContextAttendFn,
    DecodeAttendFn,
)
from bringup.runner.model.checkpoint import (
    EMBED,
    FINAL_NORM,
    FUSED_MLP_PROJECTIONS,
    MLP_PROJECTIONS,
    CheckpointNames,
    ProjectionBiases,
    dense_mlp_shapes,
    layer_prefix,
    layer_shapes,
    model_shapes,
)
from bringup.runner.model.checkpoint import hf_tensor_names as hf_tensor_names  # re-exported
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.config.fields import Fields
from bringup.runner.model.kv_cache import PagedKVCache, cache_shape
from bringup.runner.model.norm import RMSNorm
from bringup.runner.model.rope import inverse_frequencies, rope_tables
from bringup.runner.weights.checkpoint_reader import CheckpointReader, TensorGetter
from bringup.runner.weights.formats.compressed_tensors.stored_reader import checkpoint_reader
from bringup.runner.weights.held import StoredGetter
from bringup.runner.weights.layout_linear import LayoutLinear, WeightLayout
from bringup.runner.weights.layouts import storage_key

ACTIVATIONS = {"silu": F.silu, "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh")}


class MLP(nn.Module):
    """Gated MLP: down(act(gate(x)) * up(x)) with config.hidden_act (silu: SwiGLU, gelu tanh: GeGLU), gate and
    up fused into one projection."""

    def __init__(self, config: ModelConfig, bias: bool, fused_checkpoint: bool = False) -> None:
        super().__init__()
        self.act = ACTIVATIONS[config.hidden_act]
        self.parts = FUSED_MLP_PROJECTIONS if fused_checkpoint else MLP_PROJECTIONS
        self.gate_up_proj = LayoutLinear(config.hidden_size, 2 * config.intermediate_size, bias)
        self.down_proj = LayoutLinear(config.intermediate_size, config.hidden_size, bias)

    def forward(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        gate, up = self.gate_up_proj(x, kind).chunk(2, dim=-1)
        return self.down_proj(self.act(gate) * up, kind)

    def load_hf(self, reader: CheckpointReader, prefix: str, kinds: list[str]) -> None:
        """Fill from the checkpoint's `prefix` (`...mlp.`)."""
        for name, parts in self.parts.items():
            reader.fill(getattr(self, name), prefix, parts, kinds)


class DecoderLayer(nn.Module):
    """Pre-norm residual blocks: x + attn(norm(x)), then x + mlp(norm(x)). `norm_names` lists the layer's norms
    (checkpoint names, each also the attribute); a family with other norms subclasses it (gemma2.py)."""

    norm_names: ClassVar[tuple[str, ...]] = ("input_layernorm", "post_attention_layernorm")

    def __init__(self, config: ModelConfig, family: type[DecoderModel], index: int, ops: AttentionOps) -> None:
        super().__init__()
        for name in self.norm_names:
            setattr(self, name, family.make_norm(config))
        self.self_attn = Attention(config, ops, family.attention_spec(config, index))
        self.mlp = family.make_mlp(config, index)

    def forward(self, x: torch.Tensor, kind: str, cos: torch.Tensor, sin: torch.Tensor,
                meta: AttentionMetadata) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), kind, cos, sin, meta)
        return x + self.mlp(self.post_attention_layernorm(x), kind)

    def load_hf(self, reader: CheckpointReader, prefix: str, kinds: list[str]) -> None:
        for name in self.norm_names:
            getattr(self, name).load(reader.tensor(f"{prefix}{name}.weight"))
        self.self_attn.load_hf(reader, prefix + "self_attn.", kinds)
        self.mlp.load_hf(reader, prefix + "mlp.", kinds)


class DecoderModel(nn.Module):
    """Forward over flattened tokens with a paged KV cache. Built empty (on the meta device) and filled by
    `load_hf_tensors`; subclasses are the families."""

    architectures: tuple[str, ...] = ()  # the Hugging Face architectures a family serves
    model_types: ClassVar[dict[str, str]] = {}  # config.json model_type -> architecture (a file without architectures)
    activation: ClassVar[tuple[str, str]] = ("hidden_act", "silu")  # the MLP activation's key and the value served
    head_dim_default: ClassVar[int | None] = None  # transformers' default when config.json has no head_dim
    layer_class: ClassVar[type[DecoderLayer]] = DecoderLayer
    checkpoint_names: ClassVar[CheckpointNames] = CheckpointNames()
    scales_embeddings: ClassVar[bool] = False  # embeddings times sqrt(hidden), rounded to the model dtype (Gemma)

    # ---------------------------------------------------------------- what a family declares
    @classmethod
    def read_config(cls, fields: Fields, config: ModelConfig) -> None:
        """Set what only this family reads from config.json on `config` (hf_config.py read the shared settings)."""

    @classmethod
    def projection_biases(cls, config: ModelConfig) -> ProjectionBiases:
        raise NotImplementedError(f"{cls.__name__} does not declare its projection biases")

    @classmethod
    def attention_spec(cls, config: ModelConfig, layer_index: int) -> AttentionSpec:
        """Layer `layer_index`'s attention: Llama's, with the config's scale, window and soft-cap."""
        biases = cls.projection_biases(config)
        return AttentionSpec(qkv_bias=biases.qkv, o_bias=biases.o, qk_norm=cls.checkpoint_names.qk_norms,
                             scale=config.attention_scale, window=config.layer_window(layer_index),
                             softcap=config.attn_logit_softcap, fused_checkpoint=cls.checkpoint_names.fused)

    @classmethod
    def make_mlp(cls, config: ModelConfig, layer_index: int) -> nn.Module:
        """Layer `layer_index`'s MLP: a module with forward(x, kind) and load_hf(reader, prefix, kinds)."""
        return MLP(config, cls.projection_biases(config).mlp, cls.checkpoint_names.fused)

    @classmethod
    def mlp_shapes(cls, config: ModelConfig, layer_index: int, prefix: str) -> dict[str, tuple[int, ...]]:
        """The checkpoint tensors `make_mlp`'s module reads under `prefix` (`...mlp.`), with their shapes."""
        return dense_mlp_shapes(config, prefix, cls.projection_biases(config).mlp, cls.checkpoint_names.fused)

    @classmethod
    def make_norm(cls, config: ModelConfig) -> RMSNorm:
        return RMSNorm(config.hidden_size, config.rms_norm_eps)

    @classmethod
    def hf_tensor_shapes(cls, config: ModelConfig) -> dict[str, tuple[int, ...]]:
        """Every tensor this family reads for `config`, by Hugging Face name, with its shape (validate.py)."""
        shapes, biases = model_shapes(config), cls.projection_biases(config)
        names = CheckpointNames(cls.layer_class.norm_names, cls.checkpoint_names.qk_norms,
                                cls.checkpoint_names.fused)
        for i in range(config.num_layers):
            p = layer_prefix(i)
            shapes |= layer_shapes(config, p, names, biases) | cls.mlp_shapes(config, i, p + "mlp.")
        return shapes

    def __init__(self, config: ModelConfig, dtype: torch.dtype, device: torch.device | str,
                 layout: WeightLayout | None = None) -> None:
        super().__init__()
        c = config
        self.config, self.dtype, self.device, self.layout = c, dtype, torch.device(device), layout or WeightLayout()
        self.ops = AttentionOps()
        self.embed = nn.Parameter(torch.empty(c.vocab_size, c.hidden_size, device="meta"), requires_grad=False)
        self.layers = nn.ModuleList(self.layer_class(c, type(self), i, self.ops) for i in range(c.num_layers))
        self.norm = self.make_norm(c)
        self.lm_head = LayoutLinear(c.hidden_size, c.vocab_size, bias=False)
        # transformers rounds the scale to the model dtype before multiplying (Gemma: sqrt(3072) is 55.5 in bf16)
        self.embed_scale = torch.tensor(c.hidden_size**0.5, dtype=dtype).item() if self.scales_embeddings else None
        self._rope_table("rope", c.rope_theta, c.rope_scaling)
        self.local_rope = tuple(c.local_rope_layers) or (False,) * c.num_layers  # per layer: the second table
        if any(self.local_rope):
            self._rope_table("local_rope", c.local_rope_theta, None)

    def _rope_table(self, name: str, theta: float, scaling: dict[str, Any] | None) -> None:
        """Buffers `{name}_cos` and `{name}_sin` [max_positions, rotary_dim // 2] in the model's dtype."""
        c = self.config
        cos, sin = rope_tables(inverse_frequencies(c.rotary_dim, theta, scaling), c.max_position_embeddings)
        self.register_buffer(f"{name}_cos", cos.to(self.device, self.dtype), persistent=False)
        self.register_buffer(f"{name}_sin", sin.to(self.device, self.dtype), persistent=False)

    # ---------------------------------------------------------------- attention implementations (executor's)
    @property
    def attend(self) -> AttendFn:
        return self.ops.attend

    @attend.setter
    def attend(self, fn: AttendFn) -> None:
        self.ops.attend = fn

    @property
    def causal_attend(self) -> CausalAttendFn | None:
        return self.ops.causal_attend

    @causal_attend.setter
    def causal_attend(self, fn: CausalAttendFn | None) -> None:
        self.ops.causal_attend = fn

    @property
    def context_attend(self) -> ContextAttendFn | None:
        return self.ops.context_attend

    @context_attend.setter
    def context_attend(self, fn: ContextAttendFn | None) -> None:
        self.ops.context_attend = fn

    @property
    def decode_attend(self) -> DecodeAttendFn | None:
        return self.ops.decode_attend

    @decode_attend.setter
    def decode_attend(self, fn: DecodeAttendFn | None) -> None:
        self.ops.decode_attend = fn

    # ---------------------------------------------------------------- KV cache (kv_cache.py)
    def kv_caches(self) -> list[PagedKVCache]:
        return [layer.self_attn.cache for layer in self.layers]

    def allocate_kv_cache(self, num_blocks: int, block_size: int) -> None:
        """Allocate the cache once, every layer's planes in the model's dtype and on its device."""
        shape = cache_shape(self.config, num_blocks * block_size)
        for layer in self.layers:  # a layer split across devices (engine/split_model.py) says where each layer is
            layer.self_attn.cache.allocate(shape, self.dtype, getattr(layer, "placed_on", self.device))

    @property
    def k_caches(self) -> list[torch.Tensor]:
        return [cache.k for cache in self.kv_caches()]

    @property
    def v_caches(self) -> list[torch.Tensor]:
        return [cache.v for cache in self.kv_caches()]

    # ---------------------------------------------------------------- weights
    def load_hf_tensors(self, get: TensorGetter, stored: StoredGetter | None = None) -> None:
        """Fill the weights from Hugging Face tensor names; `get(name)` returns None when absent, `stored(name,
        scheme)` a linear weight the checkpoint holds pre-quantized (weights/held.py)."""
        reader = checkpoint_reader(get, self.device, self.dtype, self.config.stored_quantization, stored)
        kinds = self.layout.kinds
        for i, layer in enumerate(self.layers):
            layer.load_hf(reader, layer_prefix(i), kinds)
        self.embed = nn.Parameter(reader.tensor(EMBED), requires_grad=False)
        reader.fill_head(self.lm_head, self.embed.detach(), kinds, self.config.tie_word_embeddings)
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

    def adopt_kind(self, kind: str, donor: DecoderModel) -> None:
        """Also keep the linear weights `donor` (the same checkpoint, loaded for `kind`) stores for `kind`."""
        for ours, theirs in zip(self.linear_layers(), donor.linear_layers(), strict=True):
            ours.keep(kind, theirs.weight(kind))

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
        if self.embed_scale is not None:
            x = x * self.embed_scale
        rope = self.rope_cos[positions].unsqueeze(1), self.rope_sin[positions].unsqueeze(1)
        local = (self.local_rope_cos[positions].unsqueeze(1), self.local_rope_sin[positions].unsqueeze(1)) \
            if any(self.local_rope) else rope
        for i, layer in enumerate(self.layers):
            x = layer(x, kind, *(local if self.local_rope[i] else rope), meta)
        return self.norm(x)

    def logits(self, hidden: torch.Tensor, kind: str | None = None) -> torch.Tensor:
        """Logits (float32) of hidden states [T, hidden], through the head stored for `kind` (default: the
        layout's kind for T tokens)."""
        kind = kind or self.layout.for_tokens(hidden.shape[0])
        logits = self.lm_head(hidden, kind)[:, : self.config.vocab_size].float()  # panels pad the vocabulary
        cap = self.config.final_logit_softcap
        return logits if cap is None else torch.tanh(logits / cap) * cap
