"""Chat templates render, and encode_chat tokenizes, exactly as transformers' apply_chat_template does.

Each fixture under chat_templates/ is written in the style of a real family's template; each runs against a real
tokenizer directory (tiny BPE + the family's special tokens) through both bringup's HFTokenizer and transformers'
AutoTokenizer, over conversations with a system turn, several turns, non-ASCII and markup, tools, documents and
reasoning, with add_generation_prompt both ways. Conversations a template refuses must be refused by both.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import jinja2
import pytest

from bringup.errors import BringupError, StrictFallbackError
from bringup.fallbacks import FallbackRecorder
from bringup.runner.text import chat_template as ours
from bringup.runner.text.chat_template import ChatTemplate, ChatTemplateError, render_chat
from bringup.runner.text.tokenizer import ByteTokenizer, HFTokenizer
from tests.runner.hf_fixtures import save_tokenizer

TEMPLATES = Path(__file__).parent / "chat_templates"


@dataclass(frozen=True)
class Family:
    bos: str | None
    eos: str
    specials: tuple[str, ...]
    added: tuple[str, ...] = ()  # added tokens that are not special (Qwen's <think>, <tool_call>)


FAMILIES = {
    "llama3": Family("<|begin_of_text|>", "<|eot_id|>",
                     ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")),
    "qwen3": Family(None, "<|im_end|>", ("<|im_start|>", "<|im_end|>"),
                    ("<think>", "</think>", "<tool_call>", "</tool_call>")),
    "mistral": Family("<s>", "</s>", ("[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_CALLS]",
                                      "[TOOL_RESULTS]", "[/TOOL_RESULTS]")),
    "gemma": Family("<bos>", "<eos>", ("<bos>", "<eos>", "<start_of_turn>", "<end_of_turn>")),
    "phi3": Family("<s>", "<|endoftext|>", ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|endoftext|>",
                                            "<|tool|>", "<|/tool|>", "<|tool_response|>")),
    "command_r": Family("<BOS_TOKEN>", "<|END_OF_TURN_TOKEN|>",
                        ("<BOS_TOKEN>", "<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|SYSTEM_TOKEN|>",
                         "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>")),
}

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Wetter für eine Stadt <heute>",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "Stadt, z. B. Zürich"}},
                   "required": ["city"]}}}]
DOCUMENTS = [{"title": "Zürich <Wetter>", "text": "Heute 21°C & sonnig."}, {"title": "東京", "text": "晴れ"}]
NON_ASCII = "héllo <b>wörld</b> — 日本語 ✓ \"quoted\" & 'single'"

CONVERSATIONS: dict[str, dict] = {
    "user_only": {"messages": [{"role": "user", "content": "Hello! Say hi."}]},
    "system_user": {"messages": [{"role": "system", "content": "You are terse."},
                                 {"role": "user", "content": "Hello! Say hi."}]},
    "multi_turn": {"messages": [{"role": "system", "content": "You are terse."},
                                {"role": "user", "content": "Hello!"},
                                {"role": "assistant", "content": "Hi."},
                                {"role": "user", "content": "And again?"}]},
    "non_ascii_markup": {"messages": [{"role": "user", "content": NON_ASCII},
                                      {"role": "assistant", "content": "Grüße <i>zurück</i>"},
                                      {"role": "user", "content": "ok </b>"}]},
    "tools": {"tools": TOOLS, "messages": [
        {"role": "system", "content": "You call tools."},
        {"role": "user", "content": "Wie ist das Wetter in Zürich?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call12345", "type": "function",
             "function": {"name": "get_weather", "arguments": {"city": "Zürich"}}}]},
        {"role": "tool", "tool_call_id": "call12345", "content": '{"temp": "21°C"}'},
        {"role": "assistant", "content": "Es sind 21°C in Zürich."},
        {"role": "user", "content": "Und morgen?"}]},
    "documents": {"documents": DOCUMENTS, "messages": [{"role": "user", "content": "Wie ist das Wetter?"}]},
    "documents_fast": {"documents": DOCUMENTS, "template_kwargs": {"citation_mode": "fast"},
                       "messages": [{"role": "user", "content": "Wie ist das Wetter?"}]},
    "reasoning": {"messages": [{"role": "user", "content": "2+2?"},
                               {"role": "assistant", "content": "4", "reasoning": "zwei plus zwei"}]},
    "no_thinking": {"template_kwargs": {"enable_thinking": False},
                    "messages": [{"role": "user", "content": "2+2?"}]},
    "double_user": {"messages": [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]},
}

# (family, conversation) pairs the template refuses with raise_exception; every other pair renders.
REFUSED = {
    ("gemma", "system_user"), ("gemma", "multi_turn"), ("gemma", "tools"), ("gemma", "double_user"),
    ("mistral", "double_user"), ("command_r", "double_user"), ("command_r", "tools"),
}
FROZEN_NOW = datetime(2026, 7, 26, 23, 59, 59)


class FrozenClock(datetime):
    @classmethod
    def now(cls, tz=None):
        return FROZEN_NOW


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    """strftime_now reads the same instant on both sides (no flake at midnight)."""
    from transformers.utils import chat_template_utils

    monkeypatch.setattr(chat_template_utils, "datetime", FrozenClock)
    monkeypatch.setattr(ours, "datetime", FrozenClock)


def write_tokenizer_dir(path: Path, family: Family, chat_template: str | list | None) -> Path:
    """tokenizer.json (tiny BPE + the family's tokens) and tokenizer_config.json with the template."""
    from tokenizers import AddedToken, Tokenizer

    path.mkdir(parents=True, exist_ok=True)
    save_tokenizer(path, 300)
    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in family.specials])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in family.added])
    tok.save(str(path / "tokenizer.json"))
    config = {"eos_token": family.eos, **({"bos_token": family.bos} if family.bos else {})}
    if chat_template is not None:
        config["chat_template"] = chat_template
    (path / "tokenizer_config.json").write_text(json.dumps(config))
    return path


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(bringup HFTokenizer, transformers tokenizer) for a family, built once per module."""
    from transformers import AutoTokenizer

    built: dict[str, tuple] = {}

    def get(name: str):
        if name not in built:
            path = write_tokenizer_dir(tmp_path_factory.mktemp(name), FAMILIES[name],
                                       (TEMPLATES / f"{name}.jinja").read_text())
            built[name] = HFTokenizer.from_dir(path), AutoTokenizer.from_pretrained(path)
        return built[name]

    return get


def call_args(conversation: dict, add_generation_prompt: bool) -> tuple[list, dict, dict]:
    named = {"add_generation_prompt": add_generation_prompt, "tools": conversation.get("tools"),
             "documents": conversation.get("documents")}
    return conversation["messages"], named, conversation.get("template_kwargs", {})


CASES = [(family, name) for family in FAMILIES for name in CONVERSATIONS if (family, name) not in REFUSED]


@pytest.mark.parametrize("add_generation_prompt", [True, False], ids=["gen", "nogen"])
@pytest.mark.parametrize(("family", "conversation"), CASES)
def test_rendered_text_and_ids_equal_transformers(pair, family, conversation, add_generation_prompt):
    tok, hf = pair(family)
    messages, named, kwargs = call_args(CONVERSATIONS[conversation], add_generation_prompt)
    expected_text = hf.apply_chat_template(messages, tokenize=False, **named, **kwargs)
    expected_ids = hf.apply_chat_template(messages, tokenize=True, return_dict=False, **named, **kwargs)
    assert tok.apply_chat_template(messages, **named, template_kwargs=kwargs) == expected_text
    assert tok.encode_chat(messages, **named, template_kwargs=kwargs) == expected_ids
    assert len(expected_ids) > 5 and any(i in tok.special_token_ids for i in expected_ids)


@pytest.mark.parametrize(("family", "conversation"), sorted(REFUSED))
def test_refused_conversations_are_one_line_errors_naming_the_template(pair, family, conversation):
    tok, hf = pair(family)
    messages, named, kwargs = call_args(CONVERSATIONS[conversation], True)
    with pytest.raises(jinja2.TemplateError) as theirs:
        hf.apply_chat_template(messages, tokenize=False, **named, **kwargs)
    with pytest.raises(ChatTemplateError) as mine:
        tok.encode_chat(messages, **named, template_kwargs=kwargs)
    text = str(mine.value)
    assert "\n" not in text and str(theirs.value) in text
    assert "tokenizer_config.json (chat_template)" in text and "refused the conversation (line " in text
    assert isinstance(mine.value, BringupError) and isinstance(mine.value, ValueError)  # serve maps ValueError to 400


def test_tojson_keeps_non_ascii_and_markup_and_break_works(pair):
    tok, _ = pair("qwen3")
    convo = CONVERSATIONS["tools"]
    text = tok.apply_chat_template(convo["messages"], tools=convo["tools"])
    assert '"description": "Wetter für eine Stadt <heute>"' in text and '{"city": "Zürich"}' in text
    assert "\\u" not in text
    convo = CONVERSATIONS["reasoning"]  # `reasoning` aliased to reasoning_content, shown after the last query
    text = tok.apply_chat_template(convo["messages"], add_generation_prompt=False)
    assert "<think>\nzwei plus zwei\n</think>\n\n4" in text


def test_strftime_now_date_and_kwargs_reach_the_template(pair):
    tok, _ = pair("llama3")
    text = tok.apply_chat_template(CONVERSATIONS["user_only"]["messages"])
    assert "Today Date: 26 Jul 2026\n" in text
    given = tok.apply_chat_template(CONVERSATIONS["user_only"]["messages"], template_kwargs={"date_string": "1 Jan"})
    assert "Today Date: 1 Jan\n" in given


def test_chat_template_jinja_written_by_save_pretrained_is_read(tmp_path, pair):
    from transformers import AutoTokenizer

    _, hf = pair("phi3")
    hf.save_pretrained(tmp_path / "saved")
    saved = tmp_path / "saved"
    assert (saved / "chat_template.jinja").is_file()
    assert "chat_template" not in json.loads((saved / "tokenizer_config.json").read_text())
    tok, reloaded = HFTokenizer.from_dir(saved), AutoTokenizer.from_pretrained(saved)
    messages = CONVERSATIONS["multi_turn"]["messages"]
    assert tok.encode_chat(messages) == reloaded.apply_chat_template(messages, add_generation_prompt=True,
                                                                     return_dict=False)
    (saved / "chat_template.jinja").write_text("{{ raise_exception('from the file') }}")
    with pytest.raises(ChatTemplateError, match=r"chat_template\.jinja refused the conversation.*from the file"):
        HFTokenizer.from_dir(saved).apply_chat_template(messages)


def test_named_templates_pick_tool_use_when_tools_are_given(tmp_path):
    from transformers import AutoTokenizer

    family = Family("<s>", "<|im_end|>", FAMILIES["phi3"].specials + FAMILIES["qwen3"].specials)
    named = [{"name": "default", "template": (TEMPLATES / "phi3.jinja").read_text()},
             {"name": "tool_use", "template": (TEMPLATES / "qwen3.jinja").read_text()}]
    path = write_tokenizer_dir(tmp_path / "named", family, named)
    tok, hf = HFTokenizer.from_dir(path), AutoTokenizer.from_pretrained(path)
    convo = CONVERSATIONS["tools"]
    for tools in (None, [], convo["tools"]):
        expected = hf.apply_chat_template(convo["messages"], tools=tools, add_generation_prompt=True, tokenize=False)
        assert tok.apply_chat_template(convo["messages"], tools=tools) == expected
    assert "<|im_start|>" in tok.apply_chat_template(convo["messages"], tools=[])
    assert "<|user|>" in tok.apply_chat_template(convo["messages"])

    hf.save_pretrained(tmp_path / "saved")  # transformers 5: chat_template.jinja + additional_chat_templates/
    assert (tmp_path / "saved" / "additional_chat_templates" / "tool_use.jinja").is_file()
    saved = HFTokenizer.from_dir(tmp_path / "saved")
    assert saved.encode_chat(convo["messages"], tools=convo["tools"]) == tok.encode_chat(convo["messages"],
                                                                                          tools=convo["tools"])


def test_several_templates_and_no_default_is_an_error_as_in_transformers(tmp_path):
    from transformers import AutoTokenizer

    path = write_tokenizer_dir(tmp_path / "nodefault", FAMILIES["qwen3"],
                               [{"name": "rag", "template": "a"}, {"name": "tool_use", "template": "b"}])
    messages = CONVERSATIONS["user_only"]["messages"]
    with pytest.raises(ValueError, match="no default"):
        AutoTokenizer.from_pretrained(path).apply_chat_template(messages, tokenize=False)
    with pytest.raises(ChatTemplateError, match=r"several chat templates \(rag, tool_use\) and none named 'default'"):
        HFTokenizer.from_dir(path).apply_chat_template(messages)
    assert HFTokenizer.from_dir(path).apply_chat_template(messages, tools=[]) == "b"


ENVIRONMENT_SNIPPETS = {
    "loop_controls": "{% for m in messages %}{% if loop.index0 == 1 %}{% continue %}{% endif %}"
                     "{% if loop.index0 == 3 %}{% break %}{% endif %}[{{ m.content }}]{% endfor %}",
    "tojson_arguments": "{{ messages[0] | tojson(indent=2, sort_keys=true) }}"
                        "|{{ messages | tojson(ensure_ascii=true) }}"
                        "|{{ {'b': '<i>', 'a': 1} | tojson(separators=(',', ':')) }}",
    "dict_and_namespace": "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}"
                          "{{ ns.n }} {{ dict(a=1, b=messages[0].role) }} {{ dict.fromkeys(['x', 'y']) }}",
    "generation_tag": "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}"
                      "{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}",
    "undefined_prints_empty": "{{ nothing }}[{{ messages[0].missing }}]{{ tools is none }}{{ documents is none }}",
    "whitespace_control": "{% for m in messages %}\n    {% if m %}\n{{ m.role }}\n    {% endif %}\n{% endfor %}\n",
    "special_tokens_and_kwargs": "{{ bos_token }}{{ eos_token }}{{ pad_token is defined }}{{ extra }}",
}


@pytest.mark.parametrize("name", sorted(ENVIRONMENT_SNIPPETS))
def test_template_environment_matches_transformers(pair, name):
    tok, hf = pair("phi3")
    snippet = ENVIRONMENT_SNIPPETS[name]
    messages = [{"role": "user", "content": NON_ASCII}, {"role": "assistant", "content": "b"},
                {"role": "user", "content": "c"}, {"role": "assistant", "content": "d"}]
    expected = hf.apply_chat_template(messages, chat_template=snippet, tokenize=False, extra="x")
    mine = render_chat(ChatTemplate(snippet, "snippet"), messages, add_generation_prompt=False,
                       variables={**tok.template_variables, "extra": "x"})
    assert mine == expected


@pytest.mark.parametrize(("snippet", "theirs", "fragment"), [
    ("{{ namespace(_secret=1) }}", jinja2.exceptions.SecurityError, "failed (line 1): SecurityError"),
    ("line one\n{{ messages[0].content.nope.deeper }}", jinja2.exceptions.UndefinedError,
     "failed (line 2): UndefinedError"),
    ("{{ messages[0].content.__class__ }}", None, None),
    ("{% for m in messages %}", jinja2.exceptions.TemplateSyntaxError, "does not compile (line 1"),
])
def test_template_faults_are_one_line_errors(pair, snippet, theirs, fragment):
    _, hf = pair("phi3")
    messages = [{"role": "user", "content": "hi"}]
    if theirs is None:  # the sandbox hides dunder attributes: both print nothing
        expected = hf.apply_chat_template(messages, chat_template=snippet, tokenize=False)
        assert render_chat(ChatTemplate(snippet, "s"), messages) == expected == ""
        return
    with pytest.raises(theirs):
        hf.apply_chat_template(messages, chat_template=snippet, tokenize=False)
    with pytest.raises(ChatTemplateError) as mine:
        render_chat(ChatTemplate(snippet, "my.jinja"), messages)
    assert "\n" not in str(mine.value) and "the chat template in my.jinja" in str(mine.value)
    assert fragment in str(mine.value)


def test_inputs_are_checked_and_keys_with_none_dropped():
    template = ChatTemplate("{% for m in messages %}{{ m | tojson }}{% endfor %}", "t")
    assert render_chat(template, [{"role": "user", "content": "x", "name": None}]) == '{"role": "user", "content": "x"}'
    with pytest.raises(ChatTemplateError, match="conversation is empty"):
        render_chat(template, [])
    with pytest.raises(ChatTemplateError, match=r"messages\[1\] must be an object"):
        render_chat(template, [{"role": "user", "content": "x"}, "hello"])
    with pytest.raises(ChatTemplateError, match=r"documents\[0\] must be an object"):
        render_chat(template, [{"role": "user", "content": "x"}], documents=["text"])
    with pytest.raises(ChatTemplateError, match="clash with the chat's own inputs"):
        render_chat(template, [{"role": "user", "content": "x"}], variables={"messages": []})


def test_byte_tokenizer_speaks_the_same_api():
    tok = ByteTokenizer()
    messages = [{"role": "user", "content": "héllo"}]
    assert tok.apply_chat_template(messages) == "<|bos|><|user|>héllo\n<|assistant|>"
    assert tok.apply_chat_template(messages, add_generation_prompt=False) == "<|bos|><|user|>héllo\n"
    ids = tok.encode_chat(messages)
    assert ids[0] == tok.bos_token_id and ids == tok.encode(tok.apply_chat_template(messages))
    assert tok.decode(ids, skip_special_tokens=False) == "<|bos|><|user|>héllo\n<|assistant|>"


def test_missing_template_falls_back_with_one_warning(tmp_path, caplog):
    path = write_tokenizer_dir(tmp_path / "none", FAMILIES["phi3"], None)
    tok = HFTokenizer.from_dir(path)
    messages = [{"role": "user", "content": "hi"}]
    with caplog.at_level("WARNING"):
        assert tok.apply_chat_template(messages) == "user: hi\nassistant:"
        tok.apply_chat_template(messages)
    assert sum("has no chat template" in r.message for r in caplog.records) == 1


def test_missing_template_is_a_counted_fallback_and_refused_under_strict(tmp_path):
    path = write_tokenizer_dir(tmp_path / "none", FAMILIES["phi3"], None)
    messages = [{"role": "user", "content": "hi"}]
    tok = HFTokenizer.from_dir(path)
    tok.fallbacks = FallbackRecorder()
    tok.apply_chat_template(messages)
    tok.encode_chat(messages)
    (event,) = tok.fallbacks.events
    assert (event.level, event.what, event.instead) == ("op", "chat template", "a plain 'role: content' template")
    strict = HFTokenizer.from_dir(path)
    strict.fallbacks = FallbackRecorder(strict=True)
    with pytest.raises(StrictFallbackError, match="chat template"):
        strict.apply_chat_template(messages)


def test_bad_template_config_is_one_line(tmp_path):
    path = write_tokenizer_dir(tmp_path / "bad", FAMILIES["phi3"], [{"name": "default"}])
    with pytest.raises(BringupError, match=r"chat_template must be a template string or a list"):
        HFTokenizer.from_dir(path)
