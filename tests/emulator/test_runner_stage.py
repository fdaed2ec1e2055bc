"""The runner on the emulated device (selftest, generate, eval, serve), planned from the profile the stages wrote
there: a refused bfloat16 gives a float16 plan that says why, greedy tokens equal the CPU's, the hot path's host
fallbacks are listed and counted, and `bringup serve` answers chat with /v1/plan showing all of it."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest
import torch

from bringup.runner.model.kv_cache import bytes_per_block
from bringup.runner.plan.kv_sizing import MEMORY_FRACTION
from bringup.runner.sources.builtin_model import builtin_config
from tests.emulator.emu_process import emu_results
from tests.emulator.runner_children import CLI, REFUSED_BF16, REFUSING_BF16, SERVE_CAP, serve_cli, stage_profile
from tests.runner.hf_fixtures import make_hf_model
from tests.server.serve_live import free_port, started_or_fail


@pytest.fixture(scope="module")
def staged(tmp_path_factory) -> tuple[Path, dict]:
    return stage_profile(tmp_path_factory.mktemp("emu-profile"))


RUNNER = CLI + """
from pathlib import Path
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.selftest import run_selftest
from tests.runner.stated import stated

def engine(device, dtype, profile):
    return LLMEngine.create(EngineOptions(model_dir=Path(MODEL), device=device, profile_path=Path(profile),
                                          dtype=dtype, max_model_len=128, max_num_seqs=1, measurements=stated()))

def greedy(e):
    prompt = e.tokenizer.encode("the quick brown fox")
    return e.generate([prompt], SamplingParams(max_tokens=32, temperature=0.0, ignore_eos=True))[0].token_ids

planned = engine("emu:1", "auto", PROFILE)
check = run_selftest(planned, Path(MODEL), 32)
tokens = {"emu planned": greedy(planned)}
dtype = {"value": planned.plan.dtype.value, "evidence": planned.plan.dtype.evidence}
del planned
tokens["emu float32"] = greedy(engine("emu:1", "float32", PROFILE))
for name in ("float16", "float32"):
    tokens[f"cpu {name}"] = greedy(engine("cpu", name, "absent.yaml"))
generated = cli("generate", "the fox", "--model", MODEL, "--device", "emu:1", "--profile", PROFILE,
                "--max-tokens", 3, "--max-model-len", 64, "--json")
evaluated = cli("eval", "--model", MODEL, "--device", "emu:1", "--profile", PROFILE, "--reference", "float64",
                "--max-tokens", 48, "--ctx", 32, "--json")
report(tokens=tokens, dtype=dtype, selftest=[check.passed, check.steps, check.max_abs_err, check.threshold],
       generated=json.loads(generated), evaluated=json.loads(evaluated))
"""


@pytest.fixture(scope="module")
def on_emu(staged, tmp_path_factory) -> dict:
    """The tiny Llama on emu:1 as planned and at float32, on the CPU at both dtypes, selftest, generate and eval."""
    model = tmp_path_factory.mktemp("tiny-llama")
    make_hf_model(model)
    profile, _ = staged
    return emu_results(f"MODEL, PROFILE = {str(model)!r}, {str(profile)!r}\n{RUNNER}", REFUSING_BF16)


def test_the_emulator_counts_the_runner_rms_norm_through_the_host(staged):
    _, seen = staged
    assert "aten::rsqrt.out" in seen["counted"]  # the profile's host_fallback record rests on this


def test_the_plan_on_a_device_refusing_bfloat16_is_float16_and_quotes_the_refusal(on_emu):
    assert on_emu["dtype"]["value"] == "float16"
    assert f"bfloat16 capability unsupported (cannot create or move bfloat16 tensors: TypeError: {REFUSED_BF16})" \
        in on_emu["dtype"]["evidence"]


def test_greedy_tokens_on_emu_equal_the_cpu_over_32_tokens(on_emu):
    tokens = on_emu["tokens"]
    assert all(len(t) == 32 for t in tokens.values())
    assert tokens["emu planned"] == tokens["cpu float16"]
    assert tokens["emu float32"] == tokens["cpu float32"]


def test_selftest_passes_on_emu_at_the_planned_dtype_over_32_steps(on_emu):
    passed, steps, err, threshold = on_emu["selftest"]
    assert passed and steps == 32 and err <= threshold


def test_generate_on_emu_lists_the_host_fallback_and_counts_it(on_emu):
    out = on_emu["generated"]
    assert out["plan"]["device"] == "emu:1" and out["plan"]["dtype"]["value"] == "float16"
    assert out["plan"]["host_fallbacks"]["value"] == ["rms_norm"] and out["completion_tokens"] == 3
    assert out["fallbacks"]["counts"] == {"op": 1, "path": 0, "global": 0}
    assert [(e["what"], e["wanted"]) for e in out["fallbacks"]["events"]] == [("rms_norm", "rms_norm on emu:1")]


def test_eval_on_a_device_refusing_float64_compares_with_the_float64_host_reference(on_emu):
    out = on_emu["evaluated"]
    assert (out["device"], out["dtype"]) == ("emu:1", "float16")
    assert out["reference"]["source"] == "float64" and out["reference"]["top1_agreement"] > 0.9, out["reference"]


def test_serve_on_emu_answers_chat_and_its_plan_shows_device_dtype_kv_and_host_fallbacks(staged, tmp_path):
    profile, _ = staged
    port = free_port()
    server = serve_cli(["--device", "emu:1", "--profile", str(profile), "--port", str(port), "--max-num-seqs", "256",
                        "--max-model-len", "64"], REFUSING_BF16, tmp_path)
    try:
        url = f"http://127.0.0.1:{port}"
        started_or_fail(url, server, 180, "bringup serve on emu:1")
        chat = httpx.post(f"{url}/v1/chat/completions", timeout=60, json={
            "model": "bringup-builtin-llama-2.5m", "messages": [{"role": "user", "content": "hello"}],
            "max_tokens": 4, "temperature": 0})
        seen = httpx.get(f"{url}/v1/plan", timeout=10).json()
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=60)
    assert chat.status_code == 200, chat.text
    assert chat.json()["usage"]["completion_tokens"] == 4
    plan = seen["plan"]
    assert plan["device"] == "emu:1" and seen["profile"]["device"]["id"] == "emu:1"
    assert plan["dtype"]["value"] == "float16" and REFUSED_BF16 in plan["dtype"]["evidence"]
    kv, per_block = plan["kv_blocks"], bytes_per_block(builtin_config(), 16, torch.float16)
    assert kv["value"] < 256 * 64 // 16 and kv["value"] * per_block <= MEMORY_FRACTION * SERVE_CAP, kv
    assert f"memory: {MEMORY_FRACTION} × " in kv["evidence"] and f"= {kv['value']} blocks" in kv["evidence"], kv
    assert plan["host_fallbacks"]["value"] == ["rms_norm"] and "aten::rsqrt.out" in plan["host_fallbacks"]["evidence"]
    assert seen["fallbacks"] == {"op": 1, "path": 0, "global": 0}
    assert "fallback[op] rms_norm: wanted rms_norm on emu:1" in " ".join(stderr.split()), stderr[-2000:]
