"""Execution plan from a profile, and fallbacks under real faults (no mocks)."""

from __future__ import annotations

import pytest
import torch

from bringup.backends.registry import device_info
from bringup.errors import BringupError, StrictFallbackError
from bringup.profiles.schema import Capabilities, Capability
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord
from bringup.profiles.store import update_profile
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.sampling_params import SamplingParams
from tests.runner.stated import layout_times, stated

GREEDY = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)


def _ok(evidence: str = "executed check") -> Capability:
    return Capability(status="supported", evidence=evidence)


def _op(op: str, dtype: str, status: str = "pass") -> OpCaseRecord:
    return OpCaseRecord(op=op, dtype=dtype, case="case", status=status)


def write_profile(path, capabilities: Capabilities, ops=(), compiled=(), info=None):
    def mutate(p):
        p.capabilities, p.ops, p.compiled = capabilities, list(ops), list(compiled)

    update_profile(path, info or device_info("cpu"), mutate, stage="probe", status="complete", force=True)
    return path


def engine(path, **kw) -> LLMEngine:
    """The built-in model planned from `path` and start-up measurements stated as data (stated() unless given)."""
    options = {"measurements": stated(), "max_model_len": 64, "max_num_seqs": 2, **kw}
    return LLMEngine.create(EngineOptions(device="cpu", profile_path=path, **options))


def test_no_profile_is_conservative_and_says_so(tmp_path, bringup_logs):
    e = engine(tmp_path / "missing.yaml")
    assert (e.plan.dtype.value, e.plan.compiled.value) == ("float32", None)
    attention, evidence = e.plan.attention.value, e.plan.attention.evidence
    assert attention == ["matmul_softmax"] and "paged_decode not used: not measured: given as data" in evidence
    assert any("no usable profile" in r.getMessage() for r in bringup_logs.records)
    assert e.plan.to_dict()["weight_layout"]["evidence"]


def test_a_paged_decode_kernel_measured_faster_leads_the_attention_list(tmp_path):
    e = engine(tmp_path / "missing.yaml", measurements=stated(paged_decode=(True, "stated 2x faster")))
    assert e.plan.attention.value == ["paged_decode", "matmul_softmax"]
    assert e.plan.attention.evidence.startswith("paged_decode for decode steps: stated 2x faster")


def test_kv_cache_is_sized_from_the_free_memory_measured_at_start_up(tmp_path):
    from bringup.runner.model.kv_cache import bytes_per_block
    from bringup.runner.plan.kv_sizing import MEMORY_FRACTION, activation_estimate

    roomy = engine(tmp_path / "missing.yaml", max_model_len=1024, max_num_seqs=16)
    assert roomy.plan.kv_blocks.value == 16 * 1024 // 16  # everything that can ever be used
    config, weights = roomy.executor.model.config, roomy.executor.model.weight_bytes()
    per_block = bytes_per_block(config, 16, torch.float32)
    activations = activation_estimate(config, roomy.plan.max_num_batched_tokens.value, 1024, torch.float32)
    room_for_200 = weights + int((activations + 200.5 * per_block) / MEMORY_FRACTION)
    tight = engine(tmp_path / "missing.yaml", max_model_len=1024, max_num_seqs=16,
                   measurements=stated(free_bytes=room_for_200))
    assert tight.plan.kv_blocks.value == 200 and "memory: 0.9 × " in tight.plan.kv_blocks.evidence
    with pytest.raises(BringupError, match=r"a 1024-token context does not fit in device memory: .* at most \d+ "
                                           r"tokens fit: pass --max-model-len \d+ or less"):
        engine(tmp_path / "missing.yaml", max_model_len=1024, max_num_seqs=16,
               measurements=stated(free_bytes=weights + activations))


def test_profile_of_another_device_is_not_used(tmp_path, bringup_logs):
    other = device_info("cpu").model_copy(update={"name": "Some Other Accelerator", "backend": "cuda", "id": "cuda:0"})
    path = write_profile(tmp_path / "other.yaml", Capabilities(dtypes={"bfloat16": _ok()}), info=other)
    e = engine(path)
    assert e.plan.dtype.value == "float32" and "recorded for cuda:0" in e.plan.warnings[0]


def test_low_precision_only_when_supported_and_ops_pass(tmp_path):
    caps = Capabilities(dtypes={"bfloat16": _ok()}, attention={"sdpa_math": _ok()})
    good = [_op("matmul", "bfloat16"), _op("softmax", "bfloat16")]
    e = engine(write_profile(tmp_path / "good.yaml", caps, good), weight_layout="out_in")  # skip bf16 timing
    assert e.plan.dtype.value == "bfloat16" and e.plan.attention.value == ["sdpa_math", "matmul_softmax"]
    assert e.executor.model.embed.dtype == torch.bfloat16
    unused = [*good, _op("_scaled_mm", "bfloat16", "unsupported")]  # an op the runner never calls
    assert engine(write_profile(tmp_path / "unused.yaml", caps, unused), weight_layout="out_in"
                  ).plan.dtype.value == "bfloat16"
    bad = engine(write_profile(tmp_path / "bad.yaml", caps, [*good, _op("rms_norm", "bfloat16", "fail")]))
    assert bad.plan.dtype.value == "float32" and "failed" in bad.plan.dtype.evidence


