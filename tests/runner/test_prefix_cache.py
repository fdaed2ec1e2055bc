"""The prefix cache on the CPU: a request served from cached blocks gives the tokens and logprobs of the same request
computed from scratch (prefix_cases.py, shared with the emulated device's test); the blocks' reference counts and
LRU eviction; the cache never read across a change of weights, dtype, quantization or KV layout."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bringup.runner.engine.block_manager import BlockManager
from bringup.runner.engine.prefix_key import cache_identity
from bringup.runner.engine.sequence import Sequence
from bringup.runner.plan.choice import Choice
from bringup.runner.sampling_params import SamplingParams
from tests.runner.prefix_cases import GREEDY, run_cases

ATOL = 1e-4  # float32 logprobs of one prompt computed in other step shapes (a prefix from the cache, or not)


def assert_same_as_scratch(case: dict) -> None:
    """Greedy tokens equal; every logprob (generated tokens' alternatives, prompt tokens) within ATOL."""
    for scratch, cached in zip(case["scratch"], case["cached"], strict=True):
        assert cached["tokens"] == scratch["tokens"]
        for key in ("logprobs", "prompt_logprobs"):
            assert len(cached[key]) == len(scratch[key])
            for a, b in zip(cached[key], scratch[key]):
                assert (a is None) == (b is None)
                assert a is None or max(abs(x - y) for x, y in zip(a, b, strict=True)) <= ATOL, (key, a, b)


@pytest.fixture(scope="module")
def cases(builtin_engine) -> dict:
    return run_cases(builtin_engine)


@pytest.mark.parametrize("name", ["prefix_ends_mid_block", "diverges_inside_a_block", "concurrent_sharers",
                                  "eviction_with_preemption"])
def test_served_from_the_cache_as_from_scratch(cases, name):
    case = cases[name]
    assert_same_as_scratch(case)
    assert case["hits"] > 0  # the cache did serve them
    assert case["free"] == case["total"]  # every block back in the pool


def test_hits_are_the_full_blocks_in_common(cases, builtin_engine):
    size = builtin_engine.plan.block_size
    assert cases["prefix_ends_mid_block"]["hits"] == 3 * size  # the half block is computed again
    assert cases["diverges_inside_a_block"]["hits"] == size
    assert cases["concurrent_sharers"]["hits"] == 8 * 3 * size
    assert cases["eviction_with_preemption"]["preemptions"] > 0


def test_prompt_logprobs_are_computed_at_every_position(cases):
    case = cases["prompt_logprobs"]
    assert_same_as_scratch(case)
    assert case["hits"] == 0 and case["cached"][0]["prompt_logprobs"][0] is None
    assert len(case["cached"][0]["prompt_logprobs"]) > 3 * 16


def _seq(tokens: list[int]) -> Sequence:
    return Sequence("r", list(tokens), len(tokens), SamplingParams(), arrival=0)


def _filled(blocks: BlockManager, tokens: list[int]) -> Sequence:
    """A sequence admitted and run as the engine would: its blocks keyed once its K/V is computed."""
    seq = _seq(tokens)
    blocks.admit(seq, blocks.cached_prefix(seq), len(tokens))
    before, seq.num_cached_tokens = seq.num_cached_tokens, len(tokens)
    blocks.cache_full_blocks(seq, before)
    return seq


def test_shared_blocks_are_counted_and_freed_least_recently_used_first():
    blocks = BlockManager(6, 4, caching=True, identity="w")
    a = _filled(blocks, list(range(9)))  # 2 full blocks + 1
    b = _filled(blocks, [*range(8), 50, 51])  # shares both full blocks
    assert b.block_table[:2] == a.block_table[:2] and blocks.num_free == 2
    first = a.block_table[0]
    blocks.free(a)
    assert blocks.num_free == 3  # the shared blocks are still b's
    blocks.free(b)
    assert blocks.num_free == 6 and blocks.num_cached_blocks == 2
    c = _filled(blocks, [90] * 17)  # 5 blocks: the 4 holding nothing cached first, then the chain's tail
    assert len(c.block_table) == 5 and first not in c.block_table
    assert blocks.num_cached_blocks == 1 + 4  # the chain's first block, c's four
    assert blocks.cached_prefix(_seq(list(range(9)))) == [first]


def test_a_new_identity_finds_nothing_cached():
    blocks = BlockManager(8, 4, caching=True, identity="weights A")
    blocks.free(_filled(blocks, list(range(9))))
    assert len(blocks.cached_prefix(_seq(list(range(9))))) == 2
    blocks.use_identity("weights B")
    assert blocks.cached_prefix(_seq(list(range(9)))) == []


def test_blocks_held_across_a_change_are_never_keyed():
    blocks = BlockManager(8, 4, caching=True, identity="A")
    seq = _seq(list(range(6)))
    blocks.admit(seq, [], 6)
    seq.num_cached_tokens = 6
    blocks.use_identity("B")  # half of its first block was computed under A
    seq.token_ids += [6, 7, 8, 9]
    seq.num_cached_tokens = 10
    blocks.grow(seq, 10)
    blocks.cache_full_blocks(seq, 6)
    assert blocks.num_cached_blocks == 0


@pytest.mark.parametrize("change", ["dtype", "quantization", "weight_layout", "weights"])
def test_the_identity_covers_what_changes_the_values(builtin_engine, change):
    plan = builtin_engine.plan
    changed = {"dtype": replace(plan, dtype=Choice("bfloat16", "")),
               "quantization": replace(plan, quantization=Choice("int8", "")),
               "weight_layout": replace(plan, weight_layout=Choice("in_out", ""))}.get(change, plan)
    weights = "other sha256" if change == "weights" else "sha256"
    assert cache_identity(weights, changed) != cache_identity("sha256", plan)
    assert cache_identity("sha256", replace(plan, max_num_seqs=Choice(3, ""))) == cache_identity("sha256", plan)


def test_an_engine_whose_plan_changes_reads_nothing_cached(builtin_engine):
    e = builtin_engine
    plan, prompt = e.plan, [5] * 40
    e.generate([prompt], GREEDY)
    hits = e.blocks.hits
    e.generate([prompt], GREEDY)
    assert e.blocks.hits == hits + 32
    try:
        e.plan = replace(plan, dtype=Choice("bfloat16", "re-confirmed"))  # as a re-confirmation switches it
        e.generate([prompt], GREEDY)
        assert e.blocks.hits == hits + 32
    finally:
        e.plan = plan
    assert e.stats()["prefix_cache_hits"] == e.blocks.hits and e.plan.to_dict()["prefix_caching"]["shown"] == "on"


def test_no_prefix_caching_computes_every_prompt(tmp_path):
    from bringup.runner.engine.engine import EngineOptions, LLMEngine
    from tests.runner.stated import stated

    e = LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "none.yaml", max_model_len=128,
                                       max_num_seqs=2, prefix_caching=False, measurements=stated()))
    e.generate([[5] * 40, [5] * 40], GREEDY)
    e.generate([[5] * 40], GREEDY)
    assert e.plan.prefix_caching.value is False and "--no-prefix-caching" in e.plan.prefix_caching.evidence
    assert e.stats()["prefix_cache_hits"] == 0 == e.stats()["prefix_cache_queries"]
    assert e.plan.to_dict()["prefix_caching"]["shown"] == "off"


