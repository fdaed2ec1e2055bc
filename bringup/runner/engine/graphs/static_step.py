"""One decode step in a form a graph can capture: every input a static device buffer of fixed shape, refilled by
one host-to-device copy before each replay, and nothing in the step that syncs with the host or changes shape.

The buffer packs, per row of the batch bucket: the new token, its position, its cache slot, the context length,
then the context's cache slots padded to the context bucket. Rows past the step's sequences repeat the first
sequence's row exactly, so they compute the same K/V and write the same values into the same slot: no slot of
another sequence is touched and no scratch block is needed. The padding mask is computed inside the step from the
context lengths (keys at or past a row's length are masked), and for a model with a sliding window its mask too.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from bringup.runner.model.attention_layer import AttentionMetadata
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.model.decoder import DecoderModel

HEAD = 4  # packed columns before the context slots: token, position, slot, context length


class StaticStep:
    """The decode step of `batch` rows over `capacity` context slots, on static buffers; `replay` is set once it is
    captured, and each replay leaves the logits ([batch, vocab], float32) in `logits`."""

    def __init__(self, model: DecoderModel, batch: int, capacity: int, block_size: int) -> None:
        self.model, self.batch, self.capacity, self.block_size = model, batch, capacity, block_size
        self.packed = torch.zeros(batch, HEAD + capacity, dtype=torch.long, device=model.device)
        self.keys = torch.arange(capacity, dtype=torch.long, device=model.device)
        self.host_offsets = torch.arange(block_size, dtype=torch.long)
        self.logits: torch.Tensor | None = None
        self.replay: Callable[[], None] | None = None

    def fill(self, chunks: list[SeqChunk]) -> None:
        """The static inputs from `chunks` (each one new token, at most `batch` of them, contexts within
        `capacity`): one copy to the device."""
        blocks, size = self.capacity // self.block_size, self.block_size
        tables, heads = [], []
        for chunk in chunks:
            table = chunk.block_table[:blocks]
            length = len(chunk.token_ids)
            last = length - 1
            heads.append([chunk.token_ids[last], last, table[last // size] * size + last % size, length])
            tables.append(table + [0] * (blocks - len(table)))
        pad = self.batch - len(chunks)
        tables += [tables[0]] * pad
        heads += [heads[0]] * pad
        slots = (torch.tensor(tables, dtype=torch.long).unsqueeze(-1) * size + self.host_offsets).view(self.batch, -1)
        self.packed.copy_(torch.cat((torch.tensor(heads, dtype=torch.long), slots), dim=1))

    def fill_scratch(self, block_table: list[int]) -> None:
        """Inputs for a capture at start-up, before any sequence holds a block: every row one token at position 1
        of `block_table`'s context."""
        self.fill([SeqChunk([0, 0], 1, block_table)])

    def forward(self) -> None:
        """The captured body: the model's decode step and its head, from the static buffers only."""
        packed, model, config = self.packed, self.model, self.model.config
        ids, positions = packed[:, 0].contiguous(), packed[:, 1].contiguous()
        slot_mapping, lengths = packed[:, 2].contiguous(), packed[:, 3].contiguous()
        context_slots = packed[:, HEAD:].contiguous()
        valid = self.keys < lengths.unsqueeze(1)
        window_mask = None
        if config.attention_window is not None:
            inside = valid & (self.keys > (positions - config.attention_window).unsqueeze(1))
            window_mask = self._per_head(inside)
        meta = AttentionMetadata(slot_mapping=slot_mapping, context_slots=context_slots, mask=self._per_head(valid),
                                 query_index=None, output_index=None, num_queries=1, context_lens=lengths,
                                 window_mask=window_mask)
        self.logits = model.logits(model(ids, positions, meta))

    def _per_head(self, rows: torch.Tensor) -> torch.Tensor:
        """[B, C] -> [1, B, G, C] (the same keys for each query head of a kv head; a view, no copy)."""
        groups = self.model.config.num_queries_per_kv
        return rows.view(1, self.batch, 1, self.capacity).expand(1, self.batch, groups, self.capacity)