def test_attention_op_fallback_on_a_real_runtime_fault(tmp_path, bringup_logs):
    # the CPU has no memory-efficient SDPA kernel: a profile claiming it makes it raise at run time
    caps = Capabilities(attention={"sdpa_efficient": _ok("wrongly claimed"), "sdpa_math": _ok()})
    path = write_profile(tmp_path / "p.yaml", caps)
    e = engine(path)
    assert e.plan.attention.value[:2] == ["sdpa_efficient", "sdpa_math"]
    assert e.stats()["fallbacks"]["op"] == 1 and e.executor.attention.current == "sdpa_math"
    assert any("fallback[op] attention: wanted sdpa_efficient, using sdpa_math" in r.getMessage()
               for r in bringup_logs.records)
    plain = engine(tmp_path / "none.yaml")
    prompt = e.tokenizer.encode("fallback")
    assert e.generate([prompt], GREEDY)[0].token_ids == plain.generate([prompt], GREEDY)[0].token_ids
    with pytest.raises(StrictFallbackError, match="sdpa_efficient"):
        engine(path, strict=True)


def test_every_attention_path_failed_is_a_clear_error(tmp_path):
    caps = Capabilities(attention={n: Capability(status="unsupported", reason="probe failed")
                                   for n in ("sdpa_flash", "sdpa_efficient", "sdpa_math")})
    path = write_profile(tmp_path / "p.yaml", caps, [_op("softmax", "float32", "fail")])
    with pytest.raises(BringupError, match=r"every attention path failed.*must pass"):
        engine(path)


def test_compiled_path_falls_back_to_eager_when_compile_fails(tmp_path):
    from torch._dynamo import register_backend

    @register_backend(name="bringup_test_broken")
    def broken(gm, example_inputs):  # a compiler backend that really fails
        raise RuntimeError("injected compiler failure")

    caps = Capabilities(compile={"bringup_test_broken": _ok()})
    compiled = [CompiledRecord(target="decoder_block", dtype="float32", backend="bringup_test_broken",
                               status="pass", speedup=1.5)]
    path = write_profile(tmp_path / "p.yaml", caps, compiled=compiled)
    e = engine(path)
    assert e.plan.compiled.value == "bringup_test_broken"
    assert e.stats()["fallbacks"]["path"] == 1 and e.executor.compiled is None
    assert e.generate([[5, 6, 7]], GREEDY)[0].finish_reason == "length"
    with pytest.raises(StrictFallbackError, match=r"torch\.compile"):
        engine(path, strict=True)


def test_a_compiled_forward_out_of_graphs_is_a_path_fallback_not_a_silent_eager_run(tmp_path, monkeypatch,
                                                                                  bringup_logs):
    from bringup.runner.engine import executor as executor_module

    caps = Capabilities(compile={"eager": _ok()})  # dynamo's tracing backend: real graphs, no code generation
    compiled = [CompiledRecord(target="decoder_block", dtype="float32", backend="eager", status="pass", speedup=1.5)]
    path = write_profile(tmp_path / "p.yaml", caps, compiled=compiled)
    plain = engine(tmp_path / "none.yaml").generate([[5, 6, 7], [8, 9]], GREEDY)
    monkeypatch.setattr(executor_module, "RECOMPILE_LIMIT", 1)  # decode shapes need more graphs than this
    e = engine(path)
    assert e.plan.compiled.value == "eager" and e.executor.compiled is None
    assert e.stats()["fallbacks"]["path"] == 1
    warning = next(r for r in bringup_logs.records if "torch.compile(eager)" in r.getMessage())
    assert warning.levelname == "WARNING" and "recompile" in warning.getMessage().lower()
    assert [o.token_ids for o in e.generate([[5, 6, 7], [8, 9]], GREEDY)] == [o.token_ids for o in plain]
    with pytest.raises(StrictFallbackError, match=r"torch\.compile"):
        engine(path, strict=True)


def test_attention_capability_counts_only_for_the_dtypes_it_passed(tmp_path):
    per_dtype = {"dtypes": {"float32": "fail: error 0.3 > tolerance 1e-05", "bfloat16": "pass"}}
    caps = Capabilities(attention={"sdpa_math": Capability(status="supported", evidence="probe", details=per_dtype),
                                   "sdpa_flash": _ok()})
    e = engine(write_profile(tmp_path / "p.yaml", caps))
    assert e.plan.attention.value == ["sdpa_flash", "matmul_softmax"]
    assert "sdpa_math unsupported" in e.plan.attention.evidence


def _bench(matmul_records: list[dict], tflops: dict[str, float]):
    from bringup.profiles.sections.bench import BenchGroup, BenchRecord, BenchSection, MeasuredCeilings

    return BenchSection(groups={"matmul": BenchGroup(records=[BenchRecord(**r) for r in matmul_records])},
                        ceilings=MeasuredCeilings(tflops=tflops))


