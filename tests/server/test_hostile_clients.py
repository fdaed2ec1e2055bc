"""Hostile clients and hostile templates against a live server: slow senders, silent and surplus connections,
template bombs, heavy /tokenize answers, a lowered file-descriptor limit, SIGTERM during an attack.

Every case watches the server while it runs: /health must answer within 1 s throughout, and the server's RSS
must stay within 500 MB of its value before the attack. Timeouts are set short through the server's own
options so the cases stay quick. Traffic goes to 127.0.0.1 only; every loop is bounded.
"""

from __future__ import annotations

import contextlib
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from tests.runner.hf_fixtures import make_hf_model
from tests.server import raw_http
from tests.server.serve_live import LiveServer, free_port, spawn_cli, start_server, wait_healthy

HEALTH_WITHIN_S = 1.0
RSS_GROWTH_BYTES = 500 * 1024 * 1024
HEADER_TIMEOUT_S = 1.0
BODY_TIMEOUT_S = 1.0
TEMPLATE_TIMEOUT_S = 1.0
MAX_CONNECTIONS = 24

BOMBS = {  # issue 28's template bombs, and their relatives
    "huge power": "{{ 10**(10**7) > 5 }}",
    "nested range loops": "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
    "string doubling in a namespace":
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
    "tojson with a huge indent": "{{ messages|tojson(indent=200000000) }}",
    "string repeated": "{{ 'a' * 10**9 }}",
    "padding filter": "{{ 'a'|center(10**9) }}",
    "replace explosion": "{% set s = 'a' * 1000000 %}{{ s.replace('a', s) }}",
    "printf width": "{{ '%0999999999d' % 1 }}",
    "shared references printed": "{% set s = 'a' * 3000000 %}{{ [s, s, s, s, s, s, s, s] }}",
    "indent by a long string": "{% set s = 'x\\n' * 1000 %}{{ s|indent('a' * 1000000) }}",
    "join with a long separator": "{{ ([''] * 1000000)|join('a' * 1000) }}",
    "replace filter explosion": "{% set s = 'a' * 1000000 %}{{ s|replace('a', s) }}",
    "format filter width": "{{ '%0999999999d'|format(1) }}",
    "wordwrap with a long wrapstring": "{% set s = 'a' * 100000 %}{{ s|wordwrap(1, wrapstring='b' * 1000) }}",
    "str.format width": "{{ '{:999999999}'.format(1) }}",
    "integer squaring": "{% set ns = namespace(x=3) %}{% for i in range(40) %}{% set ns.x = ns.x * ns.x %}{% endfor %}",
    "endless output": "{% for i in range(100000) %}{% for j in range(100000) %}{{ 'y' * 100 }}{% endfor %}"
                      "{% endfor %}",
}
CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


@dataclass
class Watch:
    """What a watcher saw: /health latencies (None: no answer within the limit) and the server's RSS."""

    latencies: list[float | None] = field(default_factory=list)
    rss_start: int = 0
    rss_peak: int = 0

    def check(self) -> None:
        assert self.latencies, "the watcher never asked /health"
        slow = [x for x in self.latencies if x is None or x > HEALTH_WITHIN_S]
        assert not slow, f"/health slower than {HEALTH_WITHIN_S} s {len(slow)} times of {len(self.latencies)}: {slow}"
        growth = self.rss_peak - self.rss_start
        assert growth < RSS_GROWTH_BYTES, f"server RSS grew by {growth / 2**20:.0f} MiB"


