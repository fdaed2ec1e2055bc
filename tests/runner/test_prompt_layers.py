"""The fused prompt layers (host/prompt_layers.py): a prompt step's element-wise parts in host kernels."""

from __future__ import annotations

import ctypes
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from bringup.errors import StrictFallbackError
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.host import prompt_layers
from bringup.runner.model.batch_inputs import SeqChunk, build_inputs, build_mixed_inputs
from bringup.runner.model.norm import rms_norm
from bringup.runner.model.rope import apply_rope
from bringup.runner.plan.prompt_layers import PromptTimings, choose_prompt_layers
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.sources.builtin_model import load_builtin
from bringup.runner.weights.kernels.build import HostKernelInputError
from tests.runner.hf_dense_fixtures import make_family_model
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.host_compiler import needs_compiler
from tests.runner.stated import stated

GREEDY = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)
PROMPTS = [list(range(5, 45)), [12, 13], list(range(50, 120))]
KERNELS_FASTER = PromptTimings(64, [0.0010, 0.0011, 0.0010], [0.0020, 0.0021, 0.0020])


def engine(tmp_path: Path, model_dir: Path | None, prompt: PromptTimings | None, strict: bool = False,
           dtype: str = "float32") -> LLMEngine:
    """An engine whose start-up measurements are stated; with `prompt`, the fused prompt layers are tried (checked on
    the model for real) and decided from those timings."""
    return LLMEngine.create(EngineOptions(model_dir=model_dir, device="cpu", profile_path=tmp_path / "absent.yaml",
                                          max_model_len=256, max_num_seqs=4, strict=strict, dtype=dtype,
                                          measurements=replace(stated(), prompt=prompt)))


def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


@needs_compiler
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_each_kernel_computes_what_the_modules_ops_compute(dtype):
    lib, suffix = prompt_layers.library(), prompt_layers.SUFFIX[dtype]
    gen = torch.Generator().manual_seed(0)
    rows, n, heads, kv_heads, head_dim, half = 7, 72, 3, 1, 40, 20  # 72 and 20: a vector and a tail each

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).to(dtype)

    x, delta, weight = rand(rows, n), rand(rows, n), rand(n)
    normed, want_x = torch.empty_like(x), x + delta
    getattr(lib, f"bringup_add_rms_norm{suffix}")(_ptr(x), _ptr(delta), rows, n, _ptr(weight), 1e-5, _ptr(normed))
    assert torch.equal(x, want_x)  # the residual add, rounded once
    want = rms_norm(want_x, weight, 1e-5)
    ulps = (normed.double() - want.double()).abs() / want.double().abs().clamp_min(1e-30)
    assert ulps.max() <= (2**-7 if dtype == torch.bfloat16 else 1e-6)  # sums in another order: a step apart at most

    qkv = rand(rows, (heads + 2 * kv_heads) * head_dim)
    cos, sin = rand(16, half), rand(16, half)
    positions, slots = torch.tensor([3, 0, 15, 7, 7, 1, 2]), torch.tensor([9, 1, 0, 4, 5, 2, 11])
    k_cache, v_cache = (torch.zeros(kv_heads, 12, head_dim, dtype=dtype) for _ in range(2))
    q_k = qkv[:, : (heads + kv_heads) * head_dim].view(rows, heads + kv_heads, head_dim)
    rotated = apply_rope(q_k, cos[positions].unsqueeze(1), sin[positions].unsqueeze(1))
    values = qkv[:, (heads + kv_heads) * head_dim:].clone()
    getattr(lib, f"bringup_rope_and_cache{suffix}")(_ptr(qkv), rows, qkv.shape[1], heads, kv_heads, head_dim, half,
                                                    _ptr(cos), _ptr(sin), _ptr(positions), _ptr(slots), _ptr(k_cache),
                                                    _ptr(v_cache), 12)
    got = qkv[:, : (heads + kv_heads) * head_dim].view_as(rotated)
    if dtype == torch.bfloat16:  # each product rounded where torch rounds it
        assert torch.equal(got, rotated)
    else:  # the compiler may fuse a product into the subtraction (one rounding fewer)
        assert torch.allclose(got, rotated, rtol=1e-6, atol=1e-6)
    assert torch.equal(k_cache[0, slots], got[:, heads])
    assert torch.equal(v_cache[0, slots], values)
    untouched = [s for s in range(12) if s not in slots.tolist()]
    assert not k_cache[:, untouched].any() and not v_cache[:, untouched].any()

    inter = 40
    gate_up = torch.cat([torch.linspace(-110, 110, rows * inter).view(rows, inter), rand(rows, inter)], 1).to(dtype)
    gate_up[0, :4] = torch.tensor([float("inf"), float("-inf"), float("nan"), 0.0])
    act = torch.empty(rows, inter, dtype=dtype)
    getattr(lib, f"bringup_silu_mul{suffix}")(_ptr(gate_up), rows, 2 * inter, inter, _ptr(act))
    want = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
    assert torch.equal(act.isnan(), want.isnan())
    finite = ~want.isnan()
    if dtype == torch.bfloat16:
        assert torch.equal(act[finite], want[finite])
    else:  # e^x within 2 ulp
        assert torch.allclose(act[finite], want[finite], rtol=5e-7, atol=1e-37)


