"""The plan on a device whose ops partly fall back to the host (op cases with runs_on host_fallback): a path whose
ops fall back ranks after a verified alternative that runs on the device, the evidence says which; where nothing
better exists it is still used, listed in the plan's host_fallbacks and, at start-up, logged and counted."""

from __future__ import annotations

import pytest

from bringup.errors import StrictFallbackError
from bringup.profiles.schema import Capabilities, Capability, Profile
from bringup.profiles.sections.ops import OpCaseRecord
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.plan.plan import (
    GROUPED_EXPERT_OPS,
    RUNNER_OPS,
    build_plan,
    choose_attention,
    choose_dtype,
    choose_experts,
)
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.sources.builtin_model import builtin_config
from bringup.runner.sources.directory.hf_config import read_hf_config
from tests.runner.hf_moe_fixtures import mixtral_config
from tests.runner.stated import stated

SDPA_FALLS_BACK = "aten::_scaled_dot_product_flash_attention_for_cpu copied arguments to the host (aten::_to_cpu x3)"
RSQRT_FALLS_BACK = "aten::rsqrt.out copied arguments to the host (aten::_to_cpu x1, copies back x1)"
ON_DEVICE = "no host copy among 5 dispatched calls"


def case(op: str, dtype: str = "float16", host: str | None = None, status: str = "pass") -> OpCaseRecord:
    """A passing op case that ran on the device, or through the host with the evidence `host`."""
    return OpCaseRecord(op=op, dtype=dtype, case="stated", status=status,
                        runs_on="host_fallback" if host else "device", runs_on_evidence=host or ON_DEVICE)


def profile(*records: OpCaseRecord, dtypes: tuple[str, ...] = ("float16",)) -> ProfileFacts:
    caps = Capabilities(dtypes={d: Capability(status="supported", evidence="stated") for d in dtypes},
                        attention={"sdpa_math": Capability(status="supported", evidence="stated")})
    return ProfileFacts(Profile(capabilities=caps, ops=list(records)))


PLAIN_ON_DEVICE = (case("matmul"), case("bmm"), case("softmax"))


def test_attention_whose_ops_fall_back_ranks_after_the_plain_path_that_runs_on_the_device():
    choice = choose_attention(profile(case("sdpa_math", host=SDPA_FALLS_BACK), *PLAIN_ON_DEVICE), "float16")
    assert choice.value == ["matmul_softmax", "sdpa_math"]
    assert choice.evidence.startswith(f"sdpa_math falls back to the host (sdpa_math: {SDPA_FALLS_BACK}); "
                                      "matmul_softmax runs on the device (3 op case(s)): tried first")


def test_attention_keeps_its_order_when_every_path_falls_back_or_none_does():
    plain_host = (case("matmul"), case("bmm"), case("softmax", host="aten::_softmax.out copied ..."))
    both = choose_attention(profile(case("sdpa_math", host=SDPA_FALLS_BACK), *plain_host), "float16")
    neither = choose_attention(profile(case("sdpa_math"), *PLAIN_ON_DEVICE), "float16")
    assert both.value == neither.value == ["sdpa_math", "matmul_softmax"]
    assert "falls back" not in both.evidence and "falls back" not in neither.evidence


def test_op_cases_without_a_placement_are_no_evidence_of_a_fallback():
    unplaced = [OpCaseRecord(op=op, dtype="float16", case="stated", status="pass")
                for op in ("sdpa_math", "matmul", "bmm", "softmax")]
    assert choose_attention(profile(*unplaced), "float16").value == ["sdpa_math", "matmul_softmax"]


def test_a_low_precision_dtype_whose_ops_fall_back_ranks_after_one_that_runs_on_the_device():
    facts = profile(case("matmul", "bfloat16", host="aten::mm copied arguments to the host"), case("matmul"),
                    dtypes=("bfloat16", "float16"))
    choice = choose_dtype(facts, {"matmul"})
    assert choice.value == "float16"  # bfloat16 comes first in preference when neither falls back
    assert "bfloat16 also usable, but falls back to the host (matmul: aten::mm copied" in choice.evidence


