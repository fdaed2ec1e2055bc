"""Decode graphs on the CPU: the bucket sizes, the static-input decode step (padded rows, context masks, the packed
inputs) and the replay fallback, with the step's body run eagerly on its static buffers in place of a device's
replay (the CPU has no graph capture; tests/emulator/test_runner_graphs.py captures and replays on emu). The plan's
graphs row off with its reason: --graphs off, no capture API, a bad --graphs value."""

from __future__ import annotations

import pytest

from bringup.errors import BringupError, StrictFallbackError
from bringup.fallbacks import FallbackRecorder
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.engine.graphs.buckets import batch_buckets, bucket_for, context_buckets
from bringup.runner.engine.graphs.decode_graphs import DecodeGraphs
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.sampling_params import SamplingParams
from tests.runner.stated import stated

PROMPTS = [[5, 17, 33], [8, 2, 9, 14, 40, 3, 7], list(range(20, 39))]  # ragged: 3, 7, 19 tokens


def test_buckets_double_up_to_the_limits():
    assert batch_buckets(1) == [1] and batch_buckets(8) == [1, 2, 4, 8] and batch_buckets(12) == [1, 2, 4, 8, 12]
    assert context_buckets(4096, 16) == [64, 128, 256, 512, 1024, 2048, 4096]
    assert context_buckets(40, 16) == [48] and context_buckets(300, 16) == [64, 128, 256, 304]
    assert bucket_for([1, 2, 4], 3) == 4 and bucket_for([1, 2, 4], 5) is None


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> LLMEngine:
    missing = tmp_path_factory.mktemp("noprofile") / "none.yaml"
    return LLMEngine.create(EngineOptions(device="cpu", profile_path=missing, max_model_len=64, max_num_seqs=4,
                                          measurements=stated()))


def _greedy(engine: LLMEngine) -> list[list[int]]:
    params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    return [out.token_ids for out in engine.generate(PROMPTS, params)]


def _eager_body_graphs(engine: LLMEngine, capture=lambda body: body) -> DecodeGraphs:  # type: ignore[no-untyped-def]
    model, plan = engine.executor.model, engine.plan
    # contexts of 32 then 64 tokens: the longest prompt outgrows the first bucket while it decodes
    return DecodeGraphs(model, plan.block_size, batch_buckets(4), [32, 64], capture, engine.fallbacks)


def test_the_static_step_gives_the_eager_tokens_with_padded_rows_and_two_context_buckets(engine):
    assert engine.plan.graphs.value == [] and engine.plan.shown("graphs") == "off"
    assert engine.plan.graphs.evidence == "off: the cpu backend offers no graph capture"
    eager = _greedy(engine)
    graphs = engine.executor.graphs = _eager_body_graphs(engine)
    try:
        served = _greedy(engine)
    finally:
        engine.executor.graphs = None
    assert served == eager
    assert graphs.replays == 23  # every decode step: the three sequences together, padded to 4 rows
    assert {(4, 32), (4, 64)} <= set(graphs.steps)


def _serve_faulty(engine: LLMEngine, capture) -> tuple[DecodeGraphs, int]:  # type: ignore[no-untyped-def]
    """Greedy tokens served with graphs made by `capture` equal eager's; the graphs, and the path fallbacks taken."""
    eager, before = _greedy(engine), engine.fallbacks.counts["path"]
    graphs = engine.executor.graphs = _eager_body_graphs(engine, capture)
    try:
        assert _greedy(engine) == eager
    finally:
        engine.executor.graphs = None
    return graphs, engine.fallbacks.counts["path"] - before


def test_a_replay_that_fails_is_a_counted_path_fallback_and_the_steps_run_eager(engine):
    def broken(body):  # type: ignore[no-untyped-def]
        def replay() -> None:
            raise RuntimeError("emu: replay lost the device")
        return replay

    graphs, fallbacks = _serve_faulty(engine, broken)
    assert graphs.replays == 0 and not graphs.steps and fallbacks == 1
    event = engine.fallbacks.events[-1]
    assert (event.what, event.instead) == ("decode step", "eager") and "replay lost the device" in event.why


def test_a_step_captured_while_serving_whose_replay_is_wrong_never_serves_a_token(engine):
    def one_percent_high(body):  # type: ignore[no-untyped-def]
        def replay() -> None:
            body()
            body.__self__.logits.mul_(1.01)  # the StaticStep's logits: a replay that computes other numbers
        return replay

    graphs, fallbacks = _serve_faulty(engine, one_percent_high)
    assert graphs.replays == 0 and fallbacks == 1
    assert graphs.failed is not None and "failed the replay check" in graphs.failed


def test_graphs_off_says_so(tmp_path):
    engine = LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "none.yaml", max_model_len=32,
                                            max_num_seqs=1, graphs="off", measurements=stated()))
    assert engine.plan.graphs.evidence == "off: --graphs off"
    assert engine.plan.to_dict()["graphs"] == {"value": [], "evidence": "off: --graphs off", "shown": "off"}


def test_a_bad_graphs_value_is_refused_in_one_line(tmp_path):
    with pytest.raises(BringupError, match=r"--graphs 'sometimes' is not one of auto, off"):
        LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "none.yaml", graphs="sometimes"))


def test_under_strict_a_failing_replay_is_an_error(engine):
    def broken(body):  # type: ignore[no-untyped-def]
        def replay() -> None:
            raise RuntimeError("emu: replay lost the device")
        return replay

    model, plan = engine.executor.model, engine.plan
    graphs = DecodeGraphs(model, plan.block_size, [1], [32], broken, FallbackRecorder(strict=True))
    with pytest.raises(StrictFallbackError, match=r"wanted graph replay \(batch 1, context 32\), using eager"):
        graphs.logits([SeqChunk([3, 4, 5], 2, [0])])
