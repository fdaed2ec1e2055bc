"""POST /v1/completions: plain text completion, streamed or not; with echo, the prompt first (its text and its
tokens' logprobs); with prompt_logprobs, vLLM's per-token scores of the prompt."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request

from bringup.serve.async_engine import EngineRequest
from bringup.serve.context import ServerContext
from bringup.serve.errors import APIError
from bringup.serve.generation import Job, Subscription, new_id, run_request, usage
from bringup.serve.logprobs import Echo, LogprobFormatter
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
    job = Job(id=new_id("cmpl"), sequences=[], prompt_tokens=0, stop=body.stop_strings(),
              echo=[] if body.echo else None)
    for p_index, prompt in enumerate(prompts):
        param = "prompt" if len(prompts) == 1 else f"prompt.{p_index}"
        ids = await ctx.preparer.encode(prompt, param, add_special_tokens=True) if isinstance(prompt, str) \
            else list(prompt)
        ctx.preparer.check_ids(ids, param)
        budget = ctx.preparer.token_budget(len(ids), body.max_tokens, "max_tokens")
        job.prompt_tokens += len(ids)
        echoed = await _echo_text(prompt, ctx) if body.echo else ""
        for choice in range(body.n):
            params = sampling_params(body, max_tokens=budget, choice=choice, logprobs=body.logprobs,
                                     defaults=ctx.generation_defaults,
                                     prompt_logprobs=body.engine_prompt_logprobs())
            job.sequences.append(EngineRequest(f"{job.id}-{p_index}-{choice}", ids, params))
            if job.echo is not None:
                job.echo.append(echoed)
    return job


async def _echo_text(prompt: str | list[int], ctx: ServerContext) -> str:
    """The prompt as the answer repeats it: the text as given, or token ids decoded as the output is."""
    if isinstance(prompt, str):
        return prompt
    return await ctx.text_work.run(ctx.tokenizer.decode, prompt, skip_special_tokens=True)


def _echo(body: CompletionRequest, out: Any) -> Echo | None:
    """The prompt's part of the choice's logprobs: with echo and logprobs only."""
    if not body.echo or body.logprobs is None or out.prompt_logprobs is None:
        return None
    return Echo(out.prompt_token_ids, out.prompt_logprobs, body.logprobs)


async def create_completion(body: CompletionRequest, request: Request, ctx: ServerContext):
    def answer(job: Job, finals: list[Any]) -> CompletionResponse:
        fmt = LogprobFormatter(ctx.tokenizer)
        choices = [
            CompletionChoice(
                index=i, text=(job.echo[i] if job.echo is not None else "") + out.text,
                finish_reason=out.finish_reason,
                logprobs=fmt.completion(out.logprobs, 0, _echo(body, out)) if body.logprobs is not None else None,
                prompt_logprobs=None if body.prompt_logprobs is None or out.prompt_logprobs is None
                else fmt.prompt(out.prompt_logprobs, body.prompt_logprobs))
            for i, out in enumerate(finals)
        ]
        return CompletionResponse(id=job.id, created=int(time.time()), model=ctx.model_name, choices=choices,
                                  usage=usage(job, finals))

    return await run_request(body, request, ctx, build_job, stream, answer)


def stream(sub: Subscription, body: CompletionRequest, ctx: ServerContext,
           include_usage: bool) -> AsyncIterator[str]:
    job, created, fmt = sub.job, int(time.time()), LogprobFormatter(ctx.tokenizer)
    offsets = dict.fromkeys(job.choice_index(), 0)  # text offset of each choice's next logprob token
    echoed: set[str] = set()  # the choices whose first chunk (the prompt, with echo) has gone
    head = {"id": job.id, "object": "text_completion", "created": created, "model": ctx.model_name}

    def event(piece: Piece) -> dict[str, Any]:
        text, echo = piece.text, None
        if job.echo is not None and piece.request_id not in echoed:  # vLLM's way: the prompt with the first piece
            echoed.add(piece.request_id)
            text = job.echo[piece.index] + text
            if body.logprobs is not None and piece.prompt_logprobs is not None:
                echo = Echo(job.sequences[piece.index].prompt_token_ids, piece.prompt_logprobs, body.logprobs)
        logprobs = None
        if piece.logprobs or echo is not None:
            logprobs = fmt.completion(piece.logprobs, offsets[piece.request_id], echo)
            offsets[piece.request_id] += sum(len(t) for t in logprobs.tokens)
        choice = CompletionChoice(index=piece.index, text=text, logprobs=logprobs, finish_reason=piece.finish_reason)
        return {**head, "choices": [choice.model_dump(exclude={"prompt_logprobs"})],
                **({"usage": None} if include_usage else {})}

    def usage_event(used: Usage) -> dict[str, Any]:
        return {**head, "choices": [], "usage": used.model_dump()}

    return sse_events(sub, ctx, event, usage_event if include_usage else None)


__all__ = ["CompletionLogprobs", "create_completion"]
