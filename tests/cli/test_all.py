import json

from bringup.profiles.store import load_profile
from tests.cli.run_cli import run_cli


def test_all_runs_stages_into_one_profile_and_resumes(tmp_path):
    path = tmp_path / "cpu.yaml"
    args = ["all", "--device", "cpu", "--profile", str(path), "--skip", "verify-ops", "--skip", "bench", "--json"]
    first = run_cli(args)
    assert first.code == 0, first.stderr[-2000:]
    data = json.loads(first.stdout)
    assert [s["name"] for s in data["stages"]] == ["devices", "probe", "selftest"]
    assert all(s["action"] == "ran" and s["status"] == "complete" for s in data["stages"])
    assert data["facts"]["selftest"]["status"] == "pass"
    assert {row["setting"] for row in data["plan"]} >= {"dtype", "attention", "compiled", "kv_blocks"}
    profile = load_profile(path)
    assert set(profile.stages) == {"devices", "probe", "selftest"} and profile.capabilities.dtypes

    again = json.loads(run_cli(args).stdout)
    assert [s["action"] for s in again["stages"]] == ["skipped (complete)"] * 3


def test_all_rejects_an_unknown_stage(tmp_path):
    result = run_cli(["all", "--skip", "warp", "--profile", str(tmp_path / "p.yaml")])
    assert result.code == 2 and "is not a stage" in result.stderr
