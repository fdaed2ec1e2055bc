"""A live `bringup serve` on 127.0.0.1 for the server tests: real engine, real uvicorn, real sockets."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.serve.app import create_app
from bringup.serve.context import ServerConfig
from bringup.serve.http.runtime import DrainingServer, make_server
from tests.server.scrape import Samples, parse_metrics

REPO = Path(__file__).resolve().parents[2]
API_KEY = "test-key"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def engine_options(profile_dir: Path, profile_name: str = "absent.yaml", **overrides) -> EngineOptions:
    """The built-in model on the CPU; without a profile at profile_dir/profile_name, the conservative plan."""
    return EngineOptions(**{"model_dir": None, "profile_path": profile_dir / profile_name, "device": "cpu",
                            **overrides})


def wait_healthy(url: str, timeout: float = 60.0, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before it became healthy")
        try:
            if httpx.get(f"{url}/health", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} did not become healthy in {timeout} s")


def started_or_fail(url: str, server: subprocess.Popen, timeout: float, what: str) -> None:
    """Wait for a child `bringup serve` to be healthy; if it exited first, fail the test with its last stderr."""
    import pytest

    try:
        wait_healthy(url, timeout=timeout, proc=server)
    except RuntimeError:
        pytest.fail(f"{what} did not start:\n{server.communicate(timeout=30)[1][-3000:]}")


@dataclass
class LiveServer:
    """uvicorn serving the app in a background thread of this process."""

    url: str
    engine: LLMEngine
    server: DrainingServer
    thread: threading.Thread
    api_key: str | None

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def metrics(self) -> Samples:
        return parse_metrics(httpx.get(f"{self.url}/metrics", timeout=10).text)

    def wait_idle(self, timeout: float = 10.0) -> Samples:
        """Metrics once nothing is in flight and no KV block is used (or the last seen, on timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            m = self.metrics()
            idle = m["bringup_kv_blocks_used"] == 0 and m["bringup_requests_in_flight"] == 0 \
                and m.value("vllm:num_requests_running") == 0 and m.value("vllm:num_requests_waiting") == 0
            if idle or time.monotonic() > deadline:
                return m
            time.sleep(0.05)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def start_server(profile_dir: Path, *, api_key: str | None = None, max_queue: int = 64,
                 server_config: dict | None = None, sndbuf: int | None = None, **engine_overrides) -> LiveServer:
    """server_config: more ServerConfig fields (stream_write_timeout_s, ...); sndbuf: the send buffer of every
    accepted connection (small: a client that stops reading fills it fast)."""
    options = engine_options(profile_dir, **engine_overrides)
    engine = LLMEngine.create(options)
    app = create_app(engine, ServerConfig(api_key=api_key, max_queue=max_queue,
                                          profile_path=options.profile_path, **(server_config or {})))
    listener = _listener(sndbuf)
    port = listener.getsockname()[1]
    server = make_server(app.state.ctx, app, "127.0.0.1", port)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, name="uvicorn", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    wait_healthy(url)
    return LiveServer(url=url, engine=engine, server=server, thread=thread, api_key=api_key)


def _listener(sndbuf: int | None) -> socket.socket:
    """A listening socket on a free port of 127.0.0.1; accepted connections inherit its buffer sizes."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if sndbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def spawn_cli(args: list[str], cwd: Path, module: str = "bringup", **popen) -> subprocess.Popen:
    """`python -m bringup <args>` (or another `module`: tests.server.slow_steps) as a child process with this checkout
    on its path (popen: more Popen arguments, such as a preexec_fn that lowers a resource limit)."""
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen([sys.executable, "-m", module, *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
