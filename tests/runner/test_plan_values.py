"""The plan's values travel as data: the plan table's text is made from them in one place (plan/shown.py), a tune
record holds the values with that text beside them, and the export reads the numbers back from the record as written,
through a profile file, with no text parsed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from bringup.errors import BringupError
from bringup.export.tuned import TunedPlan
from bringup.profiles.schema import DeviceSection, Profile
from bringup.profiles.store import load_profile, render_yaml
from bringup.runner.model.config.builtin import builtin_config
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.layout import LayoutTimings
from bringup.runner.plan.measurements import StartupMeasurements
from bringup.runner.plan.plan import SETTING_NAMES, build_plan
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.plan.record.recorded import plan_record

KEY = "bringup-builtin [abcdef01]"


def served_plan():
    """The built-in model's draft, with the settings start-up sizes or chooses given as data."""
    plan = build_plan(ProfileFacts(None), "none", "cpu", builtin_config(), 4, 512)
    return replace(plan, kv_blocks=Choice(256, "sized from free memory"), compiled=Choice("inductor", "stated"),
                   attention=Choice(["paged_decode", "matmul_softmax"], "stated"),
                   host_fallbacks=Choice(["rms_norm", "rotary"], "stated"))


def recorded(plan) -> Profile:
    measured = StartupMeasurements(layouts=LayoutTimings({1: {"out_in": 1e-4}}), paged_decode=(True, "stated"),
                                   free_bytes=2**30)
    record = plan_record(measured, plan, "bringup-builtin", None, "ab" * 32, "2026-12-01T00:00:00+00:00", "0.1.0", 2,
                         {})
    return Profile(device=DeviceSection(id="cpu", backend="cpu", name="CPU"), models={KEY: record})


def test_the_plan_table_is_written_from_the_values():
    plan = served_plan()
    rows = {setting: value for setting, value, _ in plan.rows()}
    assert [setting for setting, _, _ in plan.rows()] == list(SETTING_NAMES)
    assert rows["kv_blocks"] == "256 × 16 tokens" and rows["compiled"] == "compiled (inductor)"
    assert rows["attention"] == "paged_decode > matmul_softmax" and rows["host_fallbacks"] == "rms_norm, rotary"
    assert rows["global_fallback"] == "none" and rows["max_num_seqs"] == "4" and rows["max_model_len"] == "512"
    assert replace(plan, compiled=Choice(None, "eager")).shown("compiled") == "eager"
    assert replace(plan, host_fallbacks=Choice([], "none")).shown("host_fallbacks") == "none"


def test_the_plan_as_json_keeps_its_values_as_data_beside_their_text():
    data = served_plan().to_dict()
    assert data["kv_blocks"] == {"value": 256, "evidence": "sized from free memory", "shown": "256 × 16 tokens"}
    assert data["attention"]["value"] == ["paged_decode", "matmul_softmax"]
    assert data["compiled"]["value"] == "inductor" and data["global_fallback"]["value"] is None
    assert data["max_num_seqs"]["value"] == 4 and data["block_size"] == 16


def test_a_tune_record_holds_data_through_the_profile_file_and_export_reads_its_numbers(tmp_path: Path):
    path = tmp_path / "p.yaml"
    path.write_text(render_yaml(recorded(served_plan())))
    record = load_profile(path).models[KEY]
    assert record.plan_format == 2 and record.block_size == 16
    assert record.plan["kv_blocks"].value == 256 and record.plan["kv_blocks"].shown == "256 × 16 tokens"
    assert record.plan["attention"].value == ["paged_decode", "matmul_softmax"]
    assert record.plan["compiled"].value == "inductor" and record.plan["global_fallback"].value is None
    assert record.shown("host_fallbacks") == "rms_norm, rotary"
    tuned = TunedPlan(KEY, record)
    assert tuned.kv_tokens() == 256 * 16
    assert (tuned.number("max_num_seqs"), tuned.number("max_model_len"), tuned.number("max_num_batched_tokens")) == (
        4, 512, 2048)
    with pytest.raises(BringupError, match=r"plan\.dtype: 'float32' is not a whole number"):
        tuned.number("dtype")  # a text where a number is asked for: refused, never guessed
    assert tuned.line("kv_blocks") == f"models[{KEY}].plan.kv_blocks: 256 × 16 tokens (sized from free memory)"


def test_a_boolean_is_refused_and_zero_is_no_number_of_the_plan(tmp_path: Path):
    plan = replace(served_plan(), max_num_seqs=Choice(True, "hand-edited"), kv_blocks=Choice(0, "not sized"))
    tuned = TunedPlan(KEY, recorded(plan).models[KEY])
    with pytest.raises(BringupError, match=r"plan\.max_num_seqs: True is not a whole number"):
        tuned.number("max_num_seqs")
    assert tuned.kv_tokens() is None
