"""POST /v1/completions: plain text completion, streamed or not."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request

from bringup.serve.async_engine import EngineRequest
from bringup.serve.context import ServerContext
from bringup.serve.errors import APIError
from bringup.serve.generation import Job, Subscription, new_id, run_request, usage
from bringup.serve.logprobs import LogprobFormatter
from bringup.serve.requests.prepare import sampling_params
from bringup.serve.requests.schemas import (
    CompletionChoice,
    CompletionLogprobs,
    CompletionRequest,
    CompletionResponse,
    Usage,
)
from bringup.serve.streaming import Piece, sse_events

MAX_SEQUENCES_PER_REQUEST = 64


async def build_job(body: CompletionRequest, ctx: ServerContext) -> Job:
    prompts = body.prompts()
    if len(prompts) * body.n > MAX_SEQUENCES_PER_REQUEST:
        raise APIError(400, f"n: {len(prompts)} prompts × n={body.n} make {len(prompts) * body.n} sequences, over "
                            f"the limit of {MAX_SEQUENCES_PER_REQUEST} in one request; split it", param="n")
    job = Job(id=new_id("cmpl"), sequences=[], prompt_tokens=0, stop=body.stop_strings())
    for p_index, prompt in enumerate(prompts):
        param = "prompt" if len(prompts) == 1 else f"prompt.{p_index}"
        ids = await ctx.preparer.encode(prompt, param, add_special_tokens=True) if isinstance(prompt, str) \
            else list(prompt)
        ctx.preparer.check_ids(ids, param)
        budget = ctx.preparer.token_budget(len(ids), body.max_tokens, "max_tokens")
        job.prompt_tokens += len(ids)
        for choice in range(body.n):
            params = sampling_params(body, max_tokens=budget, choice=choice, logprobs=body.logprobs,
                                     defaults=ctx.generation_defaults)
            job.sequences.append(EngineRequest(f"{job.id}-{p_index}-{choice}", ids, params))
    return job


async def create_completion(body: CompletionRequest, request: Request, ctx: ServerContext):
    def answer(job: Job, finals: list[Any]) -> CompletionResponse:
        fmt = LogprobFormatter(ctx.tokenizer)
        choices = [
            CompletionChoice(index=i, text=out.text, finish_reason=out.finish_reason,
                             logprobs=fmt.completion(out.logprobs, 0) if body.logprobs is not None else None)
            for i, out in enumerate(finals)
        ]
        return CompletionResponse(id=job.id, created=int(time.time()), model=ctx.model_name, choices=choices,
                                  usage=usage(job, finals))

    return await run_request(body, request, ctx, build_job, stream, answer)


def stream(sub: Subscription, body: CompletionRequest, ctx: ServerContext,
           include_usage: bool) -> AsyncIterator[str]:
    job, created, fmt = sub.job, int(time.time()), LogprobFormatter(ctx.tokenizer)
    offsets = dict.fromkeys(job.choice_index(), 0)  # text offset of each choice's next logprob token
    head = {"id": job.id, "object": "text_completion", "created": created, "model": ctx.model_name}

    def event(piece: Piece) -> dict[str, Any]:
        logprobs = None
        if piece.logprobs:
            logprobs = fmt.completion(piece.logprobs, offsets[piece.request_id])
            offsets[piece.request_id] += sum(len(t) for t in logprobs.tokens)
        choice = CompletionChoice(index=piece.index, text=piece.text, logprobs=logprobs,
                                  finish_reason=piece.finish_reason)
        return {**head, "choices": [choice.model_dump()], **({"usage": None} if include_usage else {})}

    def usage_event(used: Usage) -> dict[str, Any]:
        return {**head, "choices": [], "usage": used.model_dump()}

    return sse_events(sub, ctx, event, usage_event if include_usage else None)


__all__ = ["CompletionLogprobs", "create_completion"]
