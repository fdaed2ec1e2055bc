"""Every stage's own terminal output speaks the verdict's four words (pass / warn / fail / skip) and ends with the
line the verdict gives its section, `stage: n pass, n warn, n fail, n skip`; the profile and --json keep the stored
statuses. Real CLI runs; a held-back fault (a torch.library override of the CPU's float32 softmax) turns lines
into `fail`."""

from __future__ import annotations

import json
import re

import pytest

from bringup.profiles.store import load_profile
from bringup.profiles.verdict import verdict_of
from bringup.profiles.verdict.capability_checks import capability_checks
from bringup.profiles.verdict.device_checks import unusable_device_check, usable_device_check
from bringup.profiles.verdict.section_line import section_line
from tests.backends.sysfs import intel_igpu_nvidia_dgpu
from tests.cli.run_cli import run_cli
from tests.cli.test_all import wrong_float32_softmax  # noqa: F401  (a fixture)

LINE = re.compile(r"^(?P<stage>[a-z-]+): \d+ pass, \d+ warn, \d+ fail, \d+ skip$")
STORED_WORDS = re.compile(r"^(supported|unsupported|unknown|not passing|unsupported here|ok|failed)\b")


def last_line(text: str) -> str:
    return text.rstrip("\n").splitlines()[-1]


def assert_no_stored_words_lead(text: str) -> None:
    leading = [line for line in text.splitlines() if STORED_WORDS.match(line)]
    assert not leading, leading


def test_probe_grades_capabilities_as_the_verdict_does(tmp_path):
    path = tmp_path / "p.yaml"
    result = run_cli(["probe", "--device", "cpu", "--only", "dtypes", "--profile", str(path)])
    assert result.code == 0, result.stderr[-2000:]
    checks = capability_checks(load_profile(path).capabilities, load_profile(path).ops)
    assert last_line(result.stdout) == section_line("probe", checks)
    assert re.match(r"probe: \d+ pass, 0 warn, 0 fail, [1-9]\d* skip$", last_line(result.stdout))
    assert re.search(r"^skip \(not applicable\): dtypes\.float8_e4m3fn", result.stdout, re.M)  # not "unsupported"
    assert_no_stored_words_lead(result.stdout)

    details = run_cli(["probe", "--device", "cpu", "--only", "dtypes", "--profile", str(path), "--details"])
    rows = {m[1]: m[2] for m in re.finditer(r"│ (dtypes\.\w+)\s*│ (\w+)\s*│", details.stdout)}
    assert rows["dtypes.float32"] == "pass" and rows["dtypes.float8_e4m3fn"] == "skip", rows
    assert set(rows.values()) <= {"pass", "warn", "fail", "skip"}
    assert last_line(details.stdout) == last_line(result.stdout)

    stored = json.loads(run_cli(["probe", "--device", "cpu", "--only", "dtypes", "--profile", str(path),
                                 "--json"]).stdout)["capabilities"]
    assert stored["dtypes.float32"]["status"] == "supported"  # --json keeps the profile's words
    assert stored["dtypes.float8_e4m3fn"]["status"] == "unsupported"


def test_verify_ops_ends_with_its_section_line_and_a_fault_turns_it_to_fail(tmp_path, wrong_float32_softmax):  # noqa: F811
    path = tmp_path / "p.yaml"
    args = ["verify-ops", "--no-isolate", "--device", "cpu", "--op", "softmax", "--dtype", "float32",
            "--profile", str(path)]
    result = run_cli(args)
    assert result.code == 1, result.stderr[-2000:]
    assert last_line(result.stdout) == "verify-ops: 1 pass, 0 warn, 6 fail, 0 skip"
    assert re.search(r"^fail: softmax\[float32\]$", result.stdout, re.M)
    verdict = verdict_of(load_profile(path))
    assert last_line(result.stdout) == section_line("verify-ops", verdict.checks)  # the verdict's own count
    assert_no_stored_words_lead(result.stdout)

    details = run_cli([*args, "--details"])
    assert "1/7, 6 fail" in details.stdout  # the op x dtype cell
    failing = details.stdout[details.stdout.index("failing cases (6)"):]
    assert len(re.findall(r"│ fail\s+│", failing)) == 6  # the result column, one per failing case
    assert last_line(details.stdout) == last_line(result.stdout)
    as_json = json.loads(run_cli([*args, "--json"]).stdout)
    assert as_json["summary"]["ops"] == {"pass": 1, "fail": 6}  # stored statuses, unchanged


