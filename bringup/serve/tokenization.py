"""POST /tokenize and POST /detokenize in vLLM's shapes: the model's tokenizer, without generating.

A conversation is tokenised exactly as /v1/chat/completions builds its prompt (the same chat template call),
so `count` is the prompt's length there. Texts longer than the context are counted all the same: the answer
carries max_model_len for the client to compare. vLLM serves both outside /v1; with an API key configured
they need it as /v1 does.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable

from starlette.requests import Request

from bringup.serve.chat import chat_prompt_ids, template_messages
from bringup.serve.context import ServerContext
from bringup.serve.errors import APIError
from bringup.serve.logprobs import LogprobFormatter
from bringup.serve.request_rules import MAX_PROMPT_CHARS
from bringup.serve.schemas import (
    DetokenizeRequest,
    DetokenizeResponse,
    TokenizeChatRequest,
    TokenizeCompletionRequest,
    TokenizeResponse,
)


async def tokenize(body: TokenizeCompletionRequest | TokenizeChatRequest, ctx: ServerContext) -> TokenizeResponse:
    ctx.accept(body, body.model)
    if isinstance(body, TokenizeChatRequest):
        messages = template_messages(body, MAX_PROMPT_CHARS, f"the limit for /tokenize is {MAX_PROMPT_CHARS}")
        ids = await chat_prompt_ids(body, messages, ctx, tools=body.tools)
    else:
        ids = await asyncio.to_thread(ctx.tokenizer.encode, body.prompt, add_special_tokens=body.add_special_tokens)
    strs = None
    if body.return_token_strs:
        piece = LogprobFormatter(ctx.tokenizer).piece
        strs = [piece(t) for t in ids]
    return TokenizeResponse(count=len(ids), max_model_len=ctx.max_model_len, tokens=ids, token_strs=strs)


async def detokenize(body: DetokenizeRequest, ctx: ServerContext) -> DetokenizeResponse:
    """The text of the ids, special tokens written out (as vLLM does); ids outside the vocabulary are a 400."""
    ctx.accept(body, body.model)
    if body.tokens:
        ctx.preparer.check_ids(body.tokens, "tokens")
    text = await asyncio.to_thread(ctx.tokenizer.decode, body.tokens, skip_special_tokens=False)
    return DetokenizeResponse(prompt=text)


def key_check(api_key: str | None) -> Callable:
    """A route dependency: with a key configured, `Authorization: Bearer <key>` or a 401 (as on /v1)."""
    expected = f"Bearer {api_key}".encode() if api_key else None

    async def check(request: Request) -> None:
        if expected is None:
            return
        given = request.headers.get("authorization", "").encode("latin-1")
        if not secrets.compare_digest(given, expected):
            why = "missing" if not given else "wrong"
            raise APIError(401, f"{why} API key: send the server's key as 'Authorization: Bearer <key>'",
                           code="invalid_api_key")

    return check