def test_bench_numbers_decide_layout_and_dtype(tmp_path):
    caps = Capabilities(dtypes={"bfloat16": _ok()})
    ops = [_op("matmul", "bfloat16"), _op("softmax", "bfloat16")]
    linear_2x_faster = {"key": "k", "name": "linear", "dtype": "float32", "speedup": 2.0}
    path = write_profile(tmp_path / "p.yaml", caps, ops)

    def add_bench(p):
        p.bench = _bench([linear_2x_faster], {"float32": 2.0, "bfloat16": 1.0})

    update_profile(path, device_info("cpu"), add_bench, stage="bench", status="complete")
    e = engine(path, measurements=stated(layout_times(in_out=1.0, out_in=1.5)))  # start-up favours x @ W
    assert e.plan.dtype.value == "float32" and "not faster than float32" in e.plan.dtype.evidence
    small, evidence = e.executor.model.layout.small, e.plan.weight_layout.evidence
    assert "1 row from bench: 2.00" in evidence and "plain winner at 1 row: out_in" in evidence
    assert small == "out_in"  # bench's side-by-side one-row figure outranks the start-up timing


def test_all_planned_attention_failing_at_run_time_is_one_clear_error(tmp_path):
    caps = Capabilities(attention={"sdpa_efficient": _ok("wrongly claimed")})  # the CPU has no such kernel
    path = write_profile(tmp_path / "p.yaml", caps, [_op("softmax", "float32", "fail")])
    with pytest.raises(BringupError, match="every planned attention implementation failed at run time"):
        engine(path)


SCORED = SamplingParams(max_tokens=1, temperature=0.0, ignore_eos=True, prompt_logprobs=3)


def _scored(e: LLMEngine, prompts: list[list[int]]) -> list[tuple[list[int], list[float]]]:
    """Each prompt's first token, and its tokens' logprobs and their top 3 alternatives' (a scoring prompt never reads
    the prefix cache: each run computes it from scratch)."""
    return [(out.token_ids, [lp for p in out.prompt_logprobs[1:] for lp in (p.logprob, *(x for _, x in p.top))])
            for out in e.generate(prompts, SCORED)]


def test_a_fresh_prompt_attends_causally_with_no_mask_and_scores_as_with_the_mask(tmp_path):
    caps = Capabilities(attention={"sdpa_flash": _ok(), "sdpa_math": _ok()})
    e = engine(write_profile(tmp_path / "p.yaml", caps), max_model_len=128, max_num_seqs=4)
    assert e.executor.attention.current == "sdpa_flash"
    model, lengths = e.executor.model, []
    causal = model.causal_attend

    def counted(q, k, v, scale):  # type: ignore[no-untyped-def]
        lengths.append(q.shape[2])
        return causal(q, k, v, scale)

    prompts = [e.tokenizer.encode("a prompt of a few words, in a batch"), e.tokenizer.encode("and a shorter one")]
    model.causal_attend = counted
    unmasked = _scored(e, prompts)
    layers = len(model.layers)
    assert sorted(set(lengths)) == sorted(len(p) for p in prompts) and len(lengths) == 2 * layers
    model.causal_attend = None
    masked = _scored(e, prompts)
    for (tokens, scores), (masked_tokens, masked_scores) in zip(unmasked, masked, strict=True):
        assert tokens == masked_tokens
        assert scores == pytest.approx(masked_scores, abs=1e-4)
    assert e.stats()["fallbacks"]["op"] == 0


def test_is_causal_failing_on_its_backend_falls_back_to_the_mask_and_says_so(tmp_path, bringup_logs):
    caps = Capabilities(attention={"sdpa_flash": _ok()})
    e = engine(write_profile(tmp_path / "p.yaml", caps), max_model_len=128)
    prompt = [e.tokenizer.encode("a prompt to score")]
    expected = _scored(e, prompt)
    model = e.executor.model

    def refuses(q, k, v, scale):  # type: ignore[no-untyped-def]
        return torch.nn.functional.scaled_dot_product_attention(q, k[..., :-1], v, is_causal=True, scale=scale)

    model.causal_attend = e.executor.attention.causal
    torch_causal, attention_module = attention_module_causal()
    attention_module._sdpa_causal = lambda backend, q, k, v, scale: refuses(q, k, v, scale)
    try:
        got = _scored(e, prompt)
    finally:
        attention_module._sdpa_causal = torch_causal
    assert got[0][0] == expected[0][0] and got[0][1] == pytest.approx(expected[0][1], abs=1e-4)
    assert e.stats()["fallbacks"]["op"] == 1 and "sdpa_flash" in e.executor.attention.causal_refused
    assert any("wanted sdpa_flash is_causal, using sdpa_flash with a causal mask" in r.getMessage()
               for r in bringup_logs.records)


def attention_module_causal():  # type: ignore[no-untyped-def]
    from bringup.runner.model import attention

    return attention._sdpa_causal, attention
