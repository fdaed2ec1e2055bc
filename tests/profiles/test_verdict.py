"""The verdict from real profiles: reference profiles recorded on CPUs are READY, the H200's names what it got wrong;
a wrong or partial result is not READY."""

from pathlib import Path

import pytest

from bringup.profiles.schema import Profile
from bringup.profiles.store import load_profile
from bringup.profiles.verdict import verdict_of

REFERENCE_DIR = Path(__file__).parents[2] / "reference" / "profiles"
REFERENCE = sorted(REFERENCE_DIR.glob("cpu-*.yaml"))
H200 = REFERENCE_DIR / "nvidia-h200-sxm-torch2.11-cu130.yaml"


@pytest.fixture(scope="module")
def reference() -> Profile:
    return load_profile(REFERENCE[0])


@pytest.mark.parametrize("path", REFERENCE, ids=lambda p: p.stem)
def test_reference_profiles_are_ready_with_what_a_cpu_lacks_skipped(path):
    verdict = verdict_of(load_profile(path))
    assert verdict.status == "READY" and verdict.exit_code == 0
    assert verdict.line().startswith("READY: ") and "not applicable to this device" in verdict.line()
    skipped = {c.name: c.reason for c in verdict.of("skip")}
    assert {"dtypes.float8_e4m3fn", "attention.sdpa_cudnn", "features.graphs", "features.peer_access"} <= set(skipped)
    assert all(reason.startswith("not applicable") for reason in skipped.values())


def test_the_h200_is_ready_with_warnings_for_bfloat16_sampling_off_the_hot_path():
    """Recorded on a real H200: its float8 products pass at a float16 accumulator's tolerance, the kernels that refuse
    decode shapes or float32 activations are unsupported; its half-precision scans, failed by a per-dtype tolerance,
    are inside the error bound of their arithmetic (re-judged by bringup/probes/ops/judge/rejudge.py), and its
    bfloat16 multinomial, still wrong, is off the hot path: the runner samples on float32 logits."""
    profile = load_profile(H200)
    verdict = verdict_of(profile)
    assert verdict.status == "READY WITH WARNINGS" and verdict.exit_code == 0
    failed = {(r.op, r.dtype, r.case) for r in profile.ops if r.status == "fail"}
    assert failed == {("multinomial", "bfloat16", "with zeros [16] samples=200000 replacement=yes"),
                      ("multinomial", "bfloat16", "per row [4,33] samples=50000 replacement=yes")}
    warned = {c.name: c.reason for c in verdict.of("warn") if c.reason.startswith("off the hot path")}
    assert set(warned) == {f"{op}[{dtype}] {case}" for op, dtype, case in failed}
    assert all("(the runner runs multinomial only in sampling, on float32 logits" in reason
               for reason in warned.values())
    rejudged = [r for r in profile.ops if r.decided_by == "bound (re-judged from the recorded errors)"]
    assert {(r.op, r.dtype) for r in rejudged} == {("cumsum", "bfloat16"), ("cumsum", "float16")}
    assert len(rejudged) == 3 and all(r.status == "pass" and r.bound_ratio < 0.1 for r in rejudged)
    by_op = {}
    for record in profile.ops:
        by_op.setdefault((record.op, record.dtype), set()).add(record.status)
    assert by_op[("_scaled_mm", "float8_e4m3fn")] == {"pass"}
    assert by_op[("_int_mm", "int8")] == {"pass", "unsupported"}  # M <= 16 refused by the CUDA kernel
    assert by_op[("_weight_int4pack_mm", "float32")] == {"unsupported"}  # bfloat16 activations only
    fp8 = next(c for c in verdict.checks if c.name == "features.fp8_scaled_mm")
    assert fp8.result == "pass"


def test_a_dtype_unsupported_while_its_ops_pass_is_explained(reference):
    fp8 = next(c for c in verdict_of(reference).checks if c.name == "dtypes.float8_e4m3fn")
    assert "cast" in fp8.reason and "_scaled_mm" in fp8.reason and "general arithmetic in it does not run" in fp8.reason


