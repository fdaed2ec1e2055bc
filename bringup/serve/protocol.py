"""What the server needs from the engine: the one typed boundary between HTTP and the runner.

`bringup.runner.engine.engine.LLMEngine` implements it. The server calls the engine only from its engine
thread (async_engine.py), because the engine is not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from bringup.fallbacks import FallbackRecorder
from bringup.runner.engine.outputs import RequestOutput
from bringup.runner.plan.plan import ExecutionPlan
from bringup.runner.sampling_params import SamplingParams


class Tokenizer(Protocol):
    """What the server asks of the engine's tokenizer (ByteTokenizer and HFTokenizer implement it)."""

    generation_defaults: dict[str, Any]

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, ids: list[int], skip_special_tokens: bool = ...) -> str: ...

    def apply_chat_template(self, messages: list[dict], *, add_generation_prompt: bool = True,
                            tools: list[dict] | None = None, documents: list[dict] | None = None,
                            template_kwargs: dict | None = None) -> str: ...

    def encode_chat(self, messages: list[dict], *, add_generation_prompt: bool = True,
                    tools: list[dict] | None = None, documents: list[dict] | None = None,
                    template_kwargs: dict | None = None) -> list[int]:
        """transformers' apply_chat_template(..., tokenize=True) for the same call."""
        ...


@runtime_checkable
class Engine(Protocol):
    tokenizer: Tokenizer
    model_name: str
    max_model_len: int
    vocab_size: int
    plan: ExecutionPlan
    fallbacks: FallbackRecorder

    def add_request(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams) -> None: ...

    def abort_request(self, request_id: str) -> None: ...

    def step(self) -> list[RequestOutput]: ...

    def has_unfinished(self) -> bool: ...

    def stats(self) -> dict: ...

    def idle_work(self, interrupted: Callable[[], bool]) -> bool: ...

    def reconfirmation_report(self) -> dict | None: ...
