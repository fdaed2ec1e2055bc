"""Numbers that cannot be trusted are not served: a request whose logits turn NaN or infinite ends with a 500 (an
error event when streaming) that names the cause, is counted, and its batch neighbours carry on untouched."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.server.serve_live import LiveServer, start_server

POISON = [200, 201, 202]  # a prompt starting with these token ids gets broken logits
SERVED_BEFORE = 2  # tokens generated normally before the logits break


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> LiveServer:
    server = start_server(tmp_path_factory.mktemp("profiles"), max_model_len=256)
    yield server
    server.stop()


@pytest.fixture
def poisoned(live: LiveServer, monkeypatch):
    """The executor, wrapped: rows of POISON prompts get `value` in their logits after SERVED_BEFORE tokens."""
    real_run = live.engine.executor.run
    state = {"value": float("nan")}

    def run(seqs):
        logits = real_run(seqs).clone()  # an inference tensor: not writable in place
        for row, seq in enumerate(seqs):
            if seq.prompt_token_ids[:len(POISON)] == POISON and len(seq.output_token_ids) >= SERVED_BEFORE:
                logits[row, 7] = state["value"]
        return logits

    monkeypatch.setattr(live.engine.executor, "run", run)
    return state


def body(live: LiveServer, prompt, max_tokens: int, stream: bool = False) -> dict:
    return {"model": live.engine.model_name, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
            "ignore_eos": True, "stream": stream}


async def _side_by_side(live: LiveServer) -> tuple[httpx.Response, httpx.Response]:
    async with httpx.AsyncClient(timeout=60) as http:
        bad, good = await asyncio.gather(
            http.post(f"{live.base_url}/completions", json=body(live, [*POISON, 5, 6], 8)),
            http.post(f"{live.base_url}/completions", json=body(live, "a healthy neighbour", 24)))
    return bad, good


def test_nan_logits_fail_their_request_only(live: LiveServer, poisoned) -> None:
    before = live.metrics()
    bad, good = asyncio.run(_side_by_side(live))
    assert bad.status_code == 500, bad.text
    error = bad.json()["error"]
    assert error["type"] == "server_error" and error["code"] == "non_finite_logits"
    assert "NaN" in error["message"] and f"generated token {SERVED_BEFORE + 1}" in error["message"]
    assert good.status_code == 200
    assert good.json()["choices"][0]["finish_reason"] == "length"
    assert good.json()["usage"]["completion_tokens"] == 24
    after = live.wait_idle()
    assert after['bringup_request_errors_total{code="non_finite_logits"}'] \
        - before.get('bringup_request_errors_total{code="non_finite_logits"}', 0) == 1
    assert after.value("vllm:request_success_total", finished_reason="error") \
        - before.value("vllm:request_success_total", finished_reason="error") == 1
    assert after["bringup_kv_blocks_used"] == 0
    assert after["bringup_engine_alive"] == 1


def test_infinite_logits_end_a_stream_with_an_error_event(live: LiveServer, poisoned) -> None:
    poisoned["value"] = float("inf")
    with httpx.Client(timeout=60) as http, \
            http.stream("POST", f"{live.base_url}/completions", json=body(live, POISON, 8, stream=True)) as r:
        assert r.status_code == 200
        events = [line[len("data: "):] for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    error = json.loads(events[-2])["error"]
    assert error["code"] == "non_finite_logits" and "infinite values" in error["message"]
    chunks = [json.loads(e) for e in events[:-2]]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)  # no finish reason pretends success
    assert len(chunks) <= SERVED_BEFORE  # only the tokens drawn from finite logits were sent
    ok = httpx.post(f"{live.base_url}/completions", timeout=60, json=body(live, "after", 4))
    assert ok.status_code == 200
