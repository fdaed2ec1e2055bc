"""A streamed answer on the wire: a text/event-stream response that cleans up however it ends, and cuts a client
that stopped reading."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextvars import ContextVar

import anyio
from starlette.responses import StreamingResponse

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # no proxy buffering of a stream


# Set in the request's task when the server cut a stalled stream on purpose: the "returned without completing
# response" line uvicorn then logs is expected (runtime.py filters it out).
STREAM_CUT: ContextVar[bool] = ContextVar("bringup_stream_cut", default=False)


class StalledClient(Exception):
    """A write to the client waited longer than the write timeout: it stopped reading."""


class SSEResponse(StreamingResponse):
    """A text/event-stream response that runs on_close however it ends, and closes its body.

    With a write_timeout, a write that waits longer than that (the client stopped reading and the socket's
    buffers are full) cuts the stream: on_stall, then on_close, and the connection is closed.
    """

    media_type = "text/event-stream"

    def __init__(self, content: AsyncIterator[str], on_close, headers: dict[str, str] | None = None,
                 write_timeout: float | None = None, on_stall: Callable[[], None] | None = None):
        super().__init__(content, headers=headers)
        self.on_close = on_close
        self.write_timeout = write_timeout
        self.on_stall = on_stall

    async def stream_response(self, send) -> None:
        await super().stream_response(self._timed(send) if self.write_timeout else send)

    def _timed(self, send):
        async def timed_send(message) -> None:
            try:
                with anyio.fail_after(self.write_timeout):
                    await send(message)
            except TimeoutError:
                raise StalledClient from None

        return timed_send

    async def __call__(self, scope, receive, send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except OSError:
            pass  # the client went away mid-send
        except StalledClient:
            STREAM_CUT.set(True)
            if self.on_stall is not None:
                self.on_stall()
        finally:
            self.on_close()
            aclose = getattr(self.body_iterator, "aclose", None)
            if aclose is not None:
                await aclose()
