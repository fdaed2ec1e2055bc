"""verify-collectives over two emulated devices: one rank on each, gloo staged through the host (the emu family
declares no collective library), exact results, the fallback recorded, and faults named as on any device.

One CLI run per scenario (module fixtures), each with two or three collectives at 4 B and 64 KiB."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.emulator.bringup_on_emu import EmuRun, require_entry_point, run_bringup, spec_of

SMALL = ["--sizes", "4,64K", "--dtype", "float32", "--iters", "2", "--warmup", "1"]
QUICK = [*SMALL, "--op", "barrier", "--op", "all_reduce_sum", "--op", "send_recv_ring"]
FAULT_VARIABLE = "BRINGUP_COLLECTIVES_INJECT_FAULT"


def collectives(tmp_path: Path, spec: str, *extra: str, fault: str | None = None, options: list[str] = QUICK
                ) -> tuple[EmuRun, dict]:
    require_entry_point()
    run = run_bringup(["verify-collectives", "--device", "emu", "--profile", str(tmp_path / "p.yaml"), "--json",
                       *options, *extra], spec, tmp_path, {FAULT_VARIABLE: fault} if fault else None)
    return run, run.document()["collectives"]


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> tuple[EmuRun, dict]:
    # the default spec: emu:0 integrated, emu:1 discrete, float64 refused; every operation
    return collectives(tmp_path_factory.mktemp("clean"), "default", "--dtype", "float64", options=SMALL)


def cases(section: dict, status: str | None = None) -> list[tuple[str, str, int]]:
    return [(c["op"], c["dtype"], c["size_bytes"]) for c in section["cases"] if status in (None, c["status"])]


def test_each_rank_runs_on_its_own_emu_device_through_the_host_staged_group(clean):
    run, section = clean
    assert run.code == 0, run.stderr[-3000:]
    assert (section["status"], section["world_size"], section["rank_devices"]) == ("pass", 2, ["emu:0", "emu:1"])
    assert (section["backend"], section["device_type"], section["data_path"]) == ("gloo_host_staged", "emu",
                                                                                 "host_staged")
    assert "time and bandwidth include the device-host copies" in section["backend_reason"]


def test_results_are_exact(clean):
    _, section = clean
    passed = [c for c in section["cases"] if c["status"] == "pass" and c["op"] != "barrier"]
    assert len(passed) == 14 and all(c["wrong"] == 0 and c["ranks"] == 2 for c in passed)
    assert {c["dtype"] for c in passed} == {"float32"} and all(c["busbw_gbps"] is not None for c in passed)


def test_the_terminal_and_the_report_label_the_bandwidth_host_staged(clean, capsys):
    from bringup.cli.commands.stages.verify_collectives import print_report
    from bringup.profiles.sections.collectives import CollectivesSection
    from bringup.report.sections.runs import collectives_view

    record = CollectivesSection.model_validate(clean[1])
    print_report(record, "p.yaml")
    text = " ".join(capsys.readouterr().out.split())
    assert "bandwidth in GB/s, host-staged: device -> host -> gloo -> device, copies included" in text
    assert "fallback: gloo with the buffers staged through the host" in text
    view = collectives_view(record)
    assert view.bandwidth_unit == "GB/s, host-staged"
    assert {f.label: f.value for f in view.facts}["ranks' devices"] == "emu:0, emu:1"


def test_the_refused_dtype_is_unsupported_with_the_devices_error_and_the_run_goes_on(clean):
    _, section = clean
    refused = [c for c in section["cases"] if c["dtype"] == "float64"]
    assert len(refused) == 14 and {c["status"] for c in refused} == {"unsupported"}
    assert "refuses float64: TypeError: emu: float64 is not supported on emu devices" in refused[0]["error"]


def test_the_fallback_is_a_warning_and_counted_in_the_section(clean):
    run, section = clean
    assert section["fallbacks"] == [{
        "level": "path", "what": "collectives backend", "wanted": "a device-native collective library for emu",
        "instead": "gloo with the buffers staged through the host",
        "why": "neither torch nor bringup's emu backend names a collective library for device type 'emu'"}]
    assert "WARNING" in run.stderr and "fallback[path] collectives backend" in " ".join(run.stderr.split())


def test_a_rank_that_corrupts_its_data_is_counted_wrong_on_emu(tmp_path):
    run, section = collectives(tmp_path, "default", fault="rank=1:corrupt:op=all_reduce_sum")
    assert run.code == 1 and section["faults"] == []
    wrong = {(c["op"], c["size_bytes"]): (c["status"], c["wrong"]) for c in section["cases"]}
    # 3 corrupted elements (1 in a 4-byte buffer) reach both ranks' sums; the ring stays exact
    assert wrong[("all_reduce_sum", 4)] == ("fail", 2) and wrong[("all_reduce_sum", 65536)] == ("fail", 6)
    assert wrong[("send_recv_ring", 65536)] == ("pass", 0)


def test_a_rank_that_exits_is_named(tmp_path):
    run, section = collectives(tmp_path, "default", fault="rank=1:exit:op=all_reduce_sum:code=7")
    assert run.code == 1
    culprits = [f for f in section["faults"] if f["culprit"]]
    assert [(f["rank"], f["kind"]) for f in culprits] == [(1, "exited")]
    assert "exited with code 7" in culprits[0]["detail"]


def test_a_rank_that_hangs_is_named_within_the_timeout(tmp_path):
    run, section = collectives(tmp_path, "default", "--timeout", "3", fault="rank=1:hang:op=all_reduce_sum")
    assert run.code == 1
    assert [(f["rank"], f["kind"]) for f in section["faults"] if f["culprit"]] == [(1, "hung")]
    assert ("all_reduce_sum", "float32", 4) in cases(section, "timeout")
    assert section["detected_after_s"] < 3


def test_a_device_kernel_that_aborts_is_named_on_every_rank_it_killed(tmp_path):
    # every rank compares its output with torch.equal, which this spec's device aborts on
    run, section = collectives(tmp_path, spec_of(2, abort=["equal"]))
    assert run.code == 1
    faults = [(f["rank"], f["kind"]) for f in section["faults"] if f["culprit"]]
    assert faults == [(0, "exited"), (1, "exited")]
    assert all("killed by signal SIGABRT during case 1 (all_reduce_sum" in f["detail"] for f in section["faults"])
    assert ("all_reduce_sum", "float32", 4) in cases(section, "crashed")
