"""Every op set the plan and the verdict read names only ops that some catalog case produces: a name no case produces
never matches a profile record, so the check it stands for is silently never made (plan.py's SDPA_OPS named
`scaled_dot_product_attention` and `sdpa`, which no case is). The attention kinds are the catalog's attention ops."""

from __future__ import annotations

from collections.abc import Collection
from types import ModuleType

import pytest

import bringup.profiles.hot_path as hot_path
import bringup.runner.plan.plan as plan
from bringup.probes.ops.catalog import builtin_ops
from bringup.profiles.attention_kinds import FUSED_SDPA, PLAIN_ATTENTION, SDPA_BACKENDS, SDPA_BY_PREFERENCE, SDPA_MATH
from bringup.runner.model.config.builtin import builtin_config


def catalog_ops() -> set[str]:
    return {spec.name for spec in builtin_ops()}


def op_sets(module: ModuleType) -> dict[str, Collection[str]]:
    """The module's op sets: its names ending in _OPS that hold a set or tuple of op names."""
    return {f"{module.__name__}.{name}": value for name, value in vars(module).items()
            if name.endswith("_OPS") and isinstance(value, set | frozenset | tuple)}


def unknown_ops(sets: dict[str, Collection[str]], known: set[str]) -> list[str]:
    """`set: op` for every op a set names that no catalog case produces."""
    return [f"{name}: {op}" for name, ops in sorted(sets.items()) for op in sorted(set(ops) - known)]


def test_every_op_set_of_the_hot_path_and_the_plan_names_only_ops_the_catalog_produces():
    sets = {**op_sets(hot_path), **op_sets(plan)}
    assert {"bringup.profiles.hot_path.DECODER_OPS", "bringup.profiles.hot_path.ATTENTION_OPS",
            "bringup.runner.plan.plan.RUNNER_OPS", "bringup.runner.plan.plan.PLAIN_OPS",
            "bringup.runner.plan.plan.GROUPED_EXPERT_OPS"} <= set(sets)
    assert unknown_ops(sets, catalog_ops()) == []


@pytest.mark.parametrize("module, name", [(hot_path, "WINDOW_OPS"), (plan, "RUNNER_OPS")])
def test_the_check_names_an_op_no_case_produces_injected_into_a_set(monkeypatch, module, name):
    monkeypatch.setattr(module, name, {*getattr(module, name), "scaled_dot_product_attention"})
    assert unknown_ops(op_sets(module), catalog_ops()) == [f"{module.__name__}.{name}: scaled_dot_product_attention"]


def test_the_ops_each_planned_path_runs_are_catalog_ops():
    known = catalog_ops()
    for first in (*SDPA_BY_PREFERENCE, PLAIN_ATTENTION):
        for experts in ("none", "dense", "grouped"):
            assert plan.path_ops([first], experts) <= known, (first, experts)
    assert plan.model_ops(builtin_config(), 4096) <= known


def test_the_attention_kinds_are_the_catalog_s_attention_ops_and_the_hot_path_s():
    attention = {spec.name for spec in builtin_ops() if spec.family == "attention"}
    assert set(SDPA_BACKENDS) <= attention and set(SDPA_BACKENDS) == hot_path.ATTENTION_OPS
    assert set(FUSED_SDPA) == set(SDPA_BACKENDS) - {SDPA_MATH}
    assert plan.path_ops([SDPA_BY_PREFERENCE[0]], "none") == {SDPA_BY_PREFERENCE[0]}
