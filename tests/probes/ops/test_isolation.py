"""Crash isolation and resume, with kernels that really abort, hang, or get killed mid-run."""

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

from bringup.probes.ops.catalog import PLUGINS_ENV
from bringup.probes.ops.execute import TRACE_ENV
from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli
from tests.probes.ops.conftest import PLUGIN
from tests.probes.ops.faulty_ops import SLOW_CASES

REPO = Path(__file__).resolve().parents[3]


def test_abort_and_hang_are_recorded_and_the_run_continues(tmp_path, monkeypatch):
    monkeypatch.setenv(PLUGINS_ENV, PLUGIN)
    profile = tmp_path / "p.yaml"
    start = time.monotonic()
    result = run_cli(["verify-ops", "--json", "--timeout", "3", "--profile", str(profile),
                      "--op", "test_abort", "--op", "test_raise", "--op", "test_hang", "--op", "test_reject",
                      "--op", "relu", "-k", "abort|never|raises|rejects|odd"])
    elapsed = time.monotonic() - start
    assert result.code == 1, result.stderr
    by_op = {}
    for c in json.loads(result.stdout)["cases"]:
        by_op.setdefault(c["op"], []).append(c)
    assert [c["status"] for c in by_op["test_abort"]] == ["crashed"]
    assert "SIGABRT" in by_op["test_abort"][0]["message"]
    assert [c["status"] for c in by_op["test_hang"]] == ["timeout"]
    assert "no result within 3 s" in by_op["test_hang"][0]["message"]
    assert [c["status"] for c in by_op["test_raise"]] == ["error"]
    assert "kernel exploded" in by_op["test_raise"][0]["message"]
    assert [c["status"] for c in by_op["test_reject"]] == ["unsupported"]
    assert "not implemented for 'Float'" in by_op["test_reject"][0]["message"]
    assert by_op["relu"] and all(c["status"] == "pass" for c in by_op["relu"])  # ran after both, in fresh workers
    assert elapsed < 60
    recorded = {(r.op, r.status) for r in load_profile(profile).ops}
    assert {("test_abort", "crashed"), ("test_hang", "timeout"), ("relu", "pass")} <= recorded


def _case_count(profile: Path) -> int:
    try:
        doc = yaml.safe_load(profile.read_text())
    except (OSError, yaml.YAMLError):
        return 0
    return len((doc or {}).get("ops") or [])


def test_killed_run_resumes_without_running_any_case_twice(tmp_path):
    profile, trace = tmp_path / "p.yaml", tmp_path / "trace.tsv"
    env = {**os.environ, PLUGINS_ENV: PLUGIN, TRACE_ENV: str(trace),
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    args = [sys.executable, "-m", "bringup", "verify-ops", "--op", "test_slow", "--profile", str(profile),
            "--checkpoint-every", "0", "--no-isolate"]
    proc = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while _case_count(profile) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = load_profile(profile)  # valid YAML and schema after a kill
    done_before = {r.case for r in partial.ops}
    assert 3 <= len(done_before) < SLOW_CASES
    assert partial.stages["verify-ops"].status == "partial"
    trace_lines_before = len(trace.read_text().splitlines())

    resumed = subprocess.run([*args, "--resume", "--json"], env=env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    second_run = [line.split("\t")[2] for line in trace.read_text().splitlines()[trace_lines_before:]]
    assert not set(second_run) & done_before, "a recorded case ran again"
    assert Counter(second_run).most_common(1)[0][1] == 1
    final = load_profile(profile)
    assert sorted(r.case for r in final.ops) == sorted(f"slow case {i}" for i in range(SLOW_CASES))
    assert final.stages["verify-ops"].status == "complete"
    assert len(json.loads(resumed.stdout)["cases"]) == SLOW_CASES  # report covers resumed + new
