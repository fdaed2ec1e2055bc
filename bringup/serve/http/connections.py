"""Connection limits like a production server's, on uvicorn's h11 protocol.

- A request's head (request line and headers) must arrive whole within the header timeout of the connection
  opening, or of its first byte on a kept-alive connection; else a 408 and the connection is closed (a client
  sending 1 byte/s, or nothing at all, is cut). The body has its own timeout (BodyLimitMiddleware).
- At most `max_connections` connections are open. Past the cap the connection silent the longest (no request
  in progress) is closed to make room, so a flood of silent sockets cannot lock out /health; when every
  connection has a request in progress, the new one gets a 503 and is closed.
- The event loop accepts at most `accept_batch` connections before their protocols run (asyncio accepts up to
  its `backlog` at once), so a flood is capped in steps instead of taking every descriptor in one go; the
  kernel's queue of pending connections stays long (KERNEL_BACKLOG), so a client is never refused there.
- Running out of file descriptors in accept() is logged as one WARNING line at most every FD_WARNING_EVERY_S
  (with how many were not logged), not a traceback a second; accepting resumes when sockets free up.
"""

from __future__ import annotations

import asyncio
import errno
import os
import resource
import socket
import time
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from bringup.log import get_logger

log = get_logger("serve")

FD_RESERVE = 64  # descriptors kept for everything but client sockets (model files, logs, pipes, threads)
FD_WARNING_EVERY_S = 10.0
KERNEL_BACKLOG = 2048
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


@dataclass(frozen=True)
class ConnectionLimits:
    header_timeout_s: float = 10.0
    max_connections: int = 1000

    @property
    def accept_batch(self) -> int:
        """Accepted sockets wait two or three loop turns for their protocol: that many batches must fit in
        the descriptors FD_RESERVE leaves beside the cap."""
        return max(8, min(KERNEL_BACKLOG, self.max_connections // 8))


def restore_kernel_backlog(listening: list) -> None:
    """asyncio listens with its accept batch as the queue length; give the kernel its long queue back."""
    for transport_socket in listening:
        with socket.socket(fileno=os.dup(transport_socket.fileno())) as same_socket:
            same_socket.listen(KERNEL_BACKLOG)


def usable_connection_cap(requested: int) -> int:
    """`requested`, lowered to what the process's file-descriptor limit leaves for client sockets."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return requested
    usable = max(8, soft - FD_RESERVE)
    if usable < requested:
        log.warning("--max-connections %d lowered to %d: the open-file limit (ulimit -n) is %d and %d descriptors "
                    "are kept for the server itself; raise ulimit -n to allow more", requested, usable, soft,
                    FD_RESERVE)
    return min(requested, usable)


def _simple_response(status: int, reason: str, message: str) -> bytes:
    body = message.encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode() + body


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header timeout and a connection cap; `limits` is set by guarded_protocol."""

    limits: ConnectionLimits

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self.last_active = time.monotonic()
        self.header_timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections and not self._make_room():
            log.warning("connection refused: %d connections open, all with a request in progress "
                        "(--max-connections %d)", len(self.connections) - 1, self.limits.max_connections)
            transport.write(_simple_response(503, "Service Unavailable", "too many connections: every one of "
                                             f"this server's {self.limits.max_connections} connections has a "
                                             "request in progress; retry later"))
            transport.close()
            return
        self._start_header_timer()

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        if self.header_timer is None and not self.busy:
            self._start_header_timer()  # a new request on a kept-alive connection
        super().data_received(data)
        if self.busy:
            self._stop_header_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_header_timer()
        super().connection_lost(exc)

    @property
    def busy(self) -> bool:
        """A request's head arrived and its response is not complete."""
        return self.cycle is not None and not self.cycle.response_complete

    def _make_room(self) -> bool:
        idle = [c for c in self.connections if c is not self and not getattr(c, "busy", True)]
        if not idle:
            return False
        oldest = min(idle, key=lambda c: c.last_active)
        oldest.transport.close()
        self.connections.discard(oldest)
        return True

    def _start_header_timer(self) -> None:
        self.header_timer = self.loop.call_later(self.limits.header_timeout_s, self._header_timed_out)

    def _stop_header_timer(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _header_timed_out(self) -> None:
        self.header_timer = None
        if self.busy or self.transport.is_closing():
            return
        self._unset_keepalive_if_required()
        self.transport.write(_simple_response(408, "Request Timeout", "the request's headers did not arrive "
                                              f"within {self.limits.header_timeout_s:g} s (the server's "
                                              "--header-timeout); send the whole head at once"))
        self.transport.close()


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a header timeout and a connection cap (pass it as uvicorn's `http`)."""
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"limits": limits})


class AcceptErrorLog:
    """A loop exception handler: running out of descriptors in accept() is one rate-limited WARNING line."""

    def __init__(self) -> None:
        self.last_logged: float | None = None
        self.unlogged = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if not (isinstance(exc, OSError) and exc.errno in _OUT_OF_RESOURCES):
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if self.last_logged is not None and now - self.last_logged < FD_WARNING_EVERY_S:
            self.unlogged += 1
            return
        more = f" ({self.unlogged} more like it not logged)" if self.unlogged else ""
        log.warning("cannot accept connections: %s; retrying each second; lower --max-connections or raise ulimit -n"
                    "%s", exc.strerror or exc, more)
        self.last_logged, self.unlogged = now, 0
