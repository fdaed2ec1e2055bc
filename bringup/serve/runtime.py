"""Run the app under uvicorn with a draining shutdown.

SIGTERM (or the first Ctrl-C): stop admitting (new generation requests get 503, /health says
"draining"), let every admitted request finish, then stop uvicorn and return normally (exit 0).
A second Ctrl-C, or the drain timeout, ends it at once; requests still running are aborted.
"""

from __future__ import annotations

import signal
import time
from types import FrameType

import uvicorn

from bringup.log import get_logger
from bringup.serve.context import ServerContext

log = get_logger("serve")


class DrainingServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, ctx: ServerContext) -> None:
        super().__init__(config)
        self.ctx = ctx
        self.drain_started: float | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.drain_started is None:
            self.begin_drain()
            return
        if sig == signal.SIGINT:
            log.warning("second interrupt: stopping now, aborting %d request(s)", self.ctx.engine.in_flight)
            self.should_exit = True
            self.force_exit = True

    def begin_drain(self) -> None:
        """Stop admission; uvicorn exits once nothing is in flight (callable from any thread)."""
        self.drain_started = time.monotonic()
        self.ctx.engine.start_drain()

    async def on_tick(self, counter: int) -> bool:
        if self.drain_started is not None and not self.should_exit:
            waited = time.monotonic() - self.drain_started
            if self.ctx.engine.in_flight <= 0:
                log.info("drained in %.2f s; exiting", waited)
                self.should_exit = True
            elif waited > self.ctx.config.drain_timeout_s:
                log.warning("drain timeout (%.0f s) reached with %d request(s) in flight; aborting them",
                            self.ctx.config.drain_timeout_s, self.ctx.engine.in_flight)
                self.should_exit = True
        return await super().on_tick(counter)


def make_server(ctx: ServerContext, app, host: str, port: int, log_level: str = "warning") -> DrainingServer:
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                            timeout_graceful_shutdown=5, lifespan="on")
    return DrainingServer(config, ctx)
