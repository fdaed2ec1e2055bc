"""Groups driven by the profile: dtypes from capabilities, verified ops, accepted compiled blocks."""

from __future__ import annotations

import torch

from bringup.probes.bench.groups import attention, compiled, dispatch, matmul, ops, transfer
from bringup.profiles.schema import Capabilities, Capability, Profile
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord


def profile_with(**caps: dict[str, str]) -> Profile:
    groups = {name: {k: Capability(status=v, evidence="test" if v == "supported" else None,
                                   reason=None if v == "supported" else "test")
                     for k, v in entries.items()} for name, entries in caps.items()}
    return Profile(capabilities=Capabilities(**groups))


def test_matmul_measures_only_supported_dtypes_and_explains_the_rest(context_for):
    profile = profile_with(dtypes={"float32": "supported", "float64": "supported", "bfloat16": "unsupported",
                                   "float8_e4m3fn": "supported"})
    group = matmul.run(context_for(profile))
    measured = {r.dtype for r in group.records if r.status == "ok"}
    assert measured == {"float32", "float64"}
    float8 = next(r for r in group.records if r.dtype == "float8_e4m3fn")
    assert float8.status == "skipped" and "float8" in float8.reason
    assert not any("float32 only" in n for n in group.notes)


def test_attention_measures_the_supported_backends_only(context_for):
    profile = profile_with(dtypes={"float32": "supported"},
                           attention={"sdpa_math": "supported", "sdpa_flash": "unsupported", "sdpa_weird": "supported"})
    group = attention.run(context_for(profile))
    assert {r.name for r in group.records if r.status == "ok"} == {"sdpa_math"}
    assert next(r for r in group.records if r.name == "sdpa_weird").status == "skipped"
    empty = attention.run(context_for(profile_with(attention={"sdpa_math": "unsupported"})))
    assert empty.status == "skipped" and "no SDPA backend" in empty.reason


def test_transfer_is_not_applicable_on_the_cpu(tiny_context):
    group = transfer.run(tiny_context)
    assert group.status == "not_applicable" and "CPU" in group.reason
    assert {r.key for r in group.records} == {"h2d pinned", "h2d pageable", "d2h pinned", "d2h pageable"}


def test_dispatch_measures_the_launch_floor(tiny_context):
    group = dispatch.run(tiny_context)
    assert {r.name for r in group.records} == {"tiny_op", "tiny_op_synced", "sync_only"}
    assert all(r.status == "ok" and r.median_s > 0 for r in group.records)


def add_case(op: str, dtype: str, case: str, device: torch.device):
    x = torch.randn(256, dtype=getattr(torch, dtype), device=device)
    return {"add": lambda: x + x, "mul": lambda: x * x}[op]


OPS_PROFILE = Profile(ops=[
    OpCaseRecord(op="add", dtype="float32", case="[256]", status="pass"),
    OpCaseRecord(op="mul", dtype="float32", case="[256]", status="fail"),
])


def test_ops_latency_only_for_cases_verify_ops_passed(context_for):
    group = ops.run(context_for(OPS_PROFILE), resolver=add_case)
    passed, failed = group.records
    assert passed.status == "ok" and passed.verified is True and passed.median_s > 0
    assert failed.status == "skipped" and "fail" in failed.reason


def test_cases_at_a_models_shapes_are_skipped_with_the_reason(context_for):
    model_case = OpCaseRecord(op="add", dtype="float32", case="model: hidden=72 [1,72]", status="pass")
    group = ops.run(context_for(Profile(ops=[model_case, *OPS_PROFILE.ops])), resolver=add_case)
    skipped, passed, _failed = group.records
    assert skipped.status == "skipped" and "verify-ops --model" in skipped.reason
    assert passed.status == "ok"


