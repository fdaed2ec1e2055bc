"""selftest under a mixed weight layout (F.linear's out_in for small steps, x @ W's in_out above): the layout the
start-up's timings pick passes, and a failing run names the step and the
weight kind its largest error came from (a CI run once failed at 2.2e-4 under such a layout, with nothing saying
which product the error came from)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.plan.layout import LayoutTimings
from bringup.runner.selftest import run_selftest
from bringup.runner.weights import registry
from bringup.runner.weights.kinds import IN_OUT
from tests.runner.stated import ROWS, stated

# out_in faster up to 8 rows, in_out from 16: the start-up keeps both copies and switches above 8 tokens
MIXED = LayoutTimings({m: {"out_in": 1e-6 * m, "in_out": (2e-6 if m <= 8 else 0.5e-6) * m} for m in ROWS})
MIXED_NAME = "out_in for steps of <= 8 tokens, else in_out"


def _engine(layouts: LayoutTimings | None = None) -> LLMEngine:
    return LLMEngine.create(EngineOptions(device="cpu", max_model_len=256, max_num_seqs=1, graphs="off",
                                          measurements=stated(layouts)))


def test_the_timed_mixed_layout_passes() -> None:
    engine = _engine(MIXED)
    assert engine.executor.model.layout.describe() == MIXED_NAME
    result = run_selftest(engine, None, 8)
    assert result.passed and result.error_reason() is None


def test_a_failing_run_names_the_step_and_weight_kind_of_its_largest_error(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = _engine(MIXED)
    kind = registry.KINDS[IN_OUT]
    biased = replace(kind, apply=lambda x, w, b: kind.apply(x, w, b) * 1.001)  # 0.1 % high: a wrong product
    monkeypatch.setitem(registry.KINDS, IN_OUT, biased)
    result = run_selftest(engine, None, 8)
    assert not result.passed
    reason = result.error_reason()
    assert reason is not None and result.worst_step == 0, reason
    assert f"step 1 of 8 (the prefill of {result.prompt_tokens} tokens, in_out weights)" in reason