def test_float32_on_the_device_beats_a_low_precision_dtype_whose_ops_fall_back():
    facts = profile(case("rms_norm", host=RSQRT_FALLS_BACK), case("rms_norm", "float32"))
    choice = choose_dtype(facts, {"rms_norm"})
    assert choice.value == "float32"
    assert choice.evidence.startswith(f"float32 because float16 falls back to the host (rms_norm: {RSQRT_FALLS_BACK})"
                                      "; float32 runs on the device (1 op case(s))")


def test_a_fallback_every_dtype_shares_leaves_the_dtype_choice_alone():
    facts = profile(case("rms_norm", host=RSQRT_FALLS_BACK), case("rms_norm", "float32", host=RSQRT_FALLS_BACK))
    assert choose_dtype(facts, {"rms_norm"}).value == "float16"


def test_grouped_experts_whose_ops_fall_back_give_way_to_dense_experts_on_the_device():
    moe = read_hf_config(mixtral_config().to_dict())
    grouped = [case(op, "float32", host="aten::sort.values_stable copied arguments to the host")
               if op == "moe_group_tokens" else case(op, "float32") for op in GROUPED_EXPERT_OPS]
    dense = [case(op, "float32") for op in ("matmul", "mul", "add")]
    choice = choose_experts(profile(*grouped, *dense), "float32", moe)
    assert choice.value == "dense"
    assert "grouped falls back to the host (moe_group_tokens: aten::sort.values_stable" in choice.evidence
    assert "dense runs on the device (3 op case(s))" in choice.evidence
    assert choose_experts(profile(*grouped), "float32", moe).value == "grouped"  # dense not verified: no better


def test_the_plan_lists_the_hot_path_ops_that_still_fall_back_with_their_evidence():
    records = [case(op) for op in ("matmul", "softmax", "silu", "embedding")]
    records += [case("rms_norm", host=RSQRT_FALLS_BACK), case("sort", "float32", host="aten::sort copied ..."),
                case("var", host="aten::var copied ...")]  # var: not an op the runner calls
    plan = build_plan(profile(*records), "stated", "dev:0", builtin_config(), None, None)
    assert plan.dtype.value == "float16"
    assert plan.host_fallbacks.value == ["rms_norm", "sort"]
    assert plan.host_fallbacks.evidence == (f"rms_norm at float16: {RSQRT_FALLS_BACK}; "
                                            "sort at float32: aten::sort copied ...")
    assert dict((row[0], row[1]) for row in plan.rows())["host_fallbacks"] == "rms_norm, sort"


def test_a_profile_without_placements_plans_no_host_fallbacks():
    plan = build_plan(ProfileFacts(Profile(ops=[OpCaseRecord(op="matmul", dtype="float32", case="c", status="pass")])),
                      "stated", "cpu", builtin_config(), None, None)
    assert plan.host_fallbacks.value == [] and "no op case running through the host" in plan.host_fallbacks.evidence
    assert plan.global_fallback.value is None


def test_start_up_logs_and_counts_each_planned_host_fallback_and_strict_refuses_it(tmp_path, bringup_logs):
    from bringup.backends.registry import device_info
    from bringup.profiles.store import update_profile

    def mutate(p):
        p.ops = [case(op, "float32") for op in RUNNER_OPS - {"rms_norm"}] + [
            case("rms_norm", "float32", host=RSQRT_FALLS_BACK)]

    path = tmp_path / "p.yaml"
    update_profile(path, device_info("cpu"), mutate, stage="verify-ops", status="complete", force=True)
    options = {"device": "cpu", "profile_path": path, "measurements": stated(), "max_model_len": 64,
               "max_num_seqs": 2}
    engine = LLMEngine.create(EngineOptions(**options))
    assert engine.plan.host_fallbacks.value == ["rms_norm"]
    assert engine.stats()["fallbacks"]["op"] == 1
    assert any(r.levelname == "WARNING" and r.getMessage().startswith("fallback[op] rms_norm: wanted rms_norm on cpu")
               and RSQRT_FALLS_BACK in r.getMessage() for r in bringup_logs.records)
    with pytest.raises(StrictFallbackError, match="rms_norm"):
        LLMEngine.create(EngineOptions(**options, strict=True))
