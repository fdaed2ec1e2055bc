"""The FastAPI application: OpenAI-compatible endpoints plus health, metrics and plan introspection."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Body, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from bringup.serve.config import ServerConfig
from bringup.serve.context import ServerContext
from bringup.serve.endpoints.chat import create_chat_completion
from bringup.serve.endpoints.completions import create_completion
from bringup.serve.endpoints.tokenization import detokenize, tokenize
from bringup.serve.engine_thread import EngineThread
from bringup.serve.errors import install_error_handlers
from bringup.serve.http.middleware import (
    APIKeyMiddleware,
    AssumeJSONMiddleware,
    BodyLimitMiddleware,
    StatusCountMiddleware,
)
from bringup.serve.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from bringup.serve.plan_info import plan_dict, profile_summary
from bringup.serve.protocol import Engine
from bringup.serve.requests.schemas import (
    ChatCompletionRequest,
    ChatCompletionResponse,
    CompletionRequest,
    CompletionResponse,
    DetokenizeRequest,
    DetokenizeResponse,
    ErrorResponse,
    ModelCard,
    ModelList,
    PlanResponse,
    TokenizeRequest,
    TokenizeResponse,
)

_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse, "description": text}
    for code, text in (
        (400, "invalid field or prompt longer than the context"),
        (401, "missing or wrong API key (only when the server has one)"),
        (404, "unknown model"),
        (413, "request body over the size limit, or holding more values than any valid request"),
        (429, "queue full"),
        (500, "the model produced numbers that cannot be trusted (non-finite logits)"),
        (503, "shutting down or engine not running"),
    )
}
_STREAM = {200: {"content": {"text/event-stream": {}}, "description": "JSON, or SSE when stream is true"}}


def create_app(engine: Engine, config: ServerConfig | None = None, thread: EngineThread | None = None) -> FastAPI:
    """The app for one engine; its engine loop starts and stops with the app's lifespan, on `thread` (the one that
    built the engine: engine_thread.py says why) or on one of its own."""
    ctx = ServerContext(engine, config or ServerConfig(), thread=thread)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        ctx.async_engine.start()
        try:
            yield
        finally:
            ctx.templates.close()
            ctx.text_work.close()
            ctx.async_engine.stop()

    app = FastAPI(title="bringup serve", version="1", lifespan=lifespan,
                  description="OpenAI-compatible inference on the bringup runner.")
    app.state.ctx = ctx
    install_error_handlers(app)
    app.add_middleware(AssumeJSONMiddleware)
    # added before the key check, so it runs after it: no key, no reading
    app.add_middleware(BodyLimitMiddleware, limits=ctx.body_limits(), body_timeout_s=ctx.config.body_timeout_s)
    app.add_middleware(APIKeyMiddleware, api_key=ctx.config.api_key)
    app.add_middleware(StatusCountMiddleware, metrics=ctx.metrics)
    _add_status_routes(app, ctx, engine)
    _add_api_routes(app, ctx)
    return app


def _add_status_routes(app: FastAPI, ctx: ServerContext, engine: Engine) -> None:
    """/health, /metrics, /v1/models and /v1/plan: what the server and its engine are."""
    created = int(time.time())

    @app.get("/health", responses={503: {"description": "draining or engine dead"}})
    async def health() -> JSONResponse:
        """200 while requests are admitted; 503 while draining or after the engine loop died."""
        async_engine = ctx.async_engine
        if not async_engine.alive:
            return JSONResponse({"status": "dead", "reason": async_engine.dead_reason or "engine loop stopped"},
                                status_code=503)
        if async_engine.draining:
            return JSONResponse({"status": "draining", "in_flight": async_engine.in_flight}, status_code=503)
        return JSONResponse({"status": "ok", "in_flight": async_engine.in_flight})

    @app.get("/metrics", response_class=PlainTextResponse)
    async def metrics() -> Response:
        """Prometheus text exposition (format 0.0.4); docs/metrics.md lists every metric."""
        return Response(ctx.metrics.render(), media_type=METRICS_CONTENT_TYPE)

    @app.get("/v1/models", response_model=ModelList, responses={401: _ERRORS[401]})
    async def models() -> ModelList:
        return ModelList(data=[ModelCard(id=ctx.model_name, created=created, max_model_len=ctx.max_model_len)])

    @app.get("/v1/plan", response_model=PlanResponse, responses={401: _ERRORS[401]})
    async def plan() -> PlanResponse:
        """The execution plan (each choice with its evidence), the profile it came from, and its re-confirmation at
        idle (when the start's timings were not clean)."""
        return PlanResponse(model=ctx.model_name, max_model_len=ctx.max_model_len, plan=plan_dict(engine),
                            profile=profile_summary(ctx.config.profile_path),
                            fallbacks=dict(engine.fallbacks.counts),
                            ignored_fields=ctx.ignored_fields.snapshot(),
                            reconfirmation=engine.reconfirmation_report())


def _add_api_routes(app: FastAPI, ctx: ServerContext) -> None:
    """The OpenAI endpoints, and vLLM's /tokenize and /detokenize."""

    @app.post("/v1/completions", response_model=CompletionResponse, responses={**_ERRORS, **_STREAM})
    async def completions(body: CompletionRequest, request: Request):
        return await create_completion(body, request, ctx)

    @app.post("/v1/chat/completions", response_model=ChatCompletionResponse, responses={**_ERRORS, **_STREAM})
    async def chat_completions(body: ChatCompletionRequest, request: Request):
        return await create_chat_completion(body, request, ctx)

    # outside /v1, as vLLM serves them; the key is checked by APIKeyMiddleware as on /v1
    @app.post("/tokenize", response_model=TokenizeResponse,
              responses={c: _ERRORS[c] for c in (400, 401, 404, 413)})
    async def tokenize_route(body: Annotated[TokenizeRequest, Body()]) -> Response:
        """vLLM's /tokenize: a `prompt`, or `messages` rendered by the chat template as the chat endpoint does."""
        return await tokenize(body, ctx)

    @app.post("/detokenize", response_model=DetokenizeResponse,
              responses={c: _ERRORS[c] for c in (400, 401, 404, 413)})
    async def detokenize_route(body: DetokenizeRequest) -> DetokenizeResponse:
        return await detokenize(body, ctx)
