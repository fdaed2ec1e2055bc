"""`bringup bench -o md|csv|json|jsonl` (as `llama-bench -o`): every format carries the same measurements, jsonl
lines each validate against their published schema, and formats that would share stdout are refused."""

import csv
import io
import json
from pathlib import Path

import pytest

from tests.cli.run_cli import run_cli
from tests.json_schemas import assert_valid, assert_valid_output

pytest.importorskip("jsonschema", reason="the schema checks need jsonschema (the dev extra)")


def bench(profile: Path, *args: str):
    result = run_cli(["bench", "--device", "cpu", "--quick", "--budget", "0.05", "--only", "dispatch", "--profile",
                      str(profile), *args])
    assert result.code == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def outputs(tmp_path_factory) -> dict[str, str]:
    profile = tmp_path_factory.mktemp("bench") / "p.yaml"
    return {fmt: bench(profile, "-o", fmt).stdout for fmt in ("md", "csv", "json", "jsonl")}


def test_each_format_lists_the_same_measurements(outputs):
    from_csv = [(row["group"], row["name"]) for row in csv.DictReader(io.StringIO(outputs["csv"]))]
    from_jsonl = [(row["group"], row["name"]) for row in map(json.loads, outputs["jsonl"].splitlines())]
    table = outputs["md"].splitlines()
    from_md = [tuple(cell.strip() for cell in line.strip("|").split("|")[:2]) for line in table[2:]]
    assert from_csv and from_csv == from_jsonl == from_md
    assert table[0].startswith("| group | name |") and set(table[1].replace("|", "").split()) == {"---"}
    assert assert_valid_output(outputs["json"])["measurements"] == len(from_csv)


def test_jsonl_lines_each_name_and_match_their_schema(outputs):
    for line in outputs["jsonl"].splitlines():
        row = json.loads(line)
        assert row["schema"] == "bringup.bench-row/v1" and isinstance(row["reps"], int)
        assert_valid(row)


@pytest.mark.parametrize("args", [["-o", "md", "--json"], ["-o", "csv", "--csv", "-"], ["--json", "--csv", "-"]])
def test_two_writers_of_stdout_are_refused_in_one_line(args, tmp_path):
    result = run_cli(["bench", "--device", "cpu", "--profile", str(tmp_path / "p.yaml"), *args])
    assert result.code == 2 and result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
