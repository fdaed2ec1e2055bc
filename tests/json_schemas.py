"""The published JSON Schemas (docs/schemas/) and a check of a `--json` document against the one it names."""

import json
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"


def schema_path(schema_id: str) -> Path:
    """`bringup.bench/v1` → docs/schemas/bringup.bench.v1.json."""
    name, _, version = schema_id.partition("/")
    return SCHEMAS / f"{name}.{version}.json"


def assert_valid(document: Any) -> None:
    """`document` names its schema at its top level, that schema is published, and the document validates."""
    import jsonschema

    assert isinstance(document, dict) and isinstance(document.get("schema"), str), "no top-level schema id"
    path = schema_path(document["schema"])
    assert path.is_file(), f"{document['schema']} has no published schema at {path}"
    jsonschema.validate(document, json.loads(path.read_text(encoding="utf-8")),
                        format_checker=jsonschema.FormatChecker())


def assert_valid_output(stdout: str) -> dict[str, Any]:
    """A command's stdout under --json: one document, valid against its schema; returned parsed."""
    document = json.loads(stdout)
    assert_valid(document)
    return document
