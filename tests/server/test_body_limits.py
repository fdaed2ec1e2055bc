"""Request bodies are limited as their bytes arrive, whatever the transfer encoding: an oversize chunked body is
refused at the limit without being buffered, a huge token-id list before it is parsed, and others are served."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator

import httpx
import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bringup.serve.http.body import BodyLimits, BodyScanner
from tests.server import raw_http
from tests.server.serve_live import free_port, spawn_cli, wait_healthy

MIB = 1024 * 1024
LIMIT_MIB = 8
CHUNKED_MIB = 80
CHUNK = 64 * 1024


# ---------------------------------------------------------------- the scanner, against a reference count

def commas_outside_strings(text: str) -> int:
    """The reference: a character-by-character JSON string state machine."""
    count, in_string, escaped = 0, False, False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == ",":
            count += 1
    return count


tricky_text = st.text(alphabet=st.sampled_from(['a', ',', '"', '\\', 'é', '\n', ' ', '€']), max_size=12)
json_values = st.recursive(st.none() | st.integers() | tricky_text,
                           lambda inner: st.lists(inner, max_size=5) | st.dictionaries(tricky_text, inner, max_size=4),
                           max_leaves=20)


@given(value=json_values, ascii_only=st.booleans(), cuts=st.lists(st.integers(min_value=0), max_size=6))
@settings(max_examples=400, deadline=None, derandomize=True, database=None)
def test_scanner_counts_the_values_outside_strings_however_the_body_is_cut(value, ascii_only, cuts) -> None:
    body = json.dumps(value, ensure_ascii=ascii_only).encode()
    scanner = BodyScanner(BodyLimits(max_bytes=MIB, max_values=10**6, max_strings=10**6))
    edges = [*sorted({c % (len(body) + 1) for c in cuts}), len(body)]
    start = 0
    for end in edges:
        assert scanner.feed(body[start:end]) is None
        start = end
    assert scanner.values == commas_outside_strings(body.decode())


def test_scanner_refuses_at_each_limit() -> None:
    limits = BodyLimits(max_bytes=1000, max_values=10, max_strings=3)
    assert BodyScanner(limits).feed(b"x" * 1001).status == 413
    assert "JSON values" in BodyScanner(limits).feed(b"[" + b"1," * 11 + b"1]").message
    assert "JSON strings" in BodyScanner(limits).feed(b'["a","b","c","d"]').message
    assert BodyScanner(limits).feed(b'{"a": "x,y,z,w,v,u,t,s,r,q,p,o"}') is None  # commas inside a string
    assert "UTF-8" in BodyScanner(limits).feed('{"a": 1}'.encode("utf-16")).message


# ---------------------------------------------------------------- a live server process

@pytest.fixture(scope="module")
def served(tmp_path_factory):
    port = free_port()
    workdir = tmp_path_factory.mktemp("serve-limits")
    proc = spawn_cli(["serve", "--port", str(port), "--device", "cpu", "--profile", str(workdir / "absent.yaml"),
                      "--max-model-len", "256", "--max-body-mb", str(LIMIT_MIB)], cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout=90, proc=proc)
        yield proc, url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


class PeakRSS:
    """The largest resident set size of a process, sampled every 10 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.process = psutil.Process(pid)
        self.base = self.process.memory_info().rss
        self.peak = self.base
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.process.memory_info().rss)
            time.sleep(0.01)

    @property
    def growth_mib(self) -> float:
        return (self.peak - self.base) / MIB


def lazy_text_body(model: str, total_mib: int, progress: threading.Event) -> Iterator[bytes]:
    """A JSON body with one text of total_mib, made 64 KiB at a time (never held whole by the client)."""
    yield json.dumps({"model": model, "prompt": ""})[:-2].encode()  # up to the opening quote of the prompt
    for i in range(total_mib * MIB // CHUNK):
        if i * CHUNK >= MIB:
            progress.set()
        time.sleep(0.002)  # slow enough for another client to be served meanwhile
        yield b"a" * CHUNK
    yield b'"}'


def test_chunked_body_over_the_limit_is_refused_unbuffered_and_others_are_served(served) -> None:
    proc, url = served
    model = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
    progress = threading.Event()
    outcome: dict = {}

    def upload() -> None:
        with raw_http.connect(url) as sock:
            outcome["sent"], outcome["response"] = raw_http.upload_chunked(
                sock, "/v1/completions", lazy_text_body(model, CHUNKED_MIB, progress))

    with PeakRSS(proc.pid) as rss:
        uploader = threading.Thread(target=upload)
        uploader.start()
        assert progress.wait(30)
        other = httpx.post(f"{url}/v1/completions", timeout=60,
                           json={"model": model, "prompt": "meanwhile", "max_tokens": 4})
        uploader.join(60)
    assert other.status_code == 200, other.text
    response = outcome["response"]
    assert response is not None and response.status == 413
    assert response.headers["connection"] == "close"
    error = response.json()["error"]
    assert error["code"] == "body_too_large" and f"over the limit of {LIMIT_MIB} MiB" in error["message"]
    assert outcome["sent"] < CHUNKED_MIB * MIB // 2  # the server stopped reading at the limit
    print(f"sent {outcome['sent'] / MIB:.1f} MiB, server RSS grew {rss.growth_mib:.1f} MiB")
    assert rss.growth_mib < 32, f"server RSS grew {rss.growth_mib:.0f} MiB for a {CHUNKED_MIB} MiB body"
    assert httpx.get(f"{url}/health").status_code == 200


def test_huge_token_list_is_refused_before_parsing_and_health_stays_fast(served) -> None:
    _, url = served
    model = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]
    body = json.dumps({"model": model, "prompt": [12345] * 6_800_000}).encode()  # 48 MB
    assert len(body) > 45e6
    latencies: list[float] = []
    done = threading.Event()

    def poll_health() -> None:
        with httpx.Client(timeout=10) as http:
            while not done.is_set():
                start = time.perf_counter()
                assert http.get(f"{url}/health").status_code == 200
                latencies.append(time.perf_counter() - start)
                time.sleep(0.01)

    poller = threading.Thread(target=poll_health)
    poller.start()
    try:
        with raw_http.connect(url) as sock:
            sent, response = raw_http.upload_chunked(
                sock, "/v1/completions", (body[i:i + CHUNK] for i in range(0, len(body), CHUNK)))
        time.sleep(0.2)
    finally:
        done.set()
        poller.join()
    assert response is not None and response.status == 413
    assert "JSON values" in response.json()["error"]["message"]
    assert sent < 8 * MIB  # refused by the count rule long before the body was read, let alone parsed
    print(f"sent {sent / MIB:.2f} MiB; /health: {len(latencies)} answers, slowest {max(latencies):.3f} s")
    assert latencies and max(latencies) < 0.5, f"/health took up to {max(latencies):.2f} s"
