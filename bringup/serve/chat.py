"""POST /v1/chat/completions: the model's chat template over the messages, streamed or not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request

from bringup.serve.async_engine import Sequence
from bringup.serve.context import ServerContext
from bringup.serve.errors import APIError
from bringup.serve.generation import Job, Subscription, new_id, respond, sampling_params, usage
from bringup.serve.logprobs import LogprobFormatter
from bringup.serve.schemas import (
    AssistantMessage,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatDelta,
    Usage,
)
from bringup.serve.sse_stream import Piece, sse_events


async def render_prompt(body: ChatCompletionRequest, ctx: ServerContext) -> list[int]:
    messages = [{"role": m.role, "content": m.text(), **({"name": m.name} if m.name else {})}
                for m in body.messages]
    total = sum(len(m["content"]) for m in messages)
    if total > ctx.preparer.max_model_len * 64:
        raise APIError(400, f"messages hold {total} characters; they cannot fit the model's context of "
                            f"{ctx.preparer.max_model_len} tokens; shorten them", param="messages",
                       code="context_length_exceeded")
    try:
        text = await asyncio.to_thread(ctx.tokenizer.apply_chat_template, messages)
    except (ValueError, TypeError) as exc:
        raise APIError(400, f"messages: the chat template refused them: {exc}", param="messages") from None
    return await ctx.preparer.encode(text, "messages", add_special_tokens=False)


async def build_job(body: ChatCompletionRequest, ctx: ServerContext) -> Job:
    ids = await render_prompt(body, ctx)
    ctx.preparer.check_ids(ids, "messages")
    limit_param = "max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens"
    budget = ctx.preparer.token_budget(len(ids), body.token_limit(), limit_param)
    top = (body.top_logprobs or 0) if body.logprobs else None
    job = Job(id=new_id("chatcmpl"), sequences=[], prompt_tokens=len(ids), stop=body.stop_strings())
    for choice in range(body.n):
        params = sampling_params(body, max_tokens=budget, choice=choice, logprobs=top,
                                 defaults=ctx.generation_defaults)
        job.sequences.append(Sequence(f"{job.id}-{choice}", ids, params))
    return job


async def create_chat_completion(body: ChatCompletionRequest, request: Request, ctx: ServerContext):
    ctx.check_model(body.model)
    job = await build_job(body, ctx)
    include_usage = bool(body.stream and body.stream_options and body.stream_options.include_usage)
    result = await respond(job, ctx, request, body.stream,
                           lambda sub: stream(sub, body, ctx, include_usage))
    if body.stream:
        return result
    finals = result
    fmt = LogprobFormatter(ctx.tokenizer)
    choices = [
        ChatChoice(index=i, message=AssistantMessage(content=out.text), finish_reason=out.finish_reason,
                   logprobs=fmt.chat(out.logprobs) if body.logprobs else None)
        for i, out in enumerate(finals)
    ]
    return ChatCompletionResponse(id=job.id, created=int(time.time()), model=ctx.model_name, choices=choices,
                                  usage=usage(job, finals))


def stream(sub: Subscription, body: ChatCompletionRequest, ctx: ServerContext,
           include_usage: bool) -> AsyncIterator[str]:
    job, created, fmt = sub.job, int(time.time()), LogprobFormatter(ctx.tokenizer)

    def chunk(choices: list[ChatChunkChoice], with_usage: Usage | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "id": job.id, "object": "chat.completion.chunk", "created": created, "model": ctx.model_name,
            "choices": [{**c.model_dump(exclude={"delta"}), "delta": c.delta.model_dump(exclude_none=True)}
                        for c in choices],
        }
        if include_usage:
            payload["usage"] = with_usage.model_dump() if with_usage is not None else None
        return payload

    def event(piece: Piece) -> dict[str, Any]:
        logprobs = fmt.chat(piece.logprobs) if piece.logprobs else None
        return chunk([ChatChunkChoice(index=piece.index, delta=ChatDelta(content=piece.text or None),
                                      logprobs=logprobs, finish_reason=piece.finish_reason)])

    roles = [chunk([ChatChunkChoice(index=i, delta=ChatDelta(role="assistant", content=""))])
             for i in range(len(job.sequences))]
    return sse_events(sub, ctx, event, (lambda used: chunk([], used)) if include_usage else None, roles)
