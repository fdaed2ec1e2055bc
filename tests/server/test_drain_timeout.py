"""`bringup serve` as a real process: SIGTERM with requests that outlast --drain-timeout. Each open stream ends
with an error event and [DONE] (never a dropped connection), the cut requests are logged, the exit status is 1."""

from __future__ import annotations

import contextlib
import json
import signal
import time

import httpx
import pytest

from tests.server.serve_live import free_port, spawn_cli, wait_healthy

STREAMS = 4
DRAIN_TIMEOUT_S = 2
MAX_TOKENS = 1000
# each engine step 20 ms longer: 1000 steps outlast the drain timeout tenfold on any CPU (a fast one generated the
# 4 x 1000 tokens of the built-in model in 0.9 s)
STEP_DELAY_S = 0.02


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    port = free_port()
    workdir = tmp_path_factory.mktemp("serve-drain")
    proc = spawn_cli([str(STEP_DELAY_S), "serve", "--port", str(port), "--device", "cpu", "--profile",
                      str(workdir / "absent.yaml"), "--max-model-len", "1024", "--drain-timeout", str(DRAIN_TIMEOUT_S)],
                     cwd=workdir, module="tests.server.slow_steps")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout=90, proc=proc)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_drain_timeout_ends_every_stream_with_an_error_and_exits_one(served) -> None:
    proc, url = served
    model = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
    body = {"model": model, "prompt": "outlast the drain", "max_tokens": MAX_TOKENS, "temperature": 0,
            "ignore_eos": True, "stream": True}
    with httpx.Client(timeout=60) as http, contextlib.ExitStack() as stack:
        responses = [stack.enter_context(http.stream("POST", f"{url}/v1/completions", json=body))
                     for _ in range(STREAMS)]
        readers = [r.iter_lines() for r in responses]
        assert next(line for line in readers[0] if line.startswith("data: {"))  # generating
        signalled = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        events = [[line[len("data: "):] for line in reader if line.startswith("data: ")] for reader in readers]
        ended = time.monotonic() - signalled
    for stream in events:
        assert stream[-1] == "[DONE]"
        error = json.loads(stream[-2])["error"]
        assert error["code"] == "drain_timeout" and error["type"] == "service_unavailable"
        assert "drain timeout" in error["message"] and "retry" in error["message"]
        finishes = [c["choices"][0]["finish_reason"] for c in map(json.loads, stream[:-2]) if c["choices"]]
        assert not any(finishes)  # cut, not finished: no finish reason pretends otherwise
    assert DRAIN_TIMEOUT_S <= ended < DRAIN_TIMEOUT_S + 10
    assert proc.wait(timeout=60) == 1
    stderr = " ".join(proc.stderr.read().split())  # the log handler wraps long lines
    assert "drain timeout (2 s) reached" in stderr and "cut 4 sequence(s)" in stderr
    assert "exit status 1" in stderr
    assert "Traceback" not in stderr
