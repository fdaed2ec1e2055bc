"""Request and response bodies in the OpenAI shape, with strict validation.

Request models forbid unknown fields (a typo must not be silently ignored). OpenAI fields this
server does not implement are accepted only at their neutral value; anything else is a 400 that
says the feature is unsupported (explicit, never silent).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, field_validator, model_validator

from bringup.runner.engine.sampling_params import (
    MAX_STOP_TOKEN_IDS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MIN_TEMPERATURE,
    MIN_TOP_P,
)
from bringup.serve.request_rules import (
    MAX_PROMPT_CHARS,
    MAX_PROMPT_TOKEN_IDS,
    MAX_PROMPTS,
    MAX_STOP_STRINGS,
    TOKEN_ID_MAX,
    check_prompt,
    check_stop,
)

INT64_MAX = 2**63 - 1


def _integral_float_to_int(value: Any) -> Any:
    """JSON does not tell 3 from 3.0 (JSON Schema calls both "integer"); a string stays an error."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def Int(ge: int, le: int) -> Any:
    """A JSON integer in [ge, le]: 3.0 counts as 3, "3" and true are errors (constraints stay in the schema)."""
    return Annotated[Annotated[int, Field(ge=ge, le=le)], BeforeValidator(_integral_float_to_int)]


Seed = Int(0, INT64_MAX)
TokenId = Int(0, TOKEN_ID_MAX)
MaxTokens = Int(1, MAX_TOKENS)
StopList = Annotated[list[Annotated[str, Field(min_length=1)]], Field(max_length=MAX_STOP_STRINGS)]


class StrictModel(BaseModel):
    """No unknown fields, no type coercion ("1" is not a number, 1 is not a bool), no NaN or Infinity (which
    Python's JSON parser accepts and the JSON standard does not)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class StreamOptions(StrictModel):
    include_usage: StrictBool = False


class SamplingFields(StrictModel):
    """Fields shared by both generation endpoints (OpenAI fields plus the runner's extras)."""

    model: Annotated[str, Field(min_length=1, max_length=256)]
    n: Int(1, 16) = 1
    temperature: Annotated[float, Field(ge=0.0, le=MAX_TEMPERATURE)] | None = None
    # the lower bounds keep float32 sampling finite (top_p below ~1e-45 rounds to 0 and masks every
    # token; logits / a tiny temperature or penalty overflow): 0 < x < bound is a 400, not a crash
    top_p: Annotated[float, Field(ge=MIN_TOP_P, le=1.0)] | None = None
    seed: Seed | None = None
    stop: Annotated[str, Field(min_length=1)] | StopList | None = None
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    user: Annotated[str, Field(max_length=256)] | None = None
    # runner extras (vLLM-style): -1 or 0 disables top_k
    top_k: Int(-1, 1_000_000) | None = None
    min_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    repetition_penalty: Annotated[float, Field(ge=0.01, le=10.0)] | None = None
    ignore_eos: StrictBool = False
    stop_token_ids: Annotated[list[TokenId], Field(max_length=MAX_STOP_TOKEN_IDS)] | None = None
    # OpenAI fields accepted only at their neutral value
    presence_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] | None = None
    frequency_penalty: Annotated[float, Field(ge=-2.0, le=2.0)] | None = None
    logit_bias: dict[str, float] | None = None

    @model_validator(mode="after")
    def _unsupported_at_neutral(self) -> SamplingFields:
        if self.temperature is not None and 0.0 < self.temperature < MIN_TEMPERATURE:
            raise ValueError(f"temperature must be 0 (greedy) or at least {MIN_TEMPERATURE}; smaller values "
                             "overflow the sampler's float32 logits")
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if value not in (None, 0.0):
                raise ValueError(f"{name} is not supported by this server; use repetition_penalty")
        if self.logit_bias:
            raise ValueError("logit_bias is not supported by this server")
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options is only allowed when stream is true")
        return self

    @field_validator("stop", mode="before")
    @classmethod
    def _stop_shape(cls, value: Any) -> Any:
        """The count and shape rules, in words, before the union's member-by-member errors."""
        check_stop(value)
        return value

    def stop_strings(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)


PromptText = Annotated[str, Field(max_length=MAX_PROMPT_CHARS)]
PromptIds = Annotated[list[TokenId], Field(min_length=1, max_length=MAX_PROMPT_TOKEN_IDS)]


class CompletionRequest(SamplingFields):
    """POST /v1/completions."""

    prompt: PromptText | Annotated[list[PromptText], Field(min_length=1, max_length=MAX_PROMPTS)] | PromptIds | \
        Annotated[list[PromptIds], Field(min_length=1, max_length=MAX_PROMPTS)]
    max_tokens: MaxTokens | None = 16
    logprobs: Int(0, 20) | None = None
    echo: StrictBool = False
    best_of: Int(1, 16) | None = None
    suffix: str | None = None

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt_shape(cls, value: Any) -> Any:
        """Counts first (a huge list is refused before its items are looked at), then shape and item rules."""
        check_prompt(value)
        return value

    @model_validator(mode="after")
    def _completion_unsupported(self) -> CompletionRequest:
        if self.echo:
            raise ValueError("echo is not supported by this server")
        if self.best_of is not None and self.best_of != self.n:
            raise ValueError("best_of other than n is not supported by this server")
        if self.suffix:
            raise ValueError("suffix is not supported by this server")
        return self

    def prompts(self) -> list[str | list[int]]:
        """The prompt(s) as a list: each either text or token ids."""
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if p and all(isinstance(x, int) for x in p):
            return [list(p)]  # type: ignore[arg-type]
        return list(p)  # type: ignore[arg-type]


class TextPart(StrictModel):
    type: Literal["text"]
    text: str


class ChatMessage(StrictModel):
    role: Literal["system", "developer", "user", "assistant"]
    content: Annotated[str, Field(max_length=1_000_000)] | Annotated[list[TextPart], Field(max_length=64)]
    name: Annotated[str, Field(max_length=64)] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatCompletionRequest(SamplingFields):
    """POST /v1/chat/completions."""

    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=256)]
    max_tokens: MaxTokens | None = None
    max_completion_tokens: MaxTokens | None = None
    logprobs: StrictBool = False
    top_logprobs: Int(0, 20) | None = None

    @model_validator(mode="after")
    def _chat_logprobs(self) -> ChatCompletionRequest:
        if self.top_logprobs is not None and not self.logprobs:
            raise ValueError("top_logprobs requires logprobs to be true")
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise ValueError("give max_tokens or max_completion_tokens, not both")
        return self

    def token_limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


# ---------------------------------------------------------------- responses


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class CompletionLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float | None]
    top_logprobs: list[dict[str, float] | None]
    text_offset: list[int]


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None = None


class CompletionResponse(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None
    system_fingerprint: str | None = None


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None = None


class ChatTokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChatChoiceLogprobs(BaseModel):
    content: list[ChatTokenLogprob] | None


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatChoice(BaseModel):
    index: int
    message: AssistantMessage
    logprobs: ChatChoiceLogprobs | None = None
    finish_reason: str | None = None


class ChatCompletionResponse(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage
    system_fingerprint: str | None = None


class ChatDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChatChunkChoice(BaseModel):
    index: int
    delta: ChatDelta
    logprobs: ChatChoiceLogprobs | None = None
    finish_reason: str | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "bringup"
    max_model_len: int


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorBody(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    error: ErrorBody


class PlanResponse(BaseModel):
    model: str
    max_model_len: int
    plan: dict[str, Any]
    profile: dict[str, Any] | None
    fallbacks: dict[str, int]
