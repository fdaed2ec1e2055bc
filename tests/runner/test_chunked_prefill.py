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
    decodes_step,
    row_seconds,
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
                                 None if chunk is None else [[1, 0, 0, chunk]])
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
    sched = Scheduler(BlockManager(64, 4), max_num_seqs=4, max_num_batched_tokens=64, prefill_chunk=[[1, 0, 0, 8]])
    a, b = _seq(0, 20), _seq(1, 30)
    sched.add(a)
    assert sched.schedule() == [a] and a.num_scheduled_tokens == 20  # alone: whole
    _advance([a])
    sched.add(b)
    assert sched.schedule() == [a, b] and (a.num_scheduled_tokens, b.num_scheduled_tokens) == (1, 8)
    b.num_cached_tokens, a.num_cached_tokens = 8, len(a.token_ids)
    a.token_ids.append(7)
    assert sched.schedule() == [a, b] and b.num_scheduled_tokens == 8 and b.step_end == 16


def test_prompts_run_whole_while_the_requests_waiting_for_a_first_token_outnumber_the_streams():
    sched = Scheduler(BlockManager(64, 4), max_num_seqs=4, max_num_batched_tokens=64, prefill_chunk=[[1, 0, 0, 8]])
    a, b, c = _seq(0, 20), _seq(1, 30), _seq(2, 25)
    sched.add(a)
    assert sched.schedule() == [a]
    _advance([a])
    for seq in (b, c):  # a burst beside a's stream: two wait for a first token, one stream decodes
        sched.add(seq)
    assert sched.schedule() == [a, b, c] and [s.num_scheduled_tokens for s in (a, b, c)] == [1, 30, 25]
    _advance([a, b, c])
    d = _seq(3, 30)  # one prompt among three streams: chunked for them
    sched.add(d)
    assert sched.schedule() == [a, b, c, d] and d.num_scheduled_tokens == 8
    decoding = [_seq(i, 3) for i in range(2)]
    _advance(decoding)
    mid_prompt = _seq(5, 40)
    mid_prompt.num_cached_tokens = 8  # a prompt mid-prefill waits for its first token too
    assert StepBudget(64, [[1, 0, 0, 8]], [*decoding, mid_prompt], waiting=1).fits(_seq(6, 30), 30) == 8
    assert StepBudget(64, [[1, 0, 0, 8]], [*decoding, mid_prompt], waiting=2).fits(_seq(6, 30), 30) == 30


@pytest.mark.parametrize("max_tokens, chunked", [(16, False), (1000, True)])
def test_a_stream_stalled_past_its_p99_no_longer_holds_prompts_to_chunks(max_tokens, chunked):
    """A burst of prompts run whole beside a's stream stalls it once: with 16 tokens to make, one gap in 100 allows
    none, its p99 is the stall whatever comes next, and the next prompt runs whole; with 1,000 its p99 still holds
    (9 stalls allowed), and the prompt is chunked for it."""
    sched = Scheduler(BlockManager(64, 4), max_num_seqs=4, max_num_batched_tokens=64, prefill_chunk=[[1, 0, 0, 8]])
    a, b, c = _seq(0, 20), _seq(1, 30), _seq(2, 25)
    a.params = SamplingParams(max_tokens=max_tokens)
    sched.add(a)
    sched.schedule()
    _advance([a])
    for seq in (b, c):
        sched.add(seq)
    sched.schedule()  # two wait for a first token, one stream decodes: whole, beside it
    assert a.stalls == 1 and b.stalls == c.stalls == 0
    _advance([a, b, c])
    for seq in (b, c):
        sched.finish(seq)
    d = _seq(3, 30)
    sched.add(d)
    assert sched.schedule() == [a, d] and d.num_scheduled_tokens == (8 if chunked else 30)
    assert a.stalls == (1 if chunked else 2)


