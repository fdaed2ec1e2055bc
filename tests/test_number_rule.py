"""The one number rule (bringup/number_rule.py) and every reader that uses it: profile sections, plan records, tune
records, emulator specs, model configs and export each refuse a superscript two, Arabic-Indic digits, 10^40, a
5,000-digit number, NaN, a negative number and a bool, in one line naming the field."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from bringup.errors import BringupError
from bringup.export.evidence import collective_devices, host_cores
from bringup.export.model_shape import read_shape
from bringup.export.tuned import TunedPlan
from bringup.number_rule import NumberRefused, real_number, whole_number
from bringup.profiles.base_model import READ_FROM_FILE
from bringup.profiles.sections.collectives import CollectivesSection
from bringup.profiles.sections.models import ModelPlanRecord
from bringup.runner.model.config.fields import Fields
from tests.export.built import collectives, host_device, tuned, verified

DIGITS_5000 = "9" * 5000
HOSTILE = ["²", "١٠٢٤", 10**40, DIGITS_5000, 10**5000, math.nan, -1, True]
IDS = ["superscript", "arabic-indic", "1e40", "5000-digit-text", "5000-digit-int", "nan", "negative", "bool"]


def finite_int(value) -> bool:
    """-1 and 10^40: a real number within a float's range (10^5000 is beyond it, a bool is none)."""
    return isinstance(value, int) and not isinstance(value, bool) and value.bit_length() < 1000


def one_line(message: str, *fragments: str) -> None:
    assert "\n" not in message and len(message) < 400, message
    for fragment in fragments:
        assert fragment in message, message


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_the_rule_refuses_each_in_one_line_naming_the_field(value) -> None:
    with pytest.raises(NumberRefused) as whole:
        whole_number(value, "things.count", 1 << 20)
    one_line(str(whole.value), "things.count")
    if finite_int(value):
        return  # a real number may be it where the bound allows
    with pytest.raises(NumberRefused) as real:
        real_number(value, "things.share", 1.0, 0.0)
    one_line(str(real.value), "things.share")


def test_the_bounds_are_named_and_ascii_numbers_within_them_pass() -> None:
    assert whole_number(" 1024 ", "n", 4096) == 1024 and whole_number(7, "n") == 7
    assert real_number("2.5e-3", "x") == 0.0025 and real_number(3, "x") == 3.0
    with pytest.raises(NumberRefused, match=r"n: 5000 is more than 4,096, the most it can be"):
        whole_number(5000, "n", 4096)
    with pytest.raises(NumberRefused, match=r"more than 4,096"):
        whole_number("0" * 10 + "5000", "n", 4096)
    with pytest.raises(NumberRefused, match="not a whole number"):
        whole_number("64", "n", strings=False)
    with pytest.raises(NumberRefused, match="larger than any float"):
        real_number(10**400, "x")


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_a_profile_section_refuses_each(value) -> None:
    raw = collectives().model_dump()
    with pytest.raises(ValidationError) as caught:
        CollectivesSection.model_validate({**raw, "world_size": value}, context=READ_FROM_FILE)
    assert "world_size" in str(caught.value)
    if not finite_int(value):  # a float field takes a finite number of either sign
        with pytest.raises(ValidationError, match="seconds"):
            CollectivesSection.model_validate({**raw, "seconds": value}, context=READ_FROM_FILE)


