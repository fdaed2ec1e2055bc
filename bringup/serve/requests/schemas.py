"""Request and response bodies in the OpenAI shape (and vLLM's /tokenize, /detokenize), with strict validation.

Known fields are strictly typed. Unknown fields are accepted and ignored, as vLLM does (clients written for
other servers send their own); the server logs each name once (ignored_fields.py). Fields that OpenAI or vLLM
define and this server does not implement are declared (unimplemented.py): only their neutral value is
accepted, anything else is a 400 that names the field (explicit, never silent).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Discriminator,
    Field,
    StrictBool,
    Tag,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_validator,
    model_validator,
)

from bringup.runner.sampling_params import (
    MAX_LOGPROBS,
    MAX_REPETITION_PENALTY,
    MAX_STOP_TOKEN_IDS,
    MAX_TEMPERATURE,
    MAX_TOKENS,
    MAX_TOP_K,
    MIN_REPETITION_PENALTY,
    MIN_TOP_P,
    TEMPERATURE_RULE,
    refusal,
    temperature_allowed,
)
from bringup.serve.requests.rules import (
    MAX_CHOICES,
    MAX_PROMPT_CHARS,
    MAX_PROMPT_TOKEN_IDS,
    MAX_PROMPTS,
    MAX_STOP_STRINGS,
    TOKEN_ID_MAX,
    check_prompt,
    check_stop,
)
from bringup.serve.requests.strict import Int, StrictModel
from bringup.serve.requests.unimplemented import (
    ChatNotImplemented,
    ChatTemplateNotImplemented,
    CompletionNotImplemented,
    GenerationNotImplemented,
    MessageNotImplemented,
)

INT64_MAX = 2**63 - 1

Seed = Int(0, INT64_MAX)
TokenId = Int(0, TOKEN_ID_MAX)
MaxTokens = Int(1, MAX_TOKENS)
Logprobs = Int(0, MAX_LOGPROBS)
StopList = Annotated[list[Annotated[str, Field(min_length=1)]], Field(max_length=MAX_STOP_STRINGS)]


class StreamOptions(StrictModel):
    include_usage: StrictBool = False


class SamplingFields(GenerationNotImplemented):
    """Fields shared by both generation endpoints (OpenAI fields plus the runner's extras)."""

    model: Annotated[str, Field(min_length=1, max_length=256)]
    n: Int(1, MAX_CHOICES) = 1
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
    top_k: Int(-1, MAX_TOP_K) | None = None
    min_p: Annotated[float, Field(ge=0.0, le=1.0)] | None = None
    repetition_penalty: Annotated[float, Field(ge=MIN_REPETITION_PENALTY, le=MAX_REPETITION_PENALTY)] | None = None
    ignore_eos: StrictBool = False
    stop_token_ids: Annotated[list[TokenId], Field(max_length=MAX_STOP_TOKEN_IDS)] | None = None

    @field_validator("temperature")
    @classmethod
    def _temperature(cls, value: float | None) -> float | None:
        if value is not None and not temperature_allowed(value):
            raise refusal("temperature", TEMPERATURE_RULE, value)
        return value

    @model_validator(mode="after")
    def _stream_options(self) -> SamplingFields:
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


# CompletionNotImplemented first puts its fields after SamplingFields', so that best_of's rule can read n
class CompletionRequest(CompletionNotImplemented, SamplingFields):
    """POST /v1/completions."""

    prompt: PromptText | Annotated[list[PromptText], Field(min_length=1, max_length=MAX_PROMPTS)] | PromptIds | \
        Annotated[list[PromptIds], Field(min_length=1, max_length=MAX_PROMPTS)]
    # echo and prompt_logprobs before max_tokens: max_tokens 0 is allowed when the prompt is scored (nothing is
    # generated), and a field's validator sees only the fields declared before it
    echo: StrictBool = Field(False, description="the answer starts with the prompt: its text, and with logprobs its "
                                                "tokens' logprobs (the first one null)")
    prompt_logprobs: Logprobs | None = Field(None, description="vLLM's: each prompt token's logprob and rank and "
                                                               "this many alternatives, in the choice's "
                                                               "prompt_logprobs; not with stream")
    max_tokens: MaxTokens | None = Field(16, description="tokens to generate; 0 only with echo true or "
                                                         "prompt_logprobs: the prompt is scored, nothing is generated")
    logprobs: Logprobs | None = None

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt_shape(cls, value: Any) -> Any:
        """Counts first (a huge list is refused before its items are looked at), then shape and item rules."""
        check_prompt(value)
        return value

    @field_validator("max_tokens", mode="wrap")
    @classmethod
    def _zero_when_scoring(cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
        """max_tokens 0 scores the prompt without generating, when the answer holds the prompt's scores: with echo
        true (OpenAI's legacy way, as vLLM serves it) or with prompt_logprobs (which vLLM refuses with 0; here both
        ask the same thing); any other 0 is refused as before."""
        scoring = info.data.get("echo") is True or info.data.get("prompt_logprobs") is not None
        if scoring and type(value) in (int, float) and value == 0:
            return 0
        return handler(value)

    @model_validator(mode="after")
    def _prompt_logprobs_not_streamed(self) -> CompletionRequest:
        if self.stream and self.prompt_logprobs is not None:
            raise ValueError("prompt_logprobs are not available with stream true (as in vLLM); leave stream out, or "
                             "use echo with logprobs, which streams the prompt's logprobs in the first chunk")
        return self

    def engine_prompt_logprobs(self) -> int | None:
        """How many alternatives the engine lists per prompt token: for prompt_logprobs and, with echo, for
        logprobs (vLLM's rule); 0 for echo with max_tokens 0 alone (a scoring run needs its prompt run)."""
        asked = [k for k in (self.prompt_logprobs, self.logprobs if self.echo else None) if k is not None]
        if asked:
            return max(asked)
        return 0 if self.echo and self.max_tokens == 0 else None

    def prompts(self) -> list[str | list[int]]:
        """The prompt(s) as a list: each either text or token ids."""
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if p and all(isinstance(x, int) for x in p):
            return [list(p)]  # type: ignore[arg-type]
        return list(p)  # type: ignore[arg-type]


MAX_ROLE_CHARS = 64


class TextPart(StrictModel):
    type: Literal["text"]
    text: str


class ChatMessage(MessageNotImplemented):
    """A message as vLLM takes it: any role (system, user, assistant, or a custom one that the template renders or
    refuses), text content."""

    role: Annotated[str, Field(min_length=1, max_length=MAX_ROLE_CHARS)]
    content: Annotated[str, Field(max_length=1_000_000)] | Annotated[list[TextPart], Field(max_length=64)]
    name: Annotated[str, Field(max_length=64)] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)

    def as_dict(self) -> dict[str, str]:
        """The message as a chat template sees it."""
        return {"role": self.role, "content": self.text(), **({"name": self.name} if self.name else {})}


Messages = Annotated[list[ChatMessage], Field(min_length=1, max_length=256)]
TemplateObjects = Annotated[list[dict[str, Any]], Field(max_length=256)]


class ChatTemplateFields(ChatTemplateNotImplemented):
    """How messages become a prompt (vLLM's fields): what the chat template is given."""

    messages: Messages
    add_generation_prompt: StrictBool = True
    add_special_tokens: StrictBool = False  # the model's special tokens (BOS) on top of what the template writes
    chat_template_kwargs: dict[str, Any] | None = None
    documents: TemplateObjects | None = None

    def template_args(self) -> dict[str, Any]:
        """Keyword arguments for the tokenizer's apply_chat_template / encode_chat (messages aside)."""
        return {"add_generation_prompt": self.add_generation_prompt, "documents": self.documents,
                "template_kwargs": self.chat_template_kwargs}

    def template_input_chars(self) -> int:
        """The size, as JSON, of what the template is given besides the messages."""
        extras = [v for k, v in self.template_args().items() if k != "add_generation_prompt" and v]
        return sum(len(json.dumps(v)) for v in extras)


class ChatCompletionRequest(SamplingFields, ChatTemplateFields, ChatNotImplemented):
    """POST /v1/chat/completions."""

    max_tokens: MaxTokens | None = None
    max_completion_tokens: MaxTokens | None = None
    logprobs: StrictBool = False
    top_logprobs: Logprobs | None = None

    @model_validator(mode="after")
    def _chat_logprobs(self) -> ChatCompletionRequest:
        if self.top_logprobs is not None and not self.logprobs:
            raise ValueError("top_logprobs requires logprobs to be true")
        if self.max_tokens is not None and self.max_completion_tokens is not None:
            raise ValueError("give max_tokens or max_completion_tokens, not both")
        return self

    def token_limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


ModelName = Annotated[str, Field(min_length=1, max_length=256)]


class TokenizeCompletionRequest(StrictModel):
    """POST /tokenize of a text (vLLM's shape)."""

    model: ModelName | None = None
    prompt: PromptText
    add_special_tokens: StrictBool = True
    return_token_strs: StrictBool | None = False

    @model_validator(mode="before")
    @classmethod
    def _some_input(cls, data: Any) -> Any:
        if isinstance(data, dict) and "prompt" not in data:
            raise ValueError("give prompt (a text) or messages (a conversation) to tokenize")
        return data


class TokenizeChatRequest(ChatTemplateFields):
    """POST /tokenize of a conversation (vLLM's shape): the prompt the chat endpoint would build."""

    model: ModelName | None = None
    tools: TemplateObjects | None = None  # rendered by templates that describe tools (no tool calling here)
    return_token_strs: StrictBool | None = False

    @model_validator(mode="before")
    @classmethod
    def _one_input(cls, data: Any) -> Any:
        if isinstance(data, dict) and "prompt" in data:
            raise ValueError("give prompt or messages, not both")
        return data

    def template_args(self) -> dict[str, Any]:
        return {**super().template_args(), "tools": self.tools}


def _tokenize_kind(data: Any) -> str:
    return "tokenize[messages]" if isinstance(data, dict) and "messages" in data else "tokenize[prompt]"


TokenizeRequest = Annotated[
    Annotated[TokenizeCompletionRequest, Tag("tokenize[prompt]")] | Annotated[TokenizeChatRequest,
                                                                             Tag("tokenize[messages]")],
    Discriminator(_tokenize_kind),
]


class DetokenizeRequest(StrictModel):
    """POST /detokenize (vLLM's shape)."""

    model: ModelName | None = None
    tokens: Annotated[list[TokenId], Field(max_length=MAX_PROMPT_TOKEN_IDS)]


# ---------------------------------------------------------------- responses


class TokenizeResponse(BaseModel):
    count: int
    max_model_len: int
    tokens: list[int]
    token_strs: list[str] | None = None


class DetokenizeResponse(BaseModel):
    prompt: str


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class CompletionLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float | None]
    top_logprobs: list[dict[str, float] | None]
    text_offset: list[int]


class PromptTokenLogprob(BaseModel):
    """One token's entry in vLLM's prompt_logprobs."""

    logprob: float
    rank: int | None = None  # 1 = the most likely token
    decoded_token: str | None = None


class CompletionChoice(BaseModel):
    index: int
    text: str
    logprobs: CompletionLogprobs | None = None
    finish_reason: str | None = None
    # vLLM's shape: null for the first prompt token, then token id (as a JSON key) -> its entry: the prompt's own
    # token first, then the top alternatives
    prompt_logprobs: list[dict[str, PromptTokenLogprob] | None] | None = None


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
    reconfirmation: dict[str, Any] | None = Field(
        default=None, description="the plan re-timed while the server was idle, when the start's timings were not "
                                  "clean: state (not needed, pending, done), why, and each attempt with its outcome "
                                  "(switched, confirmed, contended, interrupted, failed)")
    ignored_fields: dict[str, int] = Field(default_factory=dict, description="request fields accepted and ignored, "
                                                                              "by name: how many requests sent each")
