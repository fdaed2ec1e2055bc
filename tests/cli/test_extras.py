"""The core installs with torch, typer, rich, pyyaml, pydantic (plus filelock, psutil, numpy); the runner and server
come with `bringup[serve]`, GGUF reading with `bringup[gguf]`. Checked by running the real entry point with the
extras' packages made unimportable: the core commands work, the others say in one line which extra to install."""

import subprocess
import sys
from pathlib import Path

import pytest

from bringup.cli.extras import EXTRA_OF_PACKAGE

ROOT = Path(__file__).resolve().parents[2]
CORE = {"torch", "typer", "rich", "pyyaml", "pydantic", "filelock", "psutil", "numpy"}
SERVE_PACKAGES = ("fastapi", "starlette", "uvicorn", "prometheus_client", "tokenizers", "safetensors", "jinja2")
WITHOUT_EXTRAS = (*SERVE_PACKAGES, "gguf", "transformers", "httpx")


def name_of(requirement: str) -> str:
    return requirement.split(">", 1)[0].split("=", 1)[0].split("[", 1)[0].strip().lower()


def test_the_core_and_the_extras_in_pyproject():
    tomllib = pytest.importorskip("tomllib", reason="reading pyproject.toml needs Python 3.11's tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert {name_of(r) for r in project["dependencies"]} == CORE
    extras = project["optional-dependencies"]
    assert {name_of(r) for r in extras["serve"]} == {"safetensors", "tokenizers", "jinja2", "fastapi", "uvicorn",
                                                     "prometheus_client"}
    assert {name_of(r) for r in extras["gguf"]} == {"gguf"}
    assert "bringup[serve,gguf,re2]" in extras["dev"] and "jsonschema" in {name_of(r) for r in extras["dev"]}
    for package, extra in EXTRA_OF_PACKAGE.items():  # each package a message names is in the extra it names
        assert package in {name_of(r) for r in extras[extra]} or package == "starlette"


def run_without(packages: tuple[str, ...], args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """The real entry point in a fresh interpreter where importing any of `packages` fails as if not installed."""
    code = ("import sys\n"
            f"for name in {packages!r}:\n    sys.modules[name] = None\n"
            "sys.argv[0] = 'bringup'\nfrom bringup.cli.app import main\nmain()\n")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(cwd)})


def one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr[-3000:]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_the_core_commands_run_without_any_extra(tmp_path):
    profile = str(tmp_path / "p.yaml")
    for args in (["devices"], ["probe", "--only", "dtypes.float32"],
                 ["verify-ops", "--only", "relu", "--dtype", "float32", "--no-isolate"],
                 ["bench", "--quick", "--only", "dispatch"]):
        result = run_without(WITHOUT_EXTRAS, [*args, "--device", "cpu", "--profile", profile], tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
    for args in (["report", "--profile", profile], ["profile", "validate", profile]):
        result = run_without(WITHOUT_EXTRAS, args, tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.parametrize("command", [["serve"], ["selftest"], ["generate", "hello"]], ids=lambda c: c[0])
def test_a_runner_command_without_the_serve_extra_names_it(command, tmp_path):
    result = run_without(SERVE_PACKAGES, [*command, "--device", "cpu", "--profile", str(tmp_path / "p.yaml")],
                         tmp_path)
    one_line_error(result, f"`bringup {command[0]}` needs ", "pip install 'bringup[serve]'")


def test_all_without_the_serve_extra_runs_the_other_stages_and_names_the_extra(tmp_path):
    result = run_without(SERVE_PACKAGES, ["all", "--only", "devices,selftest", "--device", "cpu", "--profile",
                                          str(tmp_path / "p.yaml")], tmp_path)
    assert result.returncode == 1, result.stderr[-3000:]
    said = " ".join(result.stderr.split())
    assert "`bringup selftest` needs safetensors, which is not installed; install the serve extra" in said
    assert "devices" in result.stdout


def test_a_gguf_model_without_the_gguf_extra_names_it(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    result = run_without(("gguf",), ["generate", "hello", "--model", str(model), "--device", "cpu", "--profile",
                                     str(tmp_path / "p.yaml")], tmp_path)
    one_line_error(result, "gguf", "bringup[gguf]")
