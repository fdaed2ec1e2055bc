"""The prompts' flash kernel (host/flash_prompt.py): causal attention straight from the paged cache on AMX tiles, as
the fused prompt layers use it (host/prompt_layers.py), and its verdict (plan/host_kernels.prompt_flash_verdict)."""

from __future__ import annotations

import ctypes
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.host import flash_prompt, prompt_layers
from bringup.runner.model.attention_layer import matmul_softmax_attention
from bringup.runner.model.batch_inputs import SeqChunk, build_inputs, build_mixed_inputs
from bringup.runner.plan.host_kernels import prompt_flash_verdict
from bringup.runner.plan.prompt_layers import PromptTimings
from bringup.runner.sampling_params import SamplingParams
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.host_compiler import needs_compiler
from tests.runner.stated import stated

KERNELS_FASTER = PromptTimings(64, [0.0010, 0.0011, 0.0010], [0.0020, 0.0021, 0.0020])
GREEDY = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)


@pytest.fixture
def amx() -> None:
    why = flash_prompt.declines(4, 2, 64)
    if why is not None:
        pytest.skip(f"the flash kernel does not run here: {why}")


def engine(tmp_path: Path, model_dir: Path) -> LLMEngine:
    return LLMEngine.create(EngineOptions(model_dir=model_dir, device="cpu", profile_path=tmp_path / "absent.yaml",
                                          max_model_len=256, max_num_seqs=4, dtype="bfloat16",
                                          measurements=replace(stated(), prompt=KERNELS_FASTER)))


def attention_case(heads: int, kv_heads: int, dim: int, cached: int, new: int, seed: int):  # type: ignore[no-untyped-def]
    """A cache of 400 slots, NaN wherever the prompt's keys are not, the prompt's slots scattered through it."""
    gen = torch.Generator().manual_seed(seed)
    k_cache, v_cache = (torch.full((kv_heads, 400, dim), float("nan"), dtype=torch.bfloat16) for _ in range(2))
    slots = torch.randperm(400, generator=gen)[:cached + new]
    for cache in (k_cache, v_cache):
        cache[:, slots] = torch.randn(kv_heads, cached + new, dim, generator=gen).bfloat16()
    qkv = torch.randn(new, (heads + 2 * kv_heads) * dim, generator=gen).bfloat16()  # q a strided view, as served
    return qkv[:, :heads * dim].view(new, heads, dim), k_cache, v_cache, slots