@contextlib.contextmanager
def watched(url: str, pid: int) -> Iterator[Watch]:
    """Ask /health every 0.1 s (a fresh connection each time) and sample RSS while the block runs."""
    process = psutil.Process(pid)
    watch = Watch(rss_start=process.memory_info().rss)
    watch.rss_peak = watch.rss_start
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            start = time.monotonic()
            try:
                ok = httpx.get(f"{url}/health", timeout=HEALTH_WITHIN_S + 1).status_code == 200
                watch.latencies.append(time.monotonic() - start if ok else None)
            except httpx.TransportError:
                watch.latencies.append(None)
            watch.rss_peak = max(watch.rss_peak, process.memory_info().rss)
            done.wait(0.1)

    thread = threading.Thread(target=poll, name="health-watch", daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        done.set()
        thread.join(10)
    watch.check()


def template_model(base: Path, workdir: Path, name: str, template: str) -> Path:
    """A copy of the base model whose default and tool-use chat templates are `template`."""
    model_dir = workdir / name.replace(" ", "-")
    shutil.copytree(base, model_dir)
    (model_dir / "chat_template.jinja").write_text(template)
    (model_dir / "additional_chat_templates").mkdir()
    (model_dir / "additional_chat_templates" / "tool_use.jinja").write_text(template)
    return model_dir


@pytest.fixture(scope="module")
def base_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("llama")
    make_hf_model(path, vocab=320)
    return path


@pytest.fixture(scope="module")
def bomb_server(tmp_path_factory, base_model) -> LiveServer:
    """One server whose template picks its bomb by a template argument."""
    workdir = tmp_path_factory.mktemp("bombs")
    branches = "".join(f"{'{% if' if i == 0 else '{% elif'} bomb == {name!r} %}}{text}"
                       for i, (name, text) in enumerate(BOMBS.items()))
    template = branches + "{% else %}{% for m in messages %}<s>{{ m.role }}\n{{ m.content }}</s>{% endfor %}{% endif %}"
    model_dir = template_model(base_model, workdir, "bombs", template)
    server = start_server(workdir, model_dir=model_dir, max_queue=16,
                          server_config={"template_timeout_s": TEMPLATE_TIMEOUT_S, "template_workers": 2,
                                         "header_timeout_s": HEADER_TIMEOUT_S, "body_timeout_s": BODY_TIMEOUT_S,
                                         "max_connections": MAX_CONNECTIONS})
    yield server
    server.stop()


def model_name(live: LiveServer) -> str:
    return httpx.get(f"{live.base_url}/models", timeout=10).json()["data"][0]["id"]


def bomb_request(live: LiveServer, bomb: str, path: str = "/v1/chat/completions") -> httpx.Response:
    body = {**CHAT, "model": model_name(live), "chat_template_kwargs": {"bomb": bomb}}
    if path == "/tokenize":
        body = {"messages": CHAT["messages"], "tools": [{"type": "function", "function": {"name": "f"}}],
                "chat_template_kwargs": {"bomb": bomb}}
    return httpx.post(f"{live.url}{path}", json=body, timeout=60)


@pytest.mark.parametrize("bomb", list(BOMBS))
def test_a_template_bomb_costs_its_request_a_400(bomb_server: LiveServer, bomb: str) -> None:
    with watched(bomb_server.url, psutil.Process().pid):
        r = bomb_request(bomb_server, bomb)
    assert r.status_code == 400, r.text
    message = r.json()["error"]["message"]
    assert "went over a limit" in message and "\n" not in message, message


def test_tool_use_template_bomb_on_tokenize(bomb_server: LiveServer) -> None:
    with watched(bomb_server.url, psutil.Process().pid):
        r = bomb_request(bomb_server, "huge power", "/tokenize")
    assert r.status_code == 400 and "10 ** 10000000 has more than" in r.json()["error"]["message"], r.text


def test_eight_looping_templates_take_only_the_template_pool(bomb_server: LiveServer) -> None:
    """Eight renders that each run to their time budget: /health, /detokenize and a plain completion are
    answered meanwhile (they never wait on the template threads), and every bomb ends in a 400."""
    name = model_name(bomb_server)
    with watched(bomb_server.url, psutil.Process().pid), ThreadPoolExecutor(8) as pool:
        bombs = [pool.submit(bomb_request, bomb_server, "nested range loops") for _ in range(8)]
        time.sleep(0.3)
        start = time.monotonic()
        detok = httpx.post(f"{bomb_server.url}/detokenize", json={"tokens": [5, 6]}, timeout=10)
        plain = httpx.post(f"{bomb_server.base_url}/completions", timeout=30,
                           json={"model": name, "prompt": "hello", "max_tokens": 2})
        others_took = time.monotonic() - start
        answers = [b.result() for b in bombs]
    assert detok.status_code == 200 and plain.status_code == 200
    assert others_took < 8 * TEMPLATE_TIMEOUT_S / 2, f"other requests waited {others_took:.1f} s for the templates"
    assert all(a.status_code == 400 and "time budget" in a.json()["error"]["message"] for a in answers), \
        [a.text[:200] for a in answers]
    assert bomb_request(bomb_server, "none").status_code == 200  # and the pool is free again


def test_headers_at_one_byte_a_second_are_cut(bomb_server: LiveServer) -> None:
    with watched(bomb_server.url, psutil.Process().pid), raw_http.connect(bomb_server.url, timeout=10) as sock:
        start = time.monotonic()
        head = raw_http.head("GET", "/health", {"X-Slow": "a" * 100})
        answer = b""
        for byte in head[:30]:  # bounded: the server cuts it long before the head is done
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            if raw_http._readable(sock):
                answer = sock.recv(4096)
                break
            time.sleep(0.25)
        cut_after = time.monotonic() - start
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert HEADER_TIMEOUT_S * 0.9 < cut_after < HEADER_TIMEOUT_S + 3


def test_a_body_at_one_byte_a_second_is_cut(bomb_server: LiveServer) -> None:
    with watched(bomb_server.url, psutil.Process().pid), raw_http.connect(bomb_server.url, timeout=10) as sock:
        sock.sendall(raw_http.head("POST", "/v1/completions", {"Content-Type": "application/json",
                                                                "Content-Length": "100"}))
        start = time.monotonic()
        for byte in b'{"prompt": "':  # bounded
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            if raw_http._readable(sock):
                break
            time.sleep(0.25)
        response = raw_http.read_response(sock, timeout=10)
        cut_after = time.monotonic() - start
    assert response is not None and response.status == 408, response
    assert "did not arrive within 1 s (the server's --body-timeout)" in response.json()["error"]["message"]
    assert cut_after < BODY_TIMEOUT_S + 3


def test_three_hundred_silent_connections(bomb_server: LiveServer) -> None:
    """Past the cap the longest-silent connections are closed; the rest are closed at the header timeout."""
    with watched(bomb_server.url, psutil.Process().pid):
        socks = [raw_http.connect(bomb_server.url, timeout=10) for _ in range(300)]
        try:
            time.sleep(HEADER_TIMEOUT_S + 1.5)
            closed = sum(1 for s in socks if raw_http._readable(s))  # an EOF (or a 408) is waiting
        finally:
            for s in socks:
                s.close()
    assert closed == len(socks)


def test_past_the_cap_with_every_connection_busy_a_new_one_gets_503(bomb_server: LiveServer) -> None:
    busy = []
    try:
        for _ in range(MAX_CONNECTIONS):  # each has sent its head and is (slowly) sending a body: busy
            sock = raw_http.connect(bomb_server.url, timeout=10)
            sock.sendall(raw_http.head("POST", "/v1/completions", {"Content-Length": "50"}))
            busy.append(sock)
        time.sleep(0.3)
        with raw_http.connect(bomb_server.url, timeout=10) as extra:
            response = raw_http.read_response(extra, timeout=10)
        assert response is not None and response.status == 503, response
        assert b"too many connections" in response.body
    finally:
        for s in busy:
            s.close()
    wait_healthy(bomb_server.url, timeout=10)


@pytest.mark.parametrize("tokenizer", ["built-in", "hugging face"])
def test_four_tokenize_of_a_million_characters_with_token_strings(tmp_path, base_model, tokenizer) -> None:
    """The answers (a million token ids and their strings each) are built off the event loop, and a Hugging Face
    tokenizer encodes without holding the GIL (its encode() held it 1.7 s for these 1M characters)."""
    port = free_port()
    model = [] if tokenizer == "built-in" else ["--model", str(base_model)]
    proc = spawn_cli(["serve", "--port", str(port), "--device", "cpu", "--profile", str(tmp_path / "absent.yaml"),
                      *model], cwd=tmp_path)
    url = f"http://127.0.0.1:{port}"
    body = {"prompt": "the quick brown fox " * 50_000, "return_token_strs": True}
    assert len(body["prompt"]) == 1_000_000
    try:
        wait_healthy(url, timeout=120, proc=proc)
        with watched(url, proc.pid), ThreadPoolExecutor(4) as pool:
            counts = list(pool.map(lambda _: _tokenize_check(url, body), range(4)))
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert len(set(counts)) == 1
    if tokenizer == "built-in":
        assert counts == [1_000_001] * 4  # a byte-level token per character, and BOS


def _tokenize_check(url: str, body: dict) -> int:
    answer = httpx.post(f"{url}/tokenize", json=body, timeout=120).json()
    assert answer["count"] == len(answer["tokens"]) == len(answer["token_strs"])
    return answer["count"]


def _status_or_closed(url: str, body: dict) -> int | str:
    """The answer's status, or "closed" when the server stopped before answering (SIGTERM cut it)."""
    try:
        return httpx.post(url, json=body, timeout=30).status_code
    except httpx.TransportError:
        return "closed"


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))


