"""What request handlers need: the engine, its async front (async_engine), the tokenizer, limits and names."""

from __future__ import annotations

from pydantic import BaseModel

from bringup.log import get_logger
from bringup.runner.text.template_limits import TemplateLimits
from bringup.serve.async_engine import AsyncEngine
from bringup.serve.config import ServerConfig
from bringup.serve.engine_thread import EngineThread
from bringup.serve.errors import APIError, error_body
from bringup.serve.http.body import BodyLimits
from bringup.serve.metrics import ServerMetrics
from bringup.serve.protocol import Engine
from bringup.serve.requests.ignored_fields import IgnoredFields
from bringup.serve.requests.prepare import Preparer
from bringup.serve.requests.rules import MAX_PROMPTS
from bringup.serve.template_pool import TemplatePool
from bringup.serve.text_work import TextWork

log = get_logger("serve")

# Beyond its prompts' token ids, the largest valid request (256 chat messages of 64 text parts each) holds
# about 34,000 list items and fields, and about 67,000 strings; these bounds leave room above both.
STRUCTURE_VALUES = 65_536
MAX_BODY_STRINGS = 131_072


class ServerContext:
    def __init__(self, engine: Engine, config: ServerConfig, metrics: ServerMetrics | None = None,
                 thread: EngineThread | None = None) -> None:
        self.engine = engine
        self.config = config
        self.model_name = config.served_model_name or engine.model_name
        self.max_model_len = int(engine.max_model_len)
        self.metrics = metrics or ServerMetrics(self.model_name, self.max_model_len)
        self.async_engine = AsyncEngine(engine, max_queue=config.max_queue, metrics=self.metrics, thread=thread,
                                        idle_work=config.reconfirm_at_idle)
        self.metrics.watch_engine(engine, self.async_engine.snapshot)
        self.tokenizer = engine.tokenizer
        self.generation_defaults = dict(getattr(engine.tokenizer, "generation_defaults", {}) or {})
        self.text_work = TextWork()
        self.preparer = Preparer(engine.tokenizer, self.max_model_len, engine.vocab_size, self.text_work)
        self.ignored_fields = IgnoredFields()
        self.templates = TemplatePool(config.template_workers, config.max_queue,
                                      TemplateLimits(time_s=config.template_timeout_s))
        self.metrics.watch_ignored_fields(self.ignored_fields.snapshot)

    def body_limits(self) -> BodyLimits:
        """What a request body may hold: a token id per context position for each prompt, plus structure."""
        return BodyLimits(
            max_bytes=self.config.max_body_bytes, max_values=MAX_PROMPTS * self.max_model_len + STRUCTURE_VALUES,
            max_strings=MAX_BODY_STRINGS,
            values_rule=f"; a valid request holds at most {MAX_PROMPTS} prompts of fewer than {self.max_model_len} "
                        "token ids each (the model's context)")

    def accept(self, body: BaseModel, model: str | None) -> None:
        """Log the request's ignored fields (each name once) and check the model it names (None: any)."""
        self.ignored_fields.note(body)
        if model is not None:
            self.check_model(model)

    def check_model(self, name: str) -> None:
        if name != self.model_name:
            raise APIError(404, f"the model `{name}` does not exist on this server; it serves "
                                f"`{self.model_name}` (see GET /v1/models)", param="model",
                           code="model_not_found")

    def stream_error(self, exc: Exception) -> dict:
        """The SSE error event for a failure after streaming began."""
        if isinstance(exc, APIError):
            return exc.body()
        log.exception("stream failed", exc_info=exc)
        return error_body(500, f"internal server error: {type(exc).__name__}: {exc}")
