"""Placement across emu devices, end to end through the real commands: `serve --device emu` on the default spec
serves SmolLM2 on the dGPU alone and says why not the iGPU; a pair that holds the model only together (a fast small
device, a slow large one, capped with --device-memory) runs a layer split with more layers on the fast device than
memory alone would give it, and its greedy tokens equal the CPU's over 32 tokens; a device without a profile is
refused naming the command that records one. The devices' measured figures are given as data in their profiles
(bench ceilings), as planning tests take measurements: the planner's choice does not depend on this machine."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bringup_emu.default_spec import DEFAULT_NATIVE
from tests.emulator.emu_process import emu_env, run_python
from tests.real_model import smollm2_gguf
from tests.server.serve_live import free_port, started_or_fail

WRITE_PROFILES = """
import os, sys, torch
os.chdir(sys.argv[1])
from bringup.backends.registry import backend_for
from bringup.profiles.schema import DeviceSection, Profile
from bringup.profiles.sections.bench import BenchSection, MeasuredCeilings
from bringup.profiles.store import default_profile_path, render_yaml
for item in sys.argv[2].split(","):
    device, gbps = item.split("=")
    info = backend_for(torch.device(device)).device_info(torch.device(device).index)
    path = default_profile_path(info)
    path.parent.mkdir(exist_ok=True)
    bench = BenchSection(ceilings=MeasuredCeilings(gbps=float(gbps)))
    path.write_text(render_yaml(Profile(device=DeviceSection.model_validate(info.to_dict()), bench=bench)))
