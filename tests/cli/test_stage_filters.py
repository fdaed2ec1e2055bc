"""The same filter flags on every stage and on `all`: --only / --skip, names repeated or comma-separated; the older
spellings (verify-ops --op, -k) still work."""

import json

import pytest

from tests.cli.run_cli import run_cli


def cases(args: list[str], tmp_path) -> list[str]:
    result = run_cli(["verify-ops", "--device", "cpu", "--profile", str(tmp_path / "p.yaml"), "--dtype", "float32",
                      "--no-isolate", *args, "--json"])
    assert result.code == 0, result.stderr
    return sorted({case["op"] for case in json.loads(result.stdout)["cases"]})


def test_verify_ops_only_and_its_older_spelling_agree(tmp_path):
    assert cases(["--only", "relu,sigmoid"], tmp_path) == ["relu", "sigmoid"]
    assert cases(["--op", "relu", "--op", "sigmoid"], tmp_path) == ["relu", "sigmoid"]


def test_verify_ops_skip_leaves_an_op_out(tmp_path):
    assert cases(["-k", r"^(relu|sigmoid|tanh)\[", "--skip", "sigmoid"], tmp_path) == ["relu", "tanh"]


@pytest.mark.parametrize("args", [["--skip", "warp"], ["--only", "relu", "--skip", "relu"]])
def test_verify_ops_bad_filters_are_one_line(args, tmp_path):
    result = run_cli(["verify-ops", "--device", "cpu", "--profile", str(tmp_path / "p.yaml"), *args])
    assert result.code == 2 and result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1


def test_probe_takes_comma_separated_names(tmp_path):
    result = run_cli(["probe", "--device", "cpu", "--profile", str(tmp_path / "p.yaml"), "--only",
                      "dtypes.float32,dtypes.float64", "--json"])
    assert result.code == 0, result.stderr
    assert sorted(json.loads(result.stdout)["capabilities"]) == ["dtypes.float32", "dtypes.float64"]


def test_all_only_runs_the_stages_named(tmp_path):
    result = run_cli(["all", "--device", "cpu", "--profile", str(tmp_path / "p.yaml"), "--only", "devices", "--json"])
    assert result.code == 0, result.stderr[-2000:]
    assert [s["name"] for s in json.loads(result.stdout)["stages"]] == ["devices"]


@pytest.mark.parametrize("flag", ["--only", "--skip"])
def test_all_refuses_an_unknown_stage_in_either_filter(flag, tmp_path):
    result = run_cli(["all", flag, "devices,warp", "--profile", str(tmp_path / "p.yaml")])
    assert result.code == 2 and "'warp' is not a stage" in result.stderr
