"""Issue 55: the prefix cache is never read across a change of dtype or quantization that a tune record replay
brings. Real tune records of the built-in model (one at bfloat16, one with int8 weights) are replayed by a start;
a running float32 engine with a warm cache then switches to each replayed plan the way a re-confirmation switches
(Executor.follow, then the engine's plan): the cache's root changes and the switched plan's first request finds no
block (hits unchanged), while its second finds its own."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bringup.backends.registry import device_info
from bringup.profiles.store import update_profile
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.engine.tuning import tune
from bringup.runner.sampling_params import SamplingParams
from tests.runner.stated import stated

GREEDY = SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True)
PROMPT = [7] * 40  # two full blocks of 16 and a part
BASE = {"device": "cpu", "max_model_len": 128, "max_num_seqs": 2}  # no batch sweep: a short tune


@pytest.fixture(scope="module")
def replayed_plans(tmp_path_factory):
    """{change: the plan a start replays from a real tune record with that change}."""
    path = tmp_path_factory.mktemp("records") / "p.yaml"
    changes = {"dtype": {"dtype": "bfloat16"}, "quantization": {"quantization": "int8"}}
    records = {}
    for asked in changes.values():
        # the timings as data (a test states them: tests/runner/stated.py); the record is tune's own
        _, key, record = tune(EngineOptions(profile_path=path, measurements=stated(), **BASE, **asked), runs=1)
        records[key] = record

    def mutate(p):  # type: ignore[no-untyped-def]
        p.models = records
    update_profile(path, device_info("cpu"), mutate, stage="tune", status="complete")
    plans = {}
    for change, asked in changes.items():
        engine = LLMEngine.create(EngineOptions(profile_path=path, **BASE, **asked))
        assert engine.plan.weight_layout.evidence.startswith("recorded by tune at "), "the record was replayed"
        plans[change] = engine.plan
    return plans


@pytest.mark.slow
@pytest.mark.parametrize("change", ["dtype", "quantization"])
def test_a_replayed_records_plan_reads_nothing_the_running_plan_cached(replayed_plans, tmp_path, change):
    engine = LLMEngine.create(EngineOptions(profile_path=tmp_path / "none.yaml", measurements=stated(), **BASE))
    running, plan = engine.plan, replayed_plans[change]
    assert (running.dtype.value, running.quantization.value) == ("float32", "none")
    assert getattr(plan, change).value != getattr(running, change).value
    engine.generate([PROMPT], GREEDY)
    engine.generate([PROMPT], GREEDY)
    assert engine.blocks.hits == 32  # the running plan reuses its two full blocks
    root, hits = engine.blocks._root, engine.blocks.hits
    switched = replace(plan, kv_blocks=running.kv_blocks)  # the engine's pool stays as allocated
    engine.executor.follow(switched)
    engine.plan = switched
    assert engine.blocks._root != root and engine.blocks.num_cached_blocks == 0
    engine.generate([PROMPT], GREEDY)
    assert engine.blocks.hits == hits  # nothing computed under the old plan is found
    engine.generate([PROMPT], GREEDY)
    assert engine.blocks.hits == hits + 32  # the switched plan caches its own
