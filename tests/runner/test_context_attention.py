"""A prompt behind a cached context (a prefix-cache hit, a later prefill chunk) attended without a mask: the context no
longer than the prompt padded in as causal query rows, a longer one merged by log-sum-exp (model/context_attention.py)
through the CPU's flash kernel. Each gives the logits of the same prompt computed from scratch, the merge is checked
against float64 before it serves, and a kernel whose log-sum-exp is wrong is refused with a fallback."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
import torch

from bringup.backends.cpu import CpuBackend
from bringup.errors import StrictFallbackError
from bringup.fallbacks import FallbackRecorder
from bringup.runner.engine.context_check import check_context_attention
from bringup.runner.model.attention import AttentionDispatcher
from bringup.runner.model.batch_inputs import SeqChunk
from bringup.runner.model.context_attention import context_errors
from bringup.runner.plan.attention_timings import ERROR_FACTOR, ERROR_SLACK

FLASH = CpuBackend().attention_with_lse()
pytestmark = pytest.mark.skipif(FLASH is None, reason="this torch has no CPU flash attention with log-sum-exp")
HEADS, KV_HEADS, HEAD_DIM = 8, 2, 32


@dataclass
class _Model:
    """What check_context_attention reads of a model: its device, dtype and head shapes."""

    dtype: torch.dtype
    config: SimpleNamespace = field(default_factory=lambda: SimpleNamespace(
        num_heads=HEADS, num_kv_heads=KV_HEADS, head_dim=HEAD_DIM))
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))


def _dispatcher(recorder: FallbackRecorder, attend=FLASH, dtype=torch.float32, model=None) -> AttentionDispatcher:  # type: ignore[no-untyped-def]
    """A dispatcher planning SDPA flash, its merge checked with the CPU backend offering `attend`."""
    dispatcher = AttentionDispatcher(["sdpa_flash", "matmul_softmax"], recorder)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(CpuBackend, "attention_with_lse", lambda self: attend)
        check_context_attention(dispatcher, model or _Model(dtype))
    return dispatcher


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_merge_is_as_close_to_float64_as_the_plain_path(dtype):
    merged, plain = context_errors(FLASH, HEADS, KV_HEADS, HEAD_DIM, dtype, torch.device("cpu"))
    assert merged <= ERROR_FACTOR * plain + ERROR_SLACK, (merged, plain)
    assert merged < (1e-5 if dtype == torch.float32 else 2e-2)
    recorder = FallbackRecorder()
    assert "merged by log-sum-exp" in _dispatcher(recorder, dtype=dtype).context_evidence
    assert recorder.events == []


def _off_by(shift: float):  # type: ignore[no-untyped-def]
    """The flash kernel with every unmasked call's log-sum-exp `shift` too high: the context weighs e^shift too much."""
    def attend(q, k, v, is_causal, scale):  # type: ignore[no-untyped-def]
        out, lse = FLASH(q, k, v, is_causal, scale)
        return out, lse if is_causal else lse + shift
    return attend


def test_a_kernel_whose_log_sum_exp_is_wrong_is_refused_with_a_fallback():
    recorder = FallbackRecorder()
    dispatcher = _dispatcher(recorder, _off_by(0.01))  # 1 % too much weight on the context
    assert dispatcher.context_evidence.startswith("the masked path: error ")
    (event,) = recorder.events
    assert event.level == "op" and "merged by log-sum-exp" in event.wanted and "causal mask" in event.instead
    q = torch.randn(1, HEADS, 3, HEAD_DIM)
    context, own = torch.randn(1, KV_HEADS, 40, HEAD_DIM), torch.randn(1, HEADS, 3, HEAD_DIM)
    assert dispatcher.with_context([q], context, context, [(own, own)], HEAD_DIM ** -0.5) is None  # the masked path
    with pytest.raises(StrictFallbackError):
        _dispatcher(FallbackRecorder(strict=True), _off_by(0.01))


def test_a_merge_that_fails_at_run_time_falls_back_once():
    recorder = FallbackRecorder()
    calls = []

    def failing_later(q, k, v, is_causal, scale):  # type: ignore[no-untyped-def]
        calls.append(q.shape)
        if len(calls) > 2:  # the two calls of the float64 check pass
            raise RuntimeError("the kernel faulted")
        return FLASH(q, k, v, is_causal, scale)

    dispatcher = _dispatcher(recorder, failing_later)
    q, own = torch.randn(1, HEADS, 3, HEAD_DIM), torch.randn(1, HEADS, 3, HEAD_DIM)
    context = torch.randn(1, KV_HEADS, 40, HEAD_DIM)
    assert dispatcher.with_context([q], context, context, [(own, own)], 0.2) is None
    assert dispatcher.with_context([q], context, context, [(own, own)], 0.2) is None  # not tried again
    assert len(calls) == 3 and len(recorder.events) == 1 and "the kernel faulted" in recorder.events[0].why


