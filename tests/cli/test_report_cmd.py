"""`bringup report` through a typer app of its own (the real app registers it lazily): paths, formats, bad input."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import typer

from bringup.cli.commands import report_cmd
from bringup.errors import BringupError
from tests.report.sample import REFERENCE_PROFILES, full_profile, write_profile

app = typer.Typer(pretty_exceptions_enable=False, add_completion=False)
app.command()(report_cmd.command)


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str


def run_report(args: list[str]) -> Result:
    """As `bringup`'s main does: a BringupError becomes one line on stderr and its exit code."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            app(args, standalone_mode=False)
        except BringupError as exc:
            print(f"error: {exc}", file=err)
            code = exc.exit_code
        except typer.Exit as exc:
            code = exc.exit_code
    return Result(code, out.getvalue(), err.getvalue())


def assert_one_line_error(result: Result, fragment: str) -> None:
    assert result.code == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and fragment in lines[0], result.stderr


def test_default_output_is_beside_the_profile(tmp_path):
    profile = write_profile(tmp_path / "gpu-a.yaml", full_profile())
    result = run_report(["--profile", str(profile)])
    assert result.code == 0, result
    written = tmp_path / "gpu-a.html"
    assert written.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert str(written) in result.stdout


def test_markdown_to_stdout(tmp_path):
    profile = write_profile(tmp_path / "p.yaml", full_profile())
    result = run_report(["-p", str(profile), "--format", "md", "-o", "-"])
    assert result.code == 0, result
    assert result.stdout.startswith("## bringup report")
    assert not (tmp_path / "p.md").exists()


def test_a_whole_report_to_stdout_is_the_same_as_the_file(tmp_path):
    """The document is written whole: the bound on one untrusted string shown in a terminal does not cut it."""
    profile = write_profile(tmp_path / "p.yaml", full_profile())
    assert run_report(["-p", str(profile), "-o", str(tmp_path)]).code == 0
    to_stdout = run_report(["-p", str(profile), "-o", "-"]).stdout
    assert len(to_stdout) > 20_000 and to_stdout == (tmp_path / "p.html").read_text(encoding="utf-8")


def test_html_to_stdout_and_into_a_folder(tmp_path):
    profile = write_profile(tmp_path / "p.yaml", full_profile())
    assert run_report(["-p", str(profile), "-o", "-"]).stdout.startswith("<!DOCTYPE html>")
    folder = tmp_path / "out"
    folder.mkdir()
    assert run_report(["-p", str(profile), "-o", str(folder)]).code == 0
    assert (folder / "p.html").exists()


def test_baseline_differences_reach_the_page(tmp_path):
    baseline = write_profile(tmp_path / "old.yaml", full_profile())
    changed = full_profile()
    changed.capabilities.dtypes["float32"].status = "unknown"
    current = write_profile(tmp_path / "new.yaml", changed)
    result = run_report(["-p", str(current), "-b", str(baseline), "-o", str(tmp_path / "r.html")])
    assert result.code == 0, result
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'id="baseline"' in page and "was supported" in page


def test_reference_profile_renders(tmp_path):
    result = run_report(["-p", str(REFERENCE_PROFILES / "cpu-amd-epyc-2core-avx512-bf16.yaml"),
                         "-o", str(tmp_path / "amd.html")])
    assert result.code == 0, result
    assert 'id="roofline-chart"' in (tmp_path / "amd.html").read_text(encoding="utf-8")


def test_missing_profile(tmp_path):
    assert_one_line_error(run_report(["-p", str(tmp_path / "nope.yaml")]), "does not exist")


def test_profile_is_a_directory(tmp_path):
    assert_one_line_error(run_report(["-p", str(tmp_path)]),
                          "is a directory, not a regular file; pass the path of a profile")


def test_malformed_yaml(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema: bringup.profile/v1\ndevice: {id: cpu\n")
    assert_one_line_error(run_report(["-p", str(bad)]), "not valid YAML")


def test_malformed_baseline(tmp_path):
    profile = write_profile(tmp_path / "p.yaml", full_profile())
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just a list\n")
    assert_one_line_error(run_report(["-p", str(profile), "-b", str(bad)]), "must be a YAML mapping")


def test_unwritable_output(tmp_path):
    profile = write_profile(tmp_path / "p.yaml", full_profile())
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_one_line_error(run_report(["-p", str(profile), "-o", str(blocker / "r.html")]), "cannot write report")


def test_without_profile_uses_the_only_one_in_profiles(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert_one_line_error(run_report([]), "pass --profile")
    Path("profiles").mkdir()
    write_profile(Path("profiles") / "only.yaml", full_profile())
    assert run_report([]).code == 0
    assert Path("profiles/only.html").exists()


def test_json_says_where_the_report_went(tmp_path):
    import json as json_module

    from bringup.profiles.schema import Profile
    from bringup.profiles.store import render_yaml
    from tests.cli.run_cli import run_cli

    profile = tmp_path / "p.yaml"
    profile.write_text(render_yaml(Profile()))
    result = run_cli(["report", "--profile", str(profile), "--json"])
    assert result.code == 0, result.stderr
    assert json_module.loads(result.stdout) == {"schema": "bringup.report/v1", "report": str(tmp_path / "p.html"),
                                                "format": "html"}
