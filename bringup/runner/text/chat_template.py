"""Chat templates, rendered as transformers' `apply_chat_template` renders them.

Same Jinja environment (sandboxed, trim_blocks + lstrip_blocks, `{% break %}`/`{% continue %}`, the
`{% generation %}` tag), same globals (raise_exception, strftime_now, a limited `dict` and a `namespace` that
refuses underscore names), same `tojson` (json.dumps: non-ASCII and `<` written as they are, indent /
separators / sort_keys accepted), and the same preparation of inputs (message keys whose value is None
dropped, reasoning fields aliased, everything rebuilt from plain JSON types). Also where the templates of a
model directory live (chat_template.jinja, additional_chat_templates/*.jinja, tokenizer_config.json) and which one a
call uses. Anything a template raises becomes one ChatTemplateError line that names the template's source.
A render is held to limits on time, output and value sizes (template_limits.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols

from bringup.bounded_file import FileRefused, read_bounded
from bringup.errors import BringupError
from bringup.runner.model_files import MAX_TEMPLATE_BYTES, files_in, has_entry, read_text
from bringup.runner.text.template_limits import BoundedSandbox, TemplateLimitExceeded, render_bounded
from bringup.terminal_text import quoted

RESERVED_VARIABLES = ("messages", "tools", "documents", "add_generation_prompt")
REASONING_FIELDS = ("reasoning_content", "thinking", "reasoning")  # the first is the one templates read
NAMED_SPECIAL_TOKENS = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")


class ChatTemplateError(BringupError, ValueError):
    """A chat template that does not compile, or that refused or failed on a conversation (one line)."""


@dataclass(frozen=True)
class ChatTemplate:
    text: str
    source: str  # where the template came from, named in errors


def render_chat(template: ChatTemplate, messages: list[dict], *, add_generation_prompt: bool = True,
                tools: list[dict] | None = None, documents: list[dict] | None = None,
                variables: Mapping[str, Any] | None = None) -> str:
    """The template rendered for these inputs; `variables` are the special tokens plus extra template kwargs."""
    compiled = compile_template(template)
    context = _plain(dict(variables or {}))
    clash = sorted(set(context) & set(RESERVED_VARIABLES))
    if clash:
        raise ChatTemplateError(f"template variables {clash} clash with the chat's own inputs; pass them as the "
                                "named arguments instead")
    context.update(messages=_prepare_messages(messages), tools=_prepare_list(tools, "tools"),
                   documents=_prepare_list(documents, "documents"), add_generation_prompt=add_generation_prompt)
    try:
        return render_bounded(compiled, context)
    except Exception as exc:  # the template is user code: any failure of it is the template's
        raise _render_error(template.source, exc) from None


def compile_template(template: ChatTemplate) -> jinja2.Template:
    """The compiled template (cached by its text); ChatTemplateError naming the source if it does not compile."""
    try:
        return _compile(template.text)
    except jinja2.TemplateSyntaxError as exc:
        raise ChatTemplateError(f"the chat template in {template.source} does not compile (line {exc.lineno}: "
                                f"{_one_line(exc)}); fix the template") from None


def template_from_file(path: Path) -> ChatTemplate:
    """A Jinja chat template the user gives (--chat-template FILE), in place of the model's: a regular file of at most
    MAX_TEMPLATE_BYTES of UTF-8 that compiles; BringupError (one line) otherwise."""
    what = f"--chat-template {quoted(path)}"
    try:
        raw = read_bounded(path, MAX_TEMPLATE_BYTES, f"the {MAX_TEMPLATE_BYTES:,} bytes a chat template may")
    except FileRefused as exc:
        raise BringupError(f"{what} {exc}; give the path of a Jinja chat template file") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BringupError(f"{what} is not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    template = ChatTemplate(text, str(path))
    compile_template(template)
    return template


def pick_template(templates: Mapping[str, ChatTemplate], tools: list[dict] | None,
                  where: str) -> ChatTemplate | None:
    """The template a call uses, chosen as transformers chooses: 'tool_use' when tools are given (even an
    empty list) and it exists, else 'default'; None when the model has no template."""
    if not templates:
        return None
    if tools is not None and "tool_use" in templates:
        return templates["tool_use"]
    if "default" in templates:
        return templates["default"]
    raise ChatTemplateError(f"{where} has several chat templates ({', '.join(sorted(templates))}) and none named "
                            "'default'; name one of them 'default'")


def load_chat_templates(model_dir: Path, config_value: Any, config_path: Path) -> dict[str, ChatTemplate]:
    """The named templates of a model directory. Template files (chat_template.jinja for 'default',
    additional_chat_templates/<name>.jinja, as transformers 5 saves them) take priority over tokenizer_config.json's
    "chat_template" (a string, or a list of {"name", "template"})."""
    files: dict[str, ChatTemplate] = {}
    if has_entry(model_dir, "chat_template.jinja"):
        files["default"] = _read_template(model_dir, "chat_template.jinja")
    for name in files_in(model_dir, "additional_chat_templates", "*.jinja"):
        files[name.name.removesuffix(".jinja")] = _read_template(model_dir, name)
    if files:
        return files
    return _config_templates(config_value, config_path)


def special_token_variables(config: Mapping[str, Any]) -> dict[str, str]:
    """The special tokens a template sees by name (transformers' special_tokens_map): the named ones set in
    tokenizer_config.json, plus model-specific ones given as a dict in extra_special_tokens."""
    extra = config.get("extra_special_tokens", config.get("additional_special_tokens"))
    named = {name: config.get(name) for name in NAMED_SPECIAL_TOKENS}
    if isinstance(extra, Mapping):
        named.update(extra)
    out: dict[str, str] = {}
    for name, value in named.items():
        text = value.get("content") if isinstance(value, Mapping) else value
        if isinstance(text, str):
            out[name] = text
    return out


def strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


class TemplateRefusal(jinja2.TemplateError):
    """What `raise_exception(message)` raises: the template refuses the conversation."""


def raise_exception(message: str) -> None:
    raise TemplateRefusal(message)


class LimitedDict:
    """The template's `dict`: a call and `fromkeys`, nothing else to reach through."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any) -> dict:
        return dict.fromkeys(*args)


class GuardedNamespace(jinja2.utils.Namespace):
    """Jinja's namespace, refusing attribute names that start with an underscore."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # no named `self`: namespace(self=1) is an attribute
        self, rest = args[0], args[1:]
        attributes = dict(*rest, **kwargs)
        for name in attributes:
            GuardedNamespace.check(name)
        jinja2.utils.Namespace.__init__(self, attributes)

    def __setitem__(self, name: str, value: Any) -> None:
        GuardedNamespace.check(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def check(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"a chat template may not set the underscore attribute {name!r}")


class GenerationTag(Extension):
    """`{% generation %}...{% endgeneration %}` marks the assistant's text for masks; rendering keeps its body."""

    tags = {"generation"}

    def parse(self, parser: Any) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


@lru_cache(maxsize=1)
def template_environment() -> BoundedSandbox:
    env = BoundedSandbox(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, loopcontrols])
    env.globals.update(raise_exception=raise_exception, strftime_now=strftime_now, dict=LimitedDict(),
                       namespace=GuardedNamespace)
    return env


