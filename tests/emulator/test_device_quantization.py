"""Quantized inference on the emulated accelerator through the kernels the probe verified there (issue 53).

The probe writes emu:1's quantized records under a spec; the runner then serves, or refuses, by them: int8 through
`_weight_int8pack_mm` (native in the default spec) with the plan row naming the kernel and the record; int4 and fp8
(not native there: their cases pass only through the host's CPU fallback) refused in one line quoting the record;
fp8 served through `_scaled_mm` (per-row scales, where the row-wise record passes too) where a spec makes it native;
int4 served through `_weight_int4pack_mm_for_cpu` where a spec makes the int4 kernels native, GGUF Q4_1 / Q4_0 blocks
mapped onto its form without rounding the codes again; and a kernel that computes 1 % off, under a profile recorded
before it went wrong, refused by the start-up check (int8: outside the rounding bound; int4: its codes do not read
back)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from bringup_emu.default_spec import DEFAULT_NATIVE
from tests.emulator.emu_cli import run_bringup
from tests.emulator.emu_process import emu_results
from tests.runner.gguf_files import T, write_gguf
from tests.runner.hf_fixtures import make_hf_model

CHECKS = ("features.int8_weight_only_matmul,features.int4_weight_only_matmul,features.fp8_scaled_mm,"
          "features.fp8_scaled_mm_rowwise")
DEVICES = [{"name": "Emu iGPU", "integrated": True, "memory": "512MiB"}, {"name": "Emu dGPU", "memory": "8GiB"}]
FP8_NATIVE = {"devices": DEVICES, "native": [*DEFAULT_NATIVE, "_scaled_mm", "abs", "amax", "clamp"]}
INT4_NATIVE = {"devices": DEVICES, "native": [*DEFAULT_NATIVE, "_convert_weight_to_int4pack_for_cpu",
                                              "_weight_int4pack_mm_for_cpu"]}
WRONG_INT4 = {**INT4_NATIVE, "wrong": {"_weight_int4pack_mm_for_cpu": 1.01}}
WRONG_INT8 = {"devices": DEVICES, "native": list(DEFAULT_NATIVE), "wrong": {"_weight_int8pack_mm": 1.01}}

BODY = """
from pathlib import Path
from typer.testing import CliRunner
from bringup.cli.app import app
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.sampling_params import SamplingParams
from tests.runner.stated import stated

def cli(*args):
    done = CliRunner().invoke(app, [str(a) for a in args])
    return done.exit_code, done.output

if PROBE:
    code, out = cli("probe", "--device", "emu:1", "--profile", PROFILE, "--only", CHECKS, "--no-isolate")
    assert code == 0, out

def served(device, quantization, model=MODEL):
    e = LLMEngine.create(EngineOptions(model_dir=Path(model), device=device, profile_path=Path(PROFILE),
                                       max_model_len=64, max_num_seqs=1, measurements=stated(),
                                       quantization=quantization))
    bringup_emu.reset_fallback_counts()
    tokens = e.generate([[0, 5, 9, 33, 80]], SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True))
    rows = {name: [value, evidence] for name, value, evidence in e.plan.rows()}
    return dict(tokens=tokens[0].token_ids, quantization=rows["quantization"], layout=rows["weight_layout"],
                fallbacks=bringup_emu.fallback_counts(), native=bringup_emu.native_counts(),
                recorded=[event.what for event in e.executor.recorder.events])

results = {q: served("emu:1", q) for q in SERVE}
for name, path in GGUF.items():
    results[name] = served("emu:1", name.split()[-1], path)
report(results=results)
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("devquant") / "m"
    make_hf_model(path, hidden=64, intermediate=128, layers=2, vocab=320)
    return path


def _run(model: Path, profile: Path, spec: dict | str, serve: list[str], refuse: list[str], probe: bool = True,
         gguf: dict[str, str] | None = None) -> dict:
    """The probe's records (unless `probe` is False), the engine serving each of `serve`, and `bringup generate`'s
    answer to each of `refuse`, all under `spec`."""
    head = (f"MODEL = {str(model)!r}\nPROFILE = {str(profile)!r}\nCHECKS = {CHECKS!r}\nPROBE = {probe}\n"
            f"SERVE = {serve!r}\nGGUF = {gguf or {}!r}\n")
    seen = emu_results(head + BODY, spec)
    seen["refusals"] = {q: run_bringup(["generate", "hi", "--model", str(model), "--device", "emu:1", "--profile",
                                        str(profile), "--quantization", q, "--max-tokens", "2"], spec,
                                       profile.parent) for q in refuse}
    return seen


