"""The prefix cache's cases, run on an engine of any device (the CPU in-process, the emulated device in a child):
each request served from the cache next to the same request computed from scratch. Plain data comes back, so the
CPU and emulator tests assert the same things."""

from __future__ import annotations

from typing import Any

from bringup.runner.engine.block_manager import BlockManager
from bringup.runner.engine.engine import LLMEngine
from bringup.runner.engine.scheduler import Scheduler
from bringup.runner.sampling_params import SamplingParams

TOP = 5
GREEDY = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True, logprobs=TOP)
SCORING = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True, prompt_logprobs=TOP)


def _prompt(seed: int, n: int) -> list[int]:
    return [(seed * 7919 + i * 104729) % 200 + 10 for i in range(n)]


def _outputs(engine: LLMEngine, prompts: list[list[int]], params: SamplingParams) -> list[dict[str, Any]]:
    """Each prompt's greedy tokens and the logprobs of every generated position's top alternatives."""
    return [{"tokens": out.token_ids,
             "logprobs": [[lp for _, lp in entry.top] for entry in out.logprobs or []],
             "prompt_logprobs": [None if e is None else [e.logprob, *[lp for _, lp in e.top]]
                                 for e in out.prompt_logprobs or []]}
            for out in engine.generate(prompts, params)]


def _with_blocks(engine: LLMEngine, blocks: BlockManager, seqs: int) -> None:
    engine.blocks = blocks
    engine.scheduler = Scheduler(blocks, seqs, engine.plan.max_num_batched_tokens.value)


def run_cases(engine: LLMEngine) -> dict[str, Any]:
    """Every case: {name: {"scratch": outputs, "cached": outputs, ...counters}} (`engine` is left as it was)."""
    original = engine.blocks, engine.scheduler
    size, total, identity = engine.plan.block_size, engine.blocks.num_blocks, engine.blocks.identity
    system = _prompt(1, 3 * size + size // 2)  # three full blocks and half of a fourth
    cases = {
        # the cached prompt ends mid-block: its full blocks serve a prompt that extends it
        "prefix_ends_mid_block": ([system], [system + _prompt(2, 9)]),
        # a prompt that leaves the cached one inside its second block
        "diverges_inside_a_block": ([system], [system[:size + 5] + _prompt(3, 20)]),
        # eight requests at once on one cached system prompt
        "concurrent_sharers": ([system], [system + _prompt(10 + i, 3 + i) for i in range(8)]),
    }
    results: dict[str, Any] = {}
    try:
        for name, (warm, prompts) in cases.items():
            _with_blocks(engine, BlockManager(total, size, caching=False), 8)
            scratch = _outputs(engine, prompts, GREEDY)
            blocks = BlockManager(total, size, caching=True, identity=identity)
            _with_blocks(engine, blocks, 8)
            _outputs(engine, warm, GREEDY)
            before = blocks.hits
            results[name] = {"scratch": scratch, "cached": _outputs(engine, prompts, GREEDY),
                             "hits": blocks.hits - before, "free": blocks.num_free, "total": total}
        results["eviction_with_preemption"] = _eviction(engine, system, identity)
        results["prompt_logprobs"] = _scoring(engine, system, identity)
    finally:
        engine.blocks, engine.scheduler = original
    return results


def _eviction(engine: LLMEngine, system: list[int], identity: str) -> dict[str, Any]:
    """Six sharers in a pool of 9 blocks: sequences are preempted and recomputed, cached blocks evicted."""
    size = engine.plan.block_size
    prompts = [system[: size + 3 * i] + _prompt(20 + i, 4 + 2 * i) for i in range(6)]
    params = SamplingParams(max_tokens=10, temperature=0.0, ignore_eos=True, logprobs=TOP)
    _with_blocks(engine, BlockManager(engine.blocks.num_blocks, size, caching=False), 6)
    scratch = _outputs(engine, prompts, params)  # room for all: no preemption
    blocks = BlockManager(9, size, caching=True, identity=identity)
    _with_blocks(engine, blocks, 6)
    cached = _outputs(engine, prompts, params)
    return {"scratch": scratch, "cached": cached, "hits": blocks.hits, "preemptions": engine.scheduler.num_preemptions,
            "free": blocks.num_free, "total": 9}


def _scoring(engine: LLMEngine, system: list[int], identity: str) -> dict[str, Any]:
    """prompt_logprobs of a prompt whose prefix is cached: every position computed, as from scratch."""
    size = engine.plan.block_size
    prompt = system + _prompt(30, 5)
    _with_blocks(engine, BlockManager(engine.blocks.num_blocks, size, caching=False), 8)
    scratch = _outputs(engine, [prompt], SCORING)
    blocks = BlockManager(engine.blocks.num_blocks, size, caching=True, identity=identity)
    _with_blocks(engine, blocks, 8)
    _outputs(engine, [system], GREEDY)
    before = blocks.hits
    cached = _outputs(engine, [prompt], SCORING)
    return {"scratch": scratch, "cached": cached, "hits": blocks.hits - before}
