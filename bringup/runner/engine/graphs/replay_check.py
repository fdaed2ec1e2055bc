"""The runner's own check of its captured decode steps: each step's replay against the same step run eagerly (same
static buffers, shapes and kernels). At start-up it runs on inputs other than those the step was captured with, so a
replay that reads stale inputs or computes other numbers shows; a step captured later, when a longer context or a
larger batch is first met, is checked on the step about to run before its replay is used. verify-ops checks the
numbers against float64 beforehand; this checks the runner's capture of the served model."""

from __future__ import annotations

import torch

from bringup.runner.engine.graphs.static_step import StaticStep
from bringup.runner.model.batch_inputs import SeqChunk


def check_inputs(step: StaticStep) -> list[SeqChunk]:
    """One decode token per row, each row its own tokens and block where the cache has blocks enough (rows that
    share a block would write different K/V into one slot), at a context of one block."""
    blocks = step.model.kv_caches()[0].k.shape[1] // step.block_size
    rows = step.batch if step.batch <= blocks else 1
    vocab, length = step.model.config.vocab_size, min(step.block_size, step.capacity)
    return [SeqChunk([(7 * i + 3 + j) % vocab for j in range(length)], length - 1, [i]) for i in range(rows)]


def step_difference(step: StaticStep, chunks: list[SeqChunk]) -> float:
    """Relative max |replay - eager| of the logits of `step` on `chunks`; both write the same K/V into the same
    slots, so running it on a live step's own inputs leaves the cache as the step itself would."""
    assert step.replay is not None
    captured = step.logits  # the output tensor a replay writes into
    step.fill(chunks)
    step.forward()  # eagerly: it assigns a new logits tensor
    assert step.logits is not None
    eager = step.logits.clone()
    step.logits = captured
    step.fill(chunks)
    step.replay()
    assert step.logits is not None
    scale = eager.abs().max().clamp_min(torch.finfo(torch.float32).tiny)
    return float(((step.logits - eager).abs().max() / scale).cpu())