def _one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


@pytest.fixture(scope="module")
def default_spec(tiny, tmp_path_factory) -> tuple[dict, Path]:
    profile = tmp_path_factory.mktemp("devquant-profile") / "emu1.yaml"
    hf = make_hf_model(profile.parent / "hf", "llama", tied=True)
    q8_0 = write_gguf(profile.parent / "q8_0.gguf", hf, profile.parent / "hf", "llama",
                      lambda name, tensor: T.F32 if tensor.dim() == 1 else T.Q8_0)
    return _run(tiny, profile, "default", ["int8", "auto"], ["int4", "fp8"], gguf={"gguf int8": str(q8_0)}), profile


def test_int8_serves_through_weight_int8pack_mm_on_the_device_naming_kernel_and_record(default_spec):
    seen = default_spec[0]["results"]["int8"]
    value, evidence = seen["quantization"]
    assert value == "int8" and seen["layout"][0] == "int8_pack"
    assert "served by torch's _weight_int8pack_mm (int8_pack weights)" in evidence
    assert "capabilities.features.int8_weight_only_matmul is supported (_weight_int8pack_mm[float32]" in evidence
    assert "matched their float64 reference on a check here at float32" in evidence
    assert seen["native"].get("aten::_weight_int8pack_mm", 0) > 0  # every linear layer, every step, on the device
    assert not any("int8pack" in op for op in seen["fallbacks"]), seen["fallbacks"]
    assert len(seen["tokens"]) == 12


def test_int4_and_fp8_not_native_are_refused_in_one_line_quoting_the_probe_record(default_spec):
    refusals = default_spec[0]["refusals"]
    int4, fp8 = _one_line(refusals["int4"]), _one_line(refusals["fp8"])
    assert int4.startswith("error: --quantization int4 on emu:1: capabilities.features.int4_weight_only_matmul is "
                           "unsupported (_weight_int4pack_mm_for_cpu[float32]"), int4
    assert "passed through the host, not on the device" in int4 and int4.endswith("(or auto)")
    assert fp8.startswith("error: --quantization fp8 on emu:1: capabilities.features.fp8_scaled_mm is unsupported "
                          "(_scaled_mm[float8_e4m3fn]"), fp8
    assert "aten::_scaled_mm copied arguments to the host" in fp8
    rowwise = yaml.safe_load(default_spec[1].read_text())["capabilities"]["features"]["fp8_scaled_mm_rowwise"]
    assert rowwise["status"] == "unsupported" and "passed through the host, not on the device" in rowwise["reason"]
    assert "scales=per row/column" in rowwise["reason"]


def test_fp8_serves_through_scaled_mm_with_per_row_scales_where_the_spec_makes_it_native(tiny, tmp_path):
    seen = _run(tiny, tmp_path / "emu1.yaml", FP8_NATIVE, ["fp8"], [])["results"]["fp8"]
    value, evidence = seen["quantization"]
    assert value == "fp8" and seen["layout"][0] == "fp8_scaled_mm_rowwise"
    assert "activations quantized to float8_e4m3fn per row (token)" in evidence
    assert "served by per-row scales: torch's _scaled_mm (fp8_scaled_mm_rowwise weights): capabilities.features." \
           "fp8_scaled_mm_rowwise is supported (_scaled_mm[float8_e4m3fn]" in evidence
    assert seen["native"].get("aten::_scaled_mm", 0) > 0 and "aten::_scaled_mm" not in seen["fallbacks"]


def test_a_kernel_gone_wrong_since_the_probe_is_refused_by_the_start_up_check(default_spec, tiny):
    profile = default_spec[1]  # recorded while the kernel was right
    line = _one_line(_run(tiny, profile, WRONG_INT8, [], ["int8"], probe=False)["refusals"]["int8"])
    assert "capabilities.features.int8_weight_only_matmul is supported (_weight_int8pack_mm), but the int8_pack " \
           "weights' check on emu:1 failed: its float32 result is outside the rounding bound" in line, line


def test_auto_times_only_the_verified_kernel_and_keeps_it_only_with_the_evidence(default_spec):
    seen = default_spec[0]["results"]["auto"]
    value, evidence = seen["quantization"]
    assert "int8 tried as torch's _weight_int8pack_mm (int8_pack weights)" in evidence
    assert "int4 not tried: capabilities.features.int4_weight_only_matmul is unsupported" in evidence
    assert "fp8 not tried: capabilities.features.fp8_scaled_mm is unsupported" in evidence
    assert "int8: KLD " in evidence and "ms unquantized" in evidence  # measured on the model, whichever wins
    kept = "(not under" not in evidence.split("int8: KLD ")[1] and "(over budget)" not in evidence
    assert value == ("int8" if kept else "none"), evidence
    assert seen["layout"][0] == ("int8_pack" if kept else "out_in")


