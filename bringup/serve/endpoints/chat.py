"""POST /v1/chat/completions: the model's chat template over the messages, streamed or not."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request

from bringup.errors import BringupError
from bringup.serve.async_engine import EngineRequest
from bringup.serve.context import ServerContext
from bringup.serve.errors import APIError
from bringup.serve.generation import Job, Subscription, new_id, run_request, usage
from bringup.serve.logprobs import LogprobFormatter
from bringup.serve.requests.prepare import MAX_CHARS_PER_TOKEN, sampling_params
from bringup.serve.requests.schemas import (
    AssistantMessage,
    ChatChoice,
    ChatCompletionRequest,
    ChatCompletionResponse,
    ChatTemplateFields,
    Usage,
)
from bringup.serve.streaming import Piece, sse_events


def template_messages(body: ChatTemplateFields, char_limit: int, too_long: str) -> list[dict[str, str]]:
    """The messages as the chat template sees them; a 400 (`too_long`) when they, with everything else the
    template is given (documents, tools, template arguments), hold more than char_limit characters."""
    messages = [m.as_dict() for m in body.messages]
    total = sum(len(m["content"]) for m in messages) + body.template_input_chars()
    if total > char_limit:
        raise APIError(400, f"messages hold {total} characters (with documents, tools and template arguments); "
                            f"{too_long}; shorten them", param="messages", code="context_length_exceeded")
    return messages


async def chat_prompt_ids(body: ChatTemplateFields, messages: list[dict[str, str]], ctx: ServerContext, *,
                          tools: list[dict] | None = None) -> list[int]:
    """The token ids of the conversation as the model's chat template renders it (transformers'
    apply_chat_template(..., tokenize=True)); with add_special_tokens, the model's BOS on top. The template is
    rendered on the server's template pool, under its limits."""
    tokenizer, args = ctx.tokenizer, {**body.template_args(), "tools": tools}
    try:
        if body.add_special_tokens:
            text = await ctx.templates.run(tokenizer.apply_chat_template, messages, **args)
            return await ctx.text_work.run(tokenizer.encode, text, add_special_tokens=True)
        return await ctx.templates.run(tokenizer.encode_chat, messages, **args)
    except (BringupError, ValueError, TypeError) as exc:
        raise APIError(400, f"messages: the chat template refused them: {exc}", param="messages") from None


async def build_job(body: ChatCompletionRequest, ctx: ServerContext) -> Job:
    messages = template_messages(body, ctx.max_model_len * MAX_CHARS_PER_TOKEN,
                                 f"they cannot fit the model's context of {ctx.max_model_len} tokens")
    ids = await chat_prompt_ids(body, messages, ctx, tools=None)  # tools: refused by the schema
    ctx.preparer.check_ids(ids, "messages")
    limit_param = "max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens"
    budget = ctx.preparer.token_budget(len(ids), body.token_limit(), limit_param)
    top = (body.top_logprobs or 0) if body.logprobs else None
    job = Job(id=new_id("chatcmpl"), sequences=[], prompt_tokens=len(ids), stop=body.stop_strings())
    for choice in range(body.n):
        params = sampling_params(body, max_tokens=budget, choice=choice, logprobs=top,
                                 defaults=ctx.generation_defaults)
        job.sequences.append(EngineRequest(f"{job.id}-{choice}", ids, params))
    return job


async def create_chat_completion(body: ChatCompletionRequest, request: Request, ctx: ServerContext):
    def answer(job: Job, finals: list[Any]) -> ChatCompletionResponse:
        fmt = LogprobFormatter(ctx.tokenizer)
        choices = [
            ChatChoice(index=i, message=AssistantMessage(content=out.text), finish_reason=out.finish_reason,
                       logprobs=fmt.chat(out.logprobs) if body.logprobs else None)
            for i, out in enumerate(finals)
        ]
        return ChatCompletionResponse(id=job.id, created=int(time.time()), model=ctx.model_name, choices=choices,
                                      usage=usage(job, finals))

    return await run_request(body, request, ctx, build_job, stream, answer)


def chunk_choice(index: int, delta: dict[str, str], logprobs: dict | None = None, finish_reason: str | None = None
                 ) -> dict[str, Any]:
    """One choice of a chat.completion.chunk as ChatChunkChoice dumps it: its fields in order, the delta last and
    without unset fields."""
    return {"index": index, "logprobs": logprobs, "finish_reason": finish_reason, "delta": delta}


def stream(sub: Subscription, body: ChatCompletionRequest, ctx: ServerContext,
           include_usage: bool) -> AsyncIterator[str]:
    job, created, fmt = sub.job, int(time.time()), LogprobFormatter(ctx.tokenizer)

    def chunk(choices: list[dict[str, Any]], with_usage: Usage | None = None) -> dict[str, Any]:
        """A chat.completion.chunk of chunk_choice dicts (plain dicts, not models: this runs once per token on the
        event loop, where every microsecond is taken from the decode step's threads)."""
        payload: dict[str, Any] = {
            "id": job.id, "object": "chat.completion.chunk", "created": created, "model": ctx.model_name,
            "choices": choices,
        }
        if include_usage:
            payload["usage"] = with_usage.model_dump() if with_usage is not None else None
        return payload

    def event(piece: Piece) -> dict[str, Any]:
        logprobs = fmt.chat(piece.logprobs).model_dump() if piece.logprobs else None
        return chunk([chunk_choice(piece.index, {"content": piece.text} if piece.text else {}, logprobs,
                                   piece.finish_reason)])

    roles = [chunk([chunk_choice(i, {"role": "assistant", "content": ""})]) for i in range(len(job.sequences))]
    return sse_events(sub, ctx, event, (lambda used: chunk([], used)) if include_usage else None, roles)
