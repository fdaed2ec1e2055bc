"""KV blocks: what can be used — including the start-up batch sweep's room — capped by free memory (stated)."""

from __future__ import annotations

import torch

from bringup.runner.model.kv_cache import bytes_per_block
from bringup.runner.plan.kv_sizing import MEMORY_FRACTION, activation_estimate, size_kv_cache
from bringup.runner.sources.builtin_model import builtin_config

CONFIG = builtin_config()
BLOCK = 16
GIB = 2**30


def sized(free: int | None, sweep: tuple[int, int] | None = None):  # type: ignore[no-untyped-def]
    return size_kv_cache(CONFIG, torch.float32, BLOCK, max_num_seqs=16, max_model_len=512, max_tokens=2048,
                         free_bytes=free, weight_bytes=10 * 2**20, sweep=sweep)


def test_blocks_for_the_batch_limit_at_the_full_context():
    choice = sized(4 * GIB)
    assert choice.value == 16 * 512 // BLOCK
    assert choice.evidence.startswith("min(16 seqs × 512 tokens = 512 blocks")


def test_the_batch_sweep_gets_room_beyond_the_default_limit_it_is_meant_to_replace():
    choice = sized(4 * GIB, sweep=(256, 136))
    assert choice.value == 256 * 9  # 136 tokens = 9 blocks of 16, for each of 256 sequences
    assert "room for the batch sweep: 256 seqs × 136 tokens = 2304 blocks" in choice.evidence
    assert sized(4 * GIB, sweep=(8, 136)).value == 512  # a smaller sweep changes nothing


def test_the_sweeps_room_is_still_capped_by_free_memory():
    per_block = bytes_per_block(CONFIG, BLOCK, torch.float32)
    activations = activation_estimate(CONFIG, 2048, 512, torch.float32)
    free = int((1000 * per_block + activations) / MEMORY_FRACTION) + 1  # room for 1000 blocks exactly
    choice = sized(free, sweep=(256, 136))
    assert choice.value == 1000 and "room for the batch sweep" in choice.evidence
