"""Tokenizers: a Hugging Face `tokenizer.json` (via `tokenizers`) and the built-in byte-level one.

Both expose encode / decode / detokenizer (incremental decode) / apply_chat_template / eos_token_ids /
generation_defaults.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from bringup.errors import BringupError
from bringup.log import get_logger
from bringup.runner.engine.sampling_params import SamplingParams, is_integer, is_number
from bringup.runner.model.detokenizer import ByteDetokenizer, WindowDetokenizer

log = get_logger("runner.tokenizer")

FALLBACK_CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def render_chat(template: str, messages: list[dict], **variables: Any) -> str:
    """Render a chat template in a sandbox, as Hugging Face does (trim_blocks, lstrip_blocks)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(template).render(messages=messages, add_generation_prompt=True, **variables)
    except TemplateError as exc:
        raise ValueError(f"chat template: {exc}") from None


class ByteTokenizer:
    """UTF-8 bytes offset by the special tokens; the built-in model's tokenizer."""

    SPECIALS = ("<|bos|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>", "<|pad|>", "<|r6|>", "<|r7|>")
    CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
                     "{% if add_generation_prompt %}<|assistant|>{% endif %}")

    def __init__(self) -> None:
        self.offset = len(self.SPECIALS)
        self.vocab_size = self.offset + 256
        self.bos_token_id, self.eos_token_ids = 0, [1]
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

    def apply_chat_template(self, messages: list[dict]) -> str:
        return render_chat(self.CHAT_TEMPLATE, messages, bos_token="<|bos|>", eos_token="<|eos|>")


class HFTokenizer:
    """tokenizer.json + tokenizer_config.json (special tokens, chat template) + generation_config.json."""

    def __init__(self, model_dir: Path, config_eos: list[int] | None = None) -> None:
        from tokenizers import Tokenizer

        path = model_dir / "tokenizer.json"
        if not path.is_file():
            raise BringupError(f"{path} is missing; bringup needs a fast-tokenizer tokenizer.json "
                               "(save one with the tokenizers library or transformers' save_pretrained)")
        try:
            self._tok = Tokenizer.from_file(str(path))
        except Exception as exc:
            raise BringupError(f"{path} could not be read by the tokenizers library: {exc}") from None
        cfg = _read_json(model_dir / "tokenizer_config.json")
        gen = _read_json(model_dir / "generation_config.json")
        self.vocab_size = self._tok.get_vocab_size(with_added_tokens=True)
        self.special_token_ids = frozenset(i for i, t in self._tok.get_added_tokens_decoder().items() if t.special)
        config_path = model_dir / "tokenizer_config.json"
        self.bos_token = _token_text(cfg.get("bos_token"), "bos_token", config_path)
        self.eos_token = _token_text(cfg.get("eos_token"), "eos_token", config_path)
        self.bos_token_id = self._id(self.bos_token)
        gen_path = model_dir / "generation_config.json"
        eos = [self._id(self.eos_token), *list(config_eos or []), *_generation_eos(gen, gen_path)]
        self.eos_token_ids = sorted({i for i in eos if i is not None})
        self.chat_template = _chat_template(cfg.get("chat_template"))
        self.generation_defaults = _generation_defaults(gen, gen_path)

    def _id(self, token: str | None) -> int | None:
        return None if token is None else self._tok.token_to_id(token)

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self._tok.decode(ids, skip_special_tokens=skip_special_tokens)

    def detokenizer(self) -> WindowDetokenizer:
        """Incremental decode of generated ids (special tokens skipped) over a short window of tokens."""
        return WindowDetokenizer(self.decode, skipped=self.special_token_ids)

    def apply_chat_template(self, messages: list[dict]) -> str:
        template = self.chat_template
        if template is None:
            log.warning("tokenizer_config.json has no chat_template; using a plain 'role: content' template")
            template = FALLBACK_CHAT_TEMPLATE
        return render_chat(template, messages, bos_token=self.bos_token or "", eos_token=self.eos_token or "")


def _read_json(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as exc:
        raise BringupError(f"{path} is not valid JSON ({exc}); fix or remove it") from None
    if not isinstance(document, dict):
        raise BringupError(f"{path} must be a JSON object, got a JSON {type(document).__name__}; fix or remove it")
    return document


def _token_text(tok: Any, field: str, path: Path) -> str | None:
    """A special token's text (a string, or {"content": string} as transformers writes added tokens)."""
    text = tok.get("content") if isinstance(tok, dict) else tok
    if text is not None and not isinstance(text, str):
        raise _wrong_field(path, field, tok, "a string or an object with a string 'content'")
    return text


def _chat_template(t: Any) -> str | None:
    if isinstance(t, list):  # [{"name": "default", "template": ...}, ...]
        named = {d.get("name"): d.get("template") for d in t}
        return named.get("default") or next(iter(named.values()), None)
    return t


GENERATION_NUMBERS = ("temperature", "top_p", "repetition_penalty", "min_p")


def _generation_defaults(gen: dict, path: Path) -> dict[str, Any]:
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


def _generation_eos(gen: dict, path: Path) -> list[int]:
    value = gen.get("eos_token_id")
    ids = [] if value is None else value if isinstance(value, list) else [value]
    if not all(is_integer(i) and i >= 0 for i in ids):
        raise _wrong_field(path, "eos_token_id", value, "a token id or a list of token ids")
    return ids


def _generation_field(gen: dict, key: str, path: Path, ok: Callable[[Any], bool], what: str) -> Any:
    if not ok(gen[key]):
        raise _wrong_field(path, key, gen[key], what)
    return gen[key]


def _wrong_field(path: Path, key: str, value: Any, what: str) -> BringupError:
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    return BringupError(f"{path}: {key} must be {what}, got {shown}; fix or remove that field")


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool)
