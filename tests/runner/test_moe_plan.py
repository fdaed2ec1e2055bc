"""The `experts` plan row: "grouped" only on verify-ops evidence at the plan dtype, "dense" otherwise with the
reason; the executor applies it, and a grouped path that faults falls back to dense, recorded."""

from __future__ import annotations

import pytest
import torch

from bringup.errors import StrictFallbackError
from bringup.profiles.schema import Capabilities, Capability, Profile
from bringup.profiles.sections.ops import OpCaseRecord
from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.model.moe import DENSE, GROUPED, sparse_blocks
from bringup.runner.plan.plan import GROUPED_EXPERT_OPS, RUNNER_OPS, build_plan, choose_experts
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.sampling_params import SamplingParams
from bringup.runner.sources.builtin_model import builtin_config
from bringup.runner.sources.directory.hf_config import read_hf_config
from tests.runner.hf_moe_fixtures import make_hf_moe_model, mixtral_config, ops_profile, qwen3_moe_config, write_profile
from tests.runner.stated import stated

MOE = read_hf_config(mixtral_config().to_dict())
ALL_BUT = {op: tuple(o for o in GROUPED_EXPERT_OPS if o != op) for op in GROUPED_EXPERT_OPS}


def test_grouped_when_every_op_it_needs_passed_at_the_plan_dtype():
    choice = choose_experts(ProfileFacts(ops_profile(GROUPED_EXPERT_OPS)), "float32", MOE)
    assert choice.value == GROUPED
    assert "2 of 5 experts" in choice.evidence and "index_add 1" in choice.evidence


@pytest.mark.parametrize("op", GROUPED_EXPERT_OPS)
def test_dense_names_the_op_that_failed(op):
    choice = choose_experts(ProfileFacts(ops_profile(ALL_BUT[op], failing=(op,))), "float32", MOE)
    assert choice.value == DENSE
    assert f"{op} 1 op case(s) failed ({op} stated: fail)" in choice.evidence


@pytest.mark.parametrize("op", GROUPED_EXPERT_OPS)
def test_dense_names_the_op_that_was_never_verified(op):
    choice = choose_experts(ProfileFacts(ops_profile(ALL_BUT[op])), "float32", MOE)
    assert choice.value == DENSE and f"{op} no op cases recorded" in choice.evidence


def test_ops_verified_at_another_dtype_do_not_count():
    choice = choose_experts(ProfileFacts(ops_profile(GROUPED_EXPERT_OPS, dtype="bfloat16")), "float32", MOE)
    assert choice.value == DENSE and "verified at float32" in choice.evidence


def test_without_a_profile_dense_said_in_the_evidence():
    choice = choose_experts(ProfileFacts(None), "float32", MOE)
    assert choice.value == DENSE and "no profile" in choice.evidence


def test_a_dense_model_has_no_experts_row_value_to_choose():
    choice = choose_experts(ProfileFacts(ops_profile(GROUPED_EXPERT_OPS)), "float32", builtin_config())
    assert (choice.value, choice.evidence) == ("none", "no experts in this model")


def test_the_row_is_in_the_plan_table_and_its_dict():
    plan = build_plan(ProfileFacts(ops_profile(GROUPED_EXPERT_OPS)), "stated", "cpu", MOE, None, None)
    rows = {setting: (value, evidence) for setting, value, evidence in plan.rows()}
    assert rows["experts"] == (GROUPED, plan.experts.evidence)
    assert plan.to_dict()["experts"] == {"value": GROUPED, "evidence": plan.experts.evidence, "shown": GROUPED}


def test_a_low_precision_dtype_needs_the_router_verified_for_an_moe_model_only():
    bf16 = Profile(capabilities=Capabilities(dtypes={"bfloat16": Capability(status="supported", evidence="ran")}),
                   ops=[OpCaseRecord(op=op, dtype="bfloat16", case="c", status="pass") for op in RUNNER_OPS]
                   + [OpCaseRecord(op="moe_router", dtype="bfloat16", case="ties", status="fail")])
    facts = ProfileFacts(bf16)
    assert build_plan(facts, "stated", "cpu", builtin_config(), None, None).dtype.value == "bfloat16"
    moe = build_plan(facts, "stated", "cpu", MOE, None, None).dtype
    assert moe.value == "float32" and "moe_router ties: fail" in moe.evidence


def _engine(tmp_path, **options) -> LLMEngine:
    make_hf_moe_model(tmp_path / "model", mixtral_config())
    profile = write_profile(tmp_path / "p.yaml", ops_profile(GROUPED_EXPERT_OPS))
    return LLMEngine.create(EngineOptions(model_dir=tmp_path / "model", device="cpu", max_model_len=64,
                                          max_num_seqs=2, profile_path=profile, measurements=stated(), **options))


def _index_add_missing(self, *args, **kwargs):  # a device whose backend lacks the kernel
    raise NotImplementedError("Could not run 'aten::index_add.out' with arguments from the 'FakeDevice' backend")


def test_a_grouped_path_that_faults_falls_back_to_dense_recorded(tmp_path, monkeypatch):
    engine = _engine(tmp_path)
    greedy = SamplingParams(max_tokens=6, temperature=0.0, ignore_eos=True)
    prompt = list(range(5, 25))
    expected = engine.generate([prompt], greedy)[0].token_ids
    assert engine.fallbacks.counts["op"] == 0
    monkeypatch.setattr(torch.Tensor, "index_add_", _index_add_missing)
    assert engine.generate([prompt], greedy)[0].token_ids == expected  # the same tokens, now on the dense path
    assert {block.path for block in sparse_blocks(engine.executor.model)} == {DENSE}
    events = [e for e in engine.fallbacks.events if e.what == "experts"]
    assert engine.fallbacks.counts["op"] == 1 and len(events) == 1
    assert (events[0].wanted, events[0].instead) == (GROUPED, DENSE) and "aten::index_add" in events[0].why


def test_strict_refuses_the_fallback(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.Tensor, "index_add_", _index_add_missing)
    with pytest.raises(StrictFallbackError, match="experts"):
        _engine(tmp_path, strict=True)  # the warm-up runs the grouped path


@pytest.mark.parametrize("config", [mixtral_config(), qwen3_moe_config(decoder_sparse_step=1, mlp_only_layers=[1])],
                         ids=["mixtral", "qwen3_moe"])
def test_the_layout_plan_counts_every_expert_when_it_sizes_a_second_weight_copy(tmp_path, config):
    from bringup.runner.plan.layout import linear_weight_bytes
    from bringup.runner.sources.directory.loader import load_model, read_config

    make_hf_moe_model(tmp_path, config)
    ours = read_config(tmp_path)
    model = load_model(tmp_path, ours, torch.float32, "cpu")
    stored = sum(linear.weight("out_in").numel() * 4 for linear in model.linear_layers())
    assert linear_weight_bytes(ours, torch.float32) == stored
