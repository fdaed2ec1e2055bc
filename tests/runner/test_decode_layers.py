"""The fused decode layers (host/decode_layers.py): every layer of a decode step in one host-kernel call."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from bringup.errors import StrictFallbackError
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.host import decode_layers
from bringup.runner.model.batch_inputs import SeqChunk, build_inputs
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.plan.confirm import DecodeTimings
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.sources.builtin_model import load_builtin
from bringup.runner.weights.kernels.build import HostKernelInputError
from tests.runner.hf_dense_fixtures import make_family_model
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.host_compiler import needs_compiler
from tests.runner.stated import layout_times, stated

GREEDY = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
PROMPTS = [[5, 6, 7, 8, 9, 10, 11], [12, 13], list(range(20, 61))]
PANELS_FASTER = layout_times(in_out=2.0, out_in=2.0, panels=1.0)


def engine(tmp_path: Path, model_dir: Path | None, fused: bool, fused_s: float = 0.001, strict: bool = False,
           layouts=PANELS_FASTER, dtype: str = "float32",
           quantization: str = "none") -> LLMEngine:  # type: ignore[no-untyped-def]
    """An engine whose start-up measurements are stated: panels win the layout timing; with `fused`, the fused
    decode layers are tried (checked on the model for real) and take `fused_s` against the modules' 2 ms."""
    timings = DecodeTimings(candidates={"fused": (fused_s, 0.002)}) if fused else None
    measured = replace(stated(layouts, decode=timings), fused_decode=fused)
    return LLMEngine.create(EngineOptions(model_dir=model_dir, device="cpu", profile_path=tmp_path / "absent.yaml",
                                          max_model_len=128, max_num_seqs=4, strict=strict, measurements=measured,
                                          dtype=dtype, quantization=quantization))


def tokens(e: LLMEngine) -> list[list[int]]:
    return [o.token_ids for o in e.generate(PROMPTS, GREEDY)]


@needs_compiler
@pytest.mark.parametrize("arch", ["llama", "qwen2"])  # qwen2: q/k/v biases
def test_greedy_tokens_match_the_modules_through_the_engine(tmp_path, arch):
    model_dir = tmp_path / arch
    make_hf_model(model_dir, arch, hidden=64, heads=4, kv_heads=2, intermediate=96, layers=3)
    fused = engine(tmp_path, model_dir, fused=True)
    assert fused.plan.decode_layers.value == "fused"
    assert "confirmed on this model" in fused.plan.decode_layers.evidence
    assert fused.executor.fused is not None
    plain = engine(tmp_path, model_dir, fused=False)
    assert plain.plan.decode_layers.value == "modules" and plain.executor.fused is None
    assert tokens(fused) == tokens(plain)
    assert fused.stats()["fallbacks"]["op"] == 0


@needs_compiler
def test_bfloat16_decode_steps_run_through_the_kernel(tmp_path, monkeypatch):
    # bfloat16 tokens are not compared with the modules': where torch's bfloat16 matmul sums in another order (a
    # machine with bfloat16 dot-product instructions), one rounding apart can break a tie between two logits
    real, calls = decode_layers.library(), []

    class Counting:  # the real kernel, each bfloat16 call counted with its batch
        bringup_decode_layers = real.bringup_decode_layers

        def bringup_decode_layers_bf16(self, x, batch, *args):  # type: ignore[no-untyped-def]
            calls.append(batch)
            real.bringup_decode_layers_bf16(x, batch, *args)

    monkeypatch.setattr(decode_layers, "library", lambda: Counting())
    model_dir = tmp_path / "qwen2"
    make_hf_model(model_dir, "qwen2", hidden=64, heads=4, kv_heads=2, intermediate=96, layers=3)
    e = engine(tmp_path, model_dir, fused=True, dtype="bfloat16")
    assert e.plan.dtype.value == "bfloat16" and e.plan.decode_layers.value == "fused"
    calls.clear()  # the start-up check's call
    outputs = e.generate(PROMPTS, GREEDY)
    assert [len(o.token_ids) for o in outputs] == [GREEDY.max_tokens] * len(PROMPTS)
    # the first step's unequal prompts as rows (batch_inputs.decode_rows), then every decode token: none through
    # the modules
    assert calls[0] == sum(map(len, PROMPTS)) and sum(calls[1:]) == len(PROMPTS) * (GREEDY.max_tokens - 1)
    assert e.stats()["fallbacks"]["op"] == 0


