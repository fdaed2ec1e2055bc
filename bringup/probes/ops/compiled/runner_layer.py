"""The runner's own decoder layer as a compiled block: layer 0 of the built-in reference model.

It runs `bringup.runner.model.decoder.DecoderModel.forward` with one layer over a 37-token prefill of one
sequence, writing K/V into a small paged cache and attending through the runner's own metadata, so
eager vs compiled is judged on exactly the code the runner executes. The float64 reference is the
same model built in float64 (its RMSNorm and softmax statistics are float32 by design).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import torch

TOKENS = 37


def inputs(g: torch.Generator) -> list[Any]:
    from bringup.runner.sources.builtin_model import builtin_config

    vocab = builtin_config().vocab_size
    return [torch.randint(0, vocab, (TOKENS,), generator=g), torch.arange(TOKENS)]


def build(dtype: torch.dtype, device: torch.device) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """fn(input_ids [T], positions [T]) -> hidden [T, hidden] through one runner decoder layer."""
    from bringup.runner.model.attention_layer import AttentionMetadata
    from bringup.runner.model.families import build_model
    from bringup.runner.sources.builtin_model import builtin_config, builtin_tensors

    full = builtin_config()
    config = dataclasses.replace(full, num_layers=1)
    model = build_model(config, dtype, device)
    model.load_hf_tensors(builtin_tensors(full).get)
    model.allocate_kv_cache(num_blocks=1, block_size=TOKENS)
    causal = torch.arange(TOKENS)[None, :] <= torch.arange(TOKENS)[:, None]  # [Q, L]
    mask = causal.repeat(config.num_queries_per_kv, 1)[None, None].to(device)  # [1, 1, G*Q, L], rows (group, query)
    slots = torch.arange(TOKENS, device=device)
    meta = AttentionMetadata(slot_mapping=slots, context_slots=slots[None], mask=mask, query_index=None,
                             output_index=None, num_queries=TOKENS)

    def layer(input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return model(input_ids, positions, meta)

    return layer
