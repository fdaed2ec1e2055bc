"""The runner against the emulated device's memory cap: the KV cache sized from the memory the device reports
(two caps, two sizes, apart by what the extra memory holds), and weights larger than the cap refused in one line
or, under --allow-cpu-fallback, run on the host with the fallback logged, counted and shown in the plan."""

from __future__ import annotations

import pytest
import torch

from bringup.runner.model.kv_cache import bytes_per_block
from bringup.runner.plan.kv_sizing import MEMORY_FRACTION
from bringup.runner.sources.builtin_model import builtin_config
from tests.emulator.emu_process import emu_results
from tests.emulator.runner_children import MiB, bringup_cli

CAPS = (56 * MiB, 66 * MiB)  # emu:1, emu:2: both bound the KV cache below what 128 sequences could use
SPEC = {"devices": [{"name": "Emu 4 MiB", "memory": "4MiB"},
                    *({"name": f"Emu {cap // MiB} MiB", "memory": cap} for cap in CAPS)]}
SEQS, MAX_LEN = 128, 64

BODY = """
import logging
from pathlib import Path
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.sampling_params import SamplingParams
from tests.runner.stated import stated

blocks = {}
for device in ("emu:1", "emu:2"):  # the weights in one layout, so both caps hold the same bytes besides the cache
    e = LLMEngine.create(EngineOptions(device=device, profile_path=Path("absent.yaml"), max_model_len=MAX_LEN,
                                       max_num_seqs=SEQS, weight_layout="out_in"))
    blocks[device] = [e.plan.kv_blocks.value, e.plan.kv_blocks.evidence]
    del e

warnings = []
handler = logging.Handler(logging.WARNING)
handler.emit = lambda record: warnings.append(record.getMessage())
logging.getLogger("bringup").addHandler(handler)
e = LLMEngine.create(EngineOptions(device="emu:0", profile_path=Path("absent.yaml"), max_model_len=64, max_num_seqs=1,
                                   allow_cpu_fallback=True, measurements=stated()))
out = e.generate([e.tokenizer.encode("hi")], SamplingParams(max_tokens=2, temperature=0.0, ignore_eos=True))[0]
report(blocks=blocks, fallback_plan=e.plan.to_dict(), fallbacks=e.fallbacks.summary(), warnings=warnings,
       fallback_tokens=len(out.token_ids))
"""


@pytest.fixture(scope="module")
def seen() -> dict:
    return emu_results(f"SEQS, MAX_LEN = {SEQS}, {MAX_LEN}\n{BODY}", SPEC)


def test_the_kv_cache_is_bounded_by_each_device_memory_cap(seen):
    per_block = bytes_per_block(builtin_config(), 16, torch.float32)
    for (value, evidence), cap in zip(seen["blocks"].values(), CAPS, strict=True):
        assert value < SEQS * MAX_LEN // 16 and value * per_block <= MEMORY_FRACTION * cap, evidence
        assert f"memory: {MEMORY_FRACTION} × " in evidence and f"= {value} blocks" in evidence, evidence


def test_two_caps_give_kv_caches_apart_by_what_the_extra_memory_holds(seen):
    (small, _), (large, _) = seen["blocks"].values()
    extra = MEMORY_FRACTION * (CAPS[1] - CAPS[0]) / bytes_per_block(builtin_config(), 16, torch.float32)
    assert abs(large - small - extra) <= 1, (small, large, extra)


def test_weights_larger_than_the_cap_are_refused_in_one_line(tmp_path):
    done = bringup_cli(["generate", "hi", "--device", "emu:0", "--max-tokens", "2"], SPEC, tmp_path)
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert len(errors) == 1 and done.stderr.rstrip().endswith(errors[0]), done.stderr[-2000:]
    assert "the weights need 9.52 MiB as float32" in errors[0] and "emu:0 has 4.00 MiB free" in errors[0]
    assert "nothing was loaded" in errors[0] and "--allow-cpu-fallback" in errors[0]


def test_under_allow_cpu_fallback_they_run_on_the_host_logged_counted_and_in_the_plan(seen):
    plan, fallbacks = seen["fallback_plan"], seen["fallbacks"]
    assert plan["device"] == "cpu" and plan["global_fallback"]["value"] == "cpu"
    assert plan["global_fallback"]["evidence"].startswith(
        "wanted emu:0: bringup-builtin-llama-2.5m: the weights need 9.52 MiB as float32")
    assert any(w.startswith("global fallback: wanted emu:0") for w in plan["warnings"])
    assert fallbacks["counts"] == {"op": 0, "path": 0, "global": 1}
    assert [w for w in seen["warnings"] if w.startswith("fallback[global] device: wanted emu:0, using cpu")]
    assert seen["fallback_tokens"] == 2
