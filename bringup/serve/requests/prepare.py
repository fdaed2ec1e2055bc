"""Request fields against the loaded model: prompts to token ids (context length, vocabulary), the token budget,
and the runner's SamplingParams for each choice."""

from __future__ import annotations

from typing import Any

from bringup.runner.sampling_params import SamplingParams
from bringup.serve.errors import APIError
from bringup.serve.requests.schemas import SamplingFields
from bringup.serve.text_work import TextWork

# A prompt longer than this many characters per context token cannot fit: reject it before
# spending time tokenising it.
MAX_CHARS_PER_TOKEN = 64

class Preparer:
    """Checks and converts request fields against the loaded model (context length, vocabulary)."""

    def __init__(self, tokenizer: Any, max_model_len: int, vocab_size: int | None, text_work: TextWork) -> None:
        self.tokenizer = tokenizer
        self.text_work = text_work
        self.max_model_len = max_model_len
        self.vocab_size = vocab_size

    async def encode(self, text: str, param: str, *, add_special_tokens: bool) -> list[int]:
        """Token ids as the runner's own `generate` makes them: plain prompts get the model's special
        tokens (BOS), a rendered chat template already holds them."""
        limit = self.max_model_len * MAX_CHARS_PER_TOKEN
        if len(text) > limit:
            raise APIError(400, f"{param} is {len(text)} characters; it cannot fit the model's context of "
                                f"{self.max_model_len} tokens; shorten it", param=param,
                           code="context_length_exceeded")
        return await self.text_work.run(self.tokenizer.encode, text, add_special_tokens=add_special_tokens)

    def check_ids(self, ids: list[int], param: str) -> None:
        """A non-empty prompt whose every token id is in [0, vocab_size)."""
        if not ids:
            raise APIError(400, f"{param}: is empty; give at least one token", param=param)
        if self.vocab_size is None or (min(ids) >= 0 and max(ids) < self.vocab_size):
            return
        index, bad = next((i, t) for i, t in enumerate(ids) if not 0 <= t < self.vocab_size)
        raise APIError(400, f"{param}.{index}: token id {bad} is outside this model's vocabulary [0, "
                            f"{self.vocab_size}); use ids from the model's tokenizer", param=param,
                       code="invalid_value")

    def token_budget(self, prompt_len: int, requested: int | None, param: str) -> int:
        """max_tokens for a prompt: the requested value if prompt + it fits, else a 400 (0: a scoring request, the
        prompt alone must fit)."""
        room = self.max_model_len - prompt_len
        if room < (0 if requested == 0 else 1) or (requested is not None and requested > room):
            asked = f"; you requested {prompt_len + (requested or 0)} tokens ({prompt_len} in the prompt, " \
                    f"{requested or 0} to generate)" if requested is not None else \
                    f"; the prompt alone has {prompt_len} tokens"
            raise APIError(400, f"this model's maximum context length is {self.max_model_len} tokens{asked}; "
                                "shorten the prompt or lower max_tokens", param=param,
                           code="context_length_exceeded")
        return requested if requested is not None else room


def sampling_params(body: SamplingFields, *, max_tokens: int, choice: int, logprobs: int | None,
                    defaults: dict[str, Any] | None = None, prompt_logprobs: int | None = None) -> SamplingParams:
    """The runner's SamplingParams for choice number `choice` (seeds differ per choice, reproducibly).

    A field the request leaves out takes the model's generation_config.json default, else OpenAI's.
    """
    model = defaults or {}

    def pick(name: str, openai_default: float | int) -> Any:
        value = getattr(body, name)
        return value if value is not None else model.get(name, openai_default)

    seed = None if body.seed is None else (body.seed + choice) % (2**63)
    top_k = pick("top_k", 0)
    params = SamplingParams(
        max_tokens=max_tokens,
        temperature=pick("temperature", 1.0),
        top_p=pick("top_p", 1.0),
        top_k=0 if top_k == -1 else top_k,
        min_p=pick("min_p", 0.0),
        repetition_penalty=pick("repetition_penalty", 1.0),
        seed=seed,
        stop=body.stop_strings(),
        stop_token_ids=list(body.stop_token_ids or []),
        ignore_eos=body.ignore_eos,
        logprobs=logprobs,
        prompt_logprobs=prompt_logprobs,
    )
    try:
        params.validate()
    except ValueError as exc:
        raise APIError(400, str(exc), param=str(exc).split(":", 1)[0] or None, code="invalid_value") from None
    return params
