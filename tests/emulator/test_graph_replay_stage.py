"""`bringup verify-ops --compiled` on the emulated device compares eager with graph replay: with every op of the
decode step native (the default list plus rsqrt) the runner's decode step replays right; an op spec'd wrong only
under replay fails naming graphs and the op (found by bisection), and where rsqrt goes through the host fallback
(the default spec) the capture is refused, a warning quoting the device's error."""

from __future__ import annotations

from pathlib import Path

import pytest

from bringup.profiles.schema import Profile
from bringup.profiles.store import load_profile
from bringup.profiles.verdict.graph_replay import replay_checks
from bringup.profiles.verdict.overall import verdict_of
from bringup_emu.default_spec import DEFAULT_NATIVE
from tests.emulator.emu_cli import run_bringup
from tests.json_schemas import assert_valid_output

ONE_DEVICE = [{"name": "Emu dGPU", "memory": "2GiB"}]
NATIVE_DECODER = {"devices": ONE_DEVICE, "refused_dtypes": ["float64"], "native": [*DEFAULT_NATIVE, "rsqrt"]}
WRONG_UNDER_REPLAY = {"devices": ONE_DEVICE, "refused_dtypes": ["float64"], "native": list(DEFAULT_NATIVE),
                      "replay_wrong": {"silu": 1.05}}


def verify(blocks: str, spec: dict, folder: Path, *extra: str) -> tuple[int, str, Profile]:
    profile = folder / "emu.yaml"
    done = run_bringup(["verify-ops", "--device", "emu", "--only", blocks, "--dtype", "float32", "--compiled",
                        "--compile-backend", "eager", "--no-isolate", "--profile", str(profile), *extra], spec,
                       folder)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    loaded = load_profile(profile)
    return done.returncode, done.stdout, loaded


@pytest.fixture(scope="module")
def faulty(tmp_path_factory) -> tuple[int, str, Profile]:
    return verify("swiglu_mlp,rms_norm_linear", WRONG_UNDER_REPLAY, tmp_path_factory.mktemp("replay-faulty"),
                  "--json")


def test_with_the_decoder_native_the_decode_step_and_a_block_replay_right(tmp_path: Path) -> None:
    code, stdout, profile = verify("runner_decode_step,rms_norm_linear", NATIVE_DECODER, tmp_path)
    assert code == 0, stdout
    records = {r.target: r for r in profile.graph_replay}
    assert set(records) == {"runner_decode_step", "rms_norm_linear"}
    for record in records.values():
        assert record.status == "pass" and record.api == "torch.accelerator.Graph" and record.replays == 2
        assert record.replay_err is not None and record.allowed is not None and record.replay_err <= record.allowed
    assert [c.result for c in replay_checks(profile.graph_replay)] == ["pass", "pass"]
    assert "eager vs graph replay" in stdout


def test_an_op_wrong_under_replay_is_not_ready_naming_graphs_and_the_op(faulty) -> None:
    code, stdout, profile = faulty
    assert code == 1
    (wrong,) = [r for r in profile.graph_replay if r.target == "swiglu_mlp"]
    assert wrong.status == "mismatch" and wrong.first_bad_op == "aten.silu.default"
    assert wrong.replay_err > wrong.allowed
    line = verdict_of(profile).line()
    assert line.startswith("NOT READY (1 failure): look at graphs aten.silu.default"), line
    document = assert_valid_output(stdout)
    assert document["summary"]["graph_replay"] == {"mismatch": 1, "capture_unsupported": 1}
    assert {r["target"]: r["first_bad_op"] for r in document["graph_replay"]} == {
        "swiglu_mlp": "aten.silu.default", "rms_norm_linear": None}


def test_a_capture_the_device_refuses_is_a_warning_quoting_its_error(faulty) -> None:
    _, _, profile = faulty
    (refused,) = [r for r in profile.graph_replay if r.target == "rms_norm_linear"]
    assert refused.status == "capture_unsupported" and not refused.failing
    assert "graph capture refused aten::rsqrt.out: the op runs through the host fallback" in refused.message
    (check,) = [c for c in verdict_of(profile).checks if c.stage == "graphs" and c.result == "warn"]
    assert check.name == "rms_norm_linear[float32]" and "refused aten::rsqrt.out" in check.reason
