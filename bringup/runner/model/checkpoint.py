"""Hugging Face tensor names of a decoder checkpoint and the reader that fuses projections at load time.

Llama, Mistral and Qwen2 checkpoints share these names; a family (llama.py, qwen2.py) declares only which
projections carry biases. q, k and v are fused into one `qkv_proj`, gate and up into one `gate_up_proj`,
so each step runs one matmul where the checkpoint has several.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.layout_linear import LayoutLinear

EMBED, FINAL_NORM, LM_HEAD = "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"
LAYER_NORMS = ("input_layernorm", "post_attention_layernorm")
# our projection -> the checkpoint's projections fused into it (in order), under self_attn. and mlp.
ATTENTION_PROJECTIONS = {"qkv_proj": ("q_proj", "k_proj", "v_proj"), "o_proj": ("o_proj",)}
MLP_PROJECTIONS = {"gate_up_proj": ("gate_proj", "up_proj"), "down_proj": ("down_proj",)}

TensorGetter = Callable[[str], "torch.Tensor | None"]  # a checkpoint tensor by name, None when absent


def layer_prefix(index: int) -> str:
    return f"model.layers.{index}."


def hf_tensor_shapes(config: ModelConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a decoder with this config reads, by Hugging Face name, with its shape (lm_head only when
    untied; biases only where the config has them). The loader's checks and the built-in model both use it."""
    c = config
    hidden, inter = c.hidden_size, c.intermediate_size
    q_rows, kv_rows = c.num_heads * c.head_dim, c.num_kv_heads * c.head_dim
    shapes: dict[str, tuple[int, ...]] = {EMBED: (c.vocab_size, hidden), FINAL_NORM: (hidden,)}
    if not c.tie_word_embeddings:
        shapes[LM_HEAD] = (c.vocab_size, hidden)
    for i in range(c.num_layers):
        p = layer_prefix(i)
        shapes |= {f"{p}{norm}.weight": (hidden,) for norm in LAYER_NORMS}
        for proj, out, inp, bias in (("self_attn.q_proj", q_rows, hidden, c.qkv_bias),
                                     ("self_attn.k_proj", kv_rows, hidden, c.qkv_bias),
                                     ("self_attn.v_proj", kv_rows, hidden, c.qkv_bias),
                                     ("self_attn.o_proj", hidden, q_rows, c.o_bias),
                                     ("mlp.gate_proj", inter, hidden, c.mlp_bias),
                                     ("mlp.up_proj", inter, hidden, c.mlp_bias),
                                     ("mlp.down_proj", hidden, inter, c.mlp_bias)):
            shapes[f"{p}{proj}.weight"] = (out, inp)
            if bias:
                shapes[f"{p}{proj}.bias"] = (out,)
    return shapes


def hf_tensor_names(config: ModelConfig) -> list[str]:
    """Hugging Face names of every weight matrix and norm the model reads, in checkpoint order (lm_head only
    when untied; biases are not listed)."""
    return [name for name in hf_tensor_shapes(config) if not name.endswith(".bias")]


class CheckpointReader:
    """Reads tensors by name and converts them to the model's device and dtype."""

    def __init__(self, get: TensorGetter, device: torch.device, dtype: torch.dtype) -> None:
        self.get, self.device, self.dtype = get, device, dtype

    def tensor(self, name: str) -> torch.Tensor:
        """The tensor `name` on the model's device and dtype; KeyError when the checkpoint lacks it."""
        return self._raw(name).to(self.device, self.dtype).contiguous()

    def optional(self, name: str) -> torch.Tensor | None:
        t = self.get(name)
        return None if t is None else t.to(self.device, self.dtype).contiguous()

    def fused(self, names: Iterable[str]) -> torch.Tensor:
        """The tensors `names` concatenated along their first dimension, on the model's device and dtype."""
        parts = [self._raw(name) for name in names]
        joined = parts[0] if len(parts) == 1 else torch.cat(parts, 0)
        return joined.to(self.device, self.dtype).contiguous()

    def fill(self, linear: LayoutLinear, prefix: str, parts: Iterable[str], kinds: Iterable[str]) -> None:
        """Load `linear` from the checkpoint projections `prefix + part` (fused when several)."""
        parts = [prefix + part for part in parts]
        bias = self.fused(p + ".bias" for p in parts) if linear.has_bias else None
        linear.load(self.fused(p + ".weight" for p in parts), bias, kinds)

    def _raw(self, name: str) -> torch.Tensor:
        t = self.get(name)
        if t is None:
            raise KeyError(name)
        return t
