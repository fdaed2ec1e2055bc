"""Turn one scheduled step (sequences with block tables) into the model's flat inputs."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bringup.runner.model.attention_layer import AttentionMetadata, AttentionPart


@dataclass
class SeqChunk:
    """One sequence's share of a step: tokens[start:] are new; the context is all of tokens."""

    token_ids: list[int]
    start: int  # tokens already in the cache
    block_table: list[int]


@dataclass
class BatchInputs:
    input_ids: torch.Tensor
    positions: torch.Tensor
    meta: AttentionMetadata
    last_index: torch.Tensor  # [B] flat index of each sequence's last new token


def build_inputs(chunks: list[SeqChunk], block_size: int, queries_per_kv: int,
                 device: torch.device, window: int | None = None) -> BatchInputs:
    """Flatten the chunks; compute slots, context slots, and the causal/padding mask when needed; with a sliding
    `window`, also the mask of its layers (a query at p sees keys in (p - window, p]) when a key falls outside."""
    ids: list[int] = []
    pos: list[int] = []
    n_new = [len(c.token_ids) - c.start for c in chunks]
    ctx_len = [len(c.token_ids) for c in chunks]
    for c in chunks:
        ids.extend(c.token_ids[c.start:])
        pos.extend(range(c.start, len(c.token_ids)))
    B, Q, L = len(chunks), max(n_new), max(ctx_len)
    max_blocks = -(-L // block_size)
    tables = torch.tensor([c.block_table[:max_blocks] + [0] * (max_blocks - len(c.block_table[:max_blocks]))
                           for c in chunks], dtype=torch.long)
    offsets = torch.arange(block_size, dtype=torch.long)
    # a tensor of its own, not a view: a compiled forward would guard on the strides of the view's base
    ctx_slots = (tables.unsqueeze(-1) * block_size + offsets).view(B, -1)[:, :L].clone()
    positions = torch.tensor(pos, dtype=torch.long)
    flat_seq = torch.repeat_interleave(torch.arange(B), torch.tensor(n_new))
    slot_mapping = ctx_slots[flat_seq, positions]
    starts = torch.tensor([0, *n_new]).cumsum(0)
    uniform = all(n == Q for n in n_new)
    query_index = output_index = None
    if not uniform:
        j = torch.arange(Q)
        valid = j.unsqueeze(0) < torch.tensor(n_new).unsqueeze(1)
        query_index = torch.where(valid, starts[:-1].unsqueeze(1) + j, starts[:-1].unsqueeze(1))
        output_index = (flat_seq * Q + (torch.arange(len(ids)) - starts[flat_seq]))
    mask = window_mask = None
    needs_mask, needs_window = not (uniform and Q == 1 and min(ctx_len) == L), window is not None and window < L
    if needs_mask or needs_window:
        q_pos = torch.zeros(B, Q, dtype=torch.long)
        for b, c in enumerate(chunks):
            q_pos[b, : n_new[b]] = torch.arange(c.start, len(c.token_ids))
        key = torch.arange(L)
        m = (key.view(1, 1, L) <= q_pos.unsqueeze(-1)) & (key.view(1, L) < torch.tensor(ctx_len).view(B, 1)
                                                           ).unsqueeze(1)
        mask = _per_head(m, queries_per_kv).to(device) if needs_mask else None
        if needs_window:
            window_mask = _per_head(m & (key.view(1, 1, L) > q_pos.unsqueeze(-1) - window), queries_per_kv).to(device)
    meta = AttentionMetadata(
        slot_mapping=slot_mapping.to(device), context_slots=ctx_slots.to(device), mask=mask,
        query_index=None if query_index is None else query_index.to(device),
        output_index=None if output_index is None else output_index.to(device), num_queries=Q,
        context_lens=torch.tensor(ctx_len, dtype=torch.long, device=device), window_mask=window_mask,
        fresh=n_new if Q > 1 and all(c.start == 0 for c in chunks) else None,
        spans=[(c.start, n) for c, n in zip(chunks, n_new, strict=True)]
        if Q > 1 and any(c.start for c in chunks) else None,
    )
    return BatchInputs(torch.tensor(ids, dtype=torch.long, device=device), positions.to(device), meta,
                       (starts[1:] - 1).to(device))


def decode_rows(chunks: list[SeqChunk]) -> tuple[list[SeqChunk], list[int]]:
    """Each new token of each chunk as a decode of its own, whose context is the tokens up to it, and the row of each
    chunk's last token. A kernel that writes every row's K/V before any row attends (the fused decode kernel) then
    computes a prompt chunk's causal attention exactly, from the cache, with no gather and no mask."""
    rows: list[SeqChunk] = []
    last: list[int] = []
    for c in chunks:
        rows += [SeqChunk(c.token_ids[:p + 1], p, c.block_table) for p in range(c.start, len(c.token_ids))]
        last.append(len(rows) - 1)
    return rows, last


def build_mixed_inputs(groups: list[list[SeqChunk]], block_size: int, queries_per_kv: int,
                       device: torch.device, window: int | None = None) -> BatchInputs:
    """One forward's inputs for several groups of chunks (decodes, prompt chunks of similar lengths): their tokens
    flattened in group order, each group attending as its own part; last_index follows the same order."""
    built = [build_inputs(group, block_size, queries_per_kv, device, window) for group in groups]
    parts, first = [], 0
    for inputs in built:
        end = first + inputs.input_ids.shape[0]
        parts.append(AttentionPart(first, end, inputs.meta))
        first = end
    last = torch.cat([inputs.last_index + part.first for inputs, part in zip(built, parts, strict=True)])
    meta = AttentionMetadata(slot_mapping=torch.cat([b.meta.slot_mapping for b in built]),
                             context_slots=built[0].meta.context_slots, mask=None, query_index=None,
                             output_index=None, num_queries=max(b.meta.num_queries for b in built), parts=parts)
    return BatchInputs(torch.cat([b.input_ids for b in built]), torch.cat([b.positions for b in built]), meta, last)


def _per_head(m: torch.Tensor, queries_per_kv: int) -> torch.Tensor:
    """[B, Q, L] -> [1, B, G*Q, L]: the same rows for each query head of a kv head."""
    B, Q, L = m.shape
    return m.view(1, B, 1, Q, L).expand(1, B, queries_per_kv, Q, L).reshape(1, B, queries_per_kv * Q, L)
