"""Server-sent events and the incremental text of one choice."""

from __future__ import annotations

import json
from typing import Any

DONE = "data: [DONE]\n\n"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def sse(payload: Any) -> str:
    """One SSE event carrying a JSON payload (a pydantic model or a plain dict)."""
    if hasattr(payload, "model_dump_json"):
        body = payload.model_dump_json()
    else:
        body = json.dumps(payload, separators=(",", ":"))
    return f"data: {body}\n\n"


class TextStream:
    """Turns the engine's cumulative text into deltas that are never taken back.

    The engine's text holds only decided characters (an incomplete multi-byte character waits inside
    the engine; bytes that can never be valid arrive as U+FFFD at once), so each step's new text is sent
    at once, except a tail that could be the start of a stop string: the engine cuts a matched stop
    string off, so that tail is held until it can't be one.
    """

    def __init__(self, stop: list[str]) -> None:
        self.stop = stop
        self.sent = 0  # characters of the text already sent

    def delta(self, text: str, finished: bool) -> str:
        end = len(text) if finished else len(text) - self._stop_prefix_tail(text)
        if end <= self.sent:
            return ""
        piece = text[self.sent:end]
        self.sent = end
        return piece

    def _stop_prefix_tail(self, text: str) -> int:
        """The length of the longest end of text that is a proper prefix of a stop string."""
        hold = 0
        for stop in self.stop:
            for k in range(min(len(stop) - 1, len(text)), hold, -1):
                if text.endswith(stop[:k]):
                    hold = k
                    break
        return hold
