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


def hf_tensor_names(config: ModelConfig) -> list[str]:
    """Hugging Face names of every weight matrix and norm the model reads (lm_head only when untied; biases
    are not listed)."""
    names = [EMBED, FINAL_NORM]
    if not config.tie_word_embeddings:
        names.append(LM_HEAD)
    for i in range(config.num_layers):
        p = layer_prefix(i)
        names += [f"{p}{norm}.weight" for norm in LAYER_NORMS]
        names += [f"{p}self_attn.{n}.weight" for parts in ATTENTION_PROJECTIONS.values() for n in parts]
        names += [f"{p}mlp.{n}.weight" for parts in MLP_PROJECTIONS.values() for n in parts]
    return names


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
