"""A window's next-token log-probabilities through the real engine: its executor, its KV blocks, its plan."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from bringup.errors import BringupError
from bringup.runner.engine.engine import LLMEngine
from bringup.runner.engine.executor import Executor
from bringup.runner.engine.sequence import Sequence
from bringup.runner.eval.windows import Window
from bringup.runner.model.batch_inputs import SeqChunk


def window_logprobs(executor: Executor, tokens: list[int], window: Window, block_table: list[int]) -> torch.Tensor:
    """log-softmax (float32, on the model's device) of the logits predicting each token the window scores:
    [window.scored, vocab]. The window is one prefill from an empty cache into `block_table`."""
    logits = executor.run_chunks([SeqChunk(tokens[window.start:window.end], 0, block_table)], all_positions=True)
    first = window.first_scored_offset
    return torch.log_softmax(logits[first:first + window.scored], dim=-1)


@contextmanager
def reserved_blocks(engine: LLMEngine, n_tokens: int) -> Iterator[list[int]]:
    """A block table of the engine's KV cache holding `n_tokens` tokens, given back afterwards."""
    holder = Sequence("eval", [], n_tokens, params=None, arrival=-1)  # type: ignore[arg-type]
    if n_tokens > engine.max_model_len or not engine.blocks.can_grow(holder, n_tokens):
        raise BringupError(f"--ctx {n_tokens}: the engine's KV cache holds {engine.blocks.num_free} blocks of "
                           f"{engine.blocks.block_size} tokens and a context of {engine.max_model_len}; give a "
                           "smaller --ctx")
    engine.blocks.grow(holder, n_tokens)
    try:
        yield holder.block_table
    finally:
        engine.blocks.free(holder)