@needs_compiler
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("hidden", [64, 256])  # head_dim 16: one key at a time; 64: the 16-lane attention
def test_hidden_states_match_the_modules_on_ragged_decode_steps(tmp_path, dtype, hidden):
    model_dir = tmp_path / "llama"
    make_hf_model(model_dir, "llama", hidden=hidden, heads=4, kv_heads=1, intermediate=96, layers=2, rope_llama3=True)
    e = engine(tmp_path, model_dir, fused=True, dtype=dtype)
    model, fused = e.executor.model, e.executor.fused
    assert fused is not None
    chunks = [SeqChunk(list(range(3, 3 + n)), n - 1, list(range(8 * i, 8 * i + 8))) for i, n in
              enumerate((1, 17, 90, 33))]
    with torch.inference_mode():
        e.executor.run_chunks([SeqChunk(c.token_ids[:-1], 0, c.block_table) for c in chunks[1:]])
        step = build_inputs(chunks, e.plan.block_size, model.config.num_queries_per_kv, model.device)
        want = model(step.input_ids, step.positions, step.meta)
        k_want = model.layers[1].self_attn.cache.k.clone()
        got = fused.hidden(step.input_ids, step.positions, step.meta)
    k_got = model.layers[1].self_attn.cache.k  # the same K written into the same slots
    if dtype == "float32":
        assert (got - want).abs().max().item() <= 1e-5 * want.abs().max().item()
        assert (k_got - k_want).abs().max().item() <= 1e-5 * k_want.abs().max().item()
    else:  # layer by layer, within the bounds the start-up check holds it to
        bounds = decode_layers.TOLERANCES[torch.bfloat16]
        assert decode_layers.differs(k_got.double(), k_want.double(), *bounds) is None
        with torch.inference_mode():
            streams = decode_layers.layer_streams(model, step.input_ids, step.positions, step.meta)
            assert torch.equal(model.norm(streams[-1]), want)
            for i in range(len(model.layers)):
                x = streams[i].clone()
                fused.layer(i, x, step.positions, step.meta)
                assert decode_layers.differs(x.double(), streams[i + 1].double(), *bounds) is None


@needs_compiler
@pytest.mark.parametrize("scheme", ["int8", "int4", "int4_g64"])
def test_quantized_weights_are_fused_from_one_block_and_match_the_modules(tmp_path, scheme):
    model_dir = tmp_path / "llama"
    make_hf_model(model_dir, "llama", hidden=64, heads=4, kv_heads=1, intermediate=128, layers=2)
    e = engine(tmp_path, model_dir, fused=True, quantization=scheme)
    model, fused = e.executor.model, e.executor.fused
    assert e.plan.quantization.value == scheme and e.plan.decode_layers.value == "fused"
    assert fused is not None and fused.kind == scheme and model.layout.kinds == [scheme]
    stored = [linear.weight(scheme) for linear in model.linear_layers()]
    assert len({t.untyped_storage().data_ptr() for t in stored}) == 1  # every weight a view of one block
    assert f"its {scheme} weights in one block" in e.plan.decode_layers.evidence
    assert all(t.data_ptr() % 64 == 0 for t in stored)
    chunks = [SeqChunk(list(range(3, 3 + n)), n - 1, list(range(8 * i, 8 * i + 8))) for i, n in
              enumerate((1, 17, 90, 33))]
    with torch.inference_mode():
        e.executor.run_chunks([SeqChunk(c.token_ids[:-1], 0, c.block_table) for c in chunks[1:]])
        step = build_inputs(chunks, e.plan.block_size, model.config.num_queries_per_kv, model.device)
        want = model(step.input_ids, step.positions, step.meta)  # the modules, through the quantized linear kernel
        got = fused.hidden(step.input_ids, step.positions, step.meta)
    assert decode_layers.differs(got.double(), want.double(), *decode_layers.QUANTIZED_TOLERANCE) is None
    assert [len(o.token_ids) for o in e.generate(PROMPTS, GREEDY)] == [GREEDY.max_tokens] * len(PROMPTS)
    assert e.stats()["fallbacks"]["op"] == 0


