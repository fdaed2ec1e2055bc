"""Hostile profiles and report paths through the real CLI: never a hang, a traceback, a lost profile, or a raw
control character on the terminal.

Data-driven like tests/cli/test_hostile_inputs.py (whose Case, builders and one-line assertion it reuses): each case
builds the hostile file under tmp_path and returns the argv, and the fragments its one-line error must hold.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bringup.profiles.schema import (
    Capabilities,
    Capability,
    DeviceSection,
    EnvironmentSection,
    Profile,
    StageStamp,
)
from bringup.profiles.sections.ops import OpCaseRecord
from bringup.profiles.store import load_profile, render_yaml
from tests.cli.run_cli import CliResult, run_cli
from tests.cli.test_hostile_inputs import Builder, Case, assert_one_line_error, profile_text

HEADER = "schema: bringup.profile/v1\ndevice: {id: cpu, backend: cpu, name: x}\n"
# what a terminal would act on: clear screen, an OSC 8 link, a bell, a carriage return, a bidi override
ESCAPES = "\x1b[2J\x1b]8;;http://example.invalid\x1b\\link\x1b]8;;\x1b\\\x07\r\u202e"
MARKUP = "[/] [/bold] [link=http://example.invalid]x"


def nested_list(depth: int) -> str:
    return HEADER + f"bench: {{extra: {'[' * depth}{']' * depth}}}\n"


def plain_profile(**changes: object) -> Profile:
    """A small valid profile; `changes` replace device fields."""
    device = {"id": "cpu", "backend": "cpu", "name": "CPU", **changes}
    return Profile(
        device=DeviceSection.model_validate(device),
        environment=EnvironmentSection(bringup="0.1.0", torch="2.13.0", python="3.11", os="Linux"),
        capabilities=Capabilities(dtypes={"float32": Capability(status="supported", evidence="matmul ok")}),
        ops=[OpCaseRecord(op="softmax", dtype="float32", case="c1", status="pass")],
        stages={"probe": StageStamp(started="2026-01-01T00:00:00", bringup="0.1.0", status="complete")},
    )


def write(path: Path, profile: Profile) -> Path:
    path.write_text(render_yaml(profile))
    return path


def fifo_profile(tmp_path: Path, _good: Path) -> list[str]:
    os.mkfifo(tmp_path / "p.yaml")
    return ["profile", "show", str(tmp_path / "p.yaml")]


def device_linked_profile(tmp_path: Path, _good: Path) -> list[str]:
    (tmp_path / "p.yaml").symlink_to("/dev/zero")
    return ["profile", "show", "--json", str(tmp_path / "p.yaml")]


def directory_profile(*command: str) -> Builder:
    """A directory at {d}/dir.yaml, then `command` ({d}: its path)."""
    def build(tmp_path: Path, _good: Path) -> list[str]:
        (tmp_path / "dir.yaml").mkdir()
        return [a.replace("{d}", str(tmp_path / "dir.yaml")) for a in command]

    return build


def lock_is_a_directory(tmp_path: Path, _good: Path) -> list[str]:
    write(tmp_path / "p.yaml", Profile())  # no device recorded: any device may write it
    (tmp_path / "p.yaml.lock").mkdir()
    return ["devices", "--device", "cpu", "--profile", str(tmp_path / "p.yaml")]


def parent_is_a_file(tmp_path: Path, _good: Path) -> list[str]:
    (tmp_path / "file").write_text("")
    return ["devices", "--device", "cpu", "--profile", str(tmp_path / "file" / "p.yaml")]


def report_over(profile_name: str, *extra: str) -> Builder:
    """A valid profile at {tmp}/<profile_name>, then `report -p` it with `extra` ({p}: its path)."""
    def build(tmp_path: Path, _good: Path) -> list[str]:
        path = write(tmp_path / profile_name, plain_profile())
        return ["report", "-p", str(path), *(a.replace("{p}", str(path)).replace("{tmp}", str(tmp_path))
                                             for a in extra)]

    return build


def report_through_link(tmp_path: Path, _good: Path) -> list[str]:
    target = write(tmp_path / "target.yaml", plain_profile())
    (tmp_path / "link.yaml").symlink_to(target)
    return ["report", "-p", str(tmp_path / "link.yaml"), "--format", "md", "-o", str(target)]


def baseline_as_output(tmp_path: Path, _good: Path) -> list[str]:
    path, old = write(tmp_path / "new.yaml", plain_profile()), write(tmp_path / "old.yaml", plain_profile())
    return ["report", "-p", str(path), "-b", str(old), "-o", str(old)]


def two_profiles(*extra: str) -> Builder:
    def build(tmp_path: Path, _good: Path) -> list[str]:
        a, b = write(tmp_path / "a.yaml", plain_profile()), write(tmp_path / "b.yaml", plain_profile())
        return ["profile", "diff", str(a), str(b), *extra]

    return build


NOT_FILES = [
    Case("a FIFO as profile show", fifo_profile, ("FIFO", "not a regular file")),
    Case("a link to /dev/zero", device_linked_profile, ("character device", "not a regular file")),
    Case("a directory: profile validate", directory_profile("profile", "validate", "{d}"), ("a directory",)),
    Case("a directory: devices --force", directory_profile("devices", "--device", "cpu", "--force", "--profile", "{d}"),
         ("cannot write profile", "directory")),
    Case("a directory: probe", directory_profile("probe", "--device", "cpu", "--profile", "{d}"), ("a directory",)),
]
WRITE_FAULTS = [
    Case("the lock is a directory", lock_is_a_directory, ("cannot write profile", "p.yaml")),
    Case("the parent is a file", parent_is_a_file, ("cannot write profile", "file/p.yaml")),
]
CONTENT = [
    Case("a 5,000-digit integer", profile_text(HEADER.replace("name: x", "name: x, memory_total_bytes: " + "9" * 5000),
                                               "profile", "show", "{p}"), ("cannot be read", "4300")),
    Case("a list nested 900 deep (show --json)", profile_text(nested_list(900), "profile", "show", "--json", "{p}"),
         ("more than 64 levels", "line 3")),
    Case("a list nested 900 deep (diff)", profile_text(nested_list(900), "profile", "diff", "{p}", "{p}"),
         ("more than 64 levels",)),
    Case("a list nested 100,000 deep (libyaml's own limit)", profile_text(nested_list(100_000), "profile", "show",
                                                                          "{p}"), ("nesting depth", "line 3")),
    Case("a tagged nested list (the full loader)", profile_text(HEADER + "bench: !!map {a: " + "[" * 80 + "]" * 80
                                                               + "}\n", "profile", "show", "{p}"),
         ("more than 64 levels",)),
    Case("a python tag", profile_text(HEADER + "x: !!python/object:os.system {}\n", "profile", "show", "{p}"),
         ("not valid YAML",)),
    Case("two documents", profile_text(HEADER + "---\n" + HEADER, "profile", "show", "{p}"), ("not valid YAML",)),
]
REPORT_PATHS = [
    Case("report -p prof.html (the default output is the profile)", report_over("prof.html"),
         ("is the input", "prof.html")),
    Case("report -p p.yaml -o p.yaml --format md", report_over("p.yaml", "-o", "{p}", "--format", "md"),
         ("is the input", "choose another -o path")),
    Case("report -p link -o its target", report_through_link, ("is the input", "link.yaml")),
    Case("report -b old.yaml -o old.yaml", baseline_as_output, ("is the input", "old.yaml")),
]
DIFF_OPTIONS = [
    Case("diff --fail-on bogus", two_profiles("--fail-on", "bogus"), ("--fail-on", "'bogus'", "capabilities, ops")),
    Case("diff --fail-on ''", two_profiles("--fail-on", ""), ("--fail-on", "empty")),
    Case("diff --fail-on ops,none", two_profiles("--fail-on", "ops,none"), ("'none'",)),
]
CORPUS = NOT_FILES + WRITE_FAULTS + CONTENT + REPORT_PATHS + DIFF_OPTIONS


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", CORPUS, ids=lambda case: case.name)
def test_hostile_profile_ends_in_one_line(case: Case, tmp_path: Path) -> None:
    assert_one_line_error(run_cli(case.build(tmp_path, tmp_path)), *case.fragments)


def test_invalid_utf8_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_bytes(HEADER.encode() + b"x: \xff\xfe\n")
    assert_one_line_error(run_cli(["profile", "show", str(tmp_path / "p.yaml")]), "cannot be read", "utf-8")


def test_the_size_cap_is_stated_and_can_be_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path / "p.yaml", plain_profile())
    with path.open("a") as f:
        f.write("# " + "x" * (2 << 20) + "\n")
    monkeypatch.setenv("BRINGUP_MAX_PROFILE_MB", "1")
    assert_one_line_error(run_cli(["profile", "validate", str(path)]), "more than the 1 MiB",
                          "BRINGUP_MAX_PROFILE_MB")
    monkeypatch.setenv("BRINGUP_MAX_PROFILE_MB", "3")
    assert run_cli(["profile", "validate", str(path)]).code == 0


# ---------------------------------------------------------------- the terminal never receives a raw control character

def hostile_profile() -> Profile:
    """ESC sequences and rich markup in every kind of string a profile carries that the CLI prints."""
    profile = plain_profile(name="CPU" + ESCAPES + MARKUP, vendor="V" + ESCAPES, arch=MARKUP + ESCAPES)
    profile.environment.os = "Linux" + ESCAPES + MARKUP
    profile.capabilities.dtypes["bfloat16"] = Capability(status="unsupported", reason="no" + ESCAPES + MARKUP)
    profile.capabilities.dtypes["float32"].evidence = "ev" + ESCAPES + MARKUP
    profile.ops[0].case = "case" + ESCAPES + MARKUP
    profile.ops[0].status = "fail"
    profile.ops[0].message = "msg" + ESCAPES + MARKUP
    profile.stages["probe" + ESCAPES] = StageStamp(started="2026", bringup="0.1" + ESCAPES, status="complete")
    return profile


def assert_terminal_safe(result: CliResult, code: int = 0) -> None:
    output = result.stdout + result.stderr
    assert result.code == code, (result.code, output[-2000:])
    assert "Traceback" not in output
    for raw in ("\x1b", "\x07", "\r", "\u202e"):
        assert raw not in output, (raw, output[-2000:])
    assert "\\x1b" in output  # the hostile string was printed, its escapes shown


@pytest.mark.parametrize(("command", "markup_shown"), [
    (["profile", "show", "{h}"], "[/bold]"),
    (["profile", "validate", "{h}"], ""),
    (["profile", "diff", "{c}", "{h}"], "[/bold]"),
    (["profile", "diff", "{h}", "{c}", "--details"], "[/bold]"),
    (["report", "-p", "{h}", "--format", "md", "-o", "-"], "\\[/bold\\]"),
    (["report", "-p", "{h}", "-b", "{c}", "--format", "md", "-o", "-"], "\\[/bold\\]"),
], ids=lambda value: " ".join(value) if isinstance(value, list) else "")
def test_profile_strings_reach_the_terminal_escaped(command: list[str], markup_shown: str, tmp_path: Path) -> None:
    hostile = write(tmp_path / ("h" + "\x1b[2J" + ".yaml"), hostile_profile())  # the file name too
    clean = write(tmp_path / "c.yaml", plain_profile())
    result = run_cli([a.replace("{h}", str(hostile)).replace("{c}", str(clean)) for a in command])
    assert_terminal_safe(result, 1 if command[:2] == ["profile", "diff"] else 0)
    assert markup_shown in result.stdout  # markup printed as text, never interpreted


def test_a_hostile_string_in_an_error_line_is_escaped(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(HEADER.replace("schema: bringup.profile/v1", 'schema: "v9\\e[2J[/]"'))
    result = run_cli(["profile", "show", str(path)])
    assert_one_line_error(result, "has schema")
    assert "\x1b" not in result.stderr


def test_the_markdown_report_file_holds_no_control_character(tmp_path: Path) -> None:
    hostile = write(tmp_path / "h.yaml", hostile_profile())
    assert run_cli(["report", "-p", str(hostile), "--format", "md"]).code == 0
    text = (tmp_path / "h.md").read_text()
    assert "\x1b" not in text and "\\x1b" in text


# ---------------------------------------------------------------- profiles are never lost

def devices_into(path: Path) -> CliResult:
    return run_cli(["devices", "--device", "cpu", "--profile", str(path)])


def test_a_write_through_a_link_updates_the_target_and_keeps_the_link(tmp_path: Path) -> None:
    target, link = tmp_path / "real" / "target.yaml", tmp_path / "link.yaml"
    target.parent.mkdir()
    link.symlink_to(target)  # dangling: the first write creates the target
    for _ in range(2):
        result = devices_into(link)
        assert result.code == 0, result.stderr
        assert link.is_symlink() and os.readlink(link) == str(target)
        assert load_profile(target).stages["devices"].status == "complete"
    assert not (tmp_path / "link.yaml.lock").exists()  # the lock sits beside the real file


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604])
def test_a_stage_write_keeps_the_profile_mode(mode: int, tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    assert devices_into(path).code == 0
    path.chmod(mode)
    assert devices_into(path).code == 0
    assert stat.S_IMODE(path.stat().st_mode) == mode


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_profile_gets_the_umask_default(umask: int, mode: int, tmp_path: Path) -> None:
    old = os.umask(umask)
    try:
        assert devices_into(tmp_path / "p.yaml").code == 0
        assert run_cli(["report", "-p", str(tmp_path / "p.yaml"), "--format", "md"]).code == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "p.yaml").stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "p.md").stat().st_mode) == mode


def test_a_refused_report_leaves_the_profile_as_it_was(tmp_path: Path) -> None:
    path = write(tmp_path / "prof.html", plain_profile())
    before = path.read_bytes()
    assert run_cli(["report", "-p", str(path)]).code == 2
    assert path.read_bytes() == before


def test_force_never_replaces_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p.yaml")
    result = run_cli(["devices", "--device", "cpu", "--force", "--profile", str(tmp_path / "p.yaml")])
    assert_one_line_error(result, "cannot write profile", "FIFO")
    assert stat.S_ISFIFO((tmp_path / "p.yaml").stat().st_mode)


def unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(not unshare_works(), reason="needs `unshare -rm` (user and mount namespaces) for a read-only mount")
def test_a_profile_on_a_read_only_file_system_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    write(folder / "p.yaml", Profile())
    command = [sys.executable, "-m", "bringup", "devices", "--device", "cpu", "--profile", str(folder / "p.yaml")]
    script = f'mount --bind -o ro "{folder}" "{folder}" && exec "$@"'
    done = subprocess.run(["unshare", "-rm", "sh", "-c", script, "sh", *command], capture_output=True, text=True,
                          timeout=300)
    if "mount:" in done.stderr:
        pytest.skip(f"a read-only bind mount is not allowed here: {done.stderr.strip()[:200]}")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot write profile" in errors[0] and "Read-only file system" in errors[0]


# ---------------------------------------------------------------- profile diff gates on op verdicts

def with_ops(path: Path, statuses: list[str]) -> Path:
    profile = plain_profile()
    profile.ops = [OpCaseRecord(op="softmax", dtype="float32", case=f"c{i}", status=s)  # type: ignore[arg-type]
                   for i, s in enumerate(statuses)]
    return write(path, profile)


def test_diff_fails_on_op_regressions_only_when_asked(tmp_path: Path) -> None:
    passing = with_ops(tmp_path / "a.yaml", ["pass"] * 2000)
    failing = with_ops(tmp_path / "b.yaml", ["fail"] * 2000)
    args = ["profile", "diff", str(passing), str(failing)]
    assert run_cli(args).code == 0  # today's default: only capabilities fail a diff
    gated = run_cli([*args, "--fail-on", "ops"])
    assert gated.code == 1 and "FAIL: 2000 difference(s) in ops" in gated.stdout
    assert run_cli([*args, "--fail-on", "capabilities,ops"]).code == 1
    data = json.loads(run_cli([*args, "--fail-on", "ops", "--json"]).stdout)
    assert data["failing"] == 2000 and data["fail_on"] == ["ops"]
    improved = run_cli(["profile", "diff", str(failing), str(passing), "--fail-on", "ops"])
    assert improved.code == 0  # fail -> pass is no regression


def test_large_profiles_parsed_in_parallel_diff_as_one_after_the_other(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Past PARALLEL_PARSE_BYTES the second profile is parsed in a forked process: the same answer, and an
    error in that file is still one line naming it."""
    import bringup.profiles.store as store

    passing = with_ops(tmp_path / "a.yaml", ["pass"] * 300)
    failing = with_ops(tmp_path / "b.yaml", ["pass"] * 250 + ["fail"] * 50)
    args = ["profile", "diff", str(passing), str(failing), "--fail-on", "ops", "--json"]
    one_after_the_other = run_cli(args)
    monkeypatch.setattr(store, "PARALLEL_PARSE_BYTES", 0)
    in_parallel = run_cli(args)
    assert in_parallel.code == one_after_the_other.code == 1
    assert json.loads(in_parallel.stdout) == json.loads(one_after_the_other.stdout)
    assert json.loads(in_parallel.stdout)["failing"] == 50
    broken = tmp_path / "broken.yaml"
    broken.write_text(passing.read_text().replace("schema: bringup.profile/v1", "schema: v9"))
    assert_one_line_error(run_cli(["profile", "diff", str(passing), str(broken)]), str(broken), "has schema")


