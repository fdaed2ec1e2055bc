"""The runner serves decode steps from graphs on the emulated device (issue 52), planned from verify-ops' graph_replay
record (given here as data; tests/emulator/test_graph_replay_stage.py shows the stage writes it) and the replay timing
(given as data: the machine's speed is not a test's business); the capture, the runner's own replay check and the
tokens are the device's. With the decoder's ops native (the default list plus rsqrt) the plan captures its batch
buckets and the greedy tokens equal the CPU's; an op the spec makes wrong only under replay is caught by the runner's
own check and the plan serves eager, tokens still right; with the default spec the device refuses to capture rsqrt
(it runs through the host) and the row says so, naming it."""

from __future__ import annotations

import pytest

from bringup_emu.default_spec import DEFAULT_NATIVE, DEFAULT_SPEC
from tests.emulator.emu_process import emu_results
from tests.real_model import smollm2_hf_dir

NATIVE_DECODER = {**DEFAULT_SPEC, "native": [*DEFAULT_NATIVE, "rsqrt"]}
WRONG_UNDER_REPLAY = {**NATIVE_DECODER, "replay_wrong": {"silu": 1.05}}

BODY = """
from dataclasses import replace
from pathlib import Path
from bringup.backends.registry import device_info
from bringup.profiles.sections.graph_replay import GraphReplayRecord
from bringup.profiles.store import update_profile
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.sampling_params import SamplingParams
from tests.runner.stated import stated

PROFILE = Path("emu1.yaml")
record = GraphReplayRecord(target="runner_decode_step", dtype="float32", api="torch.accelerator.Graph", status="pass",
                           replays=2, eager_err=1e-7, replay_err=1e-7, allowed=3e-7, k=2.0)
def mutate(p):
    p.graph_replay = [record]
update_profile(PROFILE, device_info("emu:1"), mutate, stage="verify-ops", status="complete")
faster = replace(stated(), graph_decode=(1e-3, 3e-3, 0.0))  # replay 3x faster: given, not timed

def engine(device, profile=PROFILE):
    return LLMEngine.create(EngineOptions(model_dir=MODEL, device=device, profile_path=profile, max_model_len=128,
                                          max_num_seqs=SEQS, measurements=faster))

def greedy(e):
    params = SamplingParams(max_tokens=32, temperature=0.0, ignore_eos=True)
    return [out.token_ids for out in e.generate(PROMPTS, params)]

served = engine("emu:1")
graphs = served.executor.graphs
row = served.plan.to_dict()["graphs"]
if LATER_FAULT:  # the device starts scaling silu in graphs captured from now on: the buckets first met serving
    from bringup_emu import runtime
    runtime.extension().configure_graphs([True, True], [], {"silu": 1.05})
tokens = greedy(served)
seen = {"row": row, "row_after": served.plan.to_dict()["graphs"], "failed": graphs.failed if graphs else None,
        "tokens": tokens, "replays": graphs.replays if graphs else 0,
        "buckets": sorted(graphs.steps) if graphs else [], "fallbacks": dict(served.fallbacks.counts)}
del served
report(**seen, cpu=greedy(engine("cpu", Path("absent.yaml"))))
"""

BUILTIN = ("MODEL = None\nSEQS = 4\nLATER_FAULT = False\n"
           "PROMPTS = [[5, 17, 33], [8, 2, 9, 14, 40, 3, 7], list(range(20, 59))]\n")


def test_the_decoder_native_serves_decode_from_graphs_with_the_cpus_tokens():
    seen = emu_results(BUILTIN + BODY, NATIVE_DECODER)
    assert seen["row"]["value"] == [1, 2, 4] and seen["row"]["shown"] == "batch 1, 2, 4"
    evidence = seen["row"]["evidence"]
    assert "verify-ops replayed runner_decode_step at float32 right" in evidence
    assert "the runner's replay equals eager (relative max |difference| 0)" in evidence
    assert "1 ms replayed vs 3 ms eager" in evidence
    assert seen["tokens"] == seen["cpu"] and all(len(t) == 32 for t in seen["tokens"])
    assert seen["replays"] == 31  # every decode step: three sequences padded to 4 rows, then contexts past 64
    assert [4, 64] in seen["buckets"] and [4, 128] in seen["buckets"]
    assert seen["fallbacks"] == {"op": 0, "path": 0, "global": 0}


def test_an_op_wrong_only_under_replay_fails_the_runners_check_and_the_plan_serves_eager():
    seen = emu_results(BUILTIN + BODY, WRONG_UNDER_REPLAY)
    assert seen["row"]["value"] == [] and seen["replays"] == 0
    assert seen["row"]["evidence"].startswith("off: failed the replay check: the runner's captured decode step "
                                              "replayed ")
    assert seen["fallbacks"]["path"] == 1
    assert seen["tokens"] == seen["cpu"]


def test_a_bucket_first_met_while_serving_is_checked_before_it_replays_and_a_wrong_one_falls_back():
    seen = emu_results(BUILTIN.replace("LATER_FAULT = False", "LATER_FAULT = True") + BODY, NATIVE_DECODER)
    assert seen["row"]["value"] == [1, 2, 4]  # the start-up buckets (context 64) were captured before the fault
    assert seen["failed"].startswith("RuntimeError: failed the replay check: the runner's captured decode step")
    assert seen["fallbacks"]["path"] == 1  # one WARNING and count when context 128 was first met, then eager
    assert seen["row_after"]["value"] == [] and "a replay failed while serving" in seen["row_after"]["evidence"]
    assert seen["tokens"] == seen["cpu"]


def test_with_the_default_spec_the_device_refuses_to_capture_rsqrt_and_the_row_names_it():
    seen = emu_results(BUILTIN + BODY, "default")
    assert seen["row"]["value"] == []
    assert seen["row"]["evidence"].startswith("off: the runner's capture of its decode step failed: RuntimeError: emu: "
                                              "the graph capture was invalidated: graph capture refused aten::rsqrt")
    assert seen["fallbacks"]["path"] == 1  # the record said it replays: eager instead is a fallback, counted
    assert seen["tokens"] == seen["cpu"]


@pytest.mark.slow
def test_smollm2_on_emu1_has_graphs_on_and_the_cpus_greedy_tokens_over_32():
    model = smollm2_hf_dir()
    head = (f"from pathlib import Path\nMODEL = Path({str(model)!r})\nSEQS = 1\nLATER_FAULT = False\n"
            "PROMPTS = [[1, 504, 3575, 282, 4649, 314]]\n")
    seen = emu_results(head + BODY, NATIVE_DECODER)
    assert seen["row"]["value"] == [1] and seen["replays"] == 31
    assert seen["tokens"] == seen["cpu"] and len(seen["tokens"][0]) == 32
