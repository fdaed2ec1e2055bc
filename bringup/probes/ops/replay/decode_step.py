"""One whole decode step of the runner's built-in model, as a replayed block: two sequences with a 19-token prompt
already in the paged KV cache (prefilled eagerly when the block is built), one new token each, through every layer
and the LM head to float32 logits. The new token's K/V go to the same cache slots on every call, so a replay with
new token ids is the step the runner would serve. The float64 reference is the same model built in float64."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

SEQS = 2
PROMPT = 19


def inputs(g: torch.Generator) -> list[Any]:
    from bringup.runner.sources.builtin_model import builtin_config

    vocab = builtin_config().vocab_size
    return [torch.randint(0, vocab, (SEQS,), generator=g), torch.full((SEQS,), PROMPT, dtype=torch.int64)]


def build(dtype: torch.dtype, device: torch.device) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """fn(input_ids [B], positions [B]) -> logits [B, vocab] through the runner's whole model."""
    from bringup.runner.model.attention_layer import AttentionMetadata
    from bringup.runner.model.families import build_model
    from bringup.runner.sources.builtin_model import builtin_config, builtin_tensors

    config = builtin_config()
    model = build_model(config, dtype, device)
    model.load_hf_tensors(builtin_tensors(config).get)
    span = PROMPT + 1
    model.allocate_kv_cache(num_blocks=SEQS, block_size=span)
    prompts = torch.Generator().manual_seed(19)
    causal = torch.arange(PROMPT)[None, :] <= torch.arange(PROMPT)[:, None]
    mask = causal.repeat(config.num_queries_per_kv, 1)[None, None].to(device)
    with torch.no_grad():
        for seq in range(SEQS):
            ids = torch.randint(0, config.vocab_size, (PROMPT,), generator=prompts).to(device)
            slots = torch.arange(seq * span, seq * span + PROMPT, device=device)
            model(ids, torch.arange(PROMPT, device=device),
                  AttentionMetadata(slot_mapping=slots, context_slots=slots[None], mask=mask, query_index=None,
                                    output_index=None, num_queries=PROMPT))
    context = (torch.arange(SEQS)[:, None] * span + torch.arange(span)[None, :]).to(device)
    meta = AttentionMetadata(slot_mapping=context[:, PROMPT].contiguous(), context_slots=context, mask=None,
                             query_index=None, output_index=None, num_queries=1)

    def step(input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return model.logits(model(input_ids, positions, meta))

    return step
