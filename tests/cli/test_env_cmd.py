"""`bringup env`: text and JSON carry the same facts, tools are bounded, `--profile` records, bad input is one line."""

import json
import re
import shutil
import time

import pytest
import typer
from typer.testing import CliRunner

from bringup.cli.commands import env_cmd
from bringup.cli.render.env_json import typed_facts
from bringup.errors import BringupError
from bringup.probes.env_facts.report import SECTION_ORDER
from bringup.profiles.store import load_profile
from tests.probes.env_fakes import HANGING, fake_tool, first_on_path

KEY_VALUE = re.compile(r"^[^\s:\[][^:]*: \S.*$")
HEADER = re.compile(r"^\[([a-z]+)\]$")


def invoke(args: list[str]) -> tuple[int, str, str]:
    """The command through a one-command typer app; a BringupError ends as `bringup`'s entry point ends it."""
    app = typer.Typer()
    app.command()(env_cmd.command)
    result = CliRunner().invoke(app, args)
    if isinstance(result.exception, BringupError):
        return result.exception.exit_code, result.stdout, str(result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def parse_text(text: str) -> dict[str, dict[str, str]]:
    """Sections of the text report; every line must be a header, a `key: value` line or blank."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if not line:
            continue
        header = HEADER.match(line)
        if header:
            current = sections.setdefault(header.group(1), {})
            continue
        assert KEY_VALUE.match(line) and current is not None, line
        key, _, value = line.partition(": ")
        current[key] = value
    return sections


def test_text_has_every_section_and_only_key_value_lines():
    code, out, _ = invoke([])
    assert code == 0
    sections = parse_text(out)
    assert tuple(sections) == SECTION_ORDER
    assert sections["torch"]["version"] and sections["packages"]["torch"] and sections["system"]["kernel"]
    assert len(out.splitlines()) < 120


def test_json_has_the_same_sections_and_keys_as_text():
    code, out, _ = invoke(["--json"])
    assert code == 0
    data = json.loads(out)
    assert data.pop("schema") == "bringup.env/v1"
    _, text, _ = invoke([])
    assert {name: set(facts) for name, facts in data.items()} == \
           {name: set(facts) for name, facts in parse_text(text).items()}


def test_json_values_are_typed(tmp_path, monkeypatch):
    """Numbers as numbers, booleans as booleans, null where a tool is absent (not the text "not found")."""
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no tool can be found
    data = json.loads(invoke(["--json"])[1])
    assert isinstance(data["cpu"]["numa_nodes"], int) or data["cpu"].get("numa_nodes") is None
    assert data["accelerators"]["nvidia-smi"] is None and data["compilers"]["clang"] is None
    assert isinstance(data["torch"]["openmp"], bool) and isinstance(data["variables"]["not_set"], list)
    values = [value for name, facts in data.items() if name != "schema" for value in facts.values()]
    assert None in values and not {"not found", "not installed", "none found", "unknown"} & set(map(str, values))


def test_visibility_variable_appears(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-1234,3")
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setenv("MY_SERVICE_TOKEN", "secret")
    variables = json.loads(invoke(["--json"])[1])["variables"]
    assert variables["CUDA_VISIBLE_DEVICES"] == "GPU-1234,3" and variables["OMP_NUM_THREADS"] == "7"
    assert "CUDA_VISIBLE_DEVICES" not in variables["not_set"] and "secret" not in json.dumps(variables)


@pytest.mark.skipif(shutil.which("sh") is None, reason="fake tools are /bin/sh scripts")
def test_hanging_and_failing_tools_are_reported(tmp_path, monkeypatch):
    first_on_path(monkeypatch, tmp_path / "bin")
    fake_tool(tmp_path / "bin", "nvidia-smi", HANGING)
    fake_tool(tmp_path / "bin", "clang", "echo 'clang: cannot find libLLVM.so' >&2; exit 127")
    start = time.monotonic()
    code, out, _ = invoke(["--tool-timeout", "0.5"])
    assert code == 0 and time.monotonic() - start < 30
    sections = parse_text(out)
    assert sections["accelerators"]["nvidia-smi"] == "timed out after 0.5 s"
    assert sections["compilers"]["clang"] == "exit 127: clang: cannot find libLLVM.so"


def test_profile_records_the_same_facts(tmp_path):
    path = tmp_path / "runs" / "p.yaml"
    code, out, _ = invoke(["--json", "--device", "cpu", "--profile", str(path)])
    assert code == 0
    data = json.loads(out)
    profile = load_profile(path)
    environment = profile.environment
    assert profile.stages["env"].status == "complete" and profile.device.id == "cpu"
    assert typed_facts(environment.packages) == data["packages"]
    assert typed_facts(environment.compilers) == data["compilers"]
    assert typed_facts(environment.cpu) == data["cpu"] and typed_facts(environment.system) == data["system"]
    assert typed_facts(environment.torch_build).items() <= data["torch"].items()


def one_line_error(code: int, message: str, *fragments: str) -> None:
    assert code == 2 and "\n" not in message.strip(), message
    for fragment in fragments:
        assert fragment in message, message


def test_profile_below_a_file_is_one_line_exit_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    code, _, message = invoke(["--device", "cpu", "--profile", str(blocker / "p.yaml")])
    one_line_error(code, message, "cannot write profile", "writable --profile")


def test_profile_that_is_a_directory_is_one_line_exit_2(tmp_path):
    code, _, message = invoke(["--device", "cpu", "--profile", str(tmp_path)])
    one_line_error(code, message, "is a directory, not a regular file", "pass the path of a profile")


def test_through_the_bringup_entry_point():
    from tests.cli.run_cli import run_cli

    assert run_cli(["env", "--help"]).code == 0
    result = run_cli(["env", "--json"])
    assert result.code == 0 and tuple(json.loads(result.stdout)) == ("schema", *SECTION_ORDER)
