"""POST /v1/completions: plain text completion, streamed or not."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request

from bringup.serve.async_engine import Sequence
from bringup.serve.context import ServerContext
from bringup.serve.errors import APIError
from bringup.serve.generation import (
    Job,
    Subscription,
    new_id,
    respond,
    sampling_params,
    usage,
)
from bringup.serve.logprobs import LogprobFormatter
from bringup.serve.schemas import (
    CompletionChoice,
    CompletionLogprobs,
    CompletionRequest,
    CompletionResponse,
)
from bringup.serve.streaming import DONE, TextStream, sse

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
            job.sequences.append(Sequence(f"{job.id}-{p_index}-{choice}", ids, params))
    return job




async def create_completion(body: CompletionRequest, request: Request, ctx: ServerContext):
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
        CompletionChoice(index=i, text=out.text, finish_reason=out.finish_reason,
                         logprobs=fmt.completion(out.logprobs, 0) if body.logprobs is not None else None)
        for i, out in enumerate(finals)
    ]
    return CompletionResponse(id=job.id, created=int(time.time()), model=ctx.model_name, choices=choices,
                              usage=usage(job, finals))


async def stream(sub: Subscription, body: CompletionRequest, ctx: ServerContext,
                 include_usage: bool) -> AsyncIterator[str]:
    job = sub.job
    created = int(time.time())
    index_of = job.choice_index()
    texts = {seq.request_id: TextStream(job.stop) for seq in job.sequences}
    logprobs_seen = dict.fromkeys(index_of, 0)
    offsets = dict.fromkeys(index_of, 0)
    finals: dict[str, Any] = {}
    fmt = LogprobFormatter(ctx.tokenizer)
    extra = {"usage": None} if include_usage else {}
    outputs = sub.outputs()
    try:
        async for out in outputs:
            rid = out.request_id
            delta = texts[rid].delta(out.text, out.finished)
            lp = None
            if body.logprobs is not None and out.logprobs is not None:
                new = out.logprobs[logprobs_seen[rid]:]
                logprobs_seen[rid] = len(out.logprobs)
                lp = fmt.completion(new, offsets[rid])
                offsets[rid] += sum(len(t) for t in lp.tokens)
            if out.finished:
                finals[rid] = out
            if not delta and not out.finished and not (lp and lp.tokens):
                continue
            choice = CompletionChoice(index=index_of[rid], text=delta, logprobs=lp,
                                      finish_reason=out.finish_reason if out.finished else None)
            yield sse({"id": job.id, "object": "text_completion", "created": created, "model": ctx.model_name,
                       "choices": [choice.model_dump()], **extra})
    except Exception as exc:  # report in-band: the 200 header is already sent
        yield sse(ctx.stream_error(exc))
    finally:
        await outputs.aclose()
    if include_usage and len(finals) == len(job.sequences):
        done = [finals[s.request_id] for s in job.sequences]
        yield sse({"id": job.id, "object": "text_completion", "created": created, "model": ctx.model_name,
                   "choices": [], "usage": usage(job, done).model_dump()})
    yield DONE


__all__ = ["CompletionLogprobs", "create_completion"]
