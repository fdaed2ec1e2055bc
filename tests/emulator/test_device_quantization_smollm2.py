"""SmolLM2-135M-Instruct with --quantization int8 on emu:1, served through `_weight_int8pack_mm` (native in the default
spec, recorded supported by the probe there): its greedy tokens over 32 tokens equal the same int8_pack weights applied
by torch's CPU kernel on the host, token for token (the emulator's native op is that kernel: any difference would be
the runner's doing). The host's own int8 path (blocks of 32, activations quantized to int8) is another arithmetic and
is not expected to agree: measured, it leaves float32's greedy path at the first token, while int8_pack keeps it.
int4 likewise (with the int4 kernels native on emu:1), from the Q4_1 file's blocks mapped directly, plus the eval KLD
of emu:1's int4 and the host's int4 against float32."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup_emu.default_spec import DEFAULT_NATIVE
from tests.emulator.emu_cli import run_bringup
from tests.emulator.emu_process import PRELUDE, run_emu, run_python
from tests.real_model import smollm2_gguf, smollm2_hf_dir

BODY = """
from pathlib import Path
from typer.testing import CliRunner
from bringup.cli.app import app
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.sampling_params import SamplingParams
from tests.runner.stated import stated

done = CliRunner().invoke(app, ["probe", "--device", "emu:1", "--profile", PROFILE, "--only",
                                "features.int8_weight_only_matmul", "--no-isolate"])
assert done.exit_code == 0, done.output

def greedy(device, quantization):
    e = LLMEngine.create(EngineOptions(model_dir=Path(MODEL), device=device, profile_path=Path(PROFILE),
                                       dtype="float32", max_model_len=128, max_num_seqs=1, measurements=stated(),
                                       quantization=quantization))
    if device == "cpu":  # the host's int8 is bringup's own kernel: the int8_pack weights put there by hand
        model = e.executor.model
        model.add_kind("int8_pack", model.layout.small)
        model.use_layout(WeightLayout("int8_pack", "int8_pack", 0))
    prompt = e.tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
    ids = e.tokenizer.encode(prompt, add_special_tokens=False)
    out = e.generate([ids], SamplingParams(max_tokens=32, temperature=0.0, ignore_eos=True))[0]
    return [e.plan.quantization.evidence, e.executor.model.layout.small, out.token_ids, out.text]

report(emu=greedy("emu:1", "int8"), cpu=greedy("cpu", "none"))
"""


@pytest.mark.slow
def test_smollm2_int8_on_emu_equals_the_same_int8_pack_weights_on_the_host_over_32_tokens(tmp_path):
    model = smollm2_hf_dir()
    head = f"MODEL = {str(model)!r}\nPROFILE = {str(tmp_path / 'emu1.yaml')!r}\n"
    done = run_emu(head + BODY, "default", timeout=900)  # two loads of the model and 64 decode steps
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.split("EMU-RESULT ")[-1])
    emu, cpu = seen["emu"], seen["cpu"]
    assert emu[1] == cpu[1] == "int8_pack"
    assert "served by torch's _weight_int8pack_mm" in emu[0] and "int8_weight_only_matmul is supported" in emu[0]
    assert len(emu[2]) == 32 and emu[2] == cpu[2], (emu[3], cpu[3])


INT4_SPEC = {"devices": [{"name": "Emu iGPU", "integrated": True, "memory": "512MiB"}, {"name": "Emu dGPU", "memory":
                                                                                        "8GiB"}],
             "native": [*DEFAULT_NATIVE, "_convert_weight_to_int4pack_for_cpu", "_weight_int4pack_mm_for_cpu"]}

INT4_BODY = """
from pathlib import Path
from typer.testing import CliRunner
from bringup.cli.app import app
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.model.decoder import WeightLayout
from bringup.runner.sampling_params import SamplingParams
from tests.runner.stated import stated

done = CliRunner().invoke(app, ["probe", "--device", "emu:1", "--profile", PROFILE, "--only",
                                "features.int4_weight_only_matmul", "--no-isolate"])
assert done.exit_code == 0, done.output

