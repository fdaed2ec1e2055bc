"""Per-request sampling parameters (the engine API's contract) and the limits a request may ask for.

Two levels: `validate()` is what the engine can run at all (its sampler stays finite even at extreme
values); `validate_request()` adds the limits a user-facing request is held to — the HTTP server and
`bringup generate` share them, so the same values are refused in both with the same words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# Limits on what a request may ask for (OpenAI's ranges where OpenAI has one).
MIN_TEMPERATURE = 0.01  # 0 < t < this: logits / t overflow float32 (0 itself means greedy)
MAX_TEMPERATURE = 2.0
MIN_TOP_P = 1e-6  # below ~1e-45 top_p rounds to 0 in float32 and masks every token
MIN_REPETITION_PENALTY, MAX_REPETITION_PENALTY = 0.01, 10.0
MAX_TOKENS = 1_000_000
MAX_TOP_K = 1_000_000
MAX_LOGPROBS = 20
MAX_STOP_STRINGS = 16
MAX_STOP_TOKEN_IDS = 64
MAX_TOKEN_ID = 2**31 - 1

Check = tuple[str, bool, str]  # (field, value is acceptable, what it must be)


def is_number(value: Any) -> bool:
    """A real number: int or float, not bool (True is not 1 here)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _in(value: Any, low: float, high: float) -> bool:
    """low <= value <= high for a real number; False for NaN and for anything that is not a number."""
    return is_number(value) and low <= value <= high


TEMPERATURE_RULE = (f"must be 0 (greedy) or in [{MIN_TEMPERATURE:g}, {MAX_TEMPERATURE:g}]; smaller values overflow "
                    "the sampler's float32 logits")


def temperature_allowed(value: Any) -> bool:
    """The request rule for temperature (TEMPERATURE_RULE), the server's and the CLI's."""
    return value == 0.0 or _in(value, MIN_TEMPERATURE, MAX_TEMPERATURE)


def refusal(name: str, why: str, value: Any) -> ValueError:
    """The error for a refused value: "<field>: <why> (got <value>)"."""
    return ValueError(f"{name}: {why} (got {_shown(value)})")


@dataclass
class SamplingParams:
    """temperature 0 means greedy; top_k 0 means off; logprobs = number of top alternatives per token.

    prompt_logprobs (vLLM's meaning): None = off; k >= 0 = each prompt token's own logprob and its top-k
    alternatives, from the model's raw logits (the first prompt token has none). max_tokens 0 is a scoring
    request, allowed only with prompt_logprobs: the prompt is run and scored, no token is generated.
    """

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    logprobs: int | None = None
    prompt_logprobs: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1

    def validate(self) -> None:
        """Raise ValueError("<field>: <why> (got <value>)") on the first value the engine cannot run."""
        self._raise_first(self._engine_checks())

    def validate_request(self) -> None:
        """The limits a user-facing request is held to (the server's and the CLI's), then validate()."""
        self._raise_first(self._request_checks())
        self.validate()

    def _engine_checks(self) -> list[Check]:
        return [
            ("max_tokens", is_integer(self.max_tokens) and (self.max_tokens >= 1 or self._scoring_only),
             "must be an integer >= 1 (0 only with prompt_logprobs: the prompt scored, nothing generated)"),
            ("temperature", _in(self.temperature, 0.0, 100.0), "must be in [0, 100] (0 = greedy)"),
            ("top_p", _in(self.top_p, 0.0, 1.0) and self.top_p > 0.0, "must be in (0, 1]"),
            ("top_k", is_integer(self.top_k) and self.top_k >= 0, "must be an integer >= 0 (0 = off)"),
            ("min_p", _in(self.min_p, 0.0, 1.0), "must be in [0, 1]"),
            ("repetition_penalty", _in(self.repetition_penalty, 0.0, 100.0) and self.repetition_penalty > 0.0,
             "must be in (0, 100]"),
            ("seed", self.seed is None or (is_integer(self.seed) and 0 <= self.seed < 2**63),
             "must be in [0, 2**63)"),
            ("stop", all(isinstance(s, str) and s for s in self.stop), "must be non-empty strings"),
            ("stop_token_ids", all(is_integer(t) and t >= 0 for t in self.stop_token_ids),
             "must be non-negative integers"),
            ("logprobs", self.logprobs is None or (is_integer(self.logprobs) and 0 <= self.logprobs <= MAX_LOGPROBS),
             f"must be in [0, {MAX_LOGPROBS}]"),
            ("prompt_logprobs", self.prompt_logprobs is None
             or (is_integer(self.prompt_logprobs) and 0 <= self.prompt_logprobs <= MAX_LOGPROBS),
             f"must be in [0, {MAX_LOGPROBS}]"),
        ]

    @property
    def _scoring_only(self) -> bool:
        """max_tokens 0 with prompt_logprobs: a request that only scores its prompt."""
        return self.max_tokens == 0 and self.prompt_logprobs is not None

    def _request_checks(self) -> list[Check]:
        """Stricter than the engine's where a request has a narrower range; each check is safe for any type."""
        return [
            ("max_tokens", is_integer(self.max_tokens) and (1 <= self.max_tokens <= MAX_TOKENS or self._scoring_only),
             f"must be an integer in [1, {MAX_TOKENS}]"),
            ("temperature", temperature_allowed(self.temperature), TEMPERATURE_RULE),
            ("top_p", _in(self.top_p, MIN_TOP_P, 1.0), f"must be in [{MIN_TOP_P:g}, 1]"),
            ("top_k", is_integer(self.top_k) and 0 <= self.top_k <= MAX_TOP_K,
             f"must be an integer in [0, {MAX_TOP_K}] (0 = off)"),
            ("repetition_penalty", _in(self.repetition_penalty, MIN_REPETITION_PENALTY, MAX_REPETITION_PENALTY),
             f"must be in [{MIN_REPETITION_PENALTY:g}, {MAX_REPETITION_PENALTY:g}] (1 = off)"),
            ("stop", isinstance(self.stop, list) and len(self.stop) <= MAX_STOP_STRINGS,
             f"must hold at most {MAX_STOP_STRINGS} strings"),
            ("stop_token_ids", isinstance(self.stop_token_ids, list) and len(self.stop_token_ids) <= MAX_STOP_TOKEN_IDS
             and all(is_integer(t) and 0 <= t <= MAX_TOKEN_ID for t in self.stop_token_ids),
             f"must hold at most {MAX_STOP_TOKEN_IDS} ids, each in [0, {MAX_TOKEN_ID}]"),
        ]

    def _raise_first(self, checks: list[Check]) -> None:
        for name, ok, why in checks:
            if not ok:
                raise refusal(name, why, getattr(self, name))


def token_budget(prompt_len: int, max_model_len: int, requested: int | None) -> int:
    """Tokens to generate after a prompt: `requested` when prompt + it fits the context, all the room left when
    None; ValueError("<field>: ...") when the prompt leaves no room or the request does not fit."""
    room = max_model_len - prompt_len
    if room < 1:
        raise ValueError(f"prompt: {prompt_len} tokens leave no room to generate within the context of "
                         f"{max_model_len} tokens (max_model_len); shorten the prompt")
    if requested is not None and requested > room:
        raise ValueError(f"max_tokens: the prompt ({prompt_len} tokens) plus {requested} to generate exceed the "
                         f"context of {max_model_len} tokens (max_model_len); ask for at most {room}")
    return room if requested is None else requested


def _shown(value: Any) -> str:
    """The offending value for a message: short, one line, NaN spelled as such."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
