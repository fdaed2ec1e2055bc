"""Every `--json` document names its schema (`bringup.<command>/v1`) and validates against the one published in
docs/schemas/ — checked here on the real output of the commands that are quick to run; tests/cli/run_cli.py checks
every other `--json` output a test produces (all, fleet, soak, eval, verify-collectives...) the same way."""

import json
import re
from pathlib import Path

import pytest

from tests.cli.run_cli import run_cli
from tests.json_schemas import SCHEMAS, assert_valid, assert_valid_output

jsonschema = pytest.importorskip("jsonschema", reason="the schema checks need jsonschema (the dev extra)")
PACKAGE = Path(__file__).resolve().parents[2] / "bringup"


def documents_printed() -> set[str]:
    """The document names every `print_json("<name>", ...)` and `schema_id("<name>")` in the package gives."""
    names = set()
    for path in PACKAGE.rglob("*.py"):
        names |= set(re.findall(r'(?:print_json|schema_id)\("([a-z-]+)"', path.read_text(encoding="utf-8")))
    return names


def test_every_printed_document_has_a_published_schema_and_no_schema_is_orphaned():
    published = {p.name.removeprefix("bringup.").removesuffix(".v1.json") for p in SCHEMAS.glob("*.json")}
    assert documents_printed() == published


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.json")), ids=lambda p: p.name)
def test_published_schemas_are_valid_json_schemas_naming_their_id(path):
    schema = json.loads(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    name = path.name.removesuffix(".v1.json")
    assert schema["properties"]["schema"] == {"const": f"{name}/v1"} and "schema" in schema["required"]


def test_a_document_that_breaks_its_schema_is_caught(tmp_path):
    document = json.loads(run_cli(["profile", "validate", str(profile(tmp_path)), "--json"]).stdout)
    assert_valid(document)
    for broken in ({**document, "valid": "yes"}, {k: v for k, v in document.items() if k != "stages"},
                   {**document, "schema": "bringup.profile-validate/v9"}):
        with pytest.raises((jsonschema.ValidationError, AssertionError)):
            assert_valid(broken)


def profile(tmp_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    if not path.exists():
        assert run_cli(["devices", "--device", "cpu", "--profile", str(path)]).code == 0
    return path


def test_env_devices_and_lists(tmp_path):
    for args in (["env"], ["devices", "--device", "cpu", "--profile", str(tmp_path / "d.yaml")],
                 ["probe", "--list"], ["verify-ops", "--list"]):
        result = run_cli([*args, "--json"])
        assert result.code == 0, result.stderr
        name = f"{args[0]}-list" if "--list" in args else args[0]
        assert assert_valid_output(result.stdout)["schema"] == f"bringup.{name}/v1"


def test_stages_and_profile_commands(tmp_path):
    path = profile(tmp_path)
    runs = {
        "probe": ["probe", "--device", "cpu", "--profile", str(path), "--only", "dtypes.float32"],
        "verify-ops": ["verify-ops", "--device", "cpu", "--profile", str(path), "--op", "softmax", "--dtype",
                       "float32"],
        "profile": ["profile", "show", str(path)],
        "profile-validate": ["profile", "validate", str(path)],
        "profile-diff": ["profile", "diff", str(path), str(path)],
        "report": ["report", "--profile", str(path), "-o", str(tmp_path / "r.html")],
        "export": ["export", "--engine", "vllm", "--profile", str(path)],
    }
    for name, args in runs.items():
        result = run_cli([*args, "--json"])
        assert result.code == 0, result.stderr
        assert assert_valid_output(result.stdout)["schema"] == f"bringup.{name}/v1"


def test_bench_and_generate(tmp_path):
    path = tmp_path / "p.yaml"
    bench = run_cli(["bench", "--device", "cpu", "--profile", str(path), "--quick", "--only", "dispatch", "--json"])
    assert bench.code == 0, bench.stderr
    assert assert_valid_output(bench.stdout)["measurements"] > 0
    generated = run_cli(["generate", "hello", "--device", "cpu", "--profile", str(path), "--max-tokens", "3",
                         "--ignore-eos", "--json"])
    assert generated.code == 0, generated.stderr
    assert assert_valid_output(generated.stdout)["completion_tokens"] == 3