def test_a_cli_server_with_128_descriptors_and_a_hostile_template_then_sigterm(tmp_path, base_model) -> None:
    """`bringup serve` as a process under `ulimit -n 128`: 150 silent sockets do not stop /health nor fill the
    log with tracebacks; template bombs in flight do not keep SIGTERM from stopping it within the drain timeout;
    a served model name that is rich markup is printed as it is."""
    model_dir = template_model(base_model, tmp_path, "loops", BOMBS["nested range loops"])
    port = free_port()
    drain_s = 5.0
    proc = spawn_cli(["serve", "--model", str(model_dir), "--port", str(port), "--device", "cpu",
                      "--profile", str(tmp_path / "absent.yaml"), "--served-model-name", "[/bold]",
                      "--header-timeout", "2", "--template-timeout", "2", "--drain-timeout", str(drain_s)],
                     cwd=tmp_path, preexec_fn=_low_fd_limit)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, timeout=120, proc=proc)
        with watched(url, proc.pid):
            socks = []
            for _ in range(150):
                with contextlib.suppress(OSError):
                    socks.append(raw_http.connect(url, timeout=5))
            time.sleep(0.5)
            bombs = ThreadPoolExecutor(4)
            body = {**CHAT, "model": "[/bold]"}
            answers = [bombs.submit(_status_or_closed, f"{url}/v1/chat/completions", body) for _ in range(4)]
            time.sleep(0.5)
            for s in socks:
                s.close()
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=drain_s + 15)
        stopped_after = time.monotonic() - sent
        statuses = [a.result() for a in answers]
        bombs.shutdown()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-2000:]
    assert stopped_after < drain_s + 5
    assert set(statuses) <= {400, 503, "closed"}, statuses
    assert "serving [/bold] on" in out
    assert "Traceback" not in err and err.count("Too many open files") <= 2, err[-3000:]
    assert "--max-connections 1000 lowered to 64" in " ".join(err.split())