def test_without_the_declared_facts_an_unsupported_capability_warns(reference):
    bare = reference.model_copy(deep=True)
    bare.capabilities.not_applicable = {}
    verdict = verdict_of(bare)
    assert verdict.status == "READY WITH WARNINGS" and verdict.exit_code == 0
    assert verdict.headline() == f"READY WITH WARNINGS ({len(verdict.of('warn'))})"
    assert not [c for c in verdict.of("skip") if c.stage == "probe"]
    assert "look at probe dtypes.float8_e4m3fn; probe dtypes.float8_e4m3fnuz;" in verdict.line()


def test_a_failing_op_case_makes_it_not_ready_and_is_named(reference):
    broken = reference.model_copy(deep=True)
    softmax = next(r for r in broken.ops if r.op == "softmax" and r.dtype == "float32")
    softmax.status, softmax.message = "fail", "max_rel 1.0e-02 outside rtol 1.3e-06"
    broken.stages["bench"].status = "partial"
    verdict = verdict_of(broken)
    assert verdict.status == "NOT READY" and verdict.exit_code == 1
    assert verdict.line() == "NOT READY (1 failure): look at verify-ops softmax[float32]"
    assert [c.name for c in verdict.of("warn")] == ["bench"]  # a partial stage is a warning, not a failure


def test_an_empty_profile_is_not_called_ready():
    verdict = verdict_of(Profile())
    assert verdict.status == "READY WITH WARNINGS" and "run `bringup all`" in verdict.of("warn")[0].reason


def test_alls_probe_line_counts_capabilities_as_the_verdict_does(reference):
    from bringup.cli.render.all_summary import probe_figure

    assert probe_figure(reference) == "12 pass · 10 skip (not applicable)"
    bare = reference.model_copy(deep=True)
    bare.capabilities.not_applicable = {}
    assert probe_figure(bare) == "12 pass · 10 warn"


def test_profile_show_ends_with_the_verdict():
    from tests.cli.run_cli import run_cli

    shown = run_cli(["profile", "show", str(REFERENCE[0])])
    assert shown.code == 0, shown.stderr
    assert " ".join(shown.stdout.split()).rpartition("verdict: ")[2].startswith("READY: ")


def test_a_hostile_name_in_the_verdict_line_reaches_the_terminal_inert(reference, tmp_path):
    from bringup.profiles.store import render_yaml
    from tests.cli.run_cli import run_cli

    broken = reference.model_copy(deep=True)
    broken.ops[0].op, broken.ops[0].status = "soft\x1b[2Jmax[bold]", "fail"
    path = tmp_path / "hostile.yaml"
    path.write_text(render_yaml(broken), encoding="utf-8")
    shown = run_cli(["profile", "show", str(path)])
    assert shown.code == 0 and "\x1b" not in shown.stdout
    # an op the runner never runs warns (graded by consequence), named as inertly as a failure would be
    shown_text = " ".join(shown.stdout.split())
    assert "verdict: READY WITH WARNINGS (1): look at verify-ops soft\\x1b[2Jmax[bold]" in shown_text


@pytest.mark.parametrize(("op", "dtype", "status"), [
    ("softmax", "bfloat16", "NOT READY"), ("multinomial", "float32", "NOT READY"), ("cumsum", "float32", "NOT READY"),
    ("multinomial", "bfloat16", "READY WITH WARNINGS"), ("cumsum", "float16", "READY WITH WARNINGS"),
    ("gelu", "float32", "READY WITH WARNINGS"), ("var", "bfloat16", "READY WITH WARNINGS")])
def test_a_wrong_op_is_graded_by_whether_the_plan_runs_it(reference, op, dtype, status):
    broken = reference.model_copy(deep=True)
    record = next(r for r in broken.ops if r.op == op and r.dtype == dtype)
    record.status = "fail"
    verdict = verdict_of(broken)
    assert verdict.status == status
    assert broken.ops[broken.ops.index(record)].status == "fail"  # the profile keeps the case's own verdict
    if status != "NOT READY":
        check = next(c for c in verdict.of("warn") if c.name.startswith(f"{op}[{dtype}]"))
        assert check.reason.startswith("off the hot path (") and op in check.reason
