"""Tokenizers: a Hugging Face `tokenizer.json` or a GGUF file's vocabulary (via `tokenizers`) and the built-in
byte-level one.

Both expose encode / decode / detokenizer (incremental decode) / apply_chat_template / encode_chat /
eos_token_ids / generation_defaults. Chat templates render as transformers renders them (chat_template.py);
encode_chat gives the ids of transformers' apply_chat_template(..., tokenize=True): the rendered text encoded
without adding special tokens (the template writes its own).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bringup.errors import BringupError
from bringup.fallbacks import FallbackRecorder
from bringup.log import get_logger
from bringup.runner.model.config.builtin import BYTE_BOS_ID, BYTE_EOS_IDS, BYTE_SPECIALS
from bringup.runner.model_files import has_entry, read_json
from bringup.runner.sampling_params import SamplingParams, is_integer, is_number
from bringup.runner.text.chat_template import (
    ChatTemplate,
    load_chat_templates,
    pick_template,
    render_chat,
    special_token_variables,
)
from bringup.runner.text.detokenizer import ByteDetokenizer, WindowDetokenizer
from bringup.runner.text.tokenizer_json import read_tokenizer_json
from bringup.terminal_text import shown

log = get_logger("runner.tokenizer")

FALLBACK_CHAT_TEMPLATE = ChatTemplate(
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}",
    "bringup's plain 'role: content' fallback")


class ByteTokenizer:
    """UTF-8 bytes offset by the special tokens; the built-in model's tokenizer."""

    SPECIALS = BYTE_SPECIALS
    CHAT_TEMPLATE = ChatTemplate(
        "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}", "the built-in byte tokenizer")
    TEMPLATE_VARIABLES = {"bos_token": "<|bos|>", "eos_token": "<|eos|>", "pad_token": "<|pad|>"}

    def __init__(self) -> None:
        self.offset = len(self.SPECIALS)
        self.vocab_size = self.offset + 256
        self.bos_token_id, self.eos_token_ids = BYTE_BOS_ID, list(BYTE_EOS_IDS)
        self.fallbacks: FallbackRecorder | None = None  # unused: the built-in template is always there
        self.generation_defaults: dict[str, Any] = {}
        self._split = re.compile("(" + "|".join(re.escape(s) for s in self.SPECIALS) + ")")

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        ids = [self.bos_token_id] if add_special_tokens else []
        for part in self._split.split(text):
            if part in self.SPECIALS:
                ids.append(self.SPECIALS.index(part))
            elif part:
                ids.extend(b + self.offset for b in part.encode("utf-8"))
        return ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        out, buf = [], bytearray()
        for i in ids:
            if i >= self.offset:
                buf.append(i - self.offset)
                continue
            out.append(buf.decode("utf-8", errors="replace"))
            buf = bytearray()
            if not skip_special_tokens and 0 <= i < self.offset:
                out.append(self.SPECIALS[i])
        out.append(buf.decode("utf-8", errors="replace"))
        return "".join(out)

    def detokenizer(self) -> ByteDetokenizer:
        """Incremental decode of generated ids (special tokens skipped), equal to decode() once flushed."""
        return ByteDetokenizer(self.offset)

    def use_chat_template(self, template: ChatTemplate) -> None:
        """Render chats with `template` (--chat-template) instead of the built-in one."""
        self.CHAT_TEMPLATE = template

    def apply_chat_template(self, messages: list[dict], *, add_generation_prompt: bool = True,
                            tools: list[dict] | None = None, documents: list[dict] | None = None,
                            template_kwargs: dict | None = None) -> str:
        """The conversation rendered by the chat template; ChatTemplateError (one line) if it refuses it."""
        return render_chat(self.CHAT_TEMPLATE, messages, add_generation_prompt=add_generation_prompt, tools=tools,
                           documents=documents, variables={**self.TEMPLATE_VARIABLES, **(template_kwargs or {})})

    def encode_chat(self, messages: list[dict], *, add_generation_prompt: bool = True,
                    tools: list[dict] | None = None, documents: list[dict] | None = None,
                    template_kwargs: dict | None = None) -> list[int]:
        """The rendered conversation's ids; the template writes the special tokens itself."""
        text = self.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tools=tools,
                                        documents=documents, template_kwargs=template_kwargs)
        return self.encode(text, add_special_tokens=False)


