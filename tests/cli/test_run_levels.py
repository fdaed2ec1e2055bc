"""`bringup all --level N`: what each level runs, and that a stage recorded at a lower level runs again."""

from __future__ import annotations

import json

from bringup.cli.commands.all_cmd import done_at_level
from bringup.cli.run_levels import SMOKE_OPS, stages_for
from bringup.profiles.schema import Profile, StageStamp
from bringup.profiles.store import load_profile
from bringup.profiles.verdict import Verdict
from bringup.profiles.verdict.run_checks import run_checks
from tests.cli.run_cli import run_cli


def test_each_level_runs_what_it_promises():
    one, two, three, four = (stages_for(level, soak_minutes=3) for level in (1, 2, 3, 4))
    assert [s.name for s in one] == ["devices", "probe", "verify-ops", "selftest"]  # no bench: seconds
    assert [a for a in next(s for s in one if s.name == "verify-ops").args if a in SMOKE_OPS] == list(SMOKE_OPS)
    assert "--quick" in next(s for s in two if s.name == "bench").args
    assert next(s for s in three if s.name == "bench").args == ["bench"]  # every group, full sizes
    assert [s.name for s in four] == [s.name for s in three] + ["soak"]
    assert four[-1].args == ["soak", "--minutes", "3"]


def stamp(level: int | None, status: str = "complete") -> StageStamp:
    return StageStamp(started="2026-12-01T00:00:00", bringup="0", status=status, level=level)


def test_a_stage_counts_as_done_only_at_its_level_or_deeper():
    profile = Profile(stages={"probe": stamp(1), "bench": stamp(None), "selftest": stamp(3, "partial")})
    assert done_at_level(profile, "probe", 1) and not done_at_level(profile, "probe", 2)
    assert done_at_level(profile, "bench", 2) and not done_at_level(profile, "bench", 3)  # run alone: level 2
    assert not done_at_level(profile, "selftest", 1) and not done_at_level(profile, "soak", 1)


def test_level_1_is_a_readiness_check_and_records_its_level(tmp_path):
    path = tmp_path / "p.yaml"
    first = run_cli(["all", "--level", "1", "--device", "cpu", "--profile", str(path), "--json"])
    assert first.code == 0, first.stderr[-2000:]
    doc = json.loads(first.stdout)
    assert [s["name"] for s in doc["stages"]] == ["devices", "probe", "verify-ops", "selftest"]
    profile = load_profile(path)
    assert {name: s.level for name, s in profile.stages.items() if name != "env"} == {
        "devices": 1, "probe": 1, "verify-ops": 1, "selftest": 1}
    assert {r.op for r in profile.ops} <= set(SMOKE_OPS) and profile.bench is None
    assert profile.stages["probe"].status == "partial"  # level 1 probes dtypes and attention only, by design
    assert [c for c in doc["verdict"]["look_at"] if c["stage"] == "stages"] == []  # a skip, not a warning
    again = json.loads(run_cli(["all", "--level", "1", "--device", "cpu", "--profile", str(path), "--json"]).stdout)
    actions = {s["name"]: s["action"] for s in again["stages"]}
    assert actions == {"devices": "skipped (complete)", "probe": "ran",  # --only probes some checks: partial
                       "verify-ops": "skipped (complete)", "selftest": "skipped (complete)"}


def test_a_model_given_to_all_is_tuned_before_the_selftest_that_replays_its_plan():
    for level in (2, 3, 4):
        names = [s.name for s in stages_for(level, tune_model=True)]
        assert names.index("tune") == names.index("selftest") - 1
        assert next(s for s in stages_for(level, tune_model=True) if s.name == "tune").takes_model
        assert "tune" not in [s.name for s in stages_for(level)]  # no model: nothing to tune
    assert "tune" not in [s.name for s in stages_for(1, tune_model=True)]  # level 1 stays seconds long


def test_a_partial_stage_is_a_skip_at_the_readiness_level_and_a_warning_otherwise():
    by_design = run_checks(Profile(stages={"probe": stamp(1, "partial")}))
    interrupted = run_checks(Profile(stages={"probe": stamp(None, "partial"), "bench": stamp(2, "partial")}))
    assert [(c.name, c.result) for c in by_design] == [("probe", "skip")]
    assert "not run at level 1" in by_design[0].reason
    assert [(c.name, c.result) for c in interrupted] == [("probe", "warn"), ("bench", "warn")]
    assert Verdict(by_design).status == "READY"
    assert Verdict(by_design).line() == "READY: 0 checks pass, 0 not applicable to this device; not run in full at " \
                                        "this level: probe"