def engine(device, quantization):
    return LLMEngine.create(EngineOptions(model_dir=Path(MODEL), device=device, profile_path=Path(PROFILE),
                                          dtype="float32", max_model_len=128, max_num_seqs=1, measurements=stated(),
                                          quantization=quantization))

def greedy(e):
    prompt = e.tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
    ids = e.tokenizer.encode(prompt, add_special_tokens=False)
    out = e.generate([ids], SamplingParams(max_tokens=32, temperature=0.0, ignore_eos=True))[0]
    return [e.plan.quantization.evidence, e.executor.model.layout.small, out.token_ids, out.text]

emu = engine("emu:1", "int4")
seen = {"emu": greedy(emu)}
kind = emu.executor.model.layout.small
host = engine("cpu", "none")  # the same int4_pack_cpu weights, moved to the host, through torch's CPU kernel
for ours, theirs in zip(host.executor.model.linear_layers(), emu.executor.model.linear_layers(), strict=True):
    ours.keep(kind, theirs.weight(kind).cpu())
host.executor.model.use_layout(WeightLayout(kind, kind, 0))
seen["cpu_pack"] = greedy(host)
del host
seen["cpu_int4"] = greedy(engine("cpu", "int4"))  # bringup's own int4 kernel: activations int8 per block of 32
report(**seen)
"""


def _kld(model: Path, device: str, profile: Path, quantization: str, reference: list[str]) -> dict:
    """`bringup eval` of the first 512 tokens of the built-in text, as its --json gives it."""
    done = run_bringup(["eval", "--model", str(model), "--device", device, "--profile", str(profile), "--dtype",
                        "float32", "--quantization", quantization, "--max-tokens", "512", "--ctx", "256", "--json",
                        *reference], INT4_SPEC, profile.parent, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # three loads of the model, 96 decode steps and three evals of 512 tokens
def test_smollm2_int4_on_emu_maps_the_q4_1_file_and_equals_the_same_weights_on_the_host(tmp_path):
    """Greedy: emu:1's int4 equals the same int4_pack_cpu weights through torch's CPU kernel on the host, token for
    token; bringup's own host int4 (activations int8 per block of 32) is another arithmetic, so only reported. eval:
    KLD against float32 of the file's own values (Q4_1 dequantized), emu int4 within 1.5x of the host's int4."""
    gguf = smollm2_gguf()
    head = f"MODEL = {str(gguf)!r}\nPROFILE = {str(tmp_path / 'emu1.yaml')!r}\n"
    done = run_python(PRELUDE + head + INT4_BODY, INT4_SPEC, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.split("EMU-RESULT ")[-1])
    emu, pack, own = seen["emu"], seen["cpu_pack"], seen["cpu_int4"]
    assert emu[1] == pack[1] == "int4_pack_cpu" and own[1] == "int4"
    assert "from the file's Q4_1 blocks, mapped directly onto the op's form" in emu[0], emu[0]
    assert "served by torch's _weight_int4pack_mm_for_cpu" in emu[0]
    assert len(emu[2]) == 32 and emu[2] == pack[2], (emu[3], pack[3])
    agree = next((i for i, (a, b) in enumerate(zip(emu[2], own[2])) if a != b), 32)
    reference = tmp_path / "f32.safetensors"
    _kld(gguf, "cpu", tmp_path / "cpu.yaml", "none", ["--save-reference", str(reference)])
    host = _kld(gguf, "cpu", tmp_path / "cpu.yaml", "int4", ["--reference", str(reference)])["reference"]
    device = _kld(gguf, "emu:1", tmp_path / "emu1.yaml", "int4", ["--reference", str(reference)])["reference"]
    print(f"int4 on emu:1 and the host's own int4 agree on the first {agree} of 32 greedy tokens; KLD against "
          f"float32: emu:1 int4 {device['kld_mean']:.4f} (top-1 {device['top1_agreement']:.3f}), host int4 "
          f"{host['kld_mean']:.4f} (top-1 {host['top1_agreement']:.3f})")
    assert 0 < device["kld_mean"] <= 1.5 * host["kld_mean"], (device, host)
