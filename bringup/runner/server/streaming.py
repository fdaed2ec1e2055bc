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

    Text that might still change is held back until it can't: the tail that could be the start of
    a stop string (the engine cuts a matched stop string off) and a trailing replacement character
    (an incomplete multi-byte character that the next token completes).
    """

    def __init__(self, stop: list[str]) -> None:
        self.stop = stop
        self.sent = ""

    def delta(self, text: str, finished: bool) -> str:
        if not text.startswith(self.sent):
            return ""  # the engine rewrote text already sent; nothing safe to add
        end = len(text) if finished else len(text) - self._unsettled_tail(text)
        if end <= len(self.sent):
            return ""
        piece = text[len(self.sent):end]
        self.sent += piece
        return piece

    def _unsettled_tail(self, text: str) -> int:
        hold = 0
        stripped = text.rstrip("\ufffd")
        hold = len(text) - len(stripped)
        for stop in self.stop:
            for k in range(min(len(stop) - 1, len(stripped)), 0, -1):
                if stripped.endswith(stop[:k]):
                    hold = max(hold, len(text) - len(stripped) + k)
                    break
        return hold
