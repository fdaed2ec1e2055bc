"""Eager against graph replay without a device: which tasks `--compiled` plans, how a record is graded, and that a
device without a graph API (the CPU) records `skipped` with the reason."""

import torch

from bringup.probes.ops.replay.execute import run_replay
from bringup.probes.ops.stage import key_of, merge_results, plan_tasks, record_key
from bringup.profiles.schema import Profile
from bringup.profiles.sections.graph_replay import DECODE_STEP, GraphReplayRecord
from bringup.profiles.verdict.graph_replay import replay_checks
from bringup.profiles.verdict.overall import Verdict


def test_compiled_plans_every_block_and_the_decode_step_in_each_dtype() -> None:
    plan = plan_tasks(None, ["float32", "bfloat16"], None, compiled=True, backend="eager", skip=["swiglu_mlp"])
    planned = {(t["target"], t["dtype"]) for t in plan.replay_tasks}
    assert (DECODE_STEP, "float32") in planned and ("runner_decoder_layer", "bfloat16") in planned
    assert len(planned) == 2 * 5  # four blocks of the compiled comparison and the decode step, less the skipped
    assert not any(target == "swiglu_mlp" for target, _ in planned)
    assert plan_tasks(None, ["float32"], None, compiled=False, backend="eager").replay_tasks == []
    only = plan_tasks([DECODE_STEP], ["float32"], None, compiled=True, backend="eager")
    assert [t["target"] for t in only.tasks] == [DECODE_STEP]  # the decode step is replayed, never compiled
    skipped = plan_tasks(None, ["float32"], None, compiled=True, backend="eager", skip=[DECODE_STEP])
    assert len(skipped.replay_tasks) == 5 and DECODE_STEP not in {t["target"] for t in skipped.replay_tasks}


def test_a_record_resumes_and_merges_by_block_and_dtype() -> None:
    task = {"kind": "replay", "target": "swiglu_mlp", "dtype": "float32"}
    first = GraphReplayRecord(target="swiglu_mlp", dtype="float32", status="error", message="first try")
    again = GraphReplayRecord(target="swiglu_mlp", dtype="float32", status="pass", replays=2)
    assert record_key(first) == key_of(task)
    profile = Profile()
    merge_results(profile, [first])
    merge_results(profile, [again])
    assert profile.graph_replay == [again]


def test_wrong_under_replay_fails_naming_graphs_and_the_op_and_a_refused_capture_warns_with_the_reason() -> None:
    records = [
        GraphReplayRecord(target="swiglu_mlp", dtype="float32", status="mismatch", first_bad_op="aten.silu.default",
                          message="wrong under graph replay: ..."),
        GraphReplayRecord(target="rms_norm_linear", dtype="float32", status="capture_unsupported",
                          message="capture failed: RuntimeError: emu: ... refused aten::rsqrt.out: ..."),
        GraphReplayRecord(target="rotary_attention", dtype="float32", status="pass", replays=2),
        GraphReplayRecord(target="rotary_attention", dtype="float16", status="skipped", message="no graph API"),
    ]
    checks = replay_checks(records)
    assert [c.result for c in checks] == ["fail", "warn", "pass", "skip"]
    assert "refused aten::rsqrt.out" in checks[1].reason
    assert Verdict(checks).line() == "NOT READY (1 failure): look at graphs aten.silu.default"
    assert Verdict(checks[1:]).line() == "READY WITH WARNINGS (1): look at graphs rms_norm_linear[float32]"


def test_the_cpu_has_no_graph_api_so_the_comparison_is_skipped_with_the_reason() -> None:
    record = run_replay({"target": "swiglu_mlp", "dtype": "float32"}, torch.device("cpu"))
    assert record.status == "skipped" and record.api is None
    assert record.message == "the cpu backend offers no graph-capture API"
    assert not record.failing
