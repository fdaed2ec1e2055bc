"""A step of decodes and a prompt chunk past the fused decode layers' rows: one forward through the modules, or two --
the decodes through the fused layers, the prompts through the modules -- from the decodes' average context where the
line through the gains timed at start-up crosses zero (plan/mixed_steps.py, engine/mixed_timing.py)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from bringup.runner.engine.decode_timing import measure_decode
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.engine.mixed_timing import measure_mixed
from bringup.runner.host.paged_decode import DecodeAttention
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.confirm import DecodeTimings
from bringup.runner.plan.layout import LayoutTimings
from bringup.runner.plan.mixed_steps import MixedTimings, choose_mixed_steps, split_from
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.host_compiler import needs_compiler
from tests.runner.stated import stated

ROWS = (1, 2, 4, 8, 16, 32, 64, 256)
# the panels the fused layers read win steps of up to 16 rows, F.linear larger ones: the kernel serves 16 rows
SMALL_PANELS = LayoutTimings({m: {"in_out": 2e-6 * m, "out_in": (1e-6 if m > 16 else 4e-6) * m,
                                  "panels": (1e-6 if m <= 16 else 8e-6) * m} for m in ROWS})
STATED = MixedTimings(4, 16, {15: [0.0541, 0.0550], 511: [0.0755, 0.0760]},
                      {15: [0.0563, 0.0570], 511: [0.0619, 0.0630]})


def test_a_step_splits_from_where_the_line_through_the_two_gains_crosses_zero():
    # gains -2.2 ms at context 15 and +13.6 ms at 511: zero at 15 + 2.2 x 496 / 15.8 = 84.06
    assert split_from(STATED) == 85
    choice = choose_mixed_steps(STATED, "given as data")
    assert choice.value == 85 and "contexts average 85 tokens or more" in choice.evidence
    assert "decodes at context 511: one forward 75.5 ms, two 61.9 ms" in choice.evidence
    always = replace(STATED, two={15: [0.050], 511: [0.060]})
    assert split_from(always) == 0
    within_noise = replace(STATED, two={15: [0.0563], 511: [0.0750]})  # 0.7 % at the long context: not kept
    assert split_from(within_noise) is None
    assert choose_mixed_steps(within_noise, "given").evidence.startswith("one forward: two forwards not faster")
    assert choose_mixed_steps(None, "", "no room").evidence == "one forward: not timed (no room)"
    contended = choose_mixed_steps(replace(STATED, cpu_share=0.6), "measured")  # a busy loop on one of two cores
    assert contended.value is None and contended.evidence.startswith("one forward: the timed threads had 60% of the "
                                                                      "CPU, not clean evidence for a split")
    assert choose_mixed_steps(replace(STATED, cpu_share=0.97), "measured").value == 85


def _engine(tmp_path: Path, mixed: MixedTimings | None) -> LLMEngine:
    """The fused decode layers kept (checked on the model for real), serving steps of up to 16 rows."""
    model_dir = tmp_path / "llama"
    if not model_dir.exists():
        make_hf_model(model_dir, "llama", hidden=64, heads=4, kv_heads=2, intermediate=96, layers=3)
    measured = replace(stated(SMALL_PANELS, decode=DecodeTimings(candidates={"fused": (0.001, 0.002)})),
                       fused_decode=True, mixed=mixed)
    return LLMEngine.create(EngineOptions(model_dir=model_dir, device="cpu", profile_path=tmp_path / "absent.yaml",
                                          max_model_len=512, max_num_seqs=4, measurements=measured))


@needs_compiler
def test_the_row_follows_the_timings_given_and_says_so(tmp_path):
    engine = _engine(tmp_path, STATED)
    assert engine.plan.mixed_steps.value == 85 == engine.executor.split_from
    assert engine.plan.mixed_steps.evidence.endswith("(the fastest of 2 runs each, alternated, given as data; floor "
                                                     "noise 2%)")
    assert engine.plan.shown("mixed_steps") == "split from context 85"
    without = _engine(tmp_path, None)
    assert without.plan.mixed_steps.value is None and without.executor.split_from is None
    assert "given as data without them" in without.plan.mixed_steps.evidence


@needs_compiler
def test_a_split_step_gives_one_forwards_logits_and_runs_its_decodes_in_the_kernel(tmp_path):
    engine = _engine(tmp_path, STATED)
    executor = engine.executor
    kernel = executor.fused
    assert kernel is not None and kernel.serves(4) and not kernel.serves(4 + 20)
    gen = torch.Generator().manual_seed(0)
    contexts = [torch.randint(3, 200, (n,), generator=gen).tolist() for n in (100, 120, 90, 110)]
    prompt = torch.randint(3, 200, (20,), generator=gen).tolist()
    tables = [list(range(8 * i, 8 * i + 8)) for i in range(4)]
    for tokens, table in zip(contexts, tables, strict=True):
        executor.run_chunks([SeqChunk(tokens[:-1], 0, table)])  # each decode's context in the cache
    step = [SeqChunk(t, len(t) - 1, table) for t, table in zip(contexts, tables, strict=True)]
    step.insert(2, SeqChunk(prompt, 0, [40, 41]))
    rows = []
    original = kernel.hidden
    kernel.hidden = lambda ids, *rest: rows.append(ids.shape[0]) or original(ids, *rest)
    executor.split_from = None
    one = executor.run_chunks(step)
    assert rows == []  # 24 rows: past the kernel, through the modules
    executor.split_from = 106  # the decodes' contexts average 105: still one forward
    assert torch.equal(executor.run_chunks(step), one) and rows == []
    executor.split_from = 105
    two = executor.run_chunks(step)
    assert rows == [4]  # the decodes in the kernel, the prompt through the modules
    assert (two - one).abs().max().item() <= 1e-4 * one.abs().max().item()
    assert engine.stats()["fallbacks"]["op"] == 0


@needs_compiler
def test_start_up_times_both_ways_at_a_short_and_a_long_context(tmp_path):
    engine = _engine(tmp_path, STATED)
    executor = engine.executor
    timings = measure_mixed(executor, engine.plan)
    assert timings is not None and (timings.decodes, timings.tokens) == (4, 16)  # 4 + 16 rows: past the kernel's
    room = (engine.plan.kv_blocks.value - 1) // 4 * 16 - 1  # each decode's blocks, beside the chunk's one
    assert sorted(timings.one) == sorted(timings.two) == [15, min(511, room)]
    assert all(len(runs) == 3 and min(runs) > 0 for side in (timings.one, timings.two) for runs in side.values())
    assert timings.cpu_share is not None and 0 < timings.cpu_share <= 1
    assert executor.split_from == 85  # left as the plan has it


@needs_compiler
def test_no_timing_where_the_cache_cannot_hold_the_decodes_at_a_long_context(tmp_path):
    engine = _engine(tmp_path, STATED)
    small = replace(engine.plan, kv_blocks=Choice(8, "stated"))  # 4 decodes at 2 blocks each, beside the chunk's
    assert measure_mixed(engine.executor, small) is None


@needs_compiler
def test_rows_timed_faster_past_the_switch_widen_what_the_fused_decode_layers_serve(tmp_path):
    kernel = _engine(tmp_path, STATED).executor.fused
    assert kernel is not None and kernel.rows == 0  # given as data: no timing past the switch, the layout decides
    switch = kernel.model.layout.switch_tokens
    assert switch and kernel.serves(switch) and not kernel.serves(switch + 1)
    kernel.rows = 4 * switch
    assert kernel.serves(4 * switch) and not kernel.serves(4 * switch + 1)


@needs_compiler
def test_timing_on_a_cache_that_holds_few_sequences_stays_inside_it(tmp_path):
    # beside the fused decode layers paged decode is timed on a batch of 8, and the kernel's rows past the switch on
    # larger ones: a cache of 32 blocks (selftest's engine) holds 3 sequences of the timing's 134 tokens, so both
    # take what it holds (the batch of 8 wrote past the cache before)
    engine = _engine(tmp_path, STATED)
    executor, plan = engine.executor, engine.plan
    plan = replace(plan, kv_blocks=replace(plan.kv_blocks, value=32))
    executor.model.decode_attend = DecodeAttention(executor.recorder, "gather")
    timings = measure_decode(executor, plan, None, sweep=False)
    assert "(paged_decode batch 3)" in timings.how
    assert all(batch <= 3 for batch in timings.fused_rows)
    assert engine.stats()["fallbacks"]["op"] == 0
