"""bringup fleet over two local emu ranks: each rank's stages on its own emulated device, links through the
host-staged group, and the ranks unlike the others named -- a different device, or a rank that was killed."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.emulator.bringup_on_emu import EmuRun, require_entry_point, run_bringup, spec_of


def fleet(out: Path, spec: str, *extra: str) -> tuple[EmuRun, dict]:
    require_entry_point()
    run = run_bringup(["fleet", "--device", "emu", "--out", str(out), "--json", "--link-size", "64K", *extra],
                      spec, out)
    return run, run.document()


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> tuple[EmuRun, dict, Path]:
    # the default spec's two devices differ: emu:0 a 512 MiB integrated part, emu:1 an 8 GiB discrete one
    out = tmp_path_factory.mktemp("mixed")
    return (*fleet(out, "default", "--stages", "devices,probe,links"), out)


def test_each_rank_runs_its_stages_on_its_own_emu_device(mixed):
    from bringup.profiles.store import load_profile_or_none

    run, report, out = mixed
    assert [(r["rank"], r["device"]) for r in report["ranks"]] == [(0, "emu:0"), (1, "emu:1")], run.stderr[-3000:]
    for rank in report["ranks"]:
        assert {name: stage["exit_code"] for name, stage in rank["stages"].items()} == {
            "devices": 0, "probe": 0, "links": 0}
        profile = load_profile_or_none(out / rank["profile"])
        assert profile.device.id == rank["device"]
        assert profile.capabilities.dtypes["float64"].status == "unsupported"  # the spec refuses it on the device


def test_the_links_are_measured_through_the_host_staged_group_and_say_so(mixed):
    _, report, _ = mixed
    assert [list(r["links"]) for r in report["ranks"]] == [["0->1"], ["1->0"]]
    assert all(value > 0 for r in report["ranks"] for value in r["links"].values())
    links = report["collectives"]
    assert (links["backend"], links["device_type"], links["data_path"]) == ("gloo_host_staged", "emu", "host_staged")
    assert [f["instead"] for f in links["fallbacks"]] == ["gloo with the buffers staged through the host"]


def test_the_rank_on_the_other_kind_of_device_is_named(mixed):
    run, report, _ = mixed
    assert run.code == 1
    assert [(o["rank"], o["kind"]) for o in report["outliers"]] == [(1, "environment")]
    detail = report["outliers"][0]["detail"]
    assert "device.name: Emu dGPU here, Emu iGPU on 1 of 2 ranks" in detail
    assert "device.memory_total_bytes: 8589934592 here" in detail


def test_a_killed_rank_among_identical_devices_is_the_only_outlier(tmp_path):
    run, report = fleet(tmp_path, spec_of(2), "--stages", "devices,links", "--inject-fault", "1=kill@links")
    assert run.code == 1
    assert [(f["rank"], f["kind"], f["stage"]) for f in report["faults"] if f["culprit"]] == [(1, "exited", "links")]
    assert [(o["rank"], o["kind"]) for o in report["outliers"]] == [(1, "fault")]
    assert [r["device"] for r in report["ranks"]] == ["emu:0", "emu:1"]
