"""A placement exported to llama.cpp and vLLM: the flags are checked by running llama.cpp's own layer rule (its
llama-model.cpp: host layers first, i_gpu_start = n_layer + 1 - ngl, each offloaded layer to the first device whose
cumulative -ts share passes it) over them and getting the plan's layers back; vLLM's pipeline settings where it runs
the pair, and why not where it does not; the command line reads the plan JSON or refuses it in one line."""

from __future__ import annotations

import bisect
import json
import shutil
from pathlib import Path

from bringup.export.placement import llama_cpp_items, vllm_items
from tests.cli.run_cli import run_cli
from tests.cli.test_bad_input import assert_one_line_error

REFERENCE = Path(__file__).resolve().parents[2] / "reference" / "profiles"
LAYERS = 30


def placement(*members: tuple[str, int, int]) -> dict:
    return {"mode": "layer_split" if len(members) > 1 else "single", "left_out": [], "crossing": "host",
            "devices": [{"device": d, "layers": [first, last]} for d, first, last in members]}


def flags(items: list) -> dict:
    return {i.name: getattr(i, "value", "LEFT OUT") for i in items}


def llama_cpp_layout(found: dict) -> list[str]:
    """Each layer's device (and the output layer's, last) as llama.cpp assigns them from these flags."""
    ngl = LAYERS + 1 if found["-ngl"] == "all" else int(found["-ngl"])
    devices = found["-dev"].split(",") if "-dev" in found else [f"CUDA{found['-mg']}"]
    shares = [float(s) for s in found["-ts"].split(",")] if "-ts" in found else [1.0]
    cumulative = [sum(shares[:i + 1]) / sum(shares) for i in range(len(shares))]
    start = max(LAYERS + 1 - ngl, 0)
    return ["CPU" if il < start else devices[bisect.bisect_right(cumulative, (il - start) / ngl)]
            for il in range(LAYERS + 1)]


def test_a_split_of_two_gpus_is_given_to_llama_cpp_and_vllm_as_planned() -> None:
    plan = placement(("cuda:1", 0, 9), ("cuda:0", 10, 29))  # the fast card last, with the output layer
    found = flags(llama_cpp_items(plan))
    assert found == {"-dev": "CUDA1,CUDA0", "-sm": "layer", "-ts": "10,21", "-mg": "LEFT OUT", "-ngl": "all"}
    assert llama_cpp_layout(found) == ["CUDA1"] * 10 + ["CUDA0"] * 21
    assert flags(vllm_items(plan)) == {"--pipeline-parallel-size": "2", "VLLM_PP_LAYER_PARTITION": "10,20",
                                       "CUDA_VISIBLE_DEVICES": "1,0"}


def test_a_split_of_the_host_and_a_gpu_is_llama_cpps_partial_offload_and_not_vllms() -> None:
    plan = placement(("cpu", 0, 19), ("cuda:0", 20, 29))
    found = flags(llama_cpp_items(plan))
    assert found == {"-sm": "none", "-mg": "0", "-ngl": "11"}
    assert llama_cpp_layout(found) == ["CPU"] * 20 + ["CUDA0"] * 11
    (why,) = {i.reason for i in vllm_items(plan)}
    assert why.startswith("vLLM runs a model on one platform") and "llama.cpp's partial offload" in why
    backwards = placement(("cuda:0", 0, 19), ("cpu", 20, 29))
    assert {i.reason for i in llama_cpp_items(backwards)} == {
        "the placement runs host layers after a GPU's; llama.cpp keeps the host's layers first"}


def test_devices_the_engines_have_no_backend_for_are_named() -> None:
    plan = placement(("emu:0", 0, 9), ("emu:1", 10, 29))
    for items, engine in ((llama_cpp_items(plan), "llama.cpp"), (vllm_items(plan), "vLLM")):
        assert items and all(not hasattr(i, "value") for i in items)
        assert all(i.reason.startswith(f"emu:0, emu:1: {engine} has no backend for these devices") for i in items)


def test_replicas_are_not_one_engines_command_and_the_export_says_so() -> None:
    plan = {**placement(("cuda:0", 0, 29), ("cuda:1", 0, 29)), "mode": "replicas"}
    for items, engine in ((llama_cpp_items(plan), "llama.cpp"), (vllm_items(plan), "vLLM")):
        assert items and all(not hasattr(i, "value") for i in items)
        assert all(i.reason.startswith("the placement runs replicas") and f"one {engine} per device" in i.reason
                   for i in items)


def test_the_command_reads_the_plan_json_and_refuses_one_without_a_placement(tmp_path) -> None:
    Path("profiles").mkdir()
    shutil.copy(REFERENCE / "nvidia-h200-sxm-torch2.11-cu130.yaml", "profiles/gpu.yaml")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"schema": "bringup.generate/v1", "plan": {"placement": {
        "value": placement(("cpu", 0, 19), ("cuda:0", 20, 29)), "evidence": "planned"}}}))
    result = run_cli(["export", "--engine", "llama.cpp", "--placement", str(plan)])
    assert result.code == 0, result.stderr
    assert " -sm none -mg 0 -ngl 11" in result.stdout
    plan.write_text(json.dumps({"plan": {"placement": {"value": None}}}))
    assert_one_line_error(run_cli(["export", "--engine", "vllm", "--placement", str(plan)]),
                          "holds no placement of several devices")
    plan.write_text("{")
    assert_one_line_error(run_cli(["export", "--engine", "vllm", "--placement", str(plan)]), "is not JSON")
