"""`bringup bench` end to end on the CPU: a quick run writes a valid profile section; baselines and
--fail-on-regression decide the exit code; bad input is one clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
import yaml
from typer.testing import CliRunner

from bringup.cli.commands.stages import bench
from bringup.errors import BringupError
from bringup.profiles.store import load_profile

app = typer.Typer()
app.command("bench")(bench.command)


@app.callback()
def _group() -> None:
    """Keep `bench` a sub-command, as in bringup's app."""


FAST = ["bench", "--device", "cpu", "--quick", "--budget", "0.05"]


def invoke(*args: str):
    return CliRunner().invoke(app, [*FAST, *args])


@pytest.fixture(scope="module")
def quick_profile(tmp_path_factory) -> tuple[Path, dict, Path]:
    folder = tmp_path_factory.mktemp("bench")
    path, csv_path = folder / "cpu.yaml", folder / "bench.csv"
    result = invoke("--only", "matmul,bandwidth,dispatch", "--profile", str(path), "--json", "--csv", str(csv_path))
    assert result.exit_code == 0, result.output
    return path, json.loads(result.stdout), csv_path


def test_quick_run_writes_a_valid_bench_section(quick_profile):
    path, output, _ = quick_profile
    profile = load_profile(path)  # validates against the schema
    section = profile.bench
    assert set(section.groups) == {"matmul", "bandwidth", "dispatch"}
    matmul = section.groups["matmul"]
    assert matmul.preset == "quick" and matmul.settings.budget_s == 0.05
    assert matmul.settings.sync == "bringup.backends.registry.synchronize"
    ok = [r for r in matmul.records if r.status == "ok"]
    assert ok and all(r.tflops > 0 and r.reps >= 1 and r.pct_measured is not None for r in ok)
    # the float32 ceiling is the best float32 matmul; quantized kernels (their own dtypes) set none
    assert section.ceilings.tflops["float32"] == max(r.tflops for r in ok if r.dtype == "float32")
    assert profile.stages["bench"].status == "complete"
    assert output["preset"] == "quick" and set(output["groups"]) == {"matmul", "bandwidth", "dispatch"}
    assert output["datasheet_reason"]  # a CPU has no datasheet entry, and the output says so


def test_csv_has_one_row_per_measurement(quick_profile):
    path, _, csv_path = quick_profile
    lines = csv_path.read_text().strip().splitlines()
    records = sum(len(g.records) for g in load_profile(path).bench.groups.values())
    assert lines[0].startswith("group,key,name") and len(lines) == 1 + records


def scaled_baseline(profile_path: Path, target: Path, factor: float) -> Path:
    """A copy of the profile whose dispatch times are `factor` times the measured ones."""
    document = yaml.safe_load(profile_path.read_text())
    for record in document["bench"]["groups"]["dispatch"]["records"]:
        for field in ("median_s", "iqr_s", "min_s"):
            record[field] *= factor
    target.write_text(yaml.safe_dump(document))
    return target


def test_fail_on_regression_exits_1_when_slower_beyond_noise(quick_profile, tmp_path):
    path, _, _ = quick_profile
    baseline = scaled_baseline(path, tmp_path / "fast-baseline.yaml", 1e-3)  # the baseline was 1000x faster
    result = invoke("--only", "dispatch", "--profile", str(path), "--baseline", str(baseline),
                    "--fail-on-regression", "10", "--json")
    assert result.exit_code == 1
    output = json.loads(result.stdout)
    assert {r["key"] for r in output["regressions"]} == {"tiny_op", "tiny_op_synced", "sync_only"}
    assert all(r["verdict"] == "slower" for r in output["baseline"]["rows"])


def test_no_regression_exits_0_and_reports_faster(quick_profile, tmp_path):
    path, _, _ = quick_profile
    baseline = scaled_baseline(path, tmp_path / "slow-baseline.yaml", 1e3)
    result = invoke("--only", "dispatch", "--profile", str(path), "--baseline", str(baseline),
                    "--fail-on-regression", "10")
    assert result.exit_code == 0, result.output
    assert "faster" in result.stdout  # the human-readable comparison table
    result = invoke("--only", "dispatch", "--profile", str(path), "--baseline", str(baseline),
                    "--fail-on-regression", "10", "--json")
    assert result.exit_code == 0
    output = json.loads(result.stdout)
    assert output["regressions"] == []
    assert {r["verdict"] for r in output["baseline"]["rows"]} == {"faster"}


@pytest.mark.parametrize("args, message", [
    (["--fail-on-regression", "5"], "--baseline"),
    (["--only", "nonsense"], "unknown bench group"),
    (["--threshold", "5"], "between 0 and 1"),
])
def test_bad_input_is_one_clear_error(args, message, tmp_path):
    result = invoke(*args, "--profile", str(tmp_path / "p.yaml"))
    assert isinstance(result.exception, BringupError) and message in str(result.exception)


def test_a_baseline_without_bench_results_is_refused(tmp_path):
    empty = tmp_path / "empty.yaml"
    empty.write_text("schema: bringup.profile/v1\n")
    result = invoke("--only", "dispatch", "--baseline", str(empty), "--profile", str(tmp_path / "p.yaml"))
    assert isinstance(result.exception, BringupError) and "no bench results" in str(result.exception)
