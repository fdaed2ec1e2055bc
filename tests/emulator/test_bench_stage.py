"""`bringup bench` on the emulated device: it names the device it measured, measures host transfers (the device is
not the host), and each op latency says where the op ran: verify-ops' record reused, or the op watched once."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bringup.profiles.schema import Profile
from bringup.profiles.sections.ops import OpCaseRecord
from bringup.profiles.store import render_yaml
from tests.emulator.emu_process import emu_env
from tests.json_schemas import assert_valid_output

# rms_norm's pieces native but rsqrt: it goes through the host
SPEC = {"devices": [{"name": "Emu bench", "memory": "1GiB"}], "native": ["mm", "pow", "mean", "add", "mul"]}
RECORDED = "no host copy among 7 dispatched calls (recorded by verify-ops)"


def profile_with_verified_ops(path: Path) -> Path:
    ops = [OpCaseRecord(op="matmul", dtype="float32", case="odd [37,129] [129,67]", status="pass", runs_on="device",
                        runs_on_evidence=RECORDED),
           OpCaseRecord(op="rms_norm", dtype="float32", case="odd [3,37,333]", status="pass")]  # not decided
    path.write_text(render_yaml(Profile(ops=ops)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> dict:
    profile = profile_with_verified_ops(tmp_path_factory.mktemp("bench") / "emu.yaml")
    command = [sys.executable, "-m", "bringup", "bench", "--device", "emu:0", "--profile", str(profile), "--quick",
               "--only", "ops,transfer", "--json"]
    done = subprocess.run(command, env=emu_env(SPEC), capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return assert_valid_output(done.stdout)


def test_bench_names_the_device_it_measured(bench):
    assert (bench["device"]["id"], bench["device"]["name"], bench["device"]["backend"]) == ("emu:0", "Emu bench",
                                                                                           "emu")


def test_transfers_to_the_device_are_measured(bench):
    transfer = bench["groups"]["transfer"]
    assert transfer["status"] == "measured"
    measured = {r["key"].rsplit(" ", 2)[0] for r in transfer["records"] if r["status"] == "ok"}  # "h2d pageable 64 MiB"
    assert measured >= {"h2d pageable", "d2h pageable"}


def test_each_op_latency_carries_where_the_op_ran(bench):
    records = {r["name"]: r for r in bench["groups"]["ops"]["records"]}
    assert records["matmul"]["status"] == "ok" and records["rms_norm"]["status"] == "ok"
    assert (records["matmul"]["runs_on"], records["matmul"]["runs_on_evidence"]) == ("device", RECORDED)
    assert records["rms_norm"]["runs_on"] == "host_fallback"  # watched once: verify-ops had not decided
    assert records["rms_norm"]["runs_on_evidence"].startswith("aten::rsqrt copied arguments to the host")
    (note,) = bench["groups"]["ops"]["notes"]
    assert note.startswith("1 of 2 timed cases ran through the host") and note.endswith(": rms_norm")