@pytest.mark.parametrize("cached, new", [(16, 40), (48, 9)], ids=["padded context", "merged context"])
def test_a_prompt_behind_its_cached_context_gives_the_logits_from_scratch(builtin_engine, cached, new):
    """The built-in model with SDPA flash planned: the whole prompt computed cold, then its first `cached` tokens
    alone and the rest behind them in the same blocks; every position's logits agree, through the path named."""
    executor, model = builtin_engine.executor, builtin_engine.executor.model
    size = builtin_engine.plan.block_size
    tokens = [(7 * i + 3) % 200 + 10 for i in range(cached + new)]
    table = list(range(-(-(cached + new) // size)))
    ops, planned = model.ops, (model.ops.attend, model.ops.causal_attend, model.ops.context_attend)
    recorder = FallbackRecorder()
    dispatcher = _dispatcher(recorder, model=model)
    assert "merged by log-sum-exp" in dispatcher.context_evidence
    used = {"causal": 0, "merged": 0}

    def counted(name, fn):  # type: ignore[no-untyped-def]
        def call(*args):  # type: ignore[no-untyped-def]
            used[name] += 1
            return fn(*args)
        return call

    ops.attend, ops.causal_attend = dispatcher, counted("causal", dispatcher.causal)
    ops.context_attend = counted("merged", dispatcher.with_context)
    prompt, fused = executor.prompt, executor.fused
    executor.prompt = executor.fused = None
    try:
        cold = executor.run_chunks([SeqChunk(tokens, 0, table)], all_positions=True)[cached:]
        executor.run_chunks([SeqChunk(tokens[:cached], 0, table)])
        used.update(causal=0, merged=0)
        warm = executor.run_chunks([SeqChunk(tokens, cached, table)], all_positions=True)
    finally:
        ops.attend, ops.causal_attend, ops.context_attend = planned
        executor.prompt, executor.fused = prompt, fused
    layers = model.config.num_layers
    assert used == ({"causal": layers, "merged": 0} if cached <= new else {"causal": 0, "merged": layers})
    assert recorder.events == []
    assert torch.allclose(warm, cold, atol=1e-4, rtol=0), (warm - cold).abs().max()


def test_not_checked_or_used_where_its_backend_is_not_planned():
    recorder, plain = FallbackRecorder(), AttentionDispatcher(["matmul_softmax"], FallbackRecorder())
    check_context_attention(plain, _Model(torch.float32))
    assert plain.context_evidence == "not used: sdpa_flash's merge is offered, but sdpa_flash is not planned"
    q, own = torch.randn(1, HEADS, 3, HEAD_DIM), torch.randn(1, HEADS, 3, HEAD_DIM)
    context = torch.randn(1, KV_HEADS, 40, HEAD_DIM)
    assert plain.with_context([q], context, context, [(own, own)], 0.2) is None and recorder.events == []


@pytest.mark.parametrize("shared", [True, False], ids=["one cached prefix", "contexts of their own"])
def test_prompts_behind_one_cached_prefix_attend_it_in_one_call_with_the_logits_from_scratch(builtin_engine, shared):
    """Three prompts behind 48 cached tokens: sharing the prefix's blocks, their queries attend it in one merged call
    a layer; each behind a context of its own, they take the masked path. Each prompt's logits at every position are
    those of the whole prompt computed cold, either way."""
    executor, model = builtin_engine.executor, builtin_engine.executor.model
    cached, news = 48, (9, 12, 5)
    prefix = [(5 * i + 1) % 200 + 10 for i in range(cached)]
    prompts = [prefix + [(11 * i + j) % 200 + 10 for i in range(n)] for j, n in enumerate(news)]
    cold_tables = [[10 + 4 * j + b for b in range(4)] for j in range(3)]
    warm_tables = [[0, 1, 2, 3 + j] if shared else [30 + 4 * j + b for b in range(4)] for j in range(3)]
    recorder = FallbackRecorder()
    dispatcher = _dispatcher(recorder, model=model)
    ops, planned = model.ops, (model.ops.attend, model.ops.causal_attend, model.ops.context_attend)
    calls = []

    def counted(queries, *rest):  # type: ignore[no-untyped-def]
        calls.append(len(queries))
        return dispatcher.with_context(queries, *rest)

    ops.attend, ops.causal_attend, ops.context_attend = dispatcher, dispatcher.causal, counted
    prompt, fused = executor.prompt, executor.fused
    executor.prompt = executor.fused = None
    try:
        cold = [executor.run_chunks([SeqChunk(p, 0, t)], all_positions=True)[cached:]
                for p, t in zip(prompts, cold_tables, strict=True)]
        for table in warm_tables[:1] if shared else warm_tables:
            executor.run_chunks([SeqChunk(prefix, 0, table)])
        calls.clear()
        warm = executor.run_chunks([SeqChunk(p, cached, t) for p, t in zip(prompts, warm_tables, strict=True)],
                                   all_positions=True)
    finally:
        ops.attend, ops.causal_attend, ops.context_attend = planned
        executor.prompt, executor.fused = prompt, fused
    assert calls == ([3] * model.config.num_layers if shared else [])
    assert recorder.events == []
    assert torch.allclose(warm, torch.cat(cold), atol=1e-4, rtol=0), (warm - torch.cat(cold)).abs().max()
