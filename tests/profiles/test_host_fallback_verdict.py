"""The verdict on where ops ran: a hot-path op through the host warns, naming it and its evidence; an op off the
hot path that falls back is information only; records without a placement (the host) add nothing."""

from __future__ import annotations

from bringup.profiles.hot_path import DECODER_OPS, HOT_PATH_OPS
from bringup.profiles.schema import Profile
from bringup.profiles.sections.ops import OpCaseRecord
from bringup.profiles.verdict import verdict_of
from bringup.profiles.verdict.host_fallback import host_fallback_checks, off_hot_path_fallbacks, op_placements

EVIDENCE = "aten::rsqrt copied arguments to the host (aten::_to_cpu x1) and results back (x1)"


def case(op: str, runs_on: str | None, dtype: str = "float32", label: str = "[4,128]") -> OpCaseRecord:
    evidence = EVIDENCE if runs_on == "host_fallback" else "no host copy among 7 dispatched calls"
    return OpCaseRecord(op=op, dtype=dtype, case=label, status="pass", runs_on=runs_on,
                        runs_on_evidence=evidence if runs_on else None)


def test_a_hot_path_op_through_the_host_warns_with_its_cases_dtypes_and_evidence():
    records = [case("rms_norm", "device", "float32"), case("rms_norm", "host_fallback", "bfloat16", "odd [3,37]"),
               case("matmul", "device")]
    checks = {c.name: c for c in host_fallback_checks(records)}
    assert checks["rms_norm"].result == "warn" and checks["matmul"].result == "pass"
    assert checks["rms_norm"].reason == ("runs through the host in 1 of 2 cases (bfloat16): "
                                         f"bfloat16 odd [3,37]: {EVIDENCE}")
    assert checks["matmul"].reason == "runs on the device in all 1 cases"


def test_the_verdict_is_ready_with_warnings_naming_the_falling_back_op():
    profile = Profile(ops=[case("softmax", "device"), case("topk", "host_fallback")])
    verdict = verdict_of(profile)
    assert verdict.status == "READY WITH WARNINGS"
    assert verdict.line() == "READY WITH WARNINGS (1): through the host on the hot path: topk"


def test_the_verdict_line_names_every_falling_back_op_before_other_warnings():
    failing_dtype = OpCaseRecord(op="softmax", dtype="float16", case="[4,128]", status="unsupported")
    profile = Profile(ops=[case(op, "host_fallback") for op in ("topk", "rsqrt", "sort", "multinomial")] +
                      [failing_dtype])
    line = verdict_of(profile).line()
    assert line.startswith("READY WITH WARNINGS (5): through the host on the hot path: multinomial, rsqrt, sort, "
                           "topk; look at verify-ops softmax"), line


def test_an_op_off_the_hot_path_that_falls_back_is_listed_not_checked():
    records = [case("relu", "host_fallback"), case("var", "device")]
    assert host_fallback_checks(records) == []
    assert [p.op for p in off_hot_path_fallbacks(records)] == ["relu"]
    assert verdict_of(Profile(ops=records)).status == "READY"


def test_records_without_a_placement_are_not_counted():
    records = [case("matmul", None), case("matmul", "host_fallback"), case("matmul", None)]
    (placement,) = op_placements(records)
    assert placement.decided == 1 and placement.runs_on() == "host fallback (1 of 1 cases)"
    assert host_fallback_checks([case("topk", None)]) == []


def test_the_hot_path_holds_the_runner_s_ops_and_the_named_kinds():
    assert DECODER_OPS <= HOT_PATH_OPS
    assert {"matmul", "sdpa_math", "rms_norm", "F.rms_norm", "rotary", "softmax", "argmax", "topk", "sort",
            "multinomial"} <= HOT_PATH_OPS
    assert not {"relu", "var", "layer_norm", "_int_mm"} & HOT_PATH_OPS


def test_every_hot_path_op_is_a_catalog_op():
    from bringup.probes.ops.catalog import builtin_ops

    assert {spec.name for spec in builtin_ops()} >= HOT_PATH_OPS


def test_bringup_all_s_verify_ops_figure_lists_the_hot_path_ops_through_the_host():
    from bringup.cli.render.all_summary import verify_ops_figure

    profile = Profile(ops=[case("rms_norm", "host_fallback"), case("relu", "host_fallback"),
                           case("topk", "host_fallback"), case("matmul", "device")])
    assert verify_ops_figure(profile) == "ops 4 pass; through the host on the hot path: rms_norm, topk"
    assert verify_ops_figure(Profile(ops=[case("matmul", None)])) == "ops 1 pass"
