"""One HTTP generation request's life: its job of engine requests, admission, the stream of engine outputs
(aborted when the client goes away), and the answer once every choice is final."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.requests import Request

from bringup.log import get_logger
from bringup.serve.async_engine import AsyncEngine, EngineFailure, EngineRequest
from bringup.serve.errors import APIError
from bringup.serve.http.sse_response import SSE_HEADERS, SSEResponse
from bringup.serve.requests.schemas import Usage

log = get_logger("serve")

@dataclass
class Job:
    """One HTTP generation request as engine sequences: choice index -> sequence."""

    id: str
    sequences: list[EngineRequest]
    prompt_tokens: int  # usage: each distinct prompt counted once
    stop: list[str] = field(default_factory=list)
    echo: list[str] | None = None  # with echo: the prompt text each choice's answer starts with

    def choice_index(self) -> dict[str, int]:
        return {seq.request_id: i for i, seq in enumerate(self.sequences)}


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


class Subscription:
    """The engine outputs of one admitted HTTP request.

    Its admission slot goes back as soon as every sequence finished (a client slow to read the rest of its
    stream does not hold a place in the queue). close() — called however the request ends (finished, client
    gone, error) — aborts the sequences still unfinished, which frees their KV blocks, and releases the slot.
    """

    def __init__(self, engine: AsyncEngine, job: Job) -> None:
        self.engine = engine
        self.job = job
        self.pending = {seq.request_id for seq in job.sequences}
        self._outputs: asyncio.Queue | None = None
        self._closed = False
        self._released = False

    async def start(self) -> None:
        """Hand the job to the engine (APIError 400/503 when it refuses)."""
        try:
            self._outputs = await self.engine.add(self.job.sequences)
        except EngineFailure as exc:
            raise APIError(503, f"the engine is not running ({exc}); restart the server",
                           code="engine_dead") from None

    async def outputs(self) -> AsyncIterator[Any]:
        """Every RequestOutput until all sequences finished; APIError when one of them failed or was cut."""
        assert self._outputs is not None, "start() first"
        while self.pending:
            item = await self._outputs.get()
            if isinstance(item, EngineFailure):
                raise APIError(503, str(item), code="engine_dead")
            if isinstance(item, APIError):  # cut by the server (drain timeout)
                raise item
            if item.finished:
                self.pending.discard(item.request_id)
                if item.finish_reason == "error":
                    raise _failed(item)
            yield item
        self._release()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.pending:
            self.engine.abort(sorted(self.pending))
        self._release()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self.engine.release()


def _failed(output: Any) -> APIError:
    """The 500 for a sequence the engine finished with an error (its numbers cannot be trusted)."""
    error = output.error
    message = error.message if error is not None else "the engine finished this request with an error"
    return APIError(500, message, code=error.code if error is not None else "engine_error")


async def respond(job: Job, ctx: Any, request: Request, stream: bool,
                  make_stream: Callable[[Subscription], AsyncIterator[bytes]]) -> SSEResponse | list[Any]:
    """Admit the job; stream it (an SSE response) or wait for every choice's final output."""
    ctx.async_engine.admit()
    sub = Subscription(ctx.async_engine, job)
    try:
        await sub.start()
    except BaseException:
        sub.close()
        raise
    if stream:
        return SSEResponse(make_stream(sub), on_close=sub.close, headers=SSE_HEADERS,
                           write_timeout=ctx.config.stream_write_timeout_s,
                           on_stall=lambda: _stalled(ctx, job, ctx.config.stream_write_timeout_s))
    try:
        return await final_outputs(sub, request)
    finally:
        sub.close()


async def run_request(body: Any, request: Request, ctx: Any, build: Callable[[Any, Any], Awaitable[Job]],
                      stream: Callable[[Subscription, Any, Any, bool], AsyncIterator[str]],
                      answer: Callable[[Job, list[Any]], Any]) -> Any:
    """What every generation endpoint does with a request: check it, build its job, then stream it, or answer
    with `answer(job, final outputs)` once every choice is final."""
    ctx.accept(body, body.model)
    job = await build(body, ctx)
    include_usage = bool(body.stream and body.stream_options and body.stream_options.include_usage)
    result = await respond(job, ctx, request, body.stream, lambda sub: stream(sub, body, ctx, include_usage))
    return result if body.stream else answer(job, result)


def usage(job: Job, outputs: list[Any]) -> Usage:
    completion = sum(len(o.token_ids) for o in outputs)
    return Usage(prompt_tokens=job.prompt_tokens, completion_tokens=completion,
                 total_tokens=job.prompt_tokens + completion)


async def final_outputs(sub: Subscription, request: Request) -> list[Any]:
    """The finished RequestOutput of every sequence, in choice order (non-streaming requests).

    Watches the connection meanwhile: a client that goes away gets its sequences aborted at once.
    """
    collect = asyncio.ensure_future(_collect(sub))
    watch = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({collect, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
        if not collect.done():
            collect.cancel()
    if not collect.done() or collect.cancelled():
        raise APIError(499, "the client closed the connection before the answer was ready",
                       code="client_closed")
    return collect.result()


async def _collect(sub: Subscription) -> list[Any]:
    """Each sequence's final output, with the prompt logprobs the engine handed back in an earlier one."""
    finals: dict[str, Any] = {}
    scored: dict[str, Any] = {}
    async for out in sub.outputs():
        if out.prompt_logprobs is not None:
            scored[out.request_id] = out.prompt_logprobs
        if out.finished:
            finals[out.request_id] = replace(out, prompt_logprobs=scored.get(out.request_id))
    return [finals[s.request_id] for s in sub.job.sequences]


async def _disconnected(request: Request) -> None:
    """Returns when the client disconnects (the request body has been read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _stalled(ctx: Any, job: Job, timeout: float) -> None:
    log.warning("stream %s: the client read nothing for %g s (--stream-write-timeout); cutting it, aborting its "
                "sequences and freeing its queue slot", job.id, timeout)
    ctx.metrics.count_stalled_stream()
