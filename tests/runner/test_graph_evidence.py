"""The graphs row's evidence from verify-ops' graph_replay records (docs/stages/verify-ops.md's contract): the whole
decode step's record decides; a mismatch names the first op off under replay, a refused capture quotes the device,
no record is not verified; blocks alone never turn the runner's graphs on."""

from __future__ import annotations

from bringup.profiles.schema import Profile
from bringup.profiles.sections.graph_replay import GraphReplayRecord
from bringup.runner.plan.graphs import check_graphs_option, replay_check, through_host, timed
from bringup.runner.plan.graphs_evidence import FAILED, PASSED, REFUSED, UNVERIFIED, replay_verdict
from bringup.runner.plan.profile_facts import ProfileFacts

REFUSAL = "emu: graph capture refused aten::rsqrt.out: the op runs through the host fallback on this device"


def record(target: str, status: str, **fields) -> GraphReplayRecord:
    return GraphReplayRecord(target=target, dtype="float32", api="torch.accelerator.Graph", status=status, **fields)


def verdict(*records: GraphReplayRecord):  # type: ignore[no-untyped-def]
    return replay_verdict(ProfileFacts(Profile(graph_replay=list(records))), "float32")


def test_the_decode_steps_record_decides():
    passed = verdict(record("runner_decode_step", "pass", replays=2, eager_err=1e-7, replay_err=2e-7),
                     record("swiglu_mlp", "pass"))
    assert (passed.status, passed.step_passed, passed.whole_step) == (PASSED, True, True)
    assert passed.evidence == ("verify-ops replayed runner_decode_step at float32 right (2 replays on new inputs, "
                               "replay error 2e-07 vs eager 1e-07)")
    assert passed.lines == ("graph_replay: runner_decode_step at float32: pass", "graph_replay: swiglu_mlp at "
                                                                                 "float32: pass")
    wrong = verdict(record("runner_decode_step", "mismatch", first_bad_op="aten.silu.default"))
    assert wrong.status == FAILED and not wrong.step_passed and "aten.silu.default" in wrong.evidence
    assert wrong.evidence.startswith("failed the replay check: verify-ops' runner_decode_step")
    refused = verdict(record("runner_decode_step", "capture_unsupported", message=REFUSAL))
    assert refused.status == REFUSED and refused.evidence.endswith(REFUSAL)
    assert refused.evidence.startswith("capture refused an op: verify-ops' runner_decode_step at float32: ")


def test_without_the_decode_step_nothing_turns_the_runners_graphs_on():
    assert verdict().status == UNVERIFIED and "no runner_decode_step record at float32" in verdict().evidence
    assert replay_verdict(ProfileFacts(None), "float32").evidence.startswith("not verified: no profile")
    blocks = verdict(record("swiglu_mlp", "pass"))
    assert blocks.status == PASSED and not blocks.step_passed and not blocks.whole_step
    skipped = verdict(record("runner_decode_step", "skipped", message="the cpu backend offers no graph API"))
    assert skipped.status == UNVERIFIED and "is skipped (the cpu backend offers no graph API)" in skipped.evidence
    bad_block = verdict(record("runner_decode_step", "pass", replays=2), record("swiglu_mlp", "mismatch",
                                                                                first_bad_op="aten.silu.default"))
    assert bad_block.step_passed and not bad_block.whole_step and "swiglu_mlp" in bad_block.evidence


def test_the_rows_other_reasons():
    assert check_graphs_option("auto") is None and "'on' is not one of auto, off" in check_graphs_option("on")
    assert through_host({}, "emu:1") is None
    sampling = "sort at float32: aten::sort.values_stable copied arguments to the host; see its record"
    assert through_host({"sort": sampling}, "emu:1") is None  # sampling runs outside the graph
    norm = "rms_norm at float16: aten::rsqrt.out copied arguments to the host; see its record"
    refused = through_host({"rms_norm": norm, "sort": sampling}, "emu:1")
    assert refused.evidence == (f"off: capture refuses an op: rms_norm runs through the host on emu:1 ({norm}), and a "
                                "graph holds device work only")
    assert replay_check(0.0) is None and replay_check(1e-4) is None and "0.0127" in replay_check(0.0127)
    assert timed(1e-3, 3e-3, 0.0) == (True, "1 ms replayed vs 3 ms eager per decode step at batch 1 (3.00x)")
    assert timed(2.9e-3, 3e-3, 0.0)[1].startswith("not faster on this model")
    assert timed(2e-3, 3e-3, 0.6)[1].startswith("not distinguishable from noise on this model (spread 60%)")
