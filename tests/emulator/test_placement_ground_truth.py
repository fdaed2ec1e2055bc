"""Host-fallback detection against the emulator's own counter: for every case of the catalog in each of its dtypes
(the 1,136 that verify-ops runs), run_case's `runs_on` is host_fallback exactly when the op called the boxed CPU
fallback while it was watched."""

from __future__ import annotations

import pytest

from tests.emulator.emu_process import emu_results

# the counter is zeroed when the watch starts and read when it ends: the ground truth covers exactly the watched call
BODY = """
import contextlib
from bringup.probes.ops import execute
from bringup.probes.ops.catalog import load_catalog
from bringup.probes.ops.spec import CaseKey

watched = execute.watch_placement
counted = {}

@contextlib.contextmanager
def counting(device):
    with watched(device) as watch:
        bringup_emu.reset_fallback_counts()
        try:
            yield watch
        finally:
            counted["ops"] = bringup_emu.fallback_counts()

execute.watch_placement = counting
catalog = load_catalog()

rows = []
for spec in catalog.ops.values():
    for case in spec.cases:
        for dtype in spec.case_dtypes(case):
            counted.clear()
            record = execute.run_case(CaseKey(spec.name, dtype, case.label), catalog, torch.device("emu:1"))
            rows.append({"case": f"{spec.name}[{dtype}] {case.label}", "status": record.status,
                         "runs_on": record.runs_on, "evidence": record.runs_on_evidence,
                         "fallback_calls": counted.get("ops")})
report(rows=rows, cases=sum(len(spec.case_dtypes(case)) for spec in catalog.ops.values() for case in spec.cases))
"""


@pytest.fixture(scope="module")
def results() -> dict:
    return emu_results(BODY, "default")


@pytest.fixture(scope="module")
def rows(results) -> list[dict]:
    return results["rows"]


def test_every_case_was_watched_and_decided(results, rows):
    assert len(rows) == results["cases"] >= 1000  # every case of the catalog in each of its dtypes
    assert [r["case"] for r in rows if r["fallback_calls"] is None or r["runs_on"] is None] == []


def test_runs_on_agrees_with_the_emulator_s_fallback_counter(rows):
    misses = [r for r in rows if r["fallback_calls"] and r["runs_on"] != "host_fallback"]
    false_positives = [r for r in rows if not r["fallback_calls"] and r["runs_on"] == "host_fallback"]
    assert (misses, false_positives) == ([], [])


def test_both_placements_occur_and_the_evidence_names_every_counted_op(rows):
    fell_back = [r for r in rows if r["runs_on"] == "host_fallback"]
    assert fell_back and len(fell_back) < len(rows)
    for row in fell_back:
        named = {call.removeprefix("aten::").split(".")[0] for call in row["fallback_calls"]}
        assert all(f"aten::{name}" in row["evidence"] for name in named), row