def test_a_profile_file_refuses_each_number_naming_its_place(tmp_path) -> None:
    from bringup.profiles.store import load_profile, render_yaml
    from tests.export.built import with_plan

    text = render_yaml(with_plan(verified(), tuned("/models/m")))
    for old, new in (("runs: 2", "runs: '²'"), ("runs: 2", "runs: '١٠٢٤'"), ("runs: 2", "runs: true"),
                     ("runs: 2", "runs: -1"), ("runs: 2", f"runs: {10**40}"), ("layout_stream_bytes: 1",
                                                                            "layout_stream_bytes: .nan")):
        assert old in text
        path = tmp_path / "p.yaml"
        path.write_text(text.replace(old, new))
        with pytest.raises(BringupError) as caught:
            load_profile(path)
        one_line(str(caught.value), new.split(":")[0])


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_a_tune_record_refuses_each(value) -> None:
    raw = tuned("/models/m").model_dump()
    for change in ({"runs": value}, {"by_batch": {value: 0.5}}, {"layout_stream_bytes": value}):
        with pytest.raises(ValidationError):
            ModelPlanRecord.model_validate({**raw, **change}, context=READ_FROM_FILE)


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_a_plan_record_value_is_refused_where_export_reads_it(value) -> None:
    written = DIGITS_5000 if finite_int(value) is False and isinstance(value, int) and value > 1 else value
    plan = TunedPlan("m [ab]", tuned("/models/m", kv=f"{written} × 16 tokens"))
    record = plan.record.model_copy(update={"plan": {**plan.record.plan, "max_model_len": plan.record.plan[
        "dtype"].model_copy(update={"value": value})}})
    with pytest.raises(BringupError) as caught:
        TunedPlan("m [ab]", record).number("max_model_len")
    one_line(str(caught.value), "models['m [ab]'].plan.max_model_len")
    with pytest.raises(BringupError, match=r"plan\.kv_blocks"):
        plan.kv_tokens()


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_an_emulator_spec_refuses_each_memory_and_factor(value) -> None:
    from bringup_emu.spec import SpecError, parse_spec

    for raw, field in (({"devices": [{"name": "d", "memory": value}]}, "devices[0].memory"),
                       ({"devices": [{"name": "d", "memory": 1024}], "wrong": {"mm": value}}, "wrong['mm']")):
        with pytest.raises(SpecError) as caught:
            parse_spec(raw)
        one_line(str(caught.value), field)


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_a_model_config_refuses_each(value, tmp_path) -> None:
    fields = Fields({"num_hidden_layers": value, "rope_theta": value}, "config.json")
    with pytest.raises(BringupError) as caught:
        fields.size("num_hidden_layers", limit=4096)
    one_line(str(caught.value), "config.json: num_hidden_layers must be a positive integer")
    if not finite_int(value) or value < 0:
        with pytest.raises(BringupError, match="rope_theta"):
            fields.positive_number("rope_theta")
    if isinstance(value, int) and value.bit_length() > 4000:
        return  # no JSON text holds it: json refuses to read the digits (tested as text above)
    (tmp_path / "config.json").write_text(json.dumps({"num_hidden_layers": value, "num_attention_heads": 8,
                                                      "hidden_size": 512}))
    with pytest.raises(BringupError) as caught:
        read_shape(str(tmp_path))
    one_line(str(caught.value), "config.json: num_hidden_layers")


@pytest.mark.parametrize("value", HOSTILE, ids=IDS)
def test_export_refuses_each_core_count(value) -> None:
    device = host_device()
    profile = verified().model_copy(update={"device": device.model_copy(
        update={"extra": {**device.extra, "logical_cores": value}})})
    with pytest.raises(BringupError) as caught:
        host_cores(profile)
    one_line(str(caught.value), "device.extra.logical_cores")


def test_export_refuses_a_world_size_past_any_job() -> None:
    section = collectives(devices=2).model_copy(update={"world_size": 10**12, "rank_devices": []})
    profile = verified(host=False).model_copy(update={"collectives": section})
    with pytest.raises(BringupError, match=r"collectives.world_size: 1000000000000 is more than 65,536"):
        collective_devices(profile)


@pytest.mark.parametrize("header, size", [(b"1024", 1024), (b"", None), ("²".encode(), None),
                                          ("١٠٢٤".encode(), None), (b"-1", None), (b"9" * 5000, (1 << 63) - 1)])
def test_a_content_length_header_is_read_by_the_rule(header, size) -> None:
    from bringup.serve.http.middleware import declared_size

    assert declared_size(header) == size


@pytest.mark.parametrize("text, shown", [("1073741824\n", "1.0 GiB"), ("max\n", None), ("²", None),
                                         ("9" * 5000, None), ("-1", None)])
def test_a_cgroup_memory_limit_is_read_by_the_rule(tmp_path, text, shown) -> None:
    from bringup.probes.env_facts.host import cgroup_memory_limit

    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/memory.max").write_text(text)
    assert cgroup_memory_limit(tmp_path) == shown
