"""Worker -> supervisor messages: one JSON object per line on an inherited pipe (or kept in memory).

Message types: boot (process started), ready (process group up), arrive (reached a case's entry
barrier), result (a finished case), fault (this rank saw another rank fail, with suspects), error
(this rank failed), done (all cases finished).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

FD_ENV_VAR = "BRINGUP_COLLECTIVES_FD"


class Channel:
    """Where a rank reports. The base class keeps the messages (torchrun mode gathers them later)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank
        self.messages: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def send(self, kind: str, **fields: Any) -> None:
        message = {"type": kind, "rank": self.rank, **fields}
        with self._lock:
            self._emit(message)

    def _emit(self, message: dict[str, Any]) -> None:
        self.messages.append(message)


class PipeChannel(Channel):
    """Writes each message as a JSON line to a pipe the supervisor reads; a write is one syscall."""

    def __init__(self, rank: int, fd: int) -> None:
        super().__init__(rank)
        self._fd = fd

    def _emit(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, default=str) + "\n").encode()
        while data:
            written = os.write(self._fd, data)
            data = data[written:]


class LineReader:
    """Accumulates bytes from a pipe and yields complete JSON messages (ignores undecodable lines)."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        messages = []
        for line in lines:
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict):
                messages.append(message)
        return messages