def test_a_prompt_whose_next_block_another_is_still_prefilling_waits_a_step_and_finds_it_cached():
    from bringup.runner.engine.scheduler import Scheduler

    blocks = BlockManager(64, 4, caching=True, identity="w")
    sched = Scheduler(blocks, max_num_seqs=4, max_num_batched_tokens=64)
    shared = list(range(1, 17))  # four full blocks
    a = Sequence("a", [*shared, 40, 41, 42, 43], 20, SamplingParams(), arrival=0)
    b = Sequence("b", [*shared, 50, 51, 52, 53], 20, SamplingParams(), arrival=1)
    c = Sequence("c", [99, *shared[1:], 60, 61, 62], 19, SamplingParams(), arrival=2)  # its first block differs
    sched.add(a)
    sched.add(b)
    assert sched.schedule() == [a]  # admitted now, b would compute a's four blocks a second time
    a.num_cached_tokens = len(a.token_ids)
    blocks.cache_full_blocks(a, 0)
    a.token_ids.append(7)
    sched.add(c)
    assert sched.schedule() == [a, b, c]
    assert (b.num_cached_tokens, b.num_scheduled_tokens, b.block_table[:4]) == (16, 4, a.block_table[:4])
    assert (c.num_cached_tokens, c.num_scheduled_tokens) == (0, 19)
    assert blocks.hits == 16