def test_verify_ops_skips_what_the_probe_declares_absent_and_warns_without_it(tmp_path):
    bare = tmp_path / "bare.yaml"
    args = ["verify-ops", "--no-isolate", "--device", "cpu", "--op", "sdpa_efficient", "--dtype", "float32"]
    warned = run_cli([*args, "--profile", str(bare)])
    assert last_line(warned.stdout) == "verify-ops: 0 pass, 6 warn, 0 fail, 0 skip"
    assert re.search(r"^warn: sdpa_efficient\[float32\]$", warned.stdout, re.M)
    probed = tmp_path / "probed.yaml"
    assert run_cli(["probe", "--device", "cpu", "--only", "attention", "--profile", str(probed)]).code == 0
    skipped = run_cli([*args, "--profile", str(probed), "--details"])
    assert last_line(skipped.stdout) == "verify-ops: 0 pass, 0 warn, 0 fail, 6 skip"
    assert re.search(r"│ sdpa_efficient\s*│ float32\s*│ skip\s*│ 6\s*│ not applicable", skipped.stdout)
    assert skipped.code == warned.code == 1  # nothing verified either way: the exit code is unchanged


def test_selftest_ends_with_its_section_line(tmp_path):
    from bringup.profiles.verdict.run_checks import selftest_checks

    path = tmp_path / "p.yaml"
    result = run_cli(["selftest", "--device", "cpu", "--steps", "4", "--profile", str(path)])
    assert result.code == 0, result.stderr[-2000:]
    assert last_line(result.stdout) == "selftest: 1 pass, 0 warn, 0 fail, 0 skip"
    assert last_line(result.stdout) == section_line("selftest", selftest_checks(load_profile(path).selftest))


def test_bench_grades_groups_and_ends_with_its_line(tmp_path):
    result = run_cli(["bench", "--device", "cpu", "--quick", "--budget", "0.05", "--only", "dispatch,transfer",
                      "--profile", str(tmp_path / "p.yaml")])
    assert result.code == 0, result.stderr[-2000:]
    assert last_line(result.stdout) == "bench: 1 pass, 0 warn, 0 fail, 1 skip"
    assert re.search(r"^dispatch pass: \d+ measured", result.stdout, re.M)
    assert re.search(r"^transfer skip: not applicable", result.stdout, re.M)
    details = run_cli(["bench", "--device", "cpu", "--quick", "--budget", "0.05", "--only", "transfer",
                       "--profile", str(tmp_path / "p.yaml"), "--details"])
    assert re.search(r"^transfer — skip", details.stdout, re.M) and "not_applicable" not in details.stdout


def test_devices_grade_what_torch_can_and_cannot_use(tmp_path):
    root = intel_igpu_nvidia_dgpu(tmp_path / "root")
    result = run_cli(["devices", "--no-write", "--system-root", str(root)])
    assert result.code == 0, result.stderr[-2000:]
    assert last_line(result.stdout) == "devices: 1 pass, 2 warn, 0 fail, 0 skip"  # the CPU; the GPUs it cannot use
    assert re.search(r"^warn: 0000:01:00\.0 NVIDIA .*: not usable by torch here: ", result.stdout, re.M)
    details = run_cli(["devices", "--no-write", "--system-root", str(root), "--details"])
    assert re.search(r"┃ result\s*┃", details.stdout) and details.stdout.count("│ warn ") == 2
    assert last_line(details.stdout) == last_line(result.stdout)


@pytest.mark.parametrize(("family", "reason", "result"), [
    ("cuda", "this torch build (2.13.0+cpu) has no CUDA support", "warn"),
    ("cuda", "no driver device node (nvidia nodes under /dev are missing)", "warn"),
    ("cuda", "hidden by CUDA_VISIBLE_DEVICES='1'", "skip"),
    (None, "no torch backend drives ASPEED devices (a plain display adapter for this machine)", "skip"),
])
def test_an_unusable_device_warns_unless_it_is_not_for_torch_or_hidden_on_purpose(family, reason, result):
    check = unusable_device_check("0000:03:00.0", "NVIDIA 3D controller", family, reason)
    assert check.result == result and reason in check.reason
    assert usable_device_check("cuda:0", "H100").result == "pass"


def test_every_stage_line_has_the_one_shape():
    assert LINE.match(section_line("bench", []))
    assert section_line("bench", []) == "bench: 0 pass, 0 warn, 0 fail, 0 skip"


def test_profile_show_prints_each_sections_line_and_grades_capabilities():
    from pathlib import Path

    path = sorted((Path(__file__).parents[2] / "reference" / "profiles").glob("*zen3*.yaml"))[0]
    shown = run_cli(["profile", "show", str(path)])
    assert shown.code == 0, shown.stderr[-2000:]
    verdict = verdict_of(load_profile(path))
    for stage in ("probe", "verify-ops", "compiled", "bench", "selftest"):
        line = section_line(stage, [c for c in verdict.checks if c.stage == stage])
        assert re.search(rf"^{re.escape(line)}$", shown.stdout, re.M), line
    assert "verify-ops: 1042 pass, 0 warn, 0 fail, 36 skip" in shown.stdout
    assert re.search(r"│ dtypes\.float8_e4m3fn\s*│ skip\s*│ not applicable", shown.stdout)
    assert "│ unsupported" not in shown.stdout and "│ supported" not in shown.stdout
