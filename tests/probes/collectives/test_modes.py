"""The other ways to start ranks: fresh interpreters (--start-method spawn) and an external torchrun world."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

from bringup.profiles.store import load_profile
from tests.probes.collectives.helpers import assert_no_process_left, run, small_plan

REPO = Path(__file__).resolve().parents[3]


def test_spawn_start_runs_a_rank_in_a_fresh_interpreter():
    plan = small_plan(ops=["barrier", "all_reduce_sum", "send_recv_ring"])
    outcome, section = run(plan, 1, start_method="spawn")
    assert section.status == "pass", section.faults
    statuses = {c.op: c.status for c in section.cases}
    assert statuses == {"barrier": "pass", "all_reduce_sum": "pass", "send_recv_ring": "skipped"}
    assert outcome.ready[0]["device"] == "cpu"
    assert_no_process_left(outcome)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_in_an_env_world_like_torchruns_the_given_world_is_used(tmp_path):
    """What torchrun gives each process: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT (env://).
    Two such processes run the plain CLI; rank 0 prints and writes, both exit 0."""
    profile = tmp_path / "p.yaml"
    base = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2", "GLOO_SOCKET_IFNAME": "lo"}
    cmd = [sys.executable, "-m", "bringup", "verify-collectives", "--sizes", "4K", "--dtype", "int32",
           "--iters", "2", "--warmup", "1", "--timeout", "30", "--json", "--device", "cpu",
           "--profile", str(profile)]
    procs = [subprocess.Popen(cmd, env={**base, "RANK": str(r), "LOCAL_RANK": str(r)}, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    try:
        outputs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outputs[0][1][-2000:] + outputs[1][1][-2000:]
    assert outputs[1][0] == ""  # only rank 0 prints
    section = json.loads(outputs[0][0])["collectives"]
    assert section["launch"] == "torchrun" and section["world_size"] == 2 and section["nnodes"] == 1
    assert section["status"] == "pass"
    assert all(c["status"] == "pass" and c["ranks"] == 2 for c in section["cases"])
    assert load_profile(profile).collectives.launch == "torchrun"
