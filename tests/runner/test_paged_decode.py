"""Paged decode attention: the same numbers as the gather path, and an op fallback when it faults."""

from __future__ import annotations

import pytest
import torch

from bringup.errors import StrictFallbackError
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.host import paged_decode
from bringup.runner.host.paged_decode import DecodeAttention
from bringup.runner.sampling_params import SamplingParams
from tests.runner.host_compiler import needs_compiler
from tests.runner.stated import stated

GREEDY = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
PROMPTS = ["paged", "a longer prompt for a ragged decode batch", "mid length one"]


@needs_compiler
@pytest.mark.parametrize(("heads", "kv_heads", "head_dim"), [(8, 4, 32), (12, 4, 64), (6, 6, 24), (4, 2, 128)])
def test_matches_the_gather_path_for_ragged_contexts(heads, kv_heads, head_dim):
    args = paged_decode._case(heads, kv_heads, head_dim, batch=6, length=70, slots=512, seed=heads,
                              device=torch.device("cpu"))
    assert args[4].tolist() != [70] * 6  # contexts of different lengths
    with torch.inference_mode():
        got = paged_decode.attend(*args, 0.125)
        want = paged_decode.gather_reference(*args, 0.125)
    assert got.shape == (6, heads * head_dim)
    assert (got - want).abs().max().item() <= 1e-5


@needs_compiler
def test_check_passes_where_the_kernel_builds():
    assert paged_decode.check(torch.device("cpu"), torch.float32, 8, 4, 32) is None


def test_check_says_why_it_cannot_be_used():
    assert "not in host memory" in paged_decode.check(torch.device("meta"), torch.float32, 8, 4, 32)
    assert "float32 only" in paged_decode.check(torch.device("cpu"), torch.float16, 8, 4, 32)
    from bringup.runner.plan.host_kernels import paged_decode_why_not
    assert "not in host memory" in paged_decode_why_not(torch.device("meta"), torch.bfloat16, 8, 4, 32)[0]


def _engine(tmp_path, strict: bool = False, planned: bool = False) -> LLMEngine:
    """The built-in engine; `planned`: start-up measurements state that paged decode checked out and is faster."""
    measured = stated(paged_decode=(True, "stated as faster") if planned else None)
    return LLMEngine.create(EngineOptions(device="cpu", profile_path=tmp_path / "absent.yaml", max_model_len=96,
                                          max_num_seqs=4, strict=strict, measurements=measured))


def _tokens(engine: LLMEngine) -> list[list[int]]:
    return [o.token_ids for o in engine.generate([engine.tokenizer.encode(p) for p in PROMPTS], GREEDY)]


@needs_compiler
def test_decode_steps_from_the_cache_give_the_gather_path_tokens(tmp_path):
    on, off = _engine(tmp_path), _engine(tmp_path)
    on.executor.model.decode_attend = DecodeAttention(on.fallbacks, instead="gather + matmul_softmax")
    off.executor.model.decode_attend = None
    assert _tokens(on) == _tokens(off)
    assert on.stats()["fallbacks"]["op"] == 0 and on.stats()["kv_blocks_used"] == 0


def test_a_kernel_fault_at_run_time_is_an_op_fallback_to_the_gather_path(tmp_path, monkeypatch, bringup_logs):
    reference = _engine(tmp_path)
    reference.executor.model.decode_attend = None
    want = _tokens(reference)
    faulty = _engine(tmp_path)
    faulty.executor.model.decode_attend = DecodeAttention(faulty.fallbacks, instead="gather + matmul_softmax")

    def broken(*args, **kwargs):
        raise RuntimeError("injected: the paged decode kernel faulted")

    monkeypatch.setattr(paged_decode, "run", broken)
    assert _tokens(faulty) == want
    assert faulty.stats()["fallbacks"]["op"] == 1
    assert any("wanted paged_decode, using gather + matmul_softmax" in r.getMessage() and "injected" in r.getMessage()
               for r in bringup_logs.records)
    with pytest.raises(StrictFallbackError, match="paged_decode"):  # at warm-up already, when planned
        _engine(tmp_path, strict=True, planned=True)


@needs_compiler
def test_under_torch_compile_it_is_one_opaque_op(inductor_cache_dir):
    args = paged_decode._case(8, 4, 32, batch=3, length=20, slots=64, seed=1, device=torch.device("cpu"))
    fn = torch.compile(lambda *a: paged_decode.attend(*a, 0.2) * 2, fullgraph=True)
    assert (fn(*args) - 2 * paged_decode.gather_reference(*args, 0.2)).abs().max().item() <= 1e-5


@needs_compiler
@pytest.mark.parametrize(("heads", "kv_heads", "head_dim"), [(9, 3, 64), (4, 2, 128), (6, 6, 24)])
def test_bfloat16_is_judged_against_float64_and_a_biased_kernel_refused(heads, kv_heads, head_dim, monkeypatch):
    from bringup.runner.plan.host_kernels import paged_decode_why_not

    cpu = torch.device("cpu")
    why, evidence = paged_decode_why_not(cpu, torch.bfloat16, heads, kv_heads, head_dim)
    assert why is None and "against float64, scale" in evidence and "on 3 ragged decode steps" in evidence
    check = paged_decode.checked_bf16(heads, kv_heads, head_dim)
    assert check.error <= 2 * check.plain_error + 1e-6 and abs(check.scale_error) < 2**-10
    real = paged_decode.run
    monkeypatch.setattr(paged_decode, "run", lambda *a: real(*a) * 1.005)  # every output 0.5 % high
    why, _ = paged_decode_why_not(cpu, torch.bfloat16, heads, kv_heads, head_dim)
    assert why is not None and (why.endswith("biased (a systematic scale beyond bfloat16's rounding)")
                                or why.endswith("less accurate than the plain path")), why
