"""One streamed response, whatever the endpoint: each choice's text as soon as it is decided, as SSE events.

The endpoint says how a piece of text becomes its event (a completion chunk or a chat chunk); this module owns
what both share: the text decided per choice (stop strings, UTF-8), the logprobs new since the last event, an
error after the 200 header sent in-band, the usage event, and `[DONE]`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from bringup.serve.context import ServerContext
from bringup.serve.generation import Subscription, usage
from bringup.serve.schemas import Usage
from bringup.serve.streaming import DONE, TextStream, sse


@dataclass
class Piece:
    """What one engine output adds to a choice."""

    request_id: str
    index: int  # the choice
    text: str  # newly decided text ("" when only logprobs or the finish are new)
    logprobs: list[Any]  # logprob entries new since the last piece (empty when none were asked for)
    finish_reason: str | None  # set on the choice's last piece


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
            if text or out.finished or new:
                yield sse(event(Piece(rid, index_of[rid], text, new, out.finish_reason if out.finished else None)))
    except Exception as exc:  # report in-band: the 200 header is already sent
        yield sse(ctx.stream_error(exc))
    finally:
        await outputs.aclose()
    if usage_event is not None and len(finals) == len(job.sequences):
        yield sse(usage_event(usage(job, [finals[s.request_id] for s in job.sequences])))
    yield DONE