"""
# emu:1 runs at a quarter of the host's speed, as its profile below says (4x slower): the planner also times a layer
# on each device at the start, and a profile's figure the device belies would leave the order to the noise; the
# default spec's native ops, as an accelerator runs them (with none, each op copies its weights through the host)
PAIR = {"devices": [{"name": "Emu fast small", "memory": "2GiB"},
                    {"name": "Emu slow large", "memory": "2GiB", "speed": 0.25}],
        "refused_dtypes": ["float64"], "native": list(DEFAULT_NATIVE)}
CAPS = "emu:0=450MiB,emu:1=560MiB"  # SmolLM2 in float32 with a 256-token cache fits neither, and both together


def write_profiles(folder: Path, spec: str | dict, measured: str) -> None:
    code = WRITE_PROFILES.replace("sys.argv[1]", repr(str(folder))).replace("sys.argv[2]", repr(measured))
    done = run_python(code, spec)
    assert done.returncode == 0, done.stderr[-3000:]


def generate(folder: Path, spec: str | dict, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "bringup", "generate", "The capital of France is", "--model",
               str(smollm2_gguf()), "--max-model-len", "256", "--json", *args]
    return subprocess.run(command, cwd=folder, env={**emu_env(spec), "COLUMNS": "400"}, capture_output=True,
                          text=True, timeout=600, check=False)


def test_serve_on_the_family_runs_smollm2_on_the_dgpu_alone_and_the_plan_says_why_not_the_igpu(tmp_path) -> None:
    write_profiles(tmp_path, "default", "emu:0=5,emu:1=10")
    port = free_port()
    command = [sys.executable, "-m", "bringup", "serve", "--device", "emu", "--model", str(smollm2_gguf()), "--port",
               str(port), "--max-model-len", "256", "--max-num-seqs", "2"]
    server = subprocess.Popen(command, cwd=tmp_path, env={**emu_env("default"), "COLUMNS": "400"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # a wide table: one line a row
    try:
        url = f"http://127.0.0.1:{port}"
        started_or_fail(url, server, 300, "serve --device emu")
        done = httpx.post(f"{url}/v1/completions", timeout=120, json={
            "model": "SmolLM2-135M-Instruct.Q4_1", "prompt": "The capital of France is", "max_tokens": 2,
            "temperature": 0})
        plan = httpx.get(f"{url}/v1/plan", timeout=10).json()["plan"]
        metrics = httpx.get(f"{url}/metrics", timeout=10).text
    finally:
        server.send_signal(signal.SIGTERM)
        stdout, _ = server.communicate(timeout=60)
    assert done.status_code == 200, done.text
    placement = plan["placement"]
    assert plan["device"] == "emu:1" and placement["value"]["mode"] == "single"
    assert [(d["device"], d["layers"]) for d in placement["value"]["devices"]] == [("emu:1", [0, 29])]
    (left,) = placement["value"]["left_out"]
    assert left["device"] == "emu:0" and left["why"].startswith("too small: the model and its KV cache need")
    assert "; and slower (" in left["why"]  # 5 GB/s measured against 10
    assert placement["shown"] == "single: emu:1 layers [0, 29]; left out: emu:0"
    (row,) = [line for line in stdout.splitlines() if "│ placement " in line]  # the start-up table's row
    assert "single: emu:1 layers [0, 29]; left out: emu:0" in row and "holds the model and is the fastest" in row
    assert 'bringup_device_layers{device="emu:1"} 30.0' in metrics
    assert 'bringup_device_layers{device="emu:0"} 0.0' in metrics


@pytest.mark.timeout(900)  # two SmolLM2 starts and 32 tokens each: about a minute on an idle 2-core machine
def test_a_pair_holding_the_model_only_together_splits_it_toward_the_fast_device_with_the_cpus_tokens(tmp_path
                                                                                                    ) -> None:
    write_profiles(tmp_path, PAIR, "emu:0=40,emu:1=10")  # emu:0 measured 4x faster
    split = generate(tmp_path, PAIR, "--device", "emu:0,emu:1", "--device-memory", CAPS, "--max-tokens", "32",
                     "--ignore-eos")
    assert split.returncode == 0, split.stderr[-3000:]
    cpu = generate(tmp_path, PAIR, "--device", "cpu", "--max-tokens", "32", "--ignore-eos")
    assert cpu.returncode == 0, cpu.stderr[-3000:]
    out, reference = json.loads(split.stdout), json.loads(cpu.stdout)
    value = out["plan"]["placement"]["value"]
    assert value["mode"] == "layer_split" and "through the host" in value["crossing"]
    layers = {d["device"]: d["layers"][1] - d["layers"][0] + 1 for d in value["devices"]}
    by_memory = round(30 * 450 / (450 + 560))  # llama.cpp's split: in proportion to memory
    assert sum(layers.values()) == 30 and layers["emu:0"] > by_memory, layers
    assert value["devices"][-1]["device"] == "emu:0"  # the fast device runs last, with the output head
    for member in value["devices"]:  # each device's layer was timed on it at the start, and the term recorded
        assert "a layer timed at" in member["evidence"] and "beyond its bytes over" in member["evidence"], member
    assert out["completion_tokens"] == reference["completion_tokens"] == 32
    assert out["token_ids"] == reference["token_ids"]


def test_a_device_without_a_profile_is_refused_naming_the_command_that_records_one(tmp_path) -> None:
    write_profiles(tmp_path, PAIR, "emu:1=10")
    done = generate(tmp_path, PAIR, "--device", "emu:0,emu:1", "--max-tokens", "1")
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "emu:0 has no profile" in lines[0], done.stderr[-2000:]
    assert "run `bringup all --device emu:0` first" in lines[0] and "Traceback" not in done.stderr


def test_a_pair_that_both_hold_the_model_is_weighed_for_replicas_from_step_costs_measured_at_the_start(tmp_path
                                                                                                     ) -> None:
    from bringup.runner.plan.placement.replica_load import ReplicaLoad, replica_gain
    from bringup.runner.plan.placement.replicas import REPLICA_GAIN
    from bringup.runner.plan.placement.step_cost import step_cost_from

    spec = {**PAIR, "devices": [PAIR["devices"][0], {**PAIR["devices"][1], "speed": 1.0}]}
    write_profiles(tmp_path, spec, "emu:0=20,emu:1=10")
    port = free_port()
    command = [sys.executable, "-m", "bringup", "serve", "--device", "emu:0,emu:1", "--port", str(port),
               "--max-model-len", "64", "--max-num-seqs", "4"]  # the built-in model: each device holds it
    server = subprocess.Popen(command, cwd=tmp_path, env=emu_env(spec), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        started_or_fail(url, server, 300, "serve --device emu:0,emu:1")
        name = httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]["id"]
        done = httpx.post(f"{url}/v1/completions", timeout=120, json={"model": name, "prompt": "Hello",
                                                                       "max_tokens": 2})
        placement = httpx.get(f"{url}/v1/plan", timeout=10).json()["plan"]["placement"]
    finally:
        server.send_signal(signal.SIGTERM)
        server.communicate(timeout=60)
    assert done.status_code == 200, done.text
    value, prediction = placement["value"], placement["value"]["prediction"]
    assert prediction["load"] == {"requests": 4, "prompt_tokens": 32, "new_tokens": 32}
    costs = {device: step_cost_from(cost) for device, cost in prediction["step_costs"].items()}
    assert sorted(costs) == ["emu:0", "emu:1"]
    for device, cost in costs.items():  # measured on each device at the start, with what was timed
        assert cost.base_s > 0 and cost.prefill_s_per_token > 0, (device, cost)
        assert f"cuts of the model timed on {device}" in cost.evidence
    assert all("prefill" in cost.evidence and "(32 tokens timed)" in cost.evidence for cost in costs.values())
    gain = replica_gain([costs["emu:0"], costs["emu:1"]], ReplicaLoad(4, 32, 32)).gain
    assert prediction["gain"] == gain and f"replicas predict {gain:.2f}x over emu:" in placement["evidence"]
    assert value["mode"] == ("replicas" if gain >= REPLICA_GAIN else "single")  # the choice follows the costs
    chosen = {d["device"]: d.get("step_cost") for d in value["devices"]}
    assert all(cost == prediction["step_costs"][device] for device, cost in chosen.items())
    if value["mode"] == "replicas":  # the router predicts from costs timed on each loaded engine
        for member in value["devices"]:
            timed = step_cost_from(member["router_step_cost"])
            assert f"timed on the loaded engine on {member['device']}" in timed.evidence and timed.base_s > 0


WRITE_MIXED_PROFILES = """
import os, sys, torch
from pathlib import Path
os.chdir(FOLDER)
from bringup.backends.registry import backend_for
from bringup.profiles.schema import Capability, DeviceSection
from bringup.profiles.sections.bench import MeasuredCeilings
from bringup.profiles.store import default_profile_path, load_profile, render_yaml
reference = load_profile(Path(REFERENCE))
for device in ("emu:0", "emu:1"):
    info = backend_for(torch.device(device)).device_info(torch.device(device).index)
    caps = reference.capabilities.model_copy(deep=True)
    if device == "emu:0":  # as a device that refuses bfloat16 records it
        caps.dtypes["bfloat16"] = Capability(status="unsupported", reason="bfloat16 refused by the device")
    bench = reference.bench.model_copy(update={"ceilings": MeasuredCeilings(gbps=10.0)})
    profile = reference.model_copy(update={"device": DeviceSection.model_validate(info.to_dict()),
                                           "capabilities": caps, "bench": bench, "compiled": []})
    default_profile_path(info).parent.mkdir(exist_ok=True)
    default_profile_path(info).write_text(render_yaml(profile))