def test_only_models_it_computes_exactly_are_fused(tmp_path):
    builtin = load_builtin(torch.float32, "cpu", WeightLayout("panels", "panels"))
    assert decode_layers.cannot_fuse(builtin, 128) is None
    assert decode_layers.cannot_fuse(load_builtin(torch.bfloat16, "cpu", WeightLayout("panels", "panels")), 128) \
        is None
    assert "float32 and bfloat16 only; the model runs float16" in decode_layers.cannot_fuse(
        load_builtin(torch.float16, "cpu", WeightLayout()), 128)
    assert "reads weights stored as panels or int8 or int4 or int4_g64 or int4_g128; the layout stores in_out and " \
        "out_in" in \
        decode_layers.cannot_fuse(load_builtin(torch.float32, "cpu", WeightLayout("in_out", "out_in", 4)), 128)
    assert decode_layers.cannot_fuse(load_builtin(torch.float32, "cpu", WeightLayout("in_out", "panels", 1)), 128) \
        is None  # steps of one token read in_out through the modules, panels through the kernel
    for family, why in (("qwen3", "q/k norms"), ("gemma2", "a Gemma2Layer, not a plain pre-norm layer"),
                        ("mistral", "a sliding window of 8 < max_model_len 128")):
        e = engine(tmp_path, _family(tmp_path, family), fused=True, layouts=None)  # hidden 72: no panels
        assert e.plan.decode_layers.value == "modules"
        assert why in e.plan.decode_layers.evidence, e.plan.decode_layers.evidence


def _family(tmp_path: Path, family: str) -> Path:
    path = tmp_path / family
    make_family_model(path, family, window=8)
    return path


@needs_compiler
def test_kept_only_where_it_measured_faster(tmp_path):
    e = engine(tmp_path, None, fused=True, fused_s=0.0019)  # 95 % of the modules' time: not worth a kernel
    assert e.plan.decode_layers.value == "modules"
    assert e.plan.decode_layers.evidence.startswith("the model's modules: fused decode layers not faster on this "
                                                    "model: 1.90 ms vs 2.00 ms")
    assert e.executor.fused is None


@needs_compiler
def test_wrong_numbers_keep_it_out_of_the_plan(tmp_path, monkeypatch):
    real = decode_layers.library()

    class Wrong:  # the real kernel, then one hidden value off by 1 %
        def bringup_decode_layers(self, x, *args):  # type: ignore[no-untyped-def]
            real.bringup_decode_layers(x, *args)  # x: the address of the residual stream
            _float_at(x).mul_(1.01)

    monkeypatch.setattr(decode_layers, "library", lambda: Wrong())
    e = engine(tmp_path, None, fused=True)
    assert e.plan.decode_layers.value == "modules"
    assert "differs from the modules by" in e.plan.decode_layers.evidence
    assert e.executor.fused is None


@needs_compiler
def test_wrong_bfloat16_numbers_keep_it_out_of_the_plan(tmp_path, monkeypatch):
    real = decode_layers.library()
    hidden = load_builtin(torch.bfloat16, "meta").config.hidden_size

    class Wrong:  # the real kernel, then every residual value 1 % high: inside bfloat16's own error on the whole model
        bringup_decode_layers = real.bringup_decode_layers

        def bringup_decode_layers_bf16(self, x, batch, *args):  # type: ignore[no-untyped-def]
            real.bringup_decode_layers_bf16(x, batch, *args)
            _bf16_at(x, batch * hidden).mul_(1.01)

    monkeypatch.setattr(decode_layers, "library", lambda: Wrong())
    e = engine(tmp_path, None, fused=True, dtype="bfloat16")
    assert e.plan.decode_layers.value == "modules"
    assert "fused decode layers not used: layer 0: differs from the modules by" in e.plan.decode_layers.evidence
    assert "(at most 1e-05) on a check" in e.plan.decode_layers.evidence, e.plan.decode_layers.evidence
    assert e.executor.fused is None


def _bf16_at(address: int, n: int) -> torch.Tensor:
    """The n bfloat16 values at `address`, as a tensor sharing their memory."""
    import ctypes

    return torch.frombuffer((ctypes.c_uint16 * n).from_address(address), dtype=torch.bfloat16)


