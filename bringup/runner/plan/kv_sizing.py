"""How many KV blocks to allocate: what can ever be used, capped by what memory allows."""

from __future__ import annotations

import torch

from bringup.errors import BringupError
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.kv_cache import bytes_per_block
from bringup.runner.plan.plan import Choice, step_tokens

MEMORY_FRACTION = 0.9  # of the free memory after the weights are loaded


def activation_estimate(config: ModelConfig, tokens: int, context: int, dtype: torch.dtype) -> int:
    """Bytes of the largest step's live activations (hidden, qkv, MLP, float32 scores and logits)."""
    elem = torch.empty((), dtype=dtype).element_size()
    c = config
    per_token = (4 * c.hidden_size + (c.num_heads + 2 * c.num_kv_heads) * c.head_dim
                 + 3 * c.intermediate_size) * elem
    scores = 2 * c.num_heads * tokens * context * 4
    gathered_kv = 2 * tokens * c.num_kv_heads * c.head_dim * elem
    return tokens * per_token + scores + gathered_kv + c.vocab_size * 4 * 64


def size_kv_cache(config: ModelConfig, dtype: torch.dtype, block_size: int, max_num_seqs: int,
                  max_model_len: int, max_tokens: int, free_bytes: int | None, weight_bytes: int,
                  sweep: tuple[int, int] | None = None) -> Choice:
    """Blocks for max_num_seqs sequences of max_model_len tokens — or, with `sweep` = (sequences, tokens each),
    for the start-up batch sweep when that needs more, so the batch limit it measures is not capped by the
    default limit the cache was sized for — capped by free memory."""
    per_block = bytes_per_block(config, block_size, dtype)
    per_seq = -(-max_model_len // block_size)
    useful = max_num_seqs * per_seq
    why = f"{max_num_seqs} seqs × {max_model_len} tokens = {useful} blocks of {per_block} B"
    if sweep is not None and sweep[0] * -(-sweep[1] // block_size) > useful:
        useful = sweep[0] * -(-sweep[1] // block_size)
        why = f"room for the batch sweep: {sweep[0]} seqs × {sweep[1]} tokens = {useful} blocks of {per_block} B"
    if free_bytes is None:
        return Choice(useful, f"{why}; free memory unknown, not capped (weights {weight_bytes / 2**20:.0f} MiB)")
    activations = activation_estimate(config, max_tokens, max_model_len, dtype)
    fits = _blocks_that_fit(free_bytes, activations, per_block)
    if fits < per_seq:
        longest = longest_context(config, dtype, block_size, max_num_seqs, free_bytes, max_model_len - 1)
        raise BringupError(
            f"a {max_model_len}-token context does not fit in device memory: one sequence needs {per_seq} KV blocks "
            f"({per_seq * per_block / 2**20:.0f} MiB) and about {activations / 2**20:.0f} MiB of activations, "
            f"and {free_bytes / 2**30:.2f} GiB is free after {weight_bytes / 2**20:.0f} MiB of weights "
            f"({MEMORY_FRACTION} of it used); " + (
                f"at most {longest} tokens fit: pass --max-model-len {longest} or less, or free device memory"
                if longest else "not even a 2-token context fits: free device memory, or use a smaller model or "
                                "dtype"))
    return Choice(min(useful, fits), f"min({why}; memory: {MEMORY_FRACTION} × {free_bytes / 2**30:.1f} GiB free "
                                     f"− {activations / 2**20:.0f} MiB est. activations = {fits} blocks); "
                                     f"weights {weight_bytes / 2**20:.0f} MiB")


def longest_context(config: ModelConfig, dtype: torch.dtype, block_size: int, max_num_seqs: int, free_bytes: int,
                    below: int) -> int | None:
    """The longest context up to `below` tokens whose one sequence and largest step fit in `free_bytes` (None: not
    even 2 tokens): what a context needs only grows with its length, so halving the range finds it."""
    per_block = bytes_per_block(config, block_size, dtype)

    def fits(tokens: int) -> bool:
        step = step_tokens(max_num_seqs, tokens)
        blocks = _blocks_that_fit(free_bytes, activation_estimate(config, step, tokens, dtype), per_block)
        return blocks >= -(-tokens // block_size)

    low, high = 1, below  # fits(low) is assumed, never asked: 1 stands for "none"
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low if low >= 2 else None


def _blocks_that_fit(free_bytes: int, activations: int, per_block: int) -> int:
    return int((free_bytes * MEMORY_FRACTION - activations) // per_block)