@dataclass(frozen=True)
class TokenizerData:
    """Everything an HFTokenizer is built from, already in memory: a model directory's files or a GGUF file's
    metadata. The labels name where each part came from in messages."""

    tokenizer_json: str  # a tokenizers-library tokenizer serialised as JSON, its vocabulary checked (vocabulary.py)
    config: dict  # tokenizer_config.json's settings: special tokens, chat_template
    generation: dict  # generation_config.json's settings: sampling defaults, eos_token_id
    chat_templates: dict[str, ChatTemplate]
    source: str  # the model, as a person names it (a directory or a .gguf file)
    tokenizer_source: str  # where `tokenizer_json` came from
    config_source: str  # where `config` came from
    generation_source: str  # where `generation` came from
    template_places: str  # where a chat template would have been found, for the message when there is none


class HFTokenizer:
    """A tokenizers-library tokenizer with its special tokens, chat templates and generation defaults."""

    def __init__(self, data: TokenizerData, config_eos: list[int] | None = None) -> None:
        from tokenizers import Tokenizer

        try:
            self._tok = Tokenizer.from_str(data.tokenizer_json)
        except Exception as exc:
            raise BringupError(f"{data.tokenizer_source} could not be read by the tokenizers library: "
                               f"{shown(exc)}") from None
        cfg, gen = data.config, data.generation
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)
        self.special_token_ids = frozenset(i for i, t in self._tok.get_added_tokens_decoder().items() if t.special)
        self.bos_token = _token_text(cfg.get("bos_token"), "bos_token", data.config_source)
        self.eos_token = _token_text(cfg.get("eos_token"), "eos_token", data.config_source)
        self.bos_token_id = self._id(self.bos_token)
        eos = [self._id(self.eos_token), *list(config_eos or []), *_generation_eos(gen, data.generation_source)]
        self.eos_token_ids = sorted({i for i in eos if i is not None})
        self.source = data.source
        self.template_places = data.template_places
        self.chat_templates = data.chat_templates
        self.template_variables = special_token_variables(cfg)
        self._warned_no_template = False
        self.fallbacks: FallbackRecorder | None = None  # the engine's, so the template fallback is counted
        self.generation_defaults = _generation_defaults(gen, data.generation_source)

    @classmethod
    def from_dir(cls, model_dir: Path, config_eos: list[int] | None = None) -> HFTokenizer:
        """tokenizer.json (its vocabulary checked: tokenizer_json.py) + tokenizer_config.json (special tokens, chat
        template) + generation_config.json of a model directory, each read through model_files' jail."""
        path = model_dir / "tokenizer.json"
        if not has_entry(model_dir, "tokenizer.json"):
            raise BringupError(f"{path} is missing; bringup needs a fast-tokenizer tokenizer.json "
                               "(save one with the tokenizers library or transformers' save_pretrained)")
        text = read_tokenizer_json(model_dir)
        cfg = _read_json(model_dir, "tokenizer_config.json")
        config_path = model_dir / "tokenizer_config.json"
        data = TokenizerData(
            tokenizer_json=text, config=cfg, generation=_read_json(model_dir, "generation_config.json"),
            chat_templates=load_chat_templates(model_dir, cfg.get("chat_template"), config_path),
            source=str(model_dir), tokenizer_source=str(path), config_source=str(config_path),
            generation_source=str(model_dir / "generation_config.json"),
            template_places=f"{model_dir} has no chat template (tokenizer_config.json or chat_template.jinja)")
        return cls(data, config_eos)

    def _id(self, token: str | None) -> int | None:
        return None if token is None else self._tok.token_to_id(token)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        # encode_batch releases the GIL while it works (encode holds it: 1.7 s on 1M characters stalls a server)
        return self._tok.encode_batch([text], add_special_tokens=add_special_tokens)[0].ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def detokenizer(self) -> WindowDetokenizer:
        """Incremental decode of generated ids (special tokens skipped) over a short window of tokens."""
        return WindowDetokenizer(self.decode, skipped=self.special_token_ids)

    def use_chat_template(self, template: ChatTemplate) -> None:
        """Render every chat with `template` (--chat-template), in place of the model's own (named or not)."""
        self.chat_templates = {"default": template}

    def apply_chat_template(self, messages: list[dict], *, add_generation_prompt: bool = True,
                            tools: list[dict] | None = None, documents: list[dict] | None = None,
                            template_kwargs: dict | None = None) -> str:
        """The conversation rendered by the model's chat template ('tool_use' when tools are given and the
        model has one); ChatTemplateError (one line, naming the template) if the template refuses or fails."""
        template = pick_template(self.chat_templates, tools, self.source)
        if template is None:
            if not self._warned_no_template:
                self._fall_back_to_plain_template()
            template = FALLBACK_CHAT_TEMPLATE
        return render_chat(template, messages, add_generation_prompt=add_generation_prompt, tools=tools,
                           documents=documents, variables={**self.template_variables, **(template_kwargs or {})})

    def _fall_back_to_plain_template(self) -> None:
        why = self.template_places
        if self.fallbacks is None:
            log.warning("%s; using a plain 'role: content' template", why)
        else:  # WARNING and counted; --strict refuses it
            self.fallbacks.record("op", "chat template", wanted="the model's chat template",
                                  instead="a plain 'role: content' template", why=why)
        self._warned_no_template = True

    def encode_chat(self, messages: list[dict], *, add_generation_prompt: bool = True,
                    tools: list[dict] | None = None, documents: list[dict] | None = None,
                    template_kwargs: dict | None = None) -> list[int]:
        """The ids transformers' apply_chat_template(..., tokenize=True) gives: the rendered text encoded
        without adding special tokens (the template writes them)."""
        text = self.apply_chat_template(messages, add_generation_prompt=add_generation_prompt, tools=tools,
                                        documents=documents, template_kwargs=template_kwargs)
        return self.encode(text, add_special_tokens=False)