def _float_at(address: int) -> torch.Tensor:
    """The float32 at `address`, as a one-element tensor sharing its memory."""
    import ctypes

    return torch.frombuffer((ctypes.c_float * 1).from_address(address), dtype=torch.float32)


@needs_compiler
def test_a_fault_at_run_time_is_an_op_fallback_to_the_modules(tmp_path, monkeypatch, bringup_logs):
    want = tokens(engine(tmp_path, None, fused=False))
    e = engine(tmp_path, None, fused=True)
    assert e.executor.fused is not None

    def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise HostKernelInputError("injected: the decode-layers kernel refused its inputs")

    monkeypatch.setattr(e.executor.fused, "hidden", broken)
    assert tokens(e) == want
    assert e.stats()["fallbacks"]["op"] == 1 and e.executor.fused is None
    assert any("wanted fused host kernel, using the model's modules" in r.getMessage() and "injected" in
               r.getMessage() for r in bringup_logs.records)
    strict = engine(tmp_path, None, fused=True, strict=True)
    monkeypatch.setattr(strict.executor.fused, "hidden", broken)
    with pytest.raises(StrictFallbackError, match="decode layers"):
        tokens(strict)


@needs_compiler
def test_indices_outside_the_tables_are_refused_before_the_kernel_runs(tmp_path):
    e = engine(tmp_path, None, fused=True)
    model, fused = e.executor.model, e.executor.fused
    assert fused is not None
    chunk = SeqChunk([3, 4, 5], 2, [0])
    step = build_inputs([chunk], e.plan.block_size, model.config.num_queries_per_kv, model.device)
    slots = fused.slots_total
    cases = {"input_ids": (replace(step, input_ids=torch.tensor([model.config.vocab_size])), "input_ids holds"),
             "positions": (replace(step, positions=torch.tensor([10**6])), "positions holds"),
             "slot": (replace(step, meta=replace(step.meta, slot_mapping=torch.tensor([slots]))), "slot_mapping"),
             "context": (replace(step, meta=replace(step.meta, context_slots=torch.tensor([[0, 1, -5]]))),
                         "context_slots row 0 reads slot -5"),
             "dtype": (replace(step, positions=step.positions.int()), "positions is torch.int32")}
    for bad, message in cases.values():
        with pytest.raises(HostKernelInputError, match=message):
            fused.hidden(bad.input_ids, bad.positions, bad.meta)


@needs_compiler
def test_a_step_of_decodes_and_prompt_chunks_runs_in_the_kernel_as_rows_with_the_modules_logits(tmp_path):
    """Each prompt token a decode row of its own (batch_inputs.decode_rows): the kernel writes every row's K/V before
    any row attends, so the chunk's causal attention is exact; the logits, and the next step that reads the K/V the
    rows wrote, match the modules (the same step with the kernel off)."""
    model_dir = tmp_path / "llama"
    make_hf_model(model_dir, "llama", hidden=64, heads=4, kv_heads=2, intermediate=96, layers=3)
    fused, plain = engine(tmp_path, model_dir, fused=True), engine(tmp_path, model_dir, fused=False)
    gen = torch.Generator().manual_seed(0)
    tokens = [torch.randint(3, 200, (n,), generator=gen).tolist() for n in (9, 40)]
    steps = [[SeqChunk(tokens[0][:8], 0, [0])],  # the decoding sequence's prompt
             [SeqChunk(tokens[0], 8, [0]), SeqChunk(tokens[1][:20], 0, [1, 2])],  # a decode and a first chunk
             [SeqChunk(tokens[0] + [7], 9, [0]), SeqChunk(tokens[1][:32], 20, [1, 2])],  # a chunk at context 20
             [SeqChunk(tokens[1][:33], 32, [1, 2, 3])]]  # a decode reading the chunks' K/V
    calls = []
    kernel = fused.executor.fused
    assert kernel is not None
    original = kernel.hidden
    kernel.hidden = lambda ids, *rest: calls.append(ids.shape[0]) or original(ids, *rest)
    for step in steps:
        got, want = fused.executor.run_chunks(step), plain.executor.run_chunks(step)
        assert (got - want).abs().max().item() <= 1e-4 * want.abs().max().item()
    assert calls == [1 + 20, 1 + 12, 1]  # the two mixed steps ran as rows in the kernel
    assert fused.stats()["fallbacks"]["op"] == 0
