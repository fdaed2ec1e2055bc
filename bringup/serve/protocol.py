"""What the server needs from the engine: the one typed boundary between HTTP and the runner.

`bringup.runner.engine.engine.LLMEngine` implements it. The server calls the engine only from its engine
thread (async_engine.py), because the engine is not thread-safe.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from bringup.fallbacks import FallbackRecorder
from bringup.runner.engine.outputs import RequestOutput
from bringup.runner.engine.sampling_params import SamplingParams
from bringup.runner.plan.plan import ExecutionPlan


@runtime_checkable
class Engine(Protocol):
    tokenizer: Any  # ByteTokenizer | HFTokenizer: encode, decode, apply_chat_template, generation_defaults
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