def test_a_gguf_file_s_q8_0_blocks_are_converted_once_for_the_device_kind_and_the_row_says_so(default_spec):
    seen = default_spec[0]["results"]["gguf int8"]
    value, evidence = seen["quantization"]
    assert value == "int8" and seen["layout"][0] == "int8_pack"
    assert "its Q8_0 blocks dequantized and quantized again (a second rounding: a recorded fallback)" in evidence
    assert "int8_pack weights" in seen["recorded"]  # the fallback, counted (and refused under --strict)


@pytest.fixture(scope="module")
def int4_spec(tiny, tmp_path_factory) -> tuple[dict, Path]:
    """int4 native on emu:1: the probe's record, int4 served on a float model and on GGUF Q4_1 and Q4_0 files."""
    profile = tmp_path_factory.mktemp("devquant-int4") / "emu1.yaml"
    hf = make_hf_model(profile.parent / "hf", "llama", tied=True)
    files = {f"{block} int4": str(write_gguf(profile.parent / f"{block}.gguf", hf, profile.parent / "hf", "llama",
                                             lambda name, tensor, t=getattr(T, block): T.F32 if tensor.dim() == 1
                                             else t)) for block in ("Q4_1", "Q4_0")}
    files["Q4_1 auto"] = files["Q4_1 int4"]
    return _run(tiny, profile, INT4_NATIVE, ["int4"], [], gguf=files), profile


def test_int4_serves_through_the_int4pack_kernel_the_probe_verified_on_the_device(int4_spec):
    seen = int4_spec[0]["results"]["int4"]
    value, evidence = seen["quantization"]
    assert value == "int4" and seen["layout"][0] == "int4_pack_cpu", seen
    assert "served by torch's _weight_int4pack_mm_for_cpu (int4_pack_cpu weights): capabilities.features." \
           "int4_weight_only_matmul is supported (_weight_int4pack_mm_for_cpu[float32] vs float64" in evidence
    assert "quantized at load" in evidence
    assert seen["native"].get("aten::_weight_int4pack_mm_for_cpu", 0) > 0
    assert not any("int4pack" in op for op in seen["fallbacks"]), seen["fallbacks"]
    assert len(seen["tokens"]) == 12


def test_gguf_q4_blocks_map_onto_the_int4pack_form_without_a_second_rounding(int4_spec):
    for block in ("Q4_1", "Q4_0"):
        seen = int4_spec[0]["results"][f"{block} int4"]
        value, evidence = seen["quantization"]
        assert value == "int4" and seen["layout"][0] == "int4_pack_cpu", seen
        assert f"from the file's {block} blocks, mapped directly onto the op's form" in evidence, evidence
        assert "quantized again" not in evidence and "int4_pack_cpu weights" not in seen["recorded"]
        assert len(seen["tokens"]) == 12


def test_an_int4_kernel_gone_wrong_since_the_probe_cannot_read_its_codes_back_and_is_refused(int4_spec, tiny):
    line = _one_line(_run(tiny, int4_spec[1], WRONG_INT4, [], ["int4"], probe=False)["refusals"]["int4"])
    assert "int4_weight_only_matmul is supported (_weight_int4pack_mm_for_cpu), but the int4_pack_cpu weights' " \
           "check on emu:1 failed: it does not run at float32: ValueError: _weight_int4pack_mm_for_cpu does not " \
           "read its packed codes back as integers 0..15" in line, line


def test_auto_on_a_q4_1_file_times_int4_pack_with_the_file_s_blocks_mapped(int4_spec):
    seen = int4_spec[0]["results"]["Q4_1 auto"]
    value, evidence = seen["quantization"]
    assert "int4 tried as torch's _weight_int4pack_mm_for_cpu (int4_pack_cpu weights)" in evidence, evidence
    assert "int4: KLD " in evidence and "int4_pack_cpu weights" not in seen["recorded"]
    if value == "int4":  # kept where it measured faster within the budget: then from the file's blocks
        assert "from the file's Q4_1 blocks, mapped directly onto the op's form" in evidence, evidence
        assert seen["layout"][0] == "int4_pack_cpu"
