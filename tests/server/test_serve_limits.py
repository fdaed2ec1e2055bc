"""Admission limits and engine failure on a live server with a two-request queue."""

from __future__ import annotations

import time

import httpx
import openai
import pytest

from bringup.backends.registry import device_info
from bringup.profiles.store import update_profile
from tests.server.serve_live import LiveServer, start_server

MAX_QUEUE = 2


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> LiveServer:
    """A server planned from a real (if young) profile: this CPU's identity, one stage recorded."""
    profiles = tmp_path_factory.mktemp("profiles")
    update_profile(profiles / "cpu.yaml", device_info("cpu"), lambda profile: None, stage="devices",
                   status="complete")
    server = start_server(profiles, profile_name="cpu.yaml", max_queue=MAX_QUEUE, max_model_len=512)
    yield server
    server.stop()


def test_plan_endpoint_summarises_the_profile_it_came_from(live: LiveServer) -> None:
    body = httpx.get(f"{live.base_url}/plan").json()
    summary = body["profile"]
    assert summary["loaded"] is True
    assert summary["path"].endswith("cpu.yaml") and body["plan"]["profile"] == summary["path"]
    assert summary["device"]["id"] == "cpu"
    assert summary["stages"]["devices"]["status"] == "complete"


def _long_stream(http: httpx.Client, live: LiveServer):
    body = {"model": live.engine.model_name, "prompt": "hold the line", "max_tokens": 400, "stream": True,
            "temperature": 0, "ignore_eos": True}
    return http.stream("POST", f"{live.base_url}/completions", json=body)


def test_full_queue_answers_429_and_frees_up_afterwards(live: LiveServer, monkeypatch) -> None:
    step = live.engine.step

    def slow_step():  # 20 ms a step: the two held streams are still generating whatever this machine's speed
        time.sleep(0.02)
        return step()

    monkeypatch.setattr(live.engine, "step", slow_step)
    client = openai.OpenAI(api_key="unused", base_url=live.base_url, max_retries=0, timeout=30)
    with httpx.Client(timeout=30) as http, _long_stream(http, live) as first, _long_stream(http, live) as second:
        held = [first.iter_lines(), second.iter_lines()]
        for lines in held:  # both admitted and generating
            assert next(line for line in lines if line.startswith("data: {"))
        with pytest.raises(openai.RateLimitError) as err:
            client.completions.create(model=live.engine.model_name, prompt="one more", max_tokens=2)
        assert err.value.status_code == 429
        assert err.value.body["code"] == "queue_full"
        raw = httpx.post(f"{live.base_url}/chat/completions", json={
            "model": live.engine.model_name, "messages": [{"role": "user", "content": "x"}]})
        assert raw.status_code == 429
        assert raw.json()["error"]["type"] == "rate_limit_error"
        assert httpx.get(f"{live.url}/health").status_code == 200
    idle = live.wait_idle()
    assert idle["bringup_kv_blocks_used"] == 0
    ok = client.completions.create(model=live.engine.model_name, prompt="now", max_tokens=2)
    assert ok.choices[0].finish_reason in ("stop", "length")
    m = live.metrics()
    assert m['bringup_http_requests_total{endpoint="/v1/completions",status="429"}'] == 1
    assert m['bringup_http_requests_total{endpoint="/v1/chat/completions",status="429"}'] == 1


@pytest.fixture
def doomed(tmp_path) -> LiveServer:
    """A server of its own: the fault injected below kills its engine for good, so it must not be `live`."""
    server = start_server(tmp_path, max_queue=MAX_QUEUE, max_model_len=128)
    yield server
    server.stop()


def test_engine_failure_turns_health_and_requests_to_503(doomed: LiveServer) -> None:
    """Inject a real fault into the running engine: its next step raises."""
    live = doomed

    def broken_step():
        raise RuntimeError("injected device fault")

    live.engine.step = broken_step
    r = httpx.post(f"{live.base_url}/completions", timeout=30,
                   json={"model": live.engine.model_name, "prompt": "x", "max_tokens": 4})
    assert r.status_code == 503
    assert "injected device fault" in r.json()["error"]["message"]
    health = httpx.get(f"{live.url}/health")
    assert health.status_code == 503
    assert health.json()["status"] == "dead" and "injected device fault" in health.json()["reason"]
    again = httpx.post(f"{live.base_url}/completions", timeout=30,
                       json={"model": live.engine.model_name, "prompt": "x", "max_tokens": 4})
    assert again.status_code == 503
    assert again.json()["error"]["code"] == "engine_dead"
    assert live.metrics()["bringup_engine_alive"] == 0
