"""What both generation endpoints share: prompts to token ids, request fields to SamplingParams,
and the stream of engine outputs for one HTTP request (aborted when the client goes away)."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import StreamingResponse

from bringup.log import get_logger
from bringup.runner.sampling_params import SamplingParams
from bringup.serve.async_engine import AsyncEngine, EngineFailure, EngineRequest
from bringup.serve.errors import APIError
from bringup.serve.requests.schemas import SamplingFields, Usage
from bringup.serve.text_work import TextWork

# A prompt longer than this many characters per context token cannot fit: reject it before
# spending time tokenising it.
MAX_CHARS_PER_TOKEN = 64

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}  # no proxy buffering of a stream

log = get_logger("serve")

# Set in the request's task when the server cut a stalled stream on purpose: the "returned without completing
# response" line uvicorn then logs is expected (runtime.py filters it out).
STREAM_CUT: ContextVar[bool] = ContextVar("bringup_stream_cut", default=False)


@dataclass
class Job:
    """One HTTP generation request as engine sequences: choice index -> sequence."""

    id: str
    sequences: list[EngineRequest]
    prompt_tokens: int  # usage: each distinct prompt counted once
    stop: list[str] = field(default_factory=list)

    def choice_index(self) -> dict[str, int]:
        return {seq.request_id: i for i, seq in enumerate(self.sequences)}


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


class Preparer:
    """Checks and converts request fields against the loaded model (context length, vocabulary)."""

    def __init__(self, tokenizer: Any, max_model_len: int, vocab_size: int | None, text_work: TextWork) -> None:
        self.tokenizer = tokenizer
        self.text_work = text_work
        self.max_model_len = max_model_len
        self.vocab_size = vocab_size

    async def encode(self, text: str, param: str, *, add_special_tokens: bool) -> list[int]:
        """Token ids as the runner's own `generate` makes them: plain prompts get the model's special
        tokens (BOS), a rendered chat template already holds them."""
        limit = self.max_model_len * MAX_CHARS_PER_TOKEN
        if len(text) > limit:
            raise APIError(400, f"{param} is {len(text)} characters; it cannot fit the model's context of "
                                f"{self.max_model_len} tokens; shorten it", param=param,
                           code="context_length_exceeded")
        return await self.text_work.run(self.tokenizer.encode, text, add_special_tokens=add_special_tokens)

    def check_ids(self, ids: list[int], param: str) -> None:
        """A non-empty prompt whose every token id is in [0, vocab_size)."""
        if not ids:
            raise APIError(400, f"{param}: is empty; give at least one token", param=param)
        if self.vocab_size is None or (min(ids) >= 0 and max(ids) < self.vocab_size):
            return
        index, bad = next((i, t) for i, t in enumerate(ids) if not 0 <= t < self.vocab_size)
        raise APIError(400, f"{param}.{index}: token id {bad} is outside this model's vocabulary [0, "
                            f"{self.vocab_size}); use ids from the model's tokenizer", param=param,
                       code="invalid_value")

    def token_budget(self, prompt_len: int, requested: int | None, param: str) -> int:
        """max_tokens for a prompt: the requested value if prompt + it fits, else a 400."""
        room = self.max_model_len - prompt_len
        if room < 1 or (requested is not None and requested > room):
            asked = f"; you requested {prompt_len + (requested or 0)} tokens ({prompt_len} in the prompt, " \
                    f"{requested or 0} to generate)" if requested is not None else \
                    f"; the prompt alone has {prompt_len} tokens"
            raise APIError(400, f"this model's maximum context length is {self.max_model_len} tokens{asked}; "
                                "shorten the prompt or lower max_tokens", param=param,
                           code="context_length_exceeded")
        return requested if requested is not None else room


def sampling_params(body: SamplingFields, *, max_tokens: int, choice: int, logprobs: int | None,
                    defaults: dict[str, Any] | None = None) -> SamplingParams:
    """The runner's SamplingParams for choice number `choice` (seeds differ per choice, reproducibly).

    A field the request leaves out takes the model's generation_config.json default, else OpenAI's.
    """
    model = defaults or {}

    def pick(name: str, openai_default: float | int) -> Any:
        value = getattr(body, name)
        return value if value is not None else model.get(name, openai_default)

    seed = None if body.seed is None else (body.seed + choice) % (2**63)
    top_k = pick("top_k", 0)
    params = SamplingParams(
        max_tokens=max_tokens,
        temperature=pick("temperature", 1.0),
        top_p=pick("top_p", 1.0),
        top_k=0 if top_k == -1 else top_k,
        min_p=pick("min_p", 0.0),
        repetition_penalty=pick("repetition_penalty", 1.0),
        seed=seed,
        stop=body.stop_strings(),
        stop_token_ids=list(body.stop_token_ids or []),
        ignore_eos=body.ignore_eos,
        logprobs=logprobs,
    )
    try:
        params.validate()
    except ValueError as exc:
        raise APIError(400, str(exc), param=str(exc).split(":", 1)[0] or None, code="invalid_value") from None
    return params


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
    finals: dict[str, Any] = {}
    async for out in sub.outputs():
        if out.finished:
            finals[out.request_id] = out
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
