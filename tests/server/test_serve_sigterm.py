"""`bringup serve` as a real process: SIGTERM stops admission, drains in-flight requests, exits 0."""

from __future__ import annotations

import contextlib
import json
import signal

import httpx
import pytest

from tests.server.serve_live import free_port, spawn_cli, wait_healthy

STREAMS = 3
MAX_TOKENS = 160


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    port = free_port()
    workdir = tmp_path_factory.mktemp("serve-cli")
    proc = spawn_cli(["serve", "--port", str(port), "--device", "cpu", "--profile", str(workdir / "absent.yaml"),
                      "--max-model-len", "512", "--drain-timeout", "60"], cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout=90, proc=proc)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _data(lines) -> dict | None:
    for line in lines:
        if line.startswith("data: {"):
            return json.loads(line[6:])
    return None


def test_sigterm_drains_in_flight_requests_and_exits_zero(served) -> None:
    proc, url = served
    model = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
    body = {"model": model, "prompt": "drain me", "max_tokens": MAX_TOKENS, "temperature": 0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    with httpx.Client(timeout=60) as http, contextlib.ExitStack() as stack:
        responses = [stack.enter_context(http.stream("POST", f"{url}/v1/completions", json=body))
                     for _ in range(STREAMS)]
        readers = [r.iter_lines() for r in responses]
        for reader in readers:
            assert _data(reader) is not None  # admitted and generating

        proc.send_signal(signal.SIGTERM)

        refused = httpx.post(f"{url}/v1/completions", json={"model": model, "prompt": "late", "max_tokens": 2})
        assert refused.status_code == 503
        assert refused.json()["error"]["code"] == "shutting_down"
        health = httpx.get(f"{url}/health")
        assert health.status_code == 503 and health.json()["status"] == "draining"

        for reader in readers:
            chunks = [json.loads(line[6:]) for line in reader if line.startswith("data: {")]
            finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
            assert finishes[-1] == "length"
            assert chunks[-1]["usage"]["completion_tokens"] == MAX_TOKENS
    assert proc.wait(timeout=60) == 0
    stderr = proc.stderr.read()
    assert "shutdown requested" in stderr and "drained" in stderr
    assert "Traceback" not in stderr
