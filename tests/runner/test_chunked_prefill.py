"""Chunked prefill: a long prompt arriving while others decode runs a chunk per step beside them, and every request
gets the tokens it gets when each prompt runs whole (greedy and seeded sampling alike); the chunk comes from measured
step times."""

from __future__ import annotations

import pytest

from bringup.runner.engine.block_manager import BlockManager
from bringup.runner.engine.chunks import StepBudget
from bringup.runner.engine.scheduler import Scheduler
from bringup.runner.plan.prefill_chunk import (
    CHUNK_STEP_RATIO,
    PrefillTimings,
    choose_prefill_chunk,
    chunk_at,
    chunk_table,
    shown_chunks,
)
from bringup.runner.sampling_params import SamplingParams
from tests.runner.test_scheduler import _advance, _seq

GREEDY = SamplingParams(max_tokens=5, temperature=0.0, ignore_eos=True)
SEEDED = SamplingParams(max_tokens=5, temperature=0.9, seed=3, ignore_eos=True)
LONG = 100


def _serve(engine, chunk: int | None) -> tuple[dict[str, list[int]], int]:
    """Three streams decoding, then a LONG-token prompt arriving: every request's tokens, and how many steps ran
    a part of a prompt."""
    engine.blocks = BlockManager(engine.blocks.num_blocks, engine.plan.block_size)  # no prefix cache: same work
    engine.scheduler = Scheduler(engine.blocks, 8, engine.plan.max_num_batched_tokens.value,
                                 None if chunk is None else [[1, 0, chunk]])
    for i, params in enumerate((GREEDY, SEEDED, GREEDY)):
        engine.add_request(f"s{i}", [30 + i] * (5 + i), params)
    engine.step()
    engine.add_request("long", [(i * 37) % 200 + 10 for i in range(LONG)], SEEDED)
    engine.add_request("scored", [(i * 11) % 200 + 10 for i in range(40)],
                       SamplingParams(max_tokens=2, temperature=0.0, prompt_logprobs=1))
    tokens: dict[str, list[int]] = {}
    partial_steps = 0
    while engine.has_unfinished():
        seqs = list(engine.scheduler.running) + list(engine.scheduler.waiting)
        outputs = engine.step()
        partial_steps += any(s.num_cached_tokens < s.num_prompt_tokens for s in seqs)
        tokens |= {o.request_id: o.token_ids for o in outputs if o.finished}
    return tokens, partial_steps


def test_chunked_prefill_gives_the_tokens_of_whole_prefills(builtin_engine):
    e = builtin_engine
    original = e.blocks, e.scheduler
    try:
        whole, _ = _serve(e, None)
        chunked, partial_steps = _serve(e, 16)
    finally:
        e.blocks, e.scheduler = original
    assert chunked == whole and len(whole) == 5
    assert partial_steps >= LONG // 16  # the long prompt ran a block per step beside the decodes


def test_a_prompt_runs_whole_when_nothing_decodes_and_in_chunks_beside_decodes():
    sched = Scheduler(BlockManager(64, 4), max_num_seqs=4, max_num_batched_tokens=64, prefill_chunk=[[1, 0, 8]])
    a, b = _seq(0, 20), _seq(1, 30)
    sched.add(a)
    assert sched.schedule() == [a] and a.num_scheduled_tokens == 20  # alone: whole
    _advance([a])
    sched.add(b)
    assert sched.schedule() == [a, b] and (a.num_scheduled_tokens, b.num_scheduled_tokens) == (1, 8)
    b.num_cached_tokens, a.num_cached_tokens = 8, len(a.token_ids)
    a.token_ids.append(7)
    assert sched.schedule() == [a, b] and b.num_scheduled_tokens == 8 and b.step_end == 16


def test_a_scoring_prompt_is_never_cut():
    scoring = _seq(0, 30)
    scoring.params = SamplingParams(max_tokens=1, prompt_logprobs=0)
    decoding = _seq(1, 3)
    decoding.num_cached_tokens = 3
    decoding.token_ids.append(7)
    budget = StepBudget(64, [[1, 0, 8]], [decoding])
    assert budget.fits(scoring, 30) == 0 and budget.fits(_seq(2, 30), 30) == 8


@pytest.mark.parametrize(("decode_ms", "expected"), [(10.0, 64), (2.0, 16), (0.5, 16)])
def test_the_chunk_is_the_largest_step_within_the_step_ratio(decode_ms, expected):
    timings = PrefillTimings(decode_ms / 1e3, {16: 4e-3, 32: 6e-3, 64: 9e-3, 128: 27e-3})
    choice = choose_prefill_chunk(timings, 4096)
    assert choice.value == [[1, 0, expected]]  # not timed at a long context: one chunk for every context
    assert f"{CHUNK_STEP_RATIO:g} × " in choice.evidence and "64: 9.0" in choice.evidence
    assert "the chunk does not shrink" in choice.evidence
    assert choose_prefill_chunk(None, 4096).value is None


def test_the_chunk_shrinks_as_the_prompt_s_context_grows_and_grows_beside_more_decodes():
    ms = 1e-3
    timings = PrefillTimings(10 * ms, {4: 12 * ms, 8: 15 * ms, 16: 20 * ms, 32: 30 * ms}, context=2048,
                             at_context={4: 16 * ms, 8: 22 * ms, 16: 34 * ms, 32: 58 * ms}, decodes=8,
                             decodes_step=20 * ms)
    # beside one decode a step may take 25 ms, beside 8 (a 20 ms step) 40 ms with the chunk's step less its decode;
    # each step on the line through its two timings, at the end of the span the chunk serves
    assert CHUNK_STEP_RATIO == 2.5
    table = chunk_table(timings, 8192)
    assert table == [[1, 0, 16], [1, 512, 8], [1, 2048, 4],  # at 8192 not even 4 fit (28 ms): the smallest moves
                     [8, 0, 32], [8, 512, 16], [8, 2048, 8], [8, 4096, 4]]
    assert [chunk_at(table, 1, c) for c in (0, 511, 512, 1023, 5000)] == [16, 16, 8, 8, 4]
    assert [chunk_at(table, d, 300) for d in (1, 7, 8, 12)] == [16, 16, 32, 32]
    decoding = _seq(1, 3)
    decoding.num_cached_tokens = 3
    decoding.token_ids.append(7)
    budget = StepBudget(64, table, [decoding])
    early, late = _seq(2, 30), _seq(3, 2000)
    late.num_cached_tokens = 1990
    assert budget.fits(early, 30) == 16 and budget.fits(late, 10) == 8  # its context: 1990
    assert shown_chunks(table).startswith("beside 1+ decodes: 16 tokens from context 0, 8 tokens from context 512")
    assert "; beside 8+ decodes: 32 tokens from context 0, " in shown_chunks(table)


def test_prefill_chunk_option_sets_the_row_or_is_refused_in_one_line(tmp_path):
    from bringup.errors import BringupError
    from bringup.runner.engine.engine import EngineOptions, LLMEngine

    def plan(value: str):  # type: ignore[no-untyped-def]
        return LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "none.yaml", max_model_len=64,
                                              max_num_seqs=2, prefill_chunk=value)).plan.prefill_chunk

    assert plan("off").value is None and plan("off").evidence.startswith("off (--prefill-chunk off)")
    assert plan("48").value == [[1, 0, 48]] and "not measured" in plan("48").evidence
    for bad in ("0", "some", "-16"):
        with pytest.raises(BringupError, match=r"--prefill-chunk '.*' is not auto, off or a positive number"):
            plan(bad)
