"""The paged KV cache: per layer one K and one V tensor of [kv_heads, num_blocks * block_size, head_dim].

A token's slot is `block * block_size + offset`; sequences address the cache only through their
block tables. The cache is allocated once, at engine start, and never grows.
"""

from __future__ import annotations

import torch

from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel


def bytes_per_block(config: ModelConfig, block_size: int, dtype: torch.dtype) -> int:
    """K and V bytes of one block across all layers."""
    elem = torch.empty((), dtype=dtype).element_size()
    return 2 * config.num_layers * block_size * config.num_kv_heads * config.head_dim * elem


def cache_shape(config: ModelConfig, slots: int) -> tuple[int, int, int]:
    """Head-major: a sequence's context for one head is a gather of whole rows of one [slots, head_dim] plane."""
    return (config.num_kv_heads, slots, config.head_dim)


def allocate_kv_cache(model: DecoderModel, num_blocks: int, block_size: int) -> None:
    """Allocate the cache once and attach it to the model."""
    c = model.config
    shape = cache_shape(c, num_blocks * block_size)
    model.k_caches = [torch.zeros(shape, dtype=model.dtype, device=model.device) for _ in range(c.num_layers)]
    model.v_caches = [torch.zeros(shape, dtype=model.dtype, device=model.device) for _ in range(c.num_layers)]
