"""`bringup verify-ops` on the emulated device: a wrong op fails and makes the verdict NOT READY naming it, an
aborting op is `crashed` and the run goes on, and where each op ran (device or host fallback) reaches the JSON,
the table and the verdict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bringup.profiles.store import load_profile
from bringup.profiles.verdict import verdict_of
from tests.emulator.emu_process import emu_env
from tests.json_schemas import assert_valid_output

# one small case per op: matmul and tanh native, softmax native but wrong, rms_norm's rsqrt through the host,
# sigmoid aborting the worker (tanh after it shows the run goes on)
CASES = r"^(matmul|softmax|rms_norm|sigmoid|tanh)\[float32\] odd "


SPEC = {"devices": [{"name": "Emu ops", "memory": "1GiB"}],
        "native": ["mm", "_softmax", "tanh", "sigmoid", "pow", "mean", "add", "mul"],  # not rsqrt
        "wrong": {"_softmax": 2.0}, "abort": ["sigmoid"]}


def verify_ops(profile: Path, *options: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "bringup", "verify-ops", "--device", "emu:0", "--profile", str(profile),
               "-k", CASES, *options]
    return subprocess.run(command, env={**emu_env(SPEC), "COLUMNS": "160"}, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Path]:
    profile = tmp_path_factory.mktemp("verify-ops") / "emu.yaml"
    done = verify_ops(profile, "--json")
    assert done.returncode == 1, done.stderr[-3000:]
    return assert_valid_output(done.stdout), profile


def by_op(document: dict) -> dict[str, dict]:
    return {case["op"]: case for case in document["cases"]}


def test_a_wrong_op_fails_and_the_verdict_is_not_ready_naming_it(run):
    document, profile = run
    softmax = by_op(document)["softmax"]
    assert softmax["status"] == "fail" and softmax["runs_on"] == "device"
    verdict = verdict_of(load_profile(profile))
    assert verdict.status == "NOT READY"
    assert "verify-ops softmax[float32]" in verdict.line()


def test_an_aborting_op_is_crashed_and_the_run_completes(run):
    document, profile = run
    cases = by_op(document)
    assert cases["sigmoid"]["status"] == "crashed" and "SIGABRT" in cases["sigmoid"]["message"]
    assert cases["sigmoid"]["runs_on"] is None  # nothing came back from the worker
    assert cases["tanh"]["status"] == "pass" and list(cases) == ["matmul", "softmax", "rms_norm", "sigmoid", "tanh"]
    assert load_profile(profile).stages["verify-ops"].status == "complete"


def test_where_each_op_ran_is_in_the_json_with_its_evidence(run):
    document, _ = run
    cases = by_op(document)
    assert cases["matmul"]["runs_on"] == "device" and cases["tanh"]["runs_on"] == "device"
    assert cases["rms_norm"]["runs_on"] == "host_fallback"
    assert cases["rms_norm"]["runs_on_evidence"].startswith("aten::rsqrt copied arguments to the host")
    assert document["summary"]["runs_on"] == {"device": 3, "host_fallback": 1, "undecided": 1}
    (fallback,) = document["host_fallback_ops"]
    assert fallback["op"] == "rms_norm" and fallback["hot_path"] and fallback["host_fallback_cases"] == 1


def test_the_hot_path_fallback_warning_names_the_op_and_its_evidence(run):
    _, profile = run
    warnings = [c for c in verdict_of(load_profile(profile)).of("warn") if c.stage == "host-fallback"]
    assert [c.name for c in warnings] == ["rms_norm"]
    assert "runs through the host in 1 of 1 cases (float32)" in warnings[0].reason
    assert "aten::rsqrt copied arguments to the host" in warnings[0].reason


def test_the_table_shows_where_each_op_ran(run):
    _, profile = run
    done = verify_ops(profile, "--resume", "--details")  # every case recorded: nothing runs again
    assert done.returncode == 1, done.stderr[-3000:]
    assert "runs on" in done.stdout
    matrix = done.stdout[done.stdout.index("op x dtype"):done.stdout.index("runs through the host (host fallback)")]
    rows = {line.split("│")[1].strip(): line.split("│")[-2].strip() for line in matrix.splitlines()
            if line.count("│") == 4}
    assert rows == {"matmul": "device", "softmax": "device", "rms_norm": "host 1/1", "sigmoid": "-", "tanh": "device"}
    assert "runs through the host, on the hot path (warn): rms_norm" in done.stdout
    assert "host-fallback: 2 pass, 1 warn, 0 fail, 0 skip" in done.stdout  # matmul, softmax; rms_norm
