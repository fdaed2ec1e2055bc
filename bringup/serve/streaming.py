"""Streamed responses, whatever the endpoint: each choice's text as soon as it is decided, as SSE events.

The endpoint says how a piece of text becomes its event (a completion chunk or a chat chunk); this module owns
what both share: server-sent events, the text decided per choice (stop strings, UTF-8), the logprobs new since
the last event, an error after the 200 header sent in-band, the usage event, and `[DONE]`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from bringup.serve.context import ServerContext
from bringup.serve.generation import Subscription, usage
from bringup.serve.requests.schemas import Usage

DONE = "data: [DONE]\n\n"


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


@dataclass
class Piece:
    """What one engine output adds to a choice."""

    request_id: str
    index: int  # the choice
    text: str  # newly decided text ("" when only logprobs or the finish are new)
    logprobs: list[Any]  # logprob entries new since the last piece (empty when none were asked for)
    finish_reason: str | None  # set on the choice's last piece
    prompt_logprobs: list[Any] | None = None  # the prompt's logprob entries, in the piece of the step that ran it


async def sse_events(sub: Subscription, ctx: ServerContext, event: Callable[[Piece], dict],
                     usage_event: Callable[[Usage], dict] | None, opening: list[dict] | None = None
                     ) -> AsyncIterator[str]:
    """`opening` events, one event per piece, the usage event (when asked for and every choice finished), DONE."""
    job = sub.job
    index_of = job.choice_index()
    texts = {seq.request_id: TextStream(job.stop) for seq in job.sequences}
    logprobs_seen = dict.fromkeys(index_of, 0)
    finals: dict[str, Any] = {}
    for payload in opening or []:
        yield sse(payload)
    outputs = sub.outputs()
    try:
        async for out in outputs:
            rid = out.request_id
            text = texts[rid].delta(out.text, out.finished)
            new: list[Any] = []
            if out.logprobs is not None:
                new, logprobs_seen[rid] = out.logprobs[logprobs_seen[rid]:], len(out.logprobs)
            if out.finished:
                finals[rid] = out
            if text or out.finished or new or out.prompt_logprobs is not None:
                yield sse(event(Piece(rid, index_of[rid], text, new, out.finish_reason if out.finished else None,
                                      out.prompt_logprobs)))
    except Exception as exc:  # report in-band: the 200 header is already sent
        yield sse(ctx.stream_error(exc))
    finally:
        await outputs.aclose()
    if usage_event is not None and len(finals) == len(job.sequences):
        yield sse(usage_event(usage(job, [finals[s.request_id] for s in job.sequences])))
    yield DONE
