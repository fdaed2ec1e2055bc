"""Issue 35, item 5: a requested int8 / int4 scheme in a bfloat16 plan is served with float32 activations (the
kernel's own, which the fused decode layers and the paged decode kernel read), or the plan says why not; its decode
steps are compared with the unquantized plan's, and a slower quantized plan is said at WARNING; `auto` keeps no scheme
measured slower than the plain path. Every timing here is given as data: no test asserts which path this machine
runs faster."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from bringup.profiles.attention_kinds import PAGED_DECODE
from bringup.profiles.store import load_profile
from bringup.runner.engine import quantized_activations
from bringup.runner.engine.auto_quantization import measure as auto_measure
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.engine.quantized_activations import float_bytes, one_sequence_bytes, time_against_unquantized
from bringup.runner.host.decode_layers import cannot_fuse
from bringup.runner.plan.plan import FUSED, Choice, build_plan
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.plan.quantize.activations import Comparison, compared, room_why_not
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.sources.model_source import model_source
from bringup.runner.weights.kernels import quantized as quantized_kernel
from bringup.runner.weights.kinds import INT8
from tests.cli.run_cli import run_cli
from tests.runner.host_compiler import needs_compiler
from tests.runner.quantized_parity import tiny_quantizable_model
from tests.runner.stated import stated

PROMPT = [0, 5, 9, 33, 80, 7, 120, 64, 12]
ROW = Choice(INT8, "requested; int8 weights")
# per decode step, as data: the quantized plan, the unquantized one
SLOWER, FASTER, CLOSE = (0.030, 0.020), (0.010, 0.020), (0.019, 0.020)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return tiny_quantizable_model(tmp_path_factory, "tiny-llama")


def start(model: Path, work: Path, dtype: str, quantization: str = INT8, free_bytes: int | None = 16 * 2**30,
          unquantized: Comparison | None = None, paged: bool = True) -> LLMEngine:
    """The engine with its start-up measurements stated: the paged decode kernel (`paged`: as for a float32 model)
    and the fused layers to be used where they can run, nothing timed; --strict (float32 activations are a plan
    choice, not a fallback)."""
    given = replace(stated(paged_decode=(paged, "given as data"), free_bytes=free_bytes), fused_decode=True,
                    unquantized=unquantized)
    return LLMEngine.create(EngineOptions(model_dir=model, device="cpu", profile_path=work / "p.yaml",
                                          max_model_len=128, max_num_seqs=1, measurements=given, dtype=dtype,
                                          quantization=quantization, strict=True))


def rows(engine: LLMEngine) -> dict[str, tuple[str, str]]:
    return {name: (value, evidence) for name, value, evidence in engine.plan.rows()}


def greedy(engine: LLMEngine) -> list[int]:
    params = SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True)
    return engine.generate([PROMPT], params)[0].token_ids


@pytest.fixture(scope="module")
def engines(tiny, tmp_path_factory) -> dict[str, LLMEngine]:
    work = tmp_path_factory.mktemp("plans")
    return {dtype: start(tiny, work, dtype) for dtype in ("bfloat16", "float32")}


@needs_compiler
def test_a_bfloat16_int8_plan_serves_float32_activations_and_says_why_and_what_it_costs(engines):
    plan = rows(engines["bfloat16"])
    value, evidence = plan["dtype"]
    assert value == "float32"
    assert evidence.startswith("float32 activations for the int8 products instead of bfloat16: the quantized "
                               "products take float32 activations")
    assert "the fused decode layers and the paged decode kernel read float32 only" in evidence
    # 2 layers x 2 KV heads x 16 dims x K and V: 256 B per token in bfloat16, 512 B in float32
    assert "the KV cache holds float32 (512 B per token instead of 256 B)" in evidence
    assert "bfloat16 as planned: requested with --dtype" in evidence
    assert "blocks of 8192 B" in plan["kv_blocks"][1]  # 16 tokens x 512 B: the cache is sized in float32
    model = engines["bfloat16"].executor.model
    assert model.dtype == torch.float32 and model.layout.kinds == [INT8] and model.k_caches[0].dtype == torch.float32
    assert plan["quantization"][0] == INT8
    assert "against the unquantized plan: not measured (timings given as data)" in plan["quantization"][1]


@needs_compiler
def test_the_fused_layers_and_paged_decode_serve_it_and_its_tokens_are_the_float32_int8_engines(engines):
    ours, theirs = engines["bfloat16"], engines["float32"]
    assert cannot_fuse(ours.executor.model, 128) is None
    assert rows(ours)["decode_layers"][0] == FUSED and ours.executor.fused is not None
    assert ours.plan.attention.value[0] == PAGED_DECODE
    for name in ("dtype", "quantization"):
        assert rows(ours)[name][0] == rows(theirs)[name][0]
    assert greedy(ours) == greedy(theirs)  # the same weights, the same float32 arithmetic


@needs_compiler
def test_the_comparison_times_the_served_plan_against_the_model_loaded_plain_in_the_requested_dtype(engines, tiny):
    comparison, why = time_against_unquantized(engines["bfloat16"].executor, model_source(tiny), "bfloat16")
    assert why is None and comparison.quantized_s > 0 and comparison.unquantized_s > 0
    assert comparison.unquantized in ("bfloat16 (F.linear, the modules)", "bfloat16 (fused decode layers on panels)")
    assert "the fastest of F.linear, the modules, fused decode layers on panels" in comparison.how
    assert greedy(engines["bfloat16"]) == greedy(engines["float32"])  # the served engine is left as it was


@needs_compiler
def test_with_no_room_for_an_unquantized_copy_the_comparison_says_why(engines, tiny, monkeypatch):
    class Small:
        def memory(self, index: int) -> tuple[int, int]:
            return 2**30, 2**10

    monkeypatch.setattr(quantized_activations, "backend_for", lambda device: Small())
    comparison, why = time_against_unquantized(engines["float32"].executor, model_source(tiny), "bfloat16")
    assert comparison is None
    assert why.startswith("no room for an unquantized bfloat16 copy of the model: 3 x ") and why.endswith(
        "MiB wanted, 0 MiB free")


@needs_compiler
def test_with_no_memory_for_float32_the_requested_dtype_stays_and_the_plan_says_why(tiny, tmp_path):
    config = model_source(tiny).config()
    draft = build_plan(ProfileFacts(None), "none", "cpu", config, 1, 128)
    float32_need = float_bytes(config, torch.float32) + one_sequence_bytes(config, draft, torch.float32) / 0.9
    engine = start(tiny, tmp_path, "bfloat16", free_bytes=int(float32_need) - 1, paged=False)  # bfloat16 fits
    plan = rows(engine)
    value, evidence = plan["dtype"]
    assert value == "bfloat16" and engine.executor.model.dtype == torch.bfloat16
    assert "float32 activations for the int8 products not used: float32 needs about" in evidence
    assert "the weights as float32" in evidence and "is free" in evidence
    assert "each int8 product widens its bfloat16 input and rounds the result back" in evidence
    value, evidence = plan["decode_layers"]
    assert value == "modules" and "int8 weights with float32 activations only; the model runs bfloat16" in evidence


def test_with_the_dequantize_fallback_the_requested_dtype_stays_and_the_plan_says_why(tiny, tmp_path, monkeypatch):
    monkeypatch.setattr(quantized_kernel, "check", lambda device, scheme: "fails its check here (stated)")
    engine = LLMEngine.create(EngineOptions(model_dir=tiny, device="cpu", profile_path=tmp_path / "p.yaml",
                                            max_model_len=128, max_num_seqs=1, measurements=stated(),
                                            dtype="bfloat16", quantization=INT8))
    value, evidence = rows(engine)["dtype"]
    assert value == "bfloat16"
    assert "float32 activations for the int8 products not used: the int8 products run as dequantize + F.linear " \
           "here (the kernel fails its check here (stated)), which the fused decode layers do not read" in evidence
    assert engine.executor.model.layout.kinds == ["int8_dequant"]


@needs_compiler
def test_a_quantized_plan_measured_slower_than_the_unquantized_one_is_served_and_said_at_warning(
        tiny, tmp_path, bringup_logs):
    stated_slower = Comparison(*SLOWER, 0.02, "bfloat16 (fused decode layers on panels)")
    engine = start(tiny, tmp_path, "bfloat16", unquantized=stated_slower)
    value, evidence = rows(engine)["quantization"]
    assert value == INT8 and engine.executor.model.layout.kinds == [INT8]
    assert "SLOWER than the unquantized plan beyond the noise (spread 2%): int8 (float32 activations) 30.00 ms vs " \
           "unquantized bfloat16 (fused decode layers on panels) 20.00 ms per decode step" in evidence
    warning = next(w for w in engine.plan.warnings if w.startswith("--quantization int8 measured slower"))
    assert "served as requested" in warning and "--quantization none would decode faster" in warning
    assert any(r.levelno == logging.WARNING and r.getMessage() == warning for r in bringup_logs.records)


@pytest.mark.parametrize(("seconds", "verdict", "warns"), [
    (SLOWER, "SLOWER than the unquantized plan beyond the noise (spread 5%)", True),
    (FASTER, "faster than the unquantized plan", False),
    (CLOSE, "not faster than the unquantized plan (under 90% of its time, beyond the spread 5%)", False),
])
def test_the_row_records_both_step_times_and_warns_only_when_slower_beyond_the_noise(seconds, verdict, warns):
    comparison = Comparison(*seconds, 0.05, "bfloat16 (F.linear, the modules)", "fastest of 4 rounds")
    row, warning = compared(ROW, comparison, None, "float32")
    times = f"int8 (float32 activations) {seconds[0] * 1e3:.2f} ms vs unquantized bfloat16 (F.linear, the modules) " \
            f"{seconds[1] * 1e3:.2f} ms per decode step (fastest of 4 rounds)"
    assert row.value == INT8 and row.evidence == f"requested; int8 weights; against the unquantized plan on this " \
                                                 f"model: {verdict}: {times}"
    assert (warning is not None) == warns


def test_a_slower_verdict_within_the_noise_is_no_warning_and_a_busy_machine_is_named():
    within = Comparison(0.022, 0.020, 0.15, "bfloat16 (F.linear, the modules)")  # 10 % slower, 15 % noise
    row, warning = compared(ROW, within, None, "float32")
    assert warning is None and "not faster than the unquantized plan" in row.evidence
    busy = Comparison(*SLOWER, 0.0, "bfloat16 (F.linear, the modules)", cpu_share=0.5)
    row, warning = compared(ROW, busy, None, "bfloat16")
    assert "on a busy machine: the timed threads had 50% of the CPU" in row.evidence and "50% of the CPU" in warning
    row, warning = compared(ROW, None, "the plan recorded by tune is replayed, timing nothing", "float32")
    assert warning is None and row.evidence.endswith("against the unquantized plan: not measured (the plan recorded "
                                                     "by tune is replayed, timing nothing)")


def test_float32_room_counts_the_float32_weights_and_one_full_sequence():
    assert room_why_not(None, 10 * 2**20, 2**20, 128) is None  # free memory unknown: no limit
    assert room_why_not(12 * 2**20, 10 * 2**20, 2**20, 128) is None
    why = room_why_not(11 * 2**20, 10 * 2**20, 2**20, 128)
    assert why == ("float32 needs about 11.1 MiB: the weights as float32 (10.0 MiB) and one 128-token sequence's "
                   "float32 KV cache and largest step (1.0 MiB in 0.9 of what is left), and 11.0 MiB is free")


@needs_compiler
@pytest.mark.parametrize(("seconds", "kept"), [(SLOWER, False), (CLOSE, False), (FASTER, True)])
def test_auto_on_a_bfloat16_plan_never_keeps_a_scheme_measured_slower_than_the_plain_path(
        tiny, tmp_path, monkeypatch, seconds, kept):
    """auto times each candidate against the plain path on the same bfloat16 model (here: the stated seconds); the
    KL divergence budget is lifted so that only the timing decides."""
    monkeypatch.setattr(auto_measure, "alternated", lambda step, use: seconds)
    monkeypatch.setattr(auto_measure, "KLD_BUDGET", float("inf"))
    engine = LLMEngine.create(EngineOptions(model_dir=tiny, device="cpu", profile_path=tmp_path / "p.yaml",
                                            max_model_len=128, max_num_seqs=1, measurements=stated(),
                                            dtype="bfloat16", quantization="auto"))
    choice = engine.plan.quantization
    assert "int8: KLD " in choice.evidence
    assert f"decode step {seconds[0] * 1e3:.2f} ms vs {seconds[1] * 1e3:.2f} ms unquantized" in choice.evidence
    assert (choice.value != "none") == kept
    assert engine.plan.dtype.value == "bfloat16"  # auto's schemes are timed in the plan dtype, as they serve
    if not kept:
        assert "auto: no scheme had every piece of evidence" in choice.evidence
        assert "(not under 90%)" in choice.evidence


@needs_compiler
@pytest.mark.parametrize(("unquantized", "kept"), [(SLOWER, False), (CLOSE, False), (FASTER, True)])
def test_auto_withdraws_a_scheme_that_does_not_beat_the_unquantized_plan_once_confirmed(
        tiny, tmp_path, monkeypatch, unquantized, kept):
    """auto's timing ran against the modules before the fused decode layers were chosen (here: int8 faster); the
    confirmed plan against the unquantized plan (stated) decides whether it stays."""
    monkeypatch.setattr(auto_measure, "alternated", lambda step, use: FASTER)
    monkeypatch.setattr(auto_measure, "KLD_BUDGET", float("inf"))
    given = replace(stated(), unquantized=Comparison(*unquantized, 0.0, "bfloat16 (fused decode layers on panels)"))
    engine = LLMEngine.create(EngineOptions(model_dir=tiny, device="cpu", profile_path=tmp_path / "p.yaml",
                                            max_model_len=128, max_num_seqs=1, measurements=given,
                                            dtype="bfloat16", quantization="auto"))
    choice, kinds = engine.plan.quantization, engine.executor.model.layout.kinds
    verdict = f"{unquantized[0] * 1e3:.2f} ms vs unquantized bfloat16 (fused decode layers on panels) " \
              f"{unquantized[1] * 1e3:.2f} ms per decode step"
    assert verdict in choice.evidence
    if kept:
        assert choice.value == INT8 and kinds == [INT8]
    else:
        assert choice.value == "none" and INT8 not in kinds
        assert choice.evidence.startswith("auto: int8 withdrawn, not faster than the unquantized plan once the plan "
                                          "was confirmed (auto had timed it against the modules only); auto: ")
        assert engine.plan.weight_layout.value != INT8


@pytest.mark.slow
@needs_compiler
def test_a_tune_record_of_the_bfloat16_int8_plan_is_keyed_float32_and_replayed(tiny, tmp_path):
    """tune records the plan it served (float32 activations), and a later start with the same flags finds it."""
    profile, flags = tmp_path / "p.yaml", ["--dtype", "bfloat16", "--quantization", "int8", "--max-model-len", "128"]
    tuned = run_cli(["tune", "--model", str(tiny), "--device", "cpu", "--profile", str(profile), "--runs", "2",
                     "--replace", *flags])
    assert tuned.code == 0, tuned.stderr
    (record,) = load_profile(profile).models.values()
    assert (record.dtype, record.quantization) == ("float32", INT8)
    started = run_cli(["generate", "Hi", "--model", str(tiny), "--device", "cpu", "--profile", str(profile),
                       "--max-tokens", "2", "--json", "-v", *flags])
    assert started.code == 0, started.stderr
    assert "replayed, no timing" in " ".join(started.stderr.split())
    plan = json.loads(started.stdout)["plan"]
    assert plan["dtype"]["value"] == "float32"
    assert plan["quantization"]["evidence"].endswith("against the unquantized plan: not measured (the plan recorded "
                                                     "by tune is replayed, timing nothing)")
