"""`bringup devices` on the default spec's mixed machine: both emu devices listed with their memory and kind, the
discrete one chosen automatically with a reason that names the integrated one, and a bare `--device emu` taking
the discrete one by the same rule while `emu:0` still means device 0."""

import json

import pytest

from bringup_emu.default_spec import DEFAULT_SPEC
from bringup_emu.spec import parse_size
from tests.emulator.emu_cli import run_bringup
from tests.emulator.emu_process import emu_results

CAPS = [parse_size(d["memory"], "memory") for d in DEFAULT_SPEC["devices"]]
PASSED_OVER = "emu:0 (Emu iGPU) is integrated"


@pytest.fixture(scope="module")
def listed(tmp_path_factory) -> dict:
    done = run_bringup(["devices", "--json", "--no-write"], "default", tmp_path_factory.mktemp("devices"))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def emu_devices(listed: dict) -> list[dict]:
    (family,) = [f for f in listed["torch"] if f["family"] == "emu"]
    assert family["usable"]
    return family["devices"]


def test_both_devices_are_listed_with_their_memory_and_kind(listed):
    devices = emu_devices(listed)
    assert [d["id"] for d in devices] == ["emu:0", "emu:1"]
    assert [d["name"] for d in devices] == [d["name"] for d in DEFAULT_SPEC["devices"]]
    assert [d["integrated"] for d in devices] == [True, False]
    assert [d["memory_total_bytes"] for d in devices] == CAPS
    assert [d["memory_free_bytes"] for d in devices] == CAPS  # nothing allocated in a fresh process


def test_the_automatic_choice_is_the_discrete_device_and_the_reason_names_both(listed):
    selected = listed["selected"]
    assert selected["id"] == "emu:1" and selected["source"] == "auto"
    assert selected["reason"] == f"discrete; {PASSED_OVER}"
    assert selected["others"] == ["emu:0", "cpu"]


def test_the_summary_shows_memory_and_kind_and_a_bare_type_takes_the_discrete_device(tmp_path):
    done = run_bringup(["devices", "--no-write", "--device", "emu"], "default", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert "  emu:0 (Emu iGPU): integrated, memory 512.0 MiB (512.0 MiB free)" in lines
    assert "  emu:1 (Emu dGPU): discrete, memory 8.0 GiB (8.0 GiB free)" in lines
    assert ("selected emu:1 (Emu dGPU): --device emu (no index: of the 2 emu devices the automatic rule prefers "
            f"emu:1, discrete; {PASSED_OVER})") in lines


def test_an_index_still_names_the_device_and_the_environment_variable_follows_the_rule():
    seen = emu_results("""
import os
from bringup.backends.selection.select import select_device
indexed = select_device("emu:0")
os.environ["BRINGUP_DEVICE"] = "emu"
bare = select_device(None)
report(indexed=[indexed.info.id, indexed.reason], bare=[bare.info.id, bare.source, bare.reason])
""")
    assert seen["indexed"] == ["emu:0", "--device emu:0"]
    assert seen["bare"][:2] == ["emu:1", "env"] and seen["bare"][2].startswith("BRINGUP_DEVICE=emu (no index:")
