"""Streaming sends each step's decided text at once: incomplete characters wait inside the engine, bytes that
can never be valid UTF-8 arrive as U+FFFD in the step that produced them."""

from __future__ import annotations

import json

import httpx
import pytest

import bringup.runner.engine.engine as engine_module
from tests.server.serve_live import LiveServer, start_server


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> LiveServer:
    server = start_server(tmp_path_factory.mktemp("profiles"))
    yield server
    server.stop()


def streamed_events(live: LiveServer, body: dict) -> list[dict]:
    """The JSON events of a streamed completion, in order."""
    body = {"model": live.engine.model_name, "stream": True, **body}
    events = []
    with httpx.Client(timeout=60) as http, http.stream("POST", f"{live.base_url}/completions", json=body) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                events.append(json.loads(line[len("data: "):]))
    return events


def test_random_bytes_stream_in_many_chunks(live: LiveServer) -> None:
    body = {"prompt": "random bytes", "max_tokens": 16, "temperature": 1.0, "seed": 11, "ignore_eos": True}
    texts = [e["choices"][0]["text"] for e in streamed_events(live, body)]
    whole = httpx.post(f"{live.base_url}/completions", timeout=60,
                       json={"model": live.engine.model_name, **body}).json()["choices"][0]["text"]
    assert "".join(texts) == whole
    assert len([t for t in texts if t]) > 1


def test_invalid_utf8_arrives_as_a_replacement_character_at_once(live: LiveServer, monkeypatch) -> None:
    offset = live.engine.tokenizer.offset
    script = [b + offset for b in b"a\xffb\xc3c\xc3\xa9d"]  # 0xFF never valid; 0xC3 then 'c' neither

    def scripted(logits, seqs):  # the engine's sampler, replaced: the scripted byte at each step
        return [(script[len(seq.output_token_ids)], None) for seq in seqs]

    monkeypatch.setattr(engine_module, "sample", scripted)
    events = streamed_events(live, {"prompt": "x", "max_tokens": len(script), "temperature": 0, "ignore_eos": True})
    texts = [e["choices"][0]["text"] for e in events]
    assert texts == ["a", "\ufffd", "b", "\ufffdc", "é", "d"]  # one event per step that decided text
    assert events[-1]["choices"][0]["finish_reason"] == "length"