def test_streams_stalled_past_their_p99_count_against_chunking():
    """Chunking buys nothing for a stream whose p99 is already a stall and slows its steps: it counts with the
    prompts waiting for a first token, against the streams chunking still protects."""
    def streams(kept: int, stalled: int) -> list:  # type: ignore[type-arg]
        decoding = [_seq(i, 3) for i in range(kept + stalled)]
        _advance(decoding)
        for seq in decoding[kept:]:
            seq.params, seq.stalls = SamplingParams(max_tokens=16), 1  # one gap in 100 of 15 allows none
        return decoding

    table = [[1, 0, 0, 8]]
    assert StepBudget(64, table, streams(kept=2, stalled=1), waiting=1).fits(_seq(9, 30), 30) == 8  # 2 >= 1 + 1
    assert StepBudget(64, table, streams(kept=1, stalled=1), waiting=1).fits(_seq(9, 30), 30) == 30  # 1 < 1 + 1
    assert StepBudget(64, table, streams(kept=3, stalled=2), waiting=1).fits(_seq(9, 30), 30) == 8  # 3 >= 1 + 2
    assert StepBudget(64, table, streams(kept=0, stalled=2), waiting=1).fits(_seq(9, 30), 30) == 30


def test_columns_past_the_full_batch_take_the_line_through_the_one_and_the_full_batch_timed():
    ms = 1e-3
    timings = PrefillTimings(10 * ms, {4: 12 * ms, 8: 15 * ms, 16: 20 * ms, 32: 30 * ms, 64: 50 * ms}, decodes=8,
                             decodes_step=17 * ms)
    # a decode row adds (17 - 10) / 7 = 1 ms: 16 decodes 25 ms, 32 decodes 41 ms
    assert decodes_step(timings, 16, 0) == pytest.approx(25 * ms)
    assert decodes_step(timings, 4, 0) == pytest.approx(10 * ms)  # fewer than the full batch: as one
    table = chunk_table(timings, 4096, max_decodes=40)
    assert sorted({d for d, _, _, _ in table}) == [1, 8, 16, 32]  # 64 > max_num_seqs 40
    # a chunk may add 1.5 x the decodes' step over its one decode's 10 ms: beside 8, 25.5 ms, 40 tokens on the line
    # from 32 (30 ms) to 64 (50); beside 16, 37.5 ms, 60 tokens; beside 32, 61.5 ms, past the largest timed: 64
    assert [chunk_at(table, d, 0, 0) for d in (1, 8, 16, 32, 40)] == [23, 40, 60, 64, 64]
    assert chunk_table(timings, 4096) == chunk_table(timings, 4096, max_decodes=8)
    choice = choose_prefill_chunk(timings, 4096, max_decodes=40)
    assert "a decode step of 8 sequences 17.0 ms (beside 16, 32+ decodes, their step on the line through the one " \
           "and 8 timed)" in choice.evidence


def test_a_scoring_prompt_is_never_cut():
    scoring = _seq(0, 30)
    scoring.params = SamplingParams(max_tokens=1, prompt_logprobs=0)
    decoding = _seq(1, 3)
    decoding.num_cached_tokens = 3
    decoding.token_ids.append(7)
    budget = StepBudget(64, [[1, 0, 0, 8]], [decoding])
    assert budget.fits(scoring, 30) == 0 and budget.fits(_seq(2, 30), 30) == 8


# beside a 10 ms decode a chunk may add 15 ms: 25 ms lies between 64 tokens (9 ms) and 128 (27 ms), at 120 on their
# line; beside 2 ms, 5 ms lies between 16 (4 ms) and 32 (6 ms), at 24; beside 0.5 ms nothing fits: the smallest
@pytest.mark.parametrize(("decode_ms", "expected"), [(10.0, 120), (2.0, 24), (0.5, 16)])
def test_the_chunk_is_the_largest_step_within_the_step_ratio(decode_ms, expected):
    timings = PrefillTimings(decode_ms / 1e3, {16: 4e-3, 32: 6e-3, 64: 9e-3, 128: 27e-3})
    choice = choose_prefill_chunk(timings, 4096)
    assert choice.value == [[1, 0, 0, expected]]  # not timed at a long context: one chunk for every context
    assert f"{CHUNK_STEP_RATIO:g} × " in choice.evidence and "64: 9.0" in choice.evidence
    assert "the chunk does not shrink" in choice.evidence
    assert choose_prefill_chunk(None, 4096).value is None


