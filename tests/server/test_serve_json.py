"""`bringup serve --json` prints its `bringup.serve/v1` document as soon as it is ready (flushed, so a supervisor
reading the pipe learns the URL), valid against the published schema, and the URL it names answers."""

from __future__ import annotations

import json
import signal

import httpx
import pytest

from tests.json_schemas import assert_valid
from tests.server.serve_live import spawn_cli

pytest.importorskip("jsonschema", reason="the schema checks need jsonschema (the dev extra)")


def test_serve_json_document_is_valid_and_names_a_live_url(tmp_path):
    proc = spawn_cli(["serve", "--port", "0", "--device", "cpu", "--profile", str(tmp_path / "absent.yaml"),
                      "--max-model-len", "256", "--json"], cwd=tmp_path)
    try:
        text = ""
        while True:
            line = proc.stdout.readline()
            assert line, f"serve ended before printing its document: {proc.stderr.read()[-2000:]}"
            text += line
            if line.rstrip() == "}":
                break
        document = json.loads(text)
        assert_valid(document)
        assert document["schema"] == "bringup.serve/v1"
        assert httpx.get(f"{document['url']}/v1/models", timeout=30).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