"""


def test_a_split_whose_devices_chose_different_dtypes_runs_in_one_both_verified_with_the_cpus_tokens(tmp_path
                                                                                                   ) -> None:
    reference = Path(__file__).resolve().parents[2] / "reference/profiles/cpu-amd-epyc-2core-avx512-bf16.yaml"
    code = WRITE_MIXED_PROFILES.replace("FOLDER", repr(str(tmp_path))).replace("REFERENCE", repr(str(reference)))
    spec = {**PAIR, "devices": [PAIR["devices"][0], {**PAIR["devices"][1], "speed": 1.0}]}  # nothing is timed
    written = run_python(code, spec)
    assert written.returncode == 0, written.stderr[-3000:]
    # emu:1's plan chooses bfloat16 (the recorded machine's, faster than float32), emu:0's float32; the proportions
    # given, so nothing is timed; the built-in model, greedy
    args = ("--max-tokens", "8", "--ignore-eos", "--max-model-len", "128", "--graphs", "off")
    command = [sys.executable, "-m", "bringup", "generate", "Hello", "--json", *args]
    split = subprocess.run([*command, "--device", "emu:0,emu:1", "--layer-split", "1,1"], cwd=tmp_path,
                           env=emu_env(spec), capture_output=True, text=True, timeout=300, check=False)
    assert split.returncode == 0, split.stderr[-3000:]
    cpu = subprocess.run([*command, "--device", "cpu", "--dtype", "float32"], cwd=tmp_path, env=emu_env(spec),
                         capture_output=True, text=True, timeout=300, check=False)
    assert cpu.returncode == 0, cpu.stderr[-3000:]
    out = json.loads(split.stdout)
    placement = out["plan"]["placement"]
    assert placement["value"]["mode"] == "layer_split" and out["plan"]["dtype"]["value"] == "float32"
    assert placement["evidence"].endswith(
        "the split runs in float32, which every member verified, so activations cross unconverted (emu:0's plan "
        "chose float32; emu:1's plan chose bfloat16; emu:0 did not verify bfloat16)")
    assert out["token_ids"] == json.loads(cpu.stdout)["token_ids"]
