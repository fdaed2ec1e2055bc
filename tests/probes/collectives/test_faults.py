"""Injected faults through the real stack: corrupted contributions are counted exactly; a rank that
exits or hangs is detected, named, and every process is ended."""

import json
import os
import signal
import time

import psutil
import pytest

from bringup.probes.collectives.ranks.launcher import launch
from tests.cli.run_cli import run_cli
from tests.probes.collectives.helpers import assert_no_process_left, new_children, run, small_plan

K = 5  # corrupted elements


def test_corrupted_contribution_is_counted_exactly(tmp_path):
    world, size = 2, 4096  # 1024 float32 elements; 512 per rank in split ops, so K fits every chunk
    result = run_cli(["verify-collectives", "--nproc", str(world), "--sizes", str(size), "--dtype", "float32",
                      "--iters", "2", "--warmup", "1", "--json", "--profile", str(tmp_path / "p.yaml"),
                      "--device", "cpu", "--inject-fault", f"rank=1:corrupt:elements={K}"])
    assert result.code == 1, result.stderr
    section = json.loads(result.stdout)["collectives"]
    assert section["status"] == "fail" and section["faults"] == []
    wrong = {c["op"]: c["wrong"] for c in section["cases"]}
    # rank 1's first K elements are wrong in its contribution; who receives them is the op's semantics:
    assert wrong["all_reduce_sum"] == world * K      # every rank's reduced output
    assert wrong["all_reduce_max"] == world * K      # the corrupt value exceeds every true value
    assert wrong["all_gather"] == world * K          # every rank gathers rank 1's chunk
    assert wrong["reduce_scatter"] == K              # those elements reduce into rank 0's chunk only
    assert wrong["all_to_all"] == K                  # rank 1's first chunk goes to rank 0
    assert wrong["send_recv_ring"] == K              # rank 1 sends to rank 0
    assert wrong["broadcast"] == 0                   # rank 1 is not the root: it contributes nothing
    statuses = {c["op"]: c["status"] for c in section["cases"]}
    assert statuses["broadcast"] == "pass" and statuses["all_reduce_sum"] == "fail"


def test_rank_that_exits_early_is_named_and_nothing_is_left(tmp_path):
    timeout = 30.0
    plan = small_plan(timeout_s=timeout)
    started = time.monotonic()
    outcome, section = run(plan, 3, fault_spec="rank=2:exit:op=all_gather:code=7")
    elapsed = time.monotonic() - started
    assert section.status == "fail"
    culprits = [f for f in section.faults if f.culprit]
    assert [(f.rank, f.kind) for f in culprits] == [(2, "exited")], section.faults
    assert "code 7" in culprits[0].detail
    # detected from the exit itself, not by waiting out the timeout
    assert elapsed < timeout and outcome.detected_after_s < timeout / 3
    by_op = {c.op: c.status for c in section.cases}
    assert by_op["all_reduce_max"] == "pass" and by_op["all_gather"] == "crashed"
    assert_no_process_left(outcome)


def test_rank_that_hangs_is_named_within_the_timeout_and_nothing_is_left():
    timeout = 3.0
    plan = small_plan(timeout_s=timeout)
    outcome, section = run(plan, 3, fault_spec="rank=1:hang:op=broadcast")
    assert section.status == "fail"
    culprits = [f for f in section.faults if f.culprit]
    assert [(f.rank, f.kind) for f in culprits] == [(1, "hung")], section.faults
    assert "broadcast" in culprits[0].detail
    assert {c.op: c.status for c in section.cases}["broadcast"] == "timeout"
    assert outcome.detected_after_s is not None and outcome.detected_after_s <= timeout
    assert_no_process_left(outcome)


def test_ctrl_c_ends_every_rank():
    """SIGINT to the launcher (what a terminal Ctrl-C delivers: the ranks sit in their own process
    group) while a rank hangs: KeyboardInterrupt propagates and no process is left behind."""
    seen: dict[str, object] = {}

    def interrupt_after_first_case(n: int) -> None:
        seen["pids"] = new_children()
        os.kill(os.getpid(), signal.SIGINT)

    plan = small_plan(timeout_s=600.0)
    # a shell that starts us in the background ignores SIGINT, and Python then never raises KeyboardInterrupt
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            launch(plan, 2, fault_spec="rank=1:hang:op=all_reduce_max",
                   on_case_done=interrupt_after_first_case)
    finally:
        signal.signal(signal.SIGINT, previous)
    ranks = seen["pids"]
    assert len(ranks) == 3  # the zygote and its two forked ranks
    assert new_children() == []
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in ranks)
