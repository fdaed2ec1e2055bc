"""Clients that stop reading their streams: cut after the write timeout, their queue slots freed, counted."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.server import raw_http
from tests.server.serve_live import LiveServer, start_server

MAX_QUEUE = 2
WRITE_TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> LiveServer:
    # small socket buffers on both sides: an unread stream fills them in a few hundred tokens, not megabytes
    server = start_server(tmp_path_factory.mktemp("profiles"), max_queue=MAX_QUEUE, sndbuf=4096,
                          server_config={"stream_write_timeout_s": WRITE_TIMEOUT_S})
    yield server
    server.stop()


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def captured(*names: str) -> Iterator[list[logging.LogRecord]]:
    """Records logged to these loggers (attached directly: neither bringup's nor uvicorn's propagate to root)."""
    handler = Records()
    loggers = [logging.getLogger(name) for name in names]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield handler.records
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def stalled_stream(live: LiveServer, prompt: str, max_tokens: int, logprobs: int | None):
    """A streaming request on a socket that is never read."""
    sock = raw_http.connect(live.url, rcvbuf=4096)
    body = {"model": live.engine.model_name, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True,
            "stream": True, "temperature": 0}
    if logprobs is not None:
        body["logprobs"] = logprobs  # ~600 bytes an event: the buffers fill fast
    raw_http.send_json(sock, "/v1/completions", body)
    return sock


def seconds_until_served(live: LiveServer, limit_s: float) -> tuple[float, list[int]]:
    """Retry a small request until it is answered 200; the seconds that took and the statuses seen."""
    start = time.monotonic()
    statuses: list[int] = []
    while time.monotonic() - start < limit_s:
        r = httpx.post(f"{live.base_url}/completions", timeout=30,
                       json={"model": live.engine.model_name, "prompt": "next", "max_tokens": 2})
        statuses.append(r.status_code)
        if r.status_code == 200:
            break
        time.sleep(0.1)
    return time.monotonic() - start, statuses


def test_unread_streams_are_cut_and_their_slots_freed(live: LiveServer) -> None:
    before = live.metrics()
    with captured("bringup.serve", "uvicorn.error") as records:
        socks = [stalled_stream(live, f"never read {i}", max_tokens=1000, logprobs=20) for i in range(MAX_QUEUE)]
        try:
            waited, statuses = seconds_until_served(live, limit_s=30)
            m = live.wait_idle()
        finally:
            for sock in socks:
                sock.close()
    assert statuses[-1] == 200, statuses
    assert 429 in statuses  # the queue really was full of stalled streams first
    # 2 × 1000 tokens take far longer than this: the slots came back by the write timeout, not by the end
    assert waited < 10, f"served only after {waited:.1f} s"
    print(f"served {waited:.2f} s after two stalled streams filled the queue")
    assert m["bringup_stream_write_timeouts_total"] - before.get("bringup_stream_write_timeouts_total", 0) \
        == MAX_QUEUE
    assert m.value("vllm:request_success_total", finished_reason="abort") \
        - before.value("vllm:request_success_total", finished_reason="abort") == MAX_QUEUE
    assert m["bringup_kv_blocks_used"] == 0 and m["bringup_requests_in_flight"] == 0
    cut = [r for r in records if "read nothing" in r.getMessage()]
    assert len(cut) == MAX_QUEUE and all(r.levelno == logging.WARNING for r in cut)
    assert not [r for r in records if r.levelno >= logging.ERROR]  # no "returned without completing response"


def test_a_finished_generation_frees_its_slot_before_its_slow_reader_is_done(live: LiveServer) -> None:
    """Generation over, the answer still unread: the request no longer counts against --max-queue."""
    socks = [stalled_stream(live, f"short {i}", max_tokens=8, logprobs=None) for i in range(MAX_QUEUE)]
    try:
        waited, statuses = seconds_until_served(live, limit_s=10)
        assert statuses[-1] == 200 and waited < WRITE_TIMEOUT_S * 5
        for sock in socks:  # the unread answers are still whole once read
            sock.settimeout(10)
            data = b""
            while b"data: [DONE]" not in data:
                data += sock.recv(65536)
            assert b'"finish_reason":"length"' in data
    finally:
        for sock in socks:
            sock.close()