@lru_cache(maxsize=64)
def _compile(text: str) -> jinja2.Template:
    return template_environment().from_bounded_source(text)


def _prepare_messages(messages: Any) -> list[dict]:
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ChatTemplateError("the conversation is empty; give at least one message")
    prepared = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ChatTemplateError(f"messages[{index}] must be an object with 'role' and 'content', "
                                    f"got {type(message).__name__}")
        plain = _plain({key: value for key, value in message.items() if value is not None})
        prepared.append(_alias_reasoning(plain))
    return prepared


def _alias_reasoning(message: dict) -> dict:
    """Reasoning given under any of its names is also readable as `reasoning_content` and `thinking`."""
    reasoning = next((message[key] for key in REASONING_FIELDS if message.get(key) is not None), None)
    if reasoning is None:
        return message
    return {"thinking": reasoning, **message, "reasoning_content": reasoning}  # key order as transformers has it


def _prepare_list(items: Any, what: str) -> list | None:
    if items is None:
        return None
    if not isinstance(items, (list, tuple)):
        raise ChatTemplateError(f"{what} must be a list of objects, got {type(items).__name__}")
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise ChatTemplateError(f"{what}[{index}] must be an object, got {type(item).__name__}")
    return _plain(items)


def _plain(value: Any) -> Any:
    """A copy built only from JSON types (exact str/int/float/bool, dict, list, tuple); anything else becomes
    the inert placeholder '<TypeName>', so a template cannot reach methods of rich objects."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):  # subclasses (enums) lose their extra methods
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_plain(item) for item in value)
    return f"<{type(value).__name__}>"


def _render_error(source: str, exc: Exception) -> ChatTemplateError:
    line = _template_line(exc)
    at = f" (line {line})" if line is not None else ""
    if isinstance(exc, TemplateRefusal):
        return ChatTemplateError(f"the chat template in {source} refused the conversation{at}: {_one_line(exc)}")
    if isinstance(exc, TemplateLimitExceeded):
        return ChatTemplateError(f"the chat template in {source} went over a limit{at}: {_one_line(exc)}; the "
                                 "template or the conversation is too big for it")
    return ChatTemplateError(f"the chat template in {source} failed{at}: {type(exc).__name__}: {_one_line(exc)}; "
                             "fix the template or the conversation")


def _template_line(exc: Exception) -> int | None:
    """The template line the error came from (Jinja rewrites tracebacks to point into '<template>')."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _read_template(model_dir: Path, name: Path | str) -> ChatTemplate:
    """A template file, read through the model directory's jail (model_files.py)."""
    return ChatTemplate(read_text(model_dir, name, MAX_TEMPLATE_BYTES), str(model_dir / name))


def _config_templates(value: Any, path: Path) -> dict[str, ChatTemplate]:
    if value is None:
        return {}
    if isinstance(value, str):
        return {"default": ChatTemplate(value, f"{path} (chat_template)")}
    entries = value.items() if isinstance(value, Mapping) else None
    if isinstance(value, list) and all(isinstance(d, Mapping) for d in value):
        entries = [(d.get("name"), d.get("template")) for d in value]
    if entries is None or not all(isinstance(n, str) and isinstance(t, str) for n, t in entries):
        raise BringupError(f"{path}: chat_template must be a template string or a list of "
                           '{"name": ..., "template": ...} objects; fix or remove that field')
    return {name: ChatTemplate(text, f"{path} (chat_template '{name}')") for name, text in entries}
