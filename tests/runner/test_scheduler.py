"""Scheduler and block manager: budgets, mixed prefill + decode, preemption, every block freed."""

from __future__ import annotations

import pytest

from bringup.runner.engine.block_manager import BlockManager
from bringup.runner.engine.engine import LLMEngine
from bringup.runner.engine.scheduler import Scheduler
from bringup.runner.engine.sequence import Sequence
from bringup.runner.sampling_params import SamplingParams


def _seq(i: int, n: int) -> Sequence:
    return Sequence(f"r{i}", list(range(1, n + 1)), n, SamplingParams(), arrival=i)


def _advance(seqs: list[Sequence]) -> None:
    """What the engine does after a step: the new tokens are cached and one token is appended."""
    for s in seqs:
        s.num_cached_tokens = len(s.token_ids)
        s.token_ids.append(7)


def test_budgets_and_mixed_prefill_decode():
    sched = Scheduler(BlockManager(64, 4), max_num_seqs=3, max_num_batched_tokens=20)
    a, b, c, d = _seq(0, 12), _seq(1, 10), _seq(2, 3), _seq(3, 2)
    for s in (a, b, c, d):
        sched.add(s)
    first = sched.schedule()
    assert first == [a]  # b's 10 tokens exceed the remaining budget of 8
    _advance(first)
    second = sched.schedule()  # a decodes (1 token) while b and c prefill: mixed step
    assert [s.request_id for s in second] == ["r0", "r1", "r2"]
    assert [s.num_new_tokens for s in second] == [1, 10, 3]
    _advance(second)
    assert d not in sched.schedule()  # max_num_seqs = 3


def test_preempts_newest_when_blocks_run_out():
    blocks = BlockManager(4, 4)
    sched = Scheduler(blocks, max_num_seqs=4, max_num_batched_tokens=64)
    old, new = _seq(0, 4), _seq(1, 4)
    sched.add(old)
    sched.add(new)
    _advance(sched.schedule())  # 2 blocks used
    for _ in range(5):  # at 9 tokens each needs 3 blocks: 6 > 4
        _advance(sched.schedule())
    assert sched.num_preemptions >= 1 and new.num_preemptions >= 1 and old.num_preemptions == 0
    assert new.block_table == [] and new.num_cached_tokens == 0 and sched.waiting[0] is new


def _workload(engine: LLMEngine, prompts: list[list[int]], params: SamplingParams) -> list[list[int]]:
    return [o.token_ids for o in engine.generate(prompts, params)]


def test_preemption_by_recompute_gives_the_same_tokens(builtin_engine):
    e = builtin_engine
    prompts = [[40 + i] * (14 + 16 * (i % 3)) for i in range(6)]  # 2 tokens short of a block boundary
    greedy = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
    alone = [_workload(e, [p], greedy)[0] for p in prompts]
    original = e.blocks, e.scheduler
    try:
        e.blocks = BlockManager(7, e.plan.block_size)  # far fewer blocks than 6 sequences need
        e.scheduler = Scheduler(e.blocks, 6, 256)
        together = _workload(e, prompts, greedy)
        assert e.scheduler.num_preemptions > 0
        assert e.blocks.num_free == 7
    finally:
        e.blocks, e.scheduler = original
    assert together == alone


def test_aborts_free_every_block(builtin_engine):
    e = builtin_engine
    params = SamplingParams(max_tokens=40, temperature=0.8, seed=1)
    for i in range(12):  # more than max_num_seqs: some wait
        e.add_request(f"abort-{i}", e.tokenizer.encode("x" * (5 + i)), params)
    for _ in range(3):
        e.step()
    assert e.stats()["num_running"] > 0 and e.stats()["num_waiting"] > 0
    for i in range(0, 12, 2):
        e.abort_request(f"abort-{i}")
    e.abort_request("no-such-request")
    finished = set()
    while e.has_unfinished():
        finished |= {o.request_id for o in e.step() if o.finished}
    assert finished == {f"abort-{i}" for i in range(1, 12, 2)}
    assert e.stats()["kv_blocks_used"] == 0


def test_bad_requests_are_value_errors(builtin_engine):
    e = builtin_engine
    with pytest.raises(ValueError, match="prompt"):
        e.add_request("long", [10] * e.max_model_len, SamplingParams())
    with pytest.raises(ValueError, match="top_p"):
        e.add_request("p", [10], SamplingParams(top_p=1.5))
    with pytest.raises(ValueError, match="vocabulary"):
        e.add_request("v", [10**6], SamplingParams())
    assert not e.has_unfinished()


def test_kv_cache_is_allocated_once_and_reused(builtin_engine):
    e = builtin_engine
    model = e.executor.model
    pointers = [t.data_ptr() for t in model.k_caches + model.v_caches]
    params = SamplingParams(max_tokens=3, temperature=0.7, seed=5)
    for i in range(25):
        e.generate([e.tokenizer.encode(f"sequential {i}")], params)
    assert [t.data_ptr() for t in model.k_caches + model.v_caches] == pointers
    assert e.stats()["kv_blocks_used"] == 0