@needs_compiler
@pytest.mark.parametrize("arch", ["llama", "qwen2", "phi3"])  # qwen2: q/k/v biases; phi3: partial rotary, head 12
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_hidden_states_match_the_modules_on_prompt_and_mixed_steps(tmp_path, arch, dtype):
    path = tmp_path / arch
    if arch == "phi3":
        make_family_model(path, "phi3", window=None)
    else:
        make_hf_model(path, arch, hidden=64, heads=4, kv_heads=2, intermediate=96, layers=3)
    e = engine(tmp_path, path, None, dtype=str(dtype).removeprefix("torch."))
    model, size = e.executor.model, e.plan.block_size
    assert prompt_layers.cannot_fuse(model, 256) is None
    fused = prompt_layers.FusedPrompt(model)
    assert prompt_layers.check_on_model(fused, size, 256, e.plan.kv_blocks.value) is None
    shape = size, model.config.num_queries_per_kv, model.device, model.config.attention_window
    first = [SeqChunk(list(range(3, 40)), 0, [0, 1, 2]), SeqChunk(list(range(7, 20)), 0, [3])]
    steps = [build_inputs(first, *shape),  # two fresh prompts: causal attention
             build_mixed_inputs([[SeqChunk(list(range(3, 41)), 37, [0, 1, 2])],  # a decode beside two chunks
                                 [SeqChunk(list(range(7, 30)), 13, [3, 4]), SeqChunk(list(range(9, 60)), 0,
                                                                                     [5, 6, 7, 8])]], *shape)]
    bound = 1e-5 if dtype == torch.float32 else 5e-2
    with torch.inference_mode():
        for step in steps:
            want = model(step.input_ids, step.positions, step.meta)
            cached = [(layer.self_attn.cache.k.clone(), layer.self_attn.cache.v.clone()) for layer in model.layers]
            got = fused.hidden(step.input_ids, step.positions, step.meta)
            assert ((got - want).abs().max() / want.abs().max()).item() <= bound
            for layer, (k, v) in zip(model.layers, cached, strict=True):  # the same K/V written to the same slots
                assert torch.allclose(layer.self_attn.cache.k.float(), k.float(), rtol=bound, atol=bound)
                assert torch.allclose(layer.self_attn.cache.v.float(), v.float(), rtol=bound, atol=bound)


@needs_compiler
def test_greedy_tokens_and_prompt_logprobs_match_the_modules_through_the_engine(tmp_path, monkeypatch):
    real, calls = prompt_layers.library(), []

    class Counting:  # the real kernels, each norm call counted with its rows
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(real, name)

        def bringup_add_rms_norm(self, x, delta, rows, *args):  # type: ignore[no-untyped-def]
            calls.append(rows)
            real.bringup_add_rms_norm(x, delta, rows, *args)

    monkeypatch.setattr(prompt_layers, "library", lambda: Counting())
    path = tmp_path / "llama"
    make_hf_model(path, "llama", hidden=64, heads=4, kv_heads=2, intermediate=96, layers=3)
    fused = engine(tmp_path, path, KERNELS_FASTER)
    assert fused.plan.prompt_layers.value == "fused", fused.plan.prompt_layers.evidence
    assert "a 64-token prompt in 1.0 ms against the modules' 2.0 ms (the fastest of 3 runs each, given as data" \
        in fused.plan.prompt_layers.evidence
    plain = engine(tmp_path, path, None)
    assert plain.plan.prompt_layers.value == "modules" and plain.executor.prompt is None
    assert "not tried (the start's timings given as data without them)" in plain.plan.prompt_layers.evidence
    calls.clear()
    scored = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True, prompt_logprobs=2)
    got, want = fused.generate(PROMPTS, GREEDY), plain.generate(PROMPTS, GREEDY)
    assert [o.token_ids for o in got] == [o.token_ids for o in want]
    assert sum(calls) >= 2 * 3 * sum(map(len, PROMPTS))  # every prompt token through both norms of 3 layers
    got_scores, want_scores = (e.generate(PROMPTS[:1], scored)[0].prompt_logprobs for e in (fused, plain))
    assert len(got_scores) == len(want_scores) == len(PROMPTS[0])
    for a, b in zip(got_scores[1:], want_scores[1:], strict=True):
        assert a.token_id == b.token_id and abs(a.logprob - b.logprob) < 1e-4
        assert [t for t, _ in a.top] == [t for t, _ in b.top]
        assert all(abs(x - y) < 1e-4 for (_, x), (_, y) in zip(a.top, b.top, strict=True))
    assert fused.stats()["fallbacks"]["op"] == 0


