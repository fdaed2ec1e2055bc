"""The prefix cache on the emulated device: the CPU test's cases (tests/runner/prefix_cases.py) run on an engine
whose model and KV cache live on `emu`; each request served from cached blocks gives the tokens and logprobs of the
same request computed from scratch there."""

from __future__ import annotations

import pytest

from tests.emulator.emu_process import emu_results
from tests.runner.test_prefix_cache import assert_same_as_scratch

BODY = """
from pathlib import Path
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from tests.runner.prefix_cases import run_cases
from tests.runner.stated import stated

e = LLMEngine.create(EngineOptions(device="emu:0", profile_path=Path("absent.yaml"), max_model_len=256,
                                   max_num_seqs=8, measurements=stated()))
report(device=str(e.executor.model.device), plan=e.plan.to_dict()["prefix_caching"], cases=run_cases(e),
       block_size=e.plan.block_size)
"""


@pytest.fixture(scope="module")
def seen() -> dict:
    return emu_results(BODY)


def test_the_model_and_cache_are_on_the_emulated_device(seen):
    assert seen["device"].startswith("emu") and seen["plan"]["value"] is True


@pytest.mark.parametrize("name", ["prefix_ends_mid_block", "diverges_inside_a_block", "concurrent_sharers",
                                  "eviction_with_preemption", "prompt_logprobs"])
def test_served_from_the_cache_as_from_scratch_on_emu(seen, name):
    case = seen["cases"][name]
    assert_same_as_scratch(case)
    size = seen["block_size"]
    expected = {"prefix_ends_mid_block": 3 * size, "diverges_inside_a_block": size,
                "concurrent_sharers": 8 * 3 * size, "prompt_logprobs": 0}
    assert case["hits"] == expected[name] if name in expected else case["hits"] > 0
