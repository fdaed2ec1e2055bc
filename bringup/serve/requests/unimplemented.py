"""Request fields that OpenAI (or vLLM) defines and this server does not implement: their tables, and the base
models that declare them.

Each is declared in the schema, so it is never mistaken for an unknown field and silently ignored: its
neutral value (what leaving it out means) is accepted, anything else is a 400 that names the field and says
what is missing. Unknown fields, by contrast, are accepted and ignored (ignored_fields.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import Field, ValidationInfo, create_model, field_validator

from bringup.serve.requests.rules import MAX_CHOICES
from bringup.serve.requests.strict import Int, StrictModel


@dataclass(frozen=True)
class Unimplemented:
    neutral: tuple[Any, ...]  # values that mean "not used"; compared with their JSON type (0 is not false)
    missing: str  # what the server lacks, for the schema and the error message
    declared: Any = None  # the field's type, checked first; None: any JSON value, documented as the neutral ones
    message: str = ""  # the error, "{name} ..."; empty: "not supported by this server (<missing>); <hint>"
    same_as: str = ""  # a field declared before this one whose value is neutral too (best_of: n)


_TOOLS = Unimplemented((None, []), "no tool calling")
_FUNCTIONS = Unimplemented((None, [], "none"), "no function calling")
_STRUCTURED = Unimplemented((None,), "no structured output")
_UNSUPPORTED = "{name} is not supported by this server"
_OPENAI_PENALTY = Annotated[float, Field(ge=-2.0, le=2.0)] | None
_PENALTY = Unimplemented((None, 0.0), "no presence or frequency penalty", _OPENAI_PENALTY,
                         f"{_UNSUPPORTED}; use repetition_penalty")

# both generation endpoints
GENERATION: dict[str, Unimplemented] = {
    "tools": _TOOLS,
    "tool_choice": Unimplemented((None, "none"), "no tool calling"),
    "functions": _FUNCTIONS,
    "function_call": _FUNCTIONS,
    "response_format": Unimplemented((None, {"type": "text"}), "no structured output"),
    "audio": Unimplemented((None,), "no audio output"),
    "modalities": Unimplemented((None, ["text"]), "text output only"),
    "prediction": Unimplemented((None,), "no predicted outputs"),
    "reasoning_effort": Unimplemented((None,), "no reasoning-effort control"),
    "verbosity": Unimplemented((None,), "no verbosity control"),
    "web_search_options": Unimplemented((None,), "no web search"),
    "store": Unimplemented((None, False), "completions are not stored"),
    # vLLM's extras that change the answer
    "guided_json": _STRUCTURED,
    "guided_regex": _STRUCTURED,
    "guided_choice": _STRUCTURED,
    "guided_grammar": _STRUCTURED,
    "structured_outputs": _STRUCTURED,
    "min_tokens": Unimplemented((None, 0), "no minimum output length"),
    "use_beam_search": Unimplemented((None, False), "no beam search"),
    "allowed_token_ids": Unimplemented((None,), "no token allow-list"),
    "bad_words": Unimplemented((None, []), "no banned words"),
    "include_stop_str_in_output": Unimplemented((None, False), "the stop string is always cut off"),
    "skip_special_tokens": Unimplemented((None, True), "special tokens are always skipped in the text"),
    "truncate_prompt_tokens": Unimplemented((None,), "no prompt truncation"),
    # OpenAI's sampling fields, typed as OpenAI types them
    "presence_penalty": _PENALTY,
    "frequency_penalty": _PENALTY,
    "logit_bias": Unimplemented((None, {}), "no logit bias", dict[str, float] | None, _UNSUPPORTED),
}

# /v1/completions only
COMPLETION_ONLY: dict[str, Unimplemented] = {
    "best_of": Unimplemented((None,), "no ranking of extra answers", Int(1, MAX_CHOICES) | None,
                             "{name} other than n is not supported by this server", same_as="n"),
    "suffix": Unimplemented((None, ""), "no text after the insertion point", str | None, _UNSUPPORTED),
}

# chat completions only (/v1/completions implements them)
CHAT_ONLY: dict[str, Unimplemented] = {
    "prompt_logprobs": Unimplemented((None,), "no prompt logprobs on chat completions: use /v1/completions with "
                                              "prompt_logprobs, or echo with logprobs"),
}

# chat completions and /tokenize of messages
CHAT_TEMPLATE: dict[str, Unimplemented] = {
    "chat_template": Unimplemented((None,), "the model's own chat template is always used"),
    "continue_final_message": Unimplemented((None, False), "no continuing of the final message"),
}

# inside a chat message
MESSAGE: dict[str, Unimplemented] = {
    "tool_calls": _TOOLS,
    "tool_call_id": _TOOLS,
    "function_call": _FUNCTIONS,
    "audio": Unimplemented((None,), "no audio"),
    "refusal": Unimplemented((None,), "no refusal messages"),
}


def schema_type(rule: Unimplemented) -> Any:
    """The field's type for the schema: its declared type, else any JSON value documented (and fuzzed) as its
    neutral values."""
    if rule.declared is not None:
        accepted = [_json(n) for n in rule.neutral] + ([f"the value of {rule.same_as}"] if rule.same_as else [])
        return Annotated[rule.declared, Field(description=f"not implemented by this server ({rule.missing}): only "
                                                          f"{' or '.join(accepted)} is accepted")]
    return Annotated[Any, Field(description=f"not implemented by this server ({rule.missing}): only the neutral "
                                            "values are accepted", json_schema_extra={"enum": list(rule.neutral)})]


def is_neutral(value: Any, rule: Unimplemented, earlier: dict[str, Any]) -> bool:
    """One of the neutral values, or equal to the field `same_as` (neutral too when that field was invalid)."""
    if rule.same_as and value == earlier.get(rule.same_as, value):
        return True
    return any(type(value) is type(n) and value == n for n in rule.neutral)


def check(name: str, value: Any, table: dict[str, Unimplemented], earlier: dict[str, Any]) -> Any:
    """value, if neutral; else ValueError("not supported by this server (...)"), which the error handler
    prefixes with the field's path. earlier: the fields validated before this one."""
    rule = table[name]
    if is_neutral(value, rule, earlier):
        return value
    if rule.message:
        raise ValueError(rule.message.format(name=name))
    others = [n for n in rule.neutral if n is not None]
    hint = "leave it out" + (f" or send {' or '.join(_json(n) for n in others)}" if others else "")
    raise ValueError(f"not supported by this server ({rule.missing}); {hint}")


def _json(value: Any) -> str:
    return json.dumps(value)


def not_implemented(name: str, table: dict[str, Unimplemented]) -> type[StrictModel]:
    """A base model declaring every field of `table`: null or its neutral value, else a 400 naming it."""

    def refuse(cls, value: Any, info: ValidationInfo) -> Any:
        return check(info.field_name, value, table, info.data)

    # the validator's name is unique per base: a model with two such bases keeps both
    return create_model(name, __base__=StrictModel,
                        __validators__={f"refuse_{name}": field_validator(*table)(refuse)},
                        **{field: (schema_type(rule), None) for field, rule in table.items()})


GenerationNotImplemented = not_implemented("GenerationNotImplemented", GENERATION)
CompletionNotImplemented = not_implemented("CompletionNotImplemented", COMPLETION_ONLY)
ChatNotImplemented = not_implemented("ChatNotImplemented", CHAT_ONLY)
ChatTemplateNotImplemented = not_implemented("ChatTemplateNotImplemented", CHAT_TEMPLATE)
MessageNotImplemented = not_implemented("MessageNotImplemented", MESSAGE)