def test_unverified_cases_are_included_with_a_mark_when_asked(context_for):
    group = ops.run(context_for(OPS_PROFILE, include_unverified=True), resolver=add_case)
    assert [r.verified for r in group.records] == [True, False]
    assert all(r.status == "ok" for r in group.records)


def test_each_timed_op_carries_where_verify_ops_saw_it_run_and_the_group_names_host_fallbacks(context_for):
    evidence = "aten::mul copied arguments to the host (aten::_to_cpu x1) and results back (x1)"
    placed = Profile(ops=[
        OpCaseRecord(op="add", dtype="float32", case="[256]", status="pass", runs_on="device",
                     runs_on_evidence="no host copy among 3 dispatched calls"),
        OpCaseRecord(op="mul", dtype="float32", case="[256]", status="pass", runs_on="host_fallback",
                     runs_on_evidence=evidence),
    ])
    group = ops.run(context_for(placed), resolver=add_case)
    added, multiplied = group.records
    assert (added.runs_on, multiplied.runs_on, multiplied.runs_on_evidence) == ("device", "host_fallback", evidence)
    (note,) = group.notes
    assert note.startswith("1 of 2 timed cases ran through the host") and note.endswith(": mul")


def test_on_the_host_an_op_s_placement_stays_undecided(context_for):
    group = ops.run(context_for(OPS_PROFILE), resolver=add_case)
    assert group.records[0].runs_on is None and group.notes == []


def test_ops_and_compiled_skip_with_a_reason_without_results(context_for):
    assert "verify-ops" in ops.run(context_for(Profile())).reason
    assert "compiled" in compiled.run(context_for(Profile())).reason
    unresolvable = ops.run(context_for(OPS_PROFILE))  # the real catalog, when present, lacks "add [256]"
    assert unresolvable.status == "skipped" or all(r.status != "ok" for r in unresolvable.records)


def rms_norm_block(target: str, case: str | None, dtype: str, device: torch.device):
    x = torch.randn(8, 64, dtype=getattr(torch, dtype), device=device)
    w = torch.ones(64, dtype=x.dtype, device=device)

    def block(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    return block, [x, w]


def test_eager_vs_compiled_for_accepted_blocks_only(context_for):
    profile = Profile(compiled=[
        CompiledRecord(target="rms_norm", dtype="float32", backend="eager", status="pass"),
        CompiledRecord(target="rope", dtype="float32", backend="inductor", status="mismatch"),
    ])
    group = compiled.run(context_for(profile), resolver=rms_norm_block)
    eager, compiled_record, rejected = group.records
    assert eager.params["mode"] == "eager" and compiled_record.params["mode"] == "compiled"
    assert compiled_record.baseline_key == eager.key
    assert abs(compiled_record.speedup - eager.min_s / compiled_record.min_s) < 1e-12
    assert rejected.status == "skipped" and "mismatch" in rejected.reason


def test_a_limited_preset_times_one_case_per_op(context_for):
    from dataclasses import replace

    profile = Profile(ops=[
        OpCaseRecord(op="add", dtype="bfloat16", case="[256]", status="pass"),
        OpCaseRecord(op="add", dtype="float32", case="[256]", status="pass"),
        OpCaseRecord(op="mul", dtype="float32", case="[256]", status="pass"),
    ])
    ctx = context_for(profile)
    ctx.preset = replace(ctx.preset, ops_limit=1)
    group = ops.run(ctx, resolver=add_case)
    assert [r.status for r in group.records] == ["skipped", "ok", "skipped"]  # float32 add first, limit 1
    assert "one case per op" in group.records[0].reason


def test_sizes_that_do_not_fit_device_memory_are_skipped_with_the_reason(context_for):
    from dataclasses import replace

    ctx = context_for(None)
    ctx.preset = replace(ctx.preset, memory_fraction=1e-12)  # a device with almost no free memory
    group = matmul.run(ctx)
    assert group.status == "skipped"
    assert all(r.status == "skipped" and "free device memory" in r.reason for r in group.records)