@needs_compiler
def test_wrong_numbers_keep_them_out_of_the_plan(tmp_path, monkeypatch):
    real = prompt_layers.library()

    class Swapped:  # the real rotary kernel handed sine for cosine: every rotation wrong, nothing out of bounds
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(real, name)

        def bringup_rope_and_cache(self, *args):  # type: ignore[no-untyped-def]
            args = list(args)
            args[7], args[8] = args[8], args[7]
            real.bringup_rope_and_cache(*args)

    monkeypatch.setattr(prompt_layers, "library", lambda: Swapped())
    e = engine(tmp_path, None, KERNELS_FASTER)
    assert e.plan.prompt_layers.value == "modules"
    assert "fused prompt layers not used: layer 0: differs from the modules by" in e.plan.prompt_layers.evidence
    assert e.executor.prompt is None


@needs_compiler
def test_a_bfloat16_kernel_one_percent_high_is_caught(tmp_path, monkeypatch):
    real = prompt_layers.library()

    class High:  # the real SiLU * up, every result then 1 % high: within bfloat16's own error on a whole model
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(real, name)

        def bringup_silu_mul_bf16(self, gate_up, rows, ld, inter, out):  # type: ignore[no-untyped-def]
            real.bringup_silu_mul_bf16(gate_up, rows, ld, inter, out)
            torch.frombuffer((ctypes.c_uint16 * (rows * inter)).from_address(out), dtype=torch.bfloat16).mul_(1.01)

    monkeypatch.setattr(prompt_layers, "library", lambda: High())
    e = engine(tmp_path, None, KERNELS_FASTER, dtype="bfloat16")
    assert e.plan.prompt_layers.value == "modules"
    assert "layer 0: differs from the modules by" in e.plan.prompt_layers.evidence
    assert "(at most 1e-05) on a check" in e.plan.prompt_layers.evidence, e.plan.prompt_layers.evidence


@needs_compiler
def test_a_refused_step_falls_back_to_the_modules_and_says_so(tmp_path, bringup_logs):
    want = [o.token_ids for o in engine(tmp_path, None, None).generate(PROMPTS, GREEDY)]
    e = engine(tmp_path, None, KERNELS_FASTER)
    assert e.executor.prompt is not None
    e.executor.prompt.slots_total = 2  # its table no longer covers the cache: the slots are refused, nothing written
    assert [o.token_ids for o in e.generate(PROMPTS, GREEDY)] == want
    assert e.stats()["fallbacks"]["op"] == 1 and e.executor.prompt is None
    assert any("wanted element-wise parts in host kernels, using the model's modules" in r.getMessage() and
               "slot_mapping holds" in r.getMessage() for r in bringup_logs.records)
    strict = engine(tmp_path, None, KERNELS_FASTER, strict=True)
    assert strict.executor.prompt is not None
    strict.executor.prompt.slots_total = 2
    with pytest.raises(StrictFallbackError, match="prompt layers"):
        strict.generate(PROMPTS, GREEDY)


def test_kept_only_where_faster_beyond_the_noise():
    assert choose_prompt_layers(KERNELS_FASTER, "given").value == "fused"
    slower = choose_prompt_layers(PromptTimings(512, [0.095, 0.096], [0.1, 0.1]), "timed")
    assert slower.value == "modules"  # 95 % of the modules' time: under the 10 % margin
    assert slower.evidence == "the model's modules: fused prompt layers not faster: a 512-token prompt in 95.0 ms " \
                              "against the modules' 100.0 ms (the fastest of 2 runs each, timed; floor noise 1%)"
    noisy = choose_prompt_layers(PromptTimings(512, [0.08, 0.1], [0.1, 0.1]), "timed")
    assert noisy.value == "modules"  # 80 %, but its own floors lie 25 % apart


def test_only_models_the_kernels_compute_are_fused(tmp_path):
    assert prompt_layers.cannot_fuse(load_builtin(torch.float32, "cpu"), 128) is None
    assert "float32 and bfloat16 only; the model runs float16" in prompt_layers.cannot_fuse(
        load_builtin(torch.float16, "cpu"), 128)
    for family, why in (("qwen3", "q/k norms"), ("gemma2", "the model scales its embeddings"),
                        ("mistral", "a sliding window of 8 < max_model_len 256")):
        path = tmp_path / family
        make_family_model(path, family, window=8)
        e = engine(tmp_path, path, KERNELS_FASTER)
        assert e.plan.prompt_layers.value == "modules"
        assert why in e.plan.prompt_layers.evidence, e.plan.prompt_layers.evidence


@needs_compiler
def test_tables_the_kernels_would_read_past_are_refused_up_front():
    model = load_builtin(torch.float32, "cpu")
    with pytest.raises(HostKernelInputError, match="the KV cache is not allocated yet"):
        prompt_layers.FusedPrompt(model)
    model.allocate_kv_cache(4, 16)
    prompt_layers.FusedPrompt(model)
    model.layers[1].input_layernorm.weight = torch.nn.Parameter(torch.ones(8), requires_grad=False)
    with pytest.raises(HostKernelInputError, match="a norm weight has 8 values for hidden size"):
        prompt_layers.FusedPrompt(model)