@needs_compiler
@pytest.mark.parametrize(("heads", "kv_heads", "dim"), [(9, 3, 64), (4, 4, 64), (8, 2, 128)])
def test_each_row_matches_float64_reading_only_its_slots(amx, heads, kv_heads, dim):
    for seed, (cached, new) in enumerate(((0, 1), (0, 16), (0, 37), (48, 21), (100, 130), (0, 200), (63, 1))):
        q, k_cache, v_cache, slots = attention_case(heads, kv_heads, dim, cached, new, seed)
        out = flash_prompt.run(q, k_cache, v_cache, slots, dim ** -0.5)
        assert out is not None and bool(torch.isfinite(out).all())  # no NaN slot read: only `slots`, in bounds
        keys, values = (c[:, slots].repeat_interleave(heads // kv_heads, dim=0).double() for c in (k_cache, v_cache))
        mask = torch.arange(cached + new).view(1, -1) <= (cached + torch.arange(new)).view(-1, 1)
        want = matmul_softmax_attention(q.transpose(0, 1).double(), keys, values, mask, dim ** -0.5)
        got = out.view(new, heads, dim).transpose(0, 1).double()
        assert (got - want).abs().max() / want.abs().max() < 8e-3  # bfloat16 inputs, outputs and probabilities


@needs_compiler
def test_a_key_after_a_row_never_reaches_it(amx):
    q, k_cache, v_cache, slots = attention_case(4, 2, 64, 10, 90, 7)
    before = flash_prompt.run(q, k_cache, v_cache, slots, 0.125)
    last = slots[-1]
    k_cache[:, last], v_cache[:, last] = 3.0, 100.0  # the last prompt token's key and value, changed
    after = flash_prompt.run(q, k_cache, v_cache, slots, 0.125)
    assert before is not None and after is not None
    assert torch.equal(after[:-1], before[:-1]) and not torch.equal(after[-1], before[-1])


@needs_compiler
def test_the_verdict_says_why_not_without_running_anything_wrong():
    assert prompt_flash_verdict(torch.float32, 4, 2, 64) == (False, "bfloat16 only; the model runs float32")
    used, why = prompt_flash_verdict(torch.bfloat16, 4, 4, 32)
    assert not used and why == "heads of 32 dims; the kernel takes multiples of 64 up to 256"
    used, why = prompt_flash_verdict(torch.bfloat16, 9, 3, 64)
    assert used == (flash_prompt.declines(9, 3, 64) is None)
    if used:
        assert "against float64, scale" in why and "on 4 prompts fresh and behind cached contexts" in why


@needs_compiler
def test_a_kernel_half_a_percent_high_is_refused(amx, monkeypatch):
    real = flash_prompt.library()

    class High:  # the real kernel, every output then 0.5 % high: inside the plain path's error, outside rounding's
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(real, name)

        def bringup_flash_prompt_bf16(self, *args):  # type: ignore[no-untyped-def]
            declined = real.bringup_flash_prompt_bf16(*args)
            rows, heads, dim, out, out_row = args[2], args[3], args[5], args[13], args[14]
            torch.frombuffer((ctypes.c_uint16 * (rows * out_row)).from_address(out), dtype=torch.bfloat16).view(
                rows, out_row)[:, :heads * dim].mul_(1.005)
            return declined

    monkeypatch.setattr(flash_prompt, "library", lambda: High())
    prompt_flash_verdict.cache_clear()
    try:
        used, why = prompt_flash_verdict(torch.bfloat16, 4, 2, 64)
    finally:
        prompt_flash_verdict.cache_clear()
    assert not used and why.endswith("biased (a systematic scale beyond bfloat16's rounding)"), why


@needs_compiler
def test_fused_prompt_layers_attend_through_it_and_match_the_modules(amx, tmp_path, monkeypatch):
    make_hf_model(tmp_path / "m", "llama", hidden=256, heads=4, kv_heads=2, intermediate=256, layers=2)
    e = engine(tmp_path, tmp_path / "m")
    assert e.plan.prompt_layers.value == "fused", e.plan.prompt_layers.evidence
    model, size, fused = e.executor.model, e.plan.block_size, e.executor.prompt
    assert fused is not None
    if not fused.flash:  # the conservative plan's plain bfloat16 attention is further from float64 than the kernel
        assert "the prompt flash kernel not used: the layers with it differ from the modules (layer 0: differs" \
            in e.plan.prompt_layers.evidence
        fused.flash = True
    calls: list[int] = []
    real_run = flash_prompt.run
    monkeypatch.setattr(flash_prompt, "run", lambda q, *a, **k: calls.append(q.shape[0]) or real_run(q, *a, **k))
    shape = size, model.config.num_queries_per_kv, model.device, model.config.attention_window
    steps = [build_inputs([SeqChunk(list(range(3, 40)), 0, [0, 1, 2]), SeqChunk(list(range(7, 20)), 0, [3])], *shape),
             build_mixed_inputs([[SeqChunk(list(range(3, 41)), 37, [0, 1, 2])],  # a decode beside two chunks
                                 [SeqChunk(list(range(7, 30)), 13, [3, 4]),
                                  SeqChunk(list(range(9, 60)), 0, [5, 6, 7, 8])]], *shape)]
    with torch.inference_mode():
        for step in steps:
            want = model(step.input_ids, step.positions, step.meta)
            got = fused.hidden(step.input_ids, step.positions, step.meta)
            assert ((got - want).abs().max() / want.abs().max()).item() <= 5e-2
    assert calls == [37, 13] * 2 + [10, 51] * 2  # each prompt of each layer; the decode row not
    assert e.generate([list(range(5, 90))], GREEDY)[0].token_ids  # served end to end
    assert e.stats()["fallbacks"]["op"] == 0


@needs_compiler
def test_a_kernel_that_declines_at_run_time_falls_back_to_the_modules_and_says_so(tmp_path):
    make_hf_model(tmp_path / "m", "llama", hidden=64, heads=2, kv_heads=1, intermediate=96, layers=2)  # heads of 32
    e, plain = engine(tmp_path, tmp_path / "m"), engine(tmp_path, tmp_path / "m")
    assert e.plan.prompt_layers.value == "fused", e.plan.prompt_layers.evidence
    assert "the prompt flash kernel not used: heads of 32 dims" in e.plan.prompt_layers.evidence
    assert e.executor.prompt is not None
    e.executor.prompt.flash = True  # as a plan from elsewhere would have it: the kernel declines these heads
    got = e.generate([list(range(5, 60))], GREEDY)[0].token_ids
    assert e.executor.prompt is None and e.stats()["fallbacks"]["op"] == 1
    assert got == plain.generate([list(range(5, 60))], GREEDY)[0].token_ids
    assert prompt_layers.FusedPrompt(e.executor.model).flash is False  # off unless the plan's verdict turns it on