def test_a_vanished_passing_case_is_a_regression_and_none_turns_the_gate_off(tmp_path: Path) -> None:
    before = with_ops(tmp_path / "a.yaml", ["pass", "pass"])
    after = with_ops(tmp_path / "b.yaml", ["pass"])
    assert run_cli(["profile", "diff", str(before), str(after), "--fail-on", "ops"]).code == 1
    changed = write(tmp_path / "c.yaml", plain_profile())
    changed.write_text(changed.read_text().replace("status: supported", "status: unsupported"))
    assert run_cli(["profile", "diff", str(before), str(changed)]).code == 1
    assert run_cli(["profile", "diff", str(before), str(changed), "--fail-on", "none"]).code == 0


def test_the_event_reader_matches_the_safe_loader_on_the_reference_profiles() -> None:
    from bringup.profiles.plain_yaml import load_plain

    reference = Path(__file__).resolve().parents[2] / "reference" / "profiles"
    for path in sorted(reference.glob("*.yaml")):
        text = path.read_text()
        assert load_plain(text, 64) == yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


# ---------------------------------------------------------------- strings from the OS reach the terminal escaped too

def test_os_device_strings_reach_the_terminal_escaped(tmp_path: Path) -> None:
    from tests.backends.sysfs import add_nodes, add_pci

    add_pci(tmp_path, "0000:01:00.0", "0x10de", "0x2520", "0x030200",
            "nv\x1b[2J\x07\u202e[bold]")  # a driver name (no '/': it is a directory name); details list it
    add_nodes(tmp_path, "nvidia0")
    result = run_cli(["devices", "--device", "cpu", "--no-write", "--system-root", str(tmp_path), "--details"])
    assert_terminal_safe(result)
