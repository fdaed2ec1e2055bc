"""Count and shape rules for the request fields whose JSON type is a union (`prompt`, `stop`).

They run before pydantic validates the union, so an error names the field (and the item) and the rule that
was broken — never one union member's complaint such as "Input should be a valid string" — and a huge list
is refused by its length before any of its items is looked at. Token ids are checked against the model's
vocabulary later, by the Preparer, which knows the vocabulary size.
"""

from __future__ import annotations

from typing import Any

from bringup.runner.sampling_params import MAX_STOP_STRINGS, MAX_TOKEN_ID

MAX_PROMPTS = 64  # texts or token-id lists in one completion request
MAX_CHOICES = 16  # n (and best_of): answers to one prompt
MAX_PROMPT_CHARS = 1_000_000
MAX_PROMPT_TOKEN_IDS = 1_000_000
TOKEN_ID_MAX = MAX_TOKEN_ID
PROMPT_SHAPES = "a text, a list of texts, a list of token ids or a list of token-id lists"


def json_type(value: Any) -> str:
    """How a parsed JSON value reads in an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, str):
        return "a text"
    if isinstance(value, list):
        return "a list"
    return "an object"


def check_prompt(value: Any) -> None:
    """Raise ValueError("prompt...: what is wrong; the rule") unless value has one of the four prompt shapes."""
    if isinstance(value, str):
        _check_text(value, "prompt")
        return
    if not isinstance(value, list):
        raise ValueError(f"prompt: must be {PROMPT_SHAPES}; got {json_type(value)}")
    if not value:
        raise ValueError(f"prompt: is an empty list; give {PROMPT_SHAPES}")
    if _is_number(value[0]):
        _check_token_ids(value, "prompt")
        return
    if len(value) > MAX_PROMPTS:
        raise ValueError(f"prompt: {len(value)} prompts are over the limit of {MAX_PROMPTS} per request; "
                         "split the request")
    if isinstance(value[0], str):
        for i, item in enumerate(value):
            _expect_kind(item, str, f"prompt.{i}", "a text")
            _check_text(item, f"prompt.{i}")
    elif isinstance(value[0], list):
        for i, item in enumerate(value):
            _expect_kind(item, list, f"prompt.{i}", "a list of token ids")
            _check_token_ids(item, f"prompt.{i}")
    else:
        raise ValueError(f"prompt.0: must be a text, a token id or a list of token ids; got {json_type(value[0])}")


def check_stop(value: Any) -> None:
    """Raise ValueError("stop...: ...") unless value is null, a non-empty string, or a short list of them."""
    if value is None:
        return
    if isinstance(value, str):
        _check_stop_string(value, "stop")
        return
    if not isinstance(value, list):
        raise ValueError(f"stop: must be a string or a list of at most {MAX_STOP_STRINGS} strings; "
                         f"got {json_type(value)}")
    if len(value) > MAX_STOP_STRINGS:
        raise ValueError(f"stop: {len(value)} stop strings are over the limit of {MAX_STOP_STRINGS}; "
                         f"give at most {MAX_STOP_STRINGS}")
    for i, item in enumerate(value):
        _expect_kind(item, str, f"stop.{i}", "a string")
        _check_stop_string(item, f"stop.{i}")


def _check_stop_string(text: str, where: str) -> None:
    if not text:
        raise ValueError(f"{where}: is empty; a stop string needs at least one character")


def _check_text(text: str, where: str) -> None:
    if len(text) > MAX_PROMPT_CHARS:
        raise ValueError(f"{where}: a text of {len(text)} characters is over the limit of {MAX_PROMPT_CHARS}; "
                         "shorten it")


def _expect_kind(item: Any, kind: type, where: str, wanted: str) -> None:
    if not isinstance(item, kind):
        raise ValueError(f"{where}: must be {wanted} like the first item (one list holds one kind); "
                         f"got {json_type(item)}")


def _check_token_ids(ids: list, where: str) -> None:
    """Length first (cheap), then every item an integer in [0, TOKEN_ID_MAX] (one pass in the common case)."""
    if not ids:
        raise ValueError(f"{where}: is an empty list of token ids; give at least one token id")
    if len(ids) > MAX_PROMPT_TOKEN_IDS:
        raise ValueError(f"{where}: {len(ids)} token ids are over the limit of {MAX_PROMPT_TOKEN_IDS}; "
                         "shorten the prompt")
    if all(type(t) is int for t in ids) and min(ids) >= 0 and max(ids) <= TOKEN_ID_MAX:
        return
    for i, token in enumerate(ids):
        if not _is_number(token) or (isinstance(token, float) and not token.is_integer()):
            raise ValueError(f"{where}.{i}: a token id must be an integer; got {json_type(token)}")
        if not 0 <= token <= TOKEN_ID_MAX:
            raise ValueError(f"{where}.{i}: token id {int(token)} is outside [0, {TOKEN_ID_MAX}]; token ids index "
                             "the model's vocabulary from 0")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
