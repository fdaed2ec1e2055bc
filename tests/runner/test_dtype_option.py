"""--dtype: auto is the plan's choice; an explicit dtype is used, refused when the profile says it does not run
correctly here, or forced with --force."""

from __future__ import annotations

import json

import pytest

from bringup.errors import BringupError
from bringup.profiles.schema import Capabilities, Capability
from bringup.profiles.store import load_profile
from bringup.runner.plan.plan import build_plan
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.sources.builtin_model import builtin_config
from tests.runner.test_cli import assert_one_line_error, run_cli
from tests.runner.test_plan_fallbacks import _op, write_profile

BF16_BROKEN = Capabilities(dtypes={"bfloat16": Capability(status="unsupported", reason="matmul max_rel 0.4")})


def plan_for(profile, dtype, force=False):
    return build_plan(ProfileFacts(profile), "p", "cpu", builtin_config(), None, None, dtype, force)


def test_auto_and_none_are_the_plans_choice():
    assert plan_for(None, "auto").dtype == plan_for(None, None).dtype
    assert plan_for(None, "auto").dtype.value == "float32"


def test_an_explicit_dtype_is_used_and_says_where_it_came_from(tmp_path):
    assert plan_for(None, "bfloat16").dtype.evidence == "requested with --dtype; no profile to check it against"
    caps = Capabilities(dtypes={"float16": Capability(status="supported", evidence="matmul ok")})
    profile = load_profile(write_profile(tmp_path / "p.yaml", caps, [_op("matmul", "float16")]))
    choice = plan_for(profile, "float16").dtype
    assert choice.value == "float16" and "capability supported (matmul ok); 1 op case(s) passed" in choice.evidence


def test_a_dtype_the_profile_marks_broken_is_refused_unless_forced(tmp_path, bringup_logs):
    profile = load_profile(write_profile(tmp_path / "p.yaml", BF16_BROKEN))
    with pytest.raises(BringupError, match=r"--dtype bfloat16: the profile says .*unsupported.*--force"):
        plan_for(profile, "bfloat16")
    failed_ops = load_profile(write_profile(tmp_path / "q.yaml", Capabilities(), [_op("softmax", "float16", "fail")]))
    with pytest.raises(BringupError, match=r"1 op case\(s\) failed \(softmax case: fail\)"):
        plan_for(failed_ops, "float16")
    forced = plan_for(profile, "bfloat16", force=True).dtype
    assert forced.value == "bfloat16" and forced.evidence.startswith("requested with --dtype --force although")
    assert any("--dtype bfloat16 forced" in r.getMessage() for r in bringup_logs.records)


def test_a_dtype_the_runner_does_not_serve_is_refused():
    with pytest.raises(BringupError, match=r"--dtype 'float64' is not one the runner serves; use auto or one of "
                                           r"float32, bfloat16, float16"):
        plan_for(None, "float64")


def test_generate_runs_the_requested_dtype_and_refuses_a_broken_one(tmp_path, monkeypatch, capsys):
    base = ["generate", "Hi", "--max-tokens", "3", "--device", "cpu", "--max-model-len", "32", "--json"]
    code, out, err = run_cli(monkeypatch, capsys, *base, "--profile", str(tmp_path / "none.yaml"), "--dtype",
                             "bfloat16")
    assert code == 0, err[-1500:]
    assert json.loads(out)["plan"]["dtype"]["value"] == "bfloat16"
    broken = write_profile(tmp_path / "broken.yaml", BF16_BROKEN)
    code, _, err = run_cli(monkeypatch, capsys, *base, "--profile", str(broken), "--dtype", "bfloat16")
    assert_one_line_error(code, err, "--dtype bfloat16", "--force")
    code, out, err = run_cli(monkeypatch, capsys, *base, "--profile", str(broken), "--dtype", "bfloat16", "--force")
    assert code == 0 and json.loads(out)["plan"]["dtype"]["value"] == "bfloat16", err[-1500:]
    code, _, err = run_cli(monkeypatch, capsys, *base, "--profile", str(broken), "--dtype", "float8")
    assert_one_line_error(code, err, "--dtype 'float8' is not one the runner serves")
