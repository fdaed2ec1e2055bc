"""The built-in reference model: built deterministically so every command works offline.

Config (documented, fixed): Llama architecture, byte-level tokenizer (8 specials + 256 bytes = 264
tokens), hidden 256, 4 layers, 8 query heads sharing 4 KV heads (head_dim 32), SwiGLU intermediate
512, RoPE theta 10000, 1024 positions, untied embeddings. Weights are drawn from a seeded
`torch.Generator` (seed 20240601) on the CPU in float32: embeddings N(0, 1), projections
N(0, 1/fan_in), norms 1. Same bytes on every run and machine, so generations are reproducible.
"""

from __future__ import annotations

import torch

from bringup.runner.model.checkpoint import hf_tensor_names
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.config.builtin import BUILTIN_NAME as BUILTIN_NAME  # re-exported
from bringup.runner.model.config.builtin import builtin_config
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.model.families import build_model

BUILTIN_SEED = 20240601


def builtin_tensors(config: ModelConfig) -> dict[str, torch.Tensor]:
    """Hugging Face-named float32 weights drawn from the fixed seed."""
    gen = torch.Generator().manual_seed(BUILTIN_SEED)
    c, out = config, {}
    shapes = {
        "q_proj": (c.num_heads * c.head_dim, c.hidden_size), "k_proj": (c.num_kv_heads * c.head_dim, c.hidden_size),
        "v_proj": (c.num_kv_heads * c.head_dim, c.hidden_size), "o_proj": (c.hidden_size, c.num_heads * c.head_dim),
        "gate_proj": (c.intermediate_size, c.hidden_size), "up_proj": (c.intermediate_size, c.hidden_size),
        "down_proj": (c.hidden_size, c.intermediate_size),
        "embed_tokens": (c.vocab_size, c.hidden_size), "lm_head": (c.vocab_size, c.hidden_size),
    }
    for name in hf_tensor_names(config):
        if name.endswith("norm.weight"):
            out[name] = torch.ones(c.hidden_size)
            continue
        rows, cols = shapes[name.split(".")[-2]]
        std = 1.0 if "embed_tokens" in name else cols**-0.5
        out[name] = torch.randn(rows, cols, generator=gen) * std
    return out


def load_builtin(dtype: torch.dtype, device: torch.device | str, layout: WeightLayout | None = None) -> DecoderModel:
    config = builtin_config()
    model = build_model(config, dtype, device, layout)
    model.load_hf_tensors(builtin_tensors(config).get)
    return model
