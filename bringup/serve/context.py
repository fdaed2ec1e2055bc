"""What request handlers need: the async engine, the tokenizer, limits and names."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bringup.log import get_logger
from bringup.serve.async_engine import AsyncEngine
from bringup.serve.errors import APIError, error_body
from bringup.serve.generation import Preparer
from bringup.serve.metrics import ServerMetrics
from bringup.serve.protocol import Engine

log = get_logger("serve")


@dataclass
class ServerConfig:
    """Server settings that are not the engine's."""

    served_model_name: str | None = None  # None: the engine's model_name
    api_key: str | None = None
    max_queue: int = 64
    drain_timeout_s: float = 60.0
    profile_path: Path | None = None
    extra_model_names: list[str] = field(default_factory=list)


class ServerContext:
    def __init__(self, engine: Engine, config: ServerConfig, metrics: ServerMetrics | None = None) -> None:
        self.llm = engine
        self.config = config
        self.metrics = metrics or ServerMetrics()
        self.engine = AsyncEngine(engine, max_queue=config.max_queue, metrics=self.metrics)
        self.tokenizer = engine.tokenizer
        self.model_name = config.served_model_name or engine.model_name
        self.max_model_len = int(engine.max_model_len)
        self.generation_defaults = dict(getattr(engine.tokenizer, "generation_defaults", {}) or {})
        self.preparer = Preparer(engine.tokenizer, self.max_model_len, engine.vocab_size)

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
