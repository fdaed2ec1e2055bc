"""The plan's settings table (plan/settings.py) names exactly ExecutionPlan's settings, and its readers follow it."""

from __future__ import annotations

from dataclasses import fields

from bringup.runner.plan.confirm import COMPILED, EXPERTS
from bringup.runner.plan.host_kernels import FUSED_LAYERS, LAYOUT, PAGED
from bringup.runner.plan.plan import ExecutionPlan, build_plan
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.plan.settings import MEASURED_SETTINGS, PLAN_FIELD, SETTINGS, TUNE_ORDER
from bringup.runner.sources.builtin_model import builtin_config

NAMES = [s.name for s in SETTINGS]


def test_the_table_names_each_choice_of_the_plan_once():
    choices = [f.name for f in fields(ExecutionPlan) if f.type == "Choice"]
    assert len(NAMES) == len(set(NAMES))
    assert sorted(NAMES) == sorted(choices)


def test_the_plan_rows_follow_the_table():
    plan = build_plan(ProfileFacts(None), "none", "cpu", builtin_config(), None, None)
    assert [name for name, _, _ in plan.rows()] == NAMES


def test_the_confirmation_candidates_are_the_ones_it_times():
    assert list(PLAN_FIELD) == [COMPILED, PAGED, LAYOUT, EXPERTS, FUSED_LAYERS]  # confirm.py's order
    assert set(PLAN_FIELD.values()) <= set(MEASURED_SETTINGS)


def test_tune_prints_every_setting_a_record_decides_once():
    assert sorted(TUNE_ORDER) == sorted(MEASURED_SETTINGS)
    assert TUNE_ORDER == ("weight_layout", "attention", "compiled", "decode_layers", "experts", "max_num_seqs")