def test_a_bound_that_leaves_a_prompt_a_few_tokens_a_step_says_what_that_costs_it():
    ms = 1e-3
    # beside a 10 ms decode a chunk may add 15 ms; 4 tokens add 10 and 8 add 27 (past the fused kernel's rows): on
    # their line 5 tokens add 14.25 ms, 2.85 ms a token, against (70 - 10) / 128 = 0.469 in the largest chunk timed
    crawling = PrefillTimings(10 * ms, {4: 20 * ms, 8: 37 * ms, 16: 39 * ms, 32: 45 * ms, 64: 54 * ms, 128: 70 * ms})
    choice = choose_prefill_chunk(crawling, 4096)
    assert choice.value == [[1, 0, 0, 5]]
    assert choice.evidence.endswith("; beside one decode a prompt moves 5 tokens a step at 2.85 ms a token, 6.1 × its "
                                    "cost in a 128-token chunk: while streams run, a prompt prefills that much slower "
                                    "(`--prefill-chunk N` or `off` trade the streams' gaps for it)")
    steady = PrefillTimings(10 * ms, {16: 14 * ms, 32: 18 * ms, 64: 26 * ms, 128: 42 * ms})
    assert "a prompt moves" not in choose_prefill_chunk(steady, 4096).evidence  # 60 tokens at 0.25 ms a token, as 128


def test_the_chunk_shrinks_as_the_prompt_s_context_grows_and_grows_beside_more_decodes_and_longer_ones():
    ms = 1e-3
    timings = PrefillTimings(10 * ms, {4: 12 * ms, 8: 15 * ms, 16: 20 * ms, 32: 30 * ms}, context=2048,
                             at_context={4: 16 * ms, 8: 22 * ms, 16: 34 * ms, 32: 58 * ms}, decodes=8,
                             decodes_step=20 * ms)
    # a decode row reads its context at (16 - 12) ms / (4 rows x 2048 tokens); beside one short decode a chunk may
    # add 15 ms: at the end of the first span (256 tokens) a step of 16 + k tokens is predicted at
    # 20 + 0.625 k + (14 + 0.875 k) / 8 ms, within 25 up to k = 4
    assert CHUNK_STEP_RATIO == 2.5
    assert row_seconds(timings) == pytest.approx(4 * ms / (4 * 2048))
    table = chunk_table(timings, 8192)
    assert [chunk_at(table, 1, 0, c) for c in (0, 255, 256, 1023, 5000)] == [20, 20, 17, 14, 4]
    assert chunk_at(table, 7, 0, 0) == 20 and chunk_at(table, 8, 0, 0) == 32  # the full batch's 20 ms step: 30 more
    # decodes at a long context take longer steps: one at 1024 tokens adds 0.5 ms, so 15.75 ms more and 21 tokens;
    # eight at 2048 add 8 ms, and at a prompt context of 1024-2048 the chunk grows from 20 tokens to 28
    assert chunk_at(table, 1, 1024, 0) == 21
    assert (chunk_at(table, 8, 0, 1500), chunk_at(table, 8, 2048, 1500)) == (20, 28)
    decoding = _seq(1, 3)
    decoding.num_cached_tokens = 3
    decoding.token_ids.append(7)
    budget = StepBudget(64, table, [decoding])
    early, late = _seq(2, 30), _seq(3, 2000)
    late.num_cached_tokens = 1990
    assert budget.fits(early, 30) == 20 and budget.fits(late, 10) == chunk_at(table, 1, 0, 1990) < 20
    assert shown_chunks(table).startswith("beside 1+ decodes: 20 tokens from context 0, 17 tokens from context 256")
    assert "; beside 8+ decodes: 32 tokens from context 0, " in shown_chunks(table)
    assert "more columns for decodes at a longer context of their own (up to 32 tokens)" in shown_chunks(table)


def test_prefill_chunk_option_sets_the_row_or_is_refused_in_one_line(tmp_path):
    from bringup.errors import BringupError
    from bringup.runner.engine.engine import EngineOptions, LLMEngine

    def plan(value: str):  # type: ignore[no-untyped-def]
        return LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "none.yaml", max_model_len=64,
                                              max_num_seqs=2, prefill_chunk=value)).plan.prefill_chunk

    assert plan("off").value is None and plan("off").evidence.startswith("off (--prefill-chunk off)")
    assert plan("48").value == [[1, 0, 0, 48]] and "not measured" in plan("48").evidence
    for bad in ("0", "some", "-16"):
        with pytest.raises(BringupError, match=r"--prefill-chunk '.*' is not auto, off or a positive number"):
            plan(bad)