def _read_json(model_dir: Path, name: str) -> dict:
    """An optional JSON object of the model directory ({} when absent), read through model_files' jail."""
    if not has_entry(model_dir, name):
        return {}
    path, document = model_dir / name, read_json(model_dir, name)
    if not isinstance(document, dict):
        raise BringupError(f"{path} must be a JSON object, got a JSON {type(document).__name__}; fix or remove it")
    return document


def _token_text(tok: Any, field: str, path: Path | str) -> str | None:
    """A special token's text (a string, or {"content": string} as transformers writes added tokens)."""
    text = tok.get("content") if isinstance(tok, dict) else tok
    if text is not None and not isinstance(text, str):
        raise _wrong_field(path, field, tok, "a string or an object with a string 'content'")
    return text


GENERATION_NUMBERS = ("temperature", "top_p", "repetition_penalty", "min_p")


def _generation_defaults(gen: dict, path: Path | str) -> dict[str, Any]:
    """Sampling defaults from generation_config.json, in SamplingParams field names; BringupError naming the
    file and the field for a wrong type or a value the engine cannot run."""
    out: dict[str, Any] = {}
    for key in GENERATION_NUMBERS:
        if gen.get(key) is not None:
            out[key] = _generation_field(gen, key, path, is_number, "a number")
    if gen.get("top_k") is not None:
        out["top_k"] = _generation_field(gen, "top_k", path, is_integer, "an integer")
    if gen.get("max_new_tokens") is not None:
        out["max_tokens"] = _generation_field(gen, "max_new_tokens", path, lambda v: is_integer(v) and v >= 1,
                                              "a positive integer")
    sample = gen.get("do_sample") is None or _generation_field(gen, "do_sample", path, _is_bool, "true or false")
    if not sample:
        out["temperature"] = 0.0
    try:
        SamplingParams(**out).validate()
    except ValueError as exc:
        raise BringupError(f"{path}: {exc}; fix or remove that field") from None
    return out


def _generation_eos(gen: dict, path: Path | str) -> list[int]:
    value = gen.get("eos_token_id")
    ids = [] if value is None else value if isinstance(value, list) else [value]
    if not all(is_integer(i) and i >= 0 for i in ids):
        raise _wrong_field(path, "eos_token_id", value, "a token id or a list of token ids")
    return ids


def _generation_field(gen: dict, key: str, path: Path | str, ok: Callable[[Any], bool], what: str) -> Any:
    if not ok(gen[key]):
        raise _wrong_field(path, key, gen[key], what)
    return gen[key]


def _wrong_field(path: Path | str, key: str, value: Any, what: str) -> BringupError:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    return BringupError(f"{path}: {key} must be {what}, got {shown}; fix or remove that field")


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)
