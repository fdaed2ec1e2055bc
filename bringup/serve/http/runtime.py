"""Run the app under uvicorn with a draining shutdown.

SIGTERM (or the first Ctrl-C): stop admitting (new generation requests get 503, /health says
"draining"), let every admitted request finish, then stop uvicorn and return normally (exit 0).
When the drain timeout runs out first, every request still running is cut: a stream gets an error
event and `data: [DONE]`, a plain request a 503; the cut requests are logged, and `requests_cut`
tells the caller to exit non-zero. A second Ctrl-C ends it at once.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import time
from types import FrameType

import uvicorn

from bringup.log import get_logger
from bringup.serve.context import ServerContext
from bringup.serve.http.connections import (
    AcceptErrorLog,
    ConnectionLimits,
    guarded_protocol,
    restore_kernel_backlog,
    usable_connection_cap,
)
from bringup.serve.http.sse_response import STREAM_CUT

log = get_logger("serve")

CUT_GRACE_S = 5.0  # after cutting, how long the error events get to reach their clients


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ctx: ServerContext) -> None:
        super().__init__(config)
        self.ctx = ctx
        self.drain_started: float | None = None
        self.cut_at: float | None = None
        self.requests_cut: list[str] = []

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().set_exception_handler(AcceptErrorLog())
        await super().serve(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        restore_kernel_backlog([s for server in self.servers for s in server.sockets])

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.drain_started is None:
            self.begin_drain()
            return
        if sig == signal.SIGINT:
            log.warning("second interrupt: stopping now, aborting %d request(s)", self.ctx.async_engine.in_flight)
            self.should_exit = True
            self.force_exit = True

    def begin_drain(self) -> None:
        """Stop admission; uvicorn exits once nothing is in flight (callable from any thread)."""
        self.drain_started = time.monotonic()
        self.ctx.async_engine.start_drain()

    async def on_tick(self, counter: int) -> bool:
        if self.drain_started is None and self.ctx.async_engine.device_loss is not None:
            self.begin_drain()  # nothing is left to serve on: answer the failed requests, then stop
        if self.drain_started is not None and not self.should_exit:
            self._drain_tick(time.monotonic())
        return await super().on_tick(counter)

    def _drain_tick(self, now: float) -> None:
        waited = now - self.drain_started
        if self.ctx.async_engine.in_flight <= 0:
            log.info("%s in %.2f s; exiting", "cut requests answered" if self.cut_at else "drained", waited)
            self.should_exit = True
        elif self.cut_at is None and waited > self.ctx.config.drain_timeout_s:
            self._cut_in_flight()
        elif self.cut_at is not None and now - self.cut_at > CUT_GRACE_S:
            log.warning("%d request(s) still open %.0f s after they were cut; closing their connections",
                        self.ctx.async_engine.in_flight, CUT_GRACE_S)
            self.should_exit = True

    def _cut_in_flight(self) -> None:
        """The drain timeout ran out: end every running request with an error its client receives."""
        timeout = self.ctx.config.drain_timeout_s
        self.cut_at = time.monotonic()
        self.requests_cut = self.ctx.async_engine.cut_all(
            f"the server is shutting down and the drain timeout ({timeout:g} s, --drain-timeout) ran out before "
            "this request finished; its output is incomplete; retry it")
        log.warning("drain timeout (%g s) reached with %d request(s) in flight: cut %d sequence(s): %s",
                    timeout, self.ctx.async_engine.in_flight, len(self.requests_cut), ", ".join(self.requests_cut))


class _CutStreamFilter(logging.Filter):
    """Drops uvicorn's "returned without completing response" for a stream the server cut on purpose."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (STREAM_CUT.get() and "without completing response" in record.getMessage())


def make_server(ctx: ServerContext, app, host: str, port: int, log_level: str = "warning") -> DrainingServer:
    limits = ConnectionLimits(header_timeout_s=ctx.config.header_timeout_s,
                              max_connections=usable_connection_cap(ctx.config.max_connections))
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                            timeout_graceful_shutdown=5, lifespan="on", http=guarded_protocol(limits),
                            backlog=limits.accept_batch)
    uvicorn_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _CutStreamFilter) for f in uvicorn_log.filters):
        uvicorn_log.addFilter(_CutStreamFilter())
    return DrainingServer(config, ctx)
