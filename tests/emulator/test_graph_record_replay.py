"""A tune record keeps the decode graphs' timing, and a start on the emulated device that replays it captures and
checks the graphs as always but takes the timing from the record (the timing itself made to fail if it runs); the
row says which record. The tune's timings are given as data (the machine's speed is not a test's business)."""

from __future__ import annotations

from tests.emulator.emu_process import emu_results
from tests.emulator.test_runner_graphs import NATIVE_DECODER

BODY = """
from dataclasses import replace
from pathlib import Path
from bringup.backends.registry import device_info
from bringup.profiles.sections.graph_replay import GraphReplayRecord
from bringup.profiles.store import update_profile
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.engine.startup import graphs as graphs_step
from bringup.runner.engine.tuning import tune
from tests.runner.stated import stated

PROFILE = Path("emu1.yaml")
verified = GraphReplayRecord(target="runner_decode_step", dtype="float32", api="torch.accelerator.Graph",
                             status="pass", replays=2, eager_err=1e-7, replay_err=1e-7, allowed=3e-7, k=2.0)
update_profile(PROFILE, device_info("emu:1"), lambda p: setattr(p, "graph_replay", [verified]), stage="verify-ops",
               status="complete")
BASE = dict(device="emu:1", profile_path=PROFILE, max_model_len=128, max_num_seqs=2)
_, key, record = tune(EngineOptions(measurements=replace(stated(), graph_decode=(1e-3, 3e-3, 0.0)), **BASE), runs=1)
update_profile(PROFILE, device_info("emu:1"), lambda p: setattr(p, "models", {key: record}), stage="tune",
               status="complete")

def never(*args, **kwargs):
    raise AssertionError("the replayed start timed graphs")
graphs_step.timed_pair = never
engine = LLMEngine.create(EngineOptions(**BASE))
report(key=key, tuned=record.tuned, recorded=record.graph_decode.model_dump(), row=engine.plan.to_dict()["graphs"],
       captured=sorted(engine.executor.graphs.steps) if engine.executor.graphs else [])
"""


def test_a_replayed_record_gives_the_graphs_timing_and_the_capture_is_still_checked():
    seen = emu_results(BODY, NATIVE_DECODER)
    assert seen["recorded"] == {"candidate_s": 1e-3, "plain_s": 3e-3, "spread": 0.0}
    assert seen["row"]["value"] == [1, 2] and seen["captured"]
    evidence = seen["row"]["evidence"]
    assert "the runner's replay equals eager" in evidence  # captured and checked at this start
    assert f"1 ms replayed vs 3 ms eager per decode step at batch 1 (3.00x) (from tune record {seen['key']}, " \
           f"tuned {seen['tuned']})" in evidence
