"""POST /tokenize and POST /detokenize in vLLM's shapes: the model's tokenizer, without generating.

A conversation is tokenised exactly as /v1/chat/completions builds its prompt (the same chat template call),
so `count` is the prompt's length there. Texts longer than the context are counted all the same: the answer
carries max_model_len for the client to compare. vLLM serves both outside /v1; with an API key configured
they need it as /v1 does (checked by APIKeyMiddleware, before the body is read).

The answer to /tokenize can hold a million ids and their strings: it is built and encoded on the server's
text-work thread (one request at a time, which bounds the memory such answers take), never on the event loop, so
/health and every other request keep being answered meanwhile.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import Response

from bringup.serve.context import ServerContext
from bringup.serve.endpoints.chat import chat_prompt_ids, template_messages
from bringup.serve.logprobs import LogprobFormatter
from bringup.serve.requests.rules import MAX_PROMPT_CHARS
from bringup.serve.requests.schemas import (
    DetokenizeRequest,
    DetokenizeResponse,
    TokenizeChatRequest,
    TokenizeCompletionRequest,
    TokenizeResponse,
)


async def tokenize(body: TokenizeCompletionRequest | TokenizeChatRequest, ctx: ServerContext) -> Response:
    """The TokenizeResponse, encoded as JSON (off the event loop)."""
    ctx.accept(body, body.model)
    if isinstance(body, TokenizeChatRequest):
        messages = template_messages(body, MAX_PROMPT_CHARS, f"the limit for /tokenize is {MAX_PROMPT_CHARS}")
        ids = await chat_prompt_ids(body, messages, ctx, tools=body.tools)
    else:
        ids = await ctx.text_work.run(ctx.tokenizer.encode, body.prompt, add_special_tokens=body.add_special_tokens)
    content = await ctx.text_work.run(_tokenize_answer, ids, ctx.tokenizer, ctx.max_model_len,
                                      body.return_token_strs)
    return Response(content, media_type="application/json")


def _tokenize_answer(ids: list[int], tokenizer: Any, max_model_len: int, with_strs: bool) -> bytes:
    strs = None
    if with_strs:
        piece = LogprobFormatter(tokenizer).piece
        strs = [piece(t) for t in ids]
    answer = TokenizeResponse(count=len(ids), max_model_len=max_model_len, tokens=ids, token_strs=strs)
    return answer.model_dump_json().encode()


async def detokenize(body: DetokenizeRequest, ctx: ServerContext) -> DetokenizeResponse:
    """The text of the ids, special tokens written out (as vLLM does); ids outside the vocabulary are a 400."""
    ctx.accept(body, body.model)
    if body.tokens:
        ctx.preparer.check_ids(body.tokens, "tokens")
    text = await ctx.text_work.run(ctx.tokenizer.decode, body.tokens, skip_special_tokens=False)
    return DetokenizeResponse(prompt=text)