def test_a_served_model_name_with_control_characters_is_refused_before_loading(tmp_path) -> None:
    proc = spawn_cli(["serve", "--device", "cpu", "--profile", str(tmp_path / "p.yaml"),
                      "--served-model-name", "a\x1b[2Jb"], cwd=tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "--served-model-name holds control characters (a\\x1b[2Jb)" in lines[0], err
    assert "\x1b" not in out + err


def test_fd_limit_helper_really_lowers_the_limit() -> None:
    """The preexec hook above must lower the limit in the child, or the CLI case proves nothing."""
    out = subprocess.run([sys.executable, "-c", "import resource; print(resource.getrlimit(resource.RLIMIT_NOFILE))"],
                         preexec_fn=_low_fd_limit, capture_output=True, text=True, timeout=30).stdout
    assert out.strip() == "(128, 128)"



OUT_OF_DESCRIPTORS = """
import asyncio, resource, socket
from bringup.log import configure_logging, get_logger
from bringup.serve.http.connections import AcceptErrorLog

configure_logging(False)
get_logger("serve").warning("logging warmed up")  # its lazy imports done while descriptors are left
resource.setrlimit(resource.RLIMIT_NOFILE, (48, 48))
made = []

class Counting(asyncio.Protocol):
    def connection_made(self, transport):
        made.append(transport)

async def main():
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(AcceptErrorLog())
    server = await loop.create_server(Counting, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    hogs = []
    try:
        for _ in range(100):  # bounded: the limit is 48
            hogs.append(open("/dev/null"))
    except OSError:
        pass
    hogs.pop().close()
    client = socket.create_connection(("127.0.0.1", port))  # takes the last descriptor: accept() has none
    await asyncio.sleep(3.5)  # asyncio retries accept() each second
    print("made while out of descriptors:", len(made), flush=True)
    for hog in hogs:
        hog.close()
    for _ in range(30):  # bounded wait for the retry
        if made:
            break
        await asyncio.sleep(0.1)
    print("made after they were freed:", len(made), flush=True)
    client.close()

asyncio.run(main())
"""


def test_running_out_of_descriptors_is_one_warning_and_accepting_resumes(tmp_path) -> None:
    """A real EMFILE in a real event loop's accept(), with the server's exception handler installed."""
    env = {"PYTHONPATH": str(Path(__file__).resolve().parents[2]), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    run = subprocess.run([sys.executable, "-c", OUT_OF_DESCRIPTORS], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "made while out of descriptors: 0" in run.stdout and "made after they were freed: 1" in run.stdout
    warnings = [line for line in run.stderr.splitlines() if "cannot accept connections" in line]
    assert len(warnings) == 1 and "Too many open files" in warnings[0], run.stderr
    assert "Traceback" not in run.stderr, run.stderr
