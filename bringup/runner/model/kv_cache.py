"""The paged KV cache: per layer one K and one V tensor of [kv_heads, num_blocks * block_size, head_dim].

A token's slot is `block * block_size + offset`; sequences address the cache only through their
block tables. The cache is allocated once, at engine start, and never grows.
"""

from __future__ import annotations

import torch
from torch import nn

from bringup.runner.model.config import ModelConfig


def bytes_per_block(config: ModelConfig, block_size: int, dtype: torch.dtype) -> int:
    """K and V bytes of one block across all layers."""
    elem = torch.empty((), dtype=dtype).element_size()
    return 2 * config.num_layers * block_size * config.num_kv_heads * config.head_dim * elem


def cache_shape(config: ModelConfig, slots: int) -> tuple[int, int, int]:
    """Head-major: a sequence's context for one head is a gather of whole rows of one [slots, head_dim] plane."""
    return (config.num_kv_heads, slots, config.head_dim)


class PagedKVCache(nn.Module):
    """One layer's K and V planes ([kv_heads, slots, head_dim] each); empty until `allocate`."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("k", None, persistent=False)
        self.register_buffer("v", None, persistent=False)

    def allocate(self, shape: tuple[int, int, int], dtype: torch.dtype, device: torch.device) -> None:
        self.k = torch.zeros(shape, dtype=dtype, device=device)
        self.v = torch.zeros(shape, dtype=dtype, device=device)

    def write(self, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store the new tokens' k and v ([T, kv_heads, head_dim]) at their slots ([T])."""
        self.k.index_copy_(1, slots, k.transpose(0, 1))
        self.v.index_copy_(1, slots, v.transpose(0, 1))

    def gather(self, context_slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each sequence's context ([B, L] slots) as contiguous keys and values [kv_heads, B, L, head_dim]."""
        (kv_heads, _, head_dim), (batch, length) = self.k.shape, context_slots.shape
        flat = context_slots.reshape(-1)
        keys = self.k.index_select(1, flat).view(kv_heads, batch, length, head_dim)
        values = self.v.index_select(1, flat).view(kv_heads, batch, length, head_dim)
        return keys, values

