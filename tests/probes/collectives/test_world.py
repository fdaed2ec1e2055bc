"""Real multi-process runs on this CPU with gloo: every op passes at world sizes 2 (via the CLI) and 4."""

import json

import pytest

from bringup.probes.collectives.bandwidth import bus_factor
from bringup.probes.collectives.ops import OP_NAMES
from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli
from tests.probes.collectives.helpers import assert_no_process_left, run, small_plan


def _check_all_pass(cases, world, expected_cases):
    assert len(cases) == expected_cases
    assert {c["op"] for c in cases} == set(OP_NAMES)
    for case in cases:
        assert case["status"] == "pass", case
        assert case["wrong"] == 0
        assert case["time_us"] > 0
        if case["op"] != "barrier":
            assert case["count"] >= 1
            assert case["busbw_gbps"] == pytest.approx(case["algbw_gbps"] * bus_factor(case["op"], world))


def test_world_of_two_passes_every_operation_through_the_cli(tmp_path):
    profile = tmp_path / "p.yaml"
    result = run_cli(["verify-collectives", "--nproc", "2", "--sizes", "1,4K", "--dtype", "float32,bfloat16",
                      "--dtype", "int32", "--iters", "2", "--warmup", "1", "--timeout", "30", "--json",
                      "--profile", str(profile), "--device", "cpu"])
    assert result.code == 0, result.stderr
    section = json.loads(result.stdout)["collectives"]
    assert section["status"] == "pass" and section["world_size"] == 2 and section["backend"] == "gloo"
    assert section["faults"] == []
    _check_all_pass(section["cases"], 2, 1 + 7 * 3 * 2)
    one_element = [c for c in section["cases"] if c["op"] == "all_reduce_sum" and c["size_bytes"] <= 4]
    assert {c["count"] for c in one_element} == {1}
    stored = load_profile(profile).collectives
    assert stored is not None and stored.status == "pass" and len(stored.cases) == len(section["cases"])


def test_world_of_four_passes_every_operation():
    plan = small_plan(dtypes=["float32", "float16"], sizes=[4, 64 * 1024])
    outcome, section = run(plan, 4)
    assert section.status == "pass", section.faults
    assert all(len(r) == len(plan.cases()) for r in outcome.results.values())
    _check_all_pass([c.model_dump() for c in section.cases], 4, len(plan.cases()))
    assert_no_process_left(outcome)
