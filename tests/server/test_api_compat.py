"""OpenAI/vLLM API compatibility of a live server: unknown fields ignored (each name logged once), fields the
server does not implement refused by name, vLLM's /tokenize and /detokenize, prompts as token ids, and
/v1/models with max_model_len.

The chat-template half starts one server per template fixture of tests/runner/chat_templates/ on a small
random Llama whose tokenizer carries that template, and compares /tokenize with transformers'
`apply_chat_template(..., tokenize=True)` on the same directory.
"""

from __future__ import annotations

import inspect
import json
import logging
import shutil
import socket
import threading
from pathlib import Path

import httpx
import openai
import pytest

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.serve.app import create_app
from bringup.serve.context import ServerConfig
from bringup.serve.http.runtime import make_server
from bringup.serve.requests.ignored_fields import MAX_NAMES, OTHER, IgnoredFields
from bringup.serve.requests.schemas import CompletionRequest
from tests.runner.hf_fixtures import make_hf_model
from tests.runner.stated import stated
from tests.server.serve_live import API_KEY, LiveServer, start_server, wait_healthy

PROMPT = "The quick brown fox"
TEMPLATES = sorted((Path(__file__).resolve().parents[1] / "runner" / "chat_templates").glob("*.jinja"))
LOGGER = "bringup.serve"


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> LiveServer:
    server = start_server(tmp_path_factory.mktemp("profiles"), api_key=API_KEY, max_model_len=128)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(api_key=API_KEY, base_url=live.base_url, max_retries=0, timeout=60)


def post(live: LiveServer, path: str, body: dict, **kwargs) -> httpx.Response:
    return httpx.post(f"{live.url}{path}", json=body, headers=kwargs.pop("headers", live.headers()), timeout=60,
                      **kwargs)


def greedy(client: openai.OpenAI, live: LiveServer, prompt, **extra) -> list[str]:
    r = client.completions.create(model=live.engine.model_name, prompt=prompt, max_tokens=8, temperature=0,
                                  extra_body={"ignore_eos": True, **extra})
    return [c.text for c in r.choices]


# ---------------------------------------------------------------- unknown and unimplemented fields


def test_an_unknown_field_is_ignored_and_logged_once_by_name(client, live, caplog) -> None:
    name = "vendor_priority_hint"  # unique to this test: the log is once per server
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        plain = greedy(client, live, PROMPT)
        first = greedy(client, live, PROMPT, **{name: {"level": 3}})
        second = greedy(client, live, PROMPT, **{name: "high"})
    assert first == second == plain  # ignored: the answer is the one without it
    lines = [r.getMessage() for r in caplog.records if name in r.getMessage()]
    assert lines == [f"ignoring request field '{name}' (not part of the OpenAI API this server implements)"]
    plan = httpx.get(f"{live.base_url}/plan", headers=live.headers()).json()
    assert plan["ignored_fields"][name] == 2


def test_unknown_fields_inside_messages_are_ignored_too(client, live, caplog) -> None:
    messages = [{"role": "user", "content": "hi"}]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        plain = client.chat.completions.create(model=live.engine.model_name, messages=messages, max_tokens=6,
                                               temperature=0)
        tagged = client.chat.completions.create(
            model=live.engine.model_name, max_tokens=6, temperature=0,
            messages=[{**messages[0], "mood": "curious", "refusal": None}],  # refusal: OpenAI's, at neutral
            stream_options=None, extra_body={"cache_salt": "abc"})
    assert tagged.choices[0].message.content == plain.choices[0].message.content
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "'messages.mood'" in logged and "'cache_salt'" in logged and "refusal" not in logged


@pytest.mark.parametrize("field, value, says", [
    ("tools", [{"type": "function", "function": {"name": "f", "parameters": {}}}], "no tool calling"),
    ("tool_choice", "required", "no tool calling"),
    ("response_format", {"type": "json_object"}, "no structured output"),
    ("guided_json", {"type": "object"}, "no structured output"),
    ("chat_template", "{{ messages }}", "the model's own chat template is always used"),
])
def test_an_unimplemented_openai_field_is_refused_by_name(client, live, field, value, says) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model=live.engine.model_name, messages=[{"role": "user", "content": "x"}],
                                       max_tokens=2, extra_body={field: value})
    error = err.value.body
    assert error["param"] == field
    assert error["message"].startswith(f"{field}: not supported by this server ({says})")


def test_tools_through_the_client_is_refused_naming_tools(client, live) -> None:
    tool = {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model=live.engine.model_name, messages=[{"role": "user", "content": "x"}],
                                       tools=[tool], max_tokens=2)
    assert err.value.body["param"] == "tools" and "tools" in err.value.body["message"]


def test_neutral_values_of_unimplemented_fields_are_accepted(client, live) -> None:
    r = client.chat.completions.create(model=live.engine.model_name, messages=[{"role": "user", "content": "x"}],
                                       max_tokens=2, tool_choice="none", response_format={"type": "text"},
                                       presence_penalty=0, extra_body={"tools": [], "store": False})
    assert r.choices[0].finish_reason in ("stop", "length")


def test_known_fields_stay_strictly_typed(live) -> None:
    r = post(live, "/v1/completions", {"model": live.engine.model_name, "prompt": "x", "max_tokens": "3"})
    assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens"


def test_the_table_of_ignored_names_is_bounded_and_names_cannot_forge_log_lines(caplog) -> None:
    table = IgnoredFields()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for i in range(MAX_NAMES + 44):
            table.note(CompletionRequest.model_validate({"model": "m", "prompt": "x", f"f{i}": 1}))
        table.note(CompletionRequest.model_validate({"model": "m", "prompt": "x", "f0": 1, "f1": 2}))
    assert len(table.counts) == MAX_NAMES + 1 and table.counts[OTHER] == 44
    assert table.counts["f0"] == 2 and table.counts["f1"] == 2
    assert len(caplog.records) == MAX_NAMES + 1  # one line per name, one for the overflow
    forged = IgnoredFields()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        forged.note(CompletionRequest.model_validate({"model": "m", "prompt": "x", "a\nERROR forged": 1}))
    assert "\n" not in caplog.records[-1].getMessage()


def test_the_runner_tokenizers_offer_what_the_server_asks(tmp_path) -> None:
    from bringup.runner.text.tokenizer import ByteTokenizer, HFTokenizer
    from bringup.serve.protocol import Tokenizer

    for cls in (ByteTokenizer, HFTokenizer):
        for name in ("encode", "decode", "apply_chat_template", "encode_chat"):
            wanted = inspect.signature(getattr(Tokenizer, name)).parameters
            given = inspect.signature(getattr(cls, name)).parameters
            assert list(wanted) == list(given)[:len(wanted)], (cls.__name__, name)


# ---------------------------------------------------------------- prompts as token ids, /v1/models


def test_prompt_as_token_ids_gives_the_text_prompts_completion(client, live) -> None:
    ids = post(live, "/tokenize", {"prompt": PROMPT}).json()["tokens"]
    other = "Hello there"
    other_ids = live.engine.tokenizer.encode(other, add_special_tokens=True)
    assert greedy(client, live, ids) == greedy(client, live, PROMPT)
    assert greedy(client, live, [ids, other_ids]) == greedy(client, live, [PROMPT, other])


def test_a_token_id_outside_the_vocabulary_is_refused_naming_the_rule(live) -> None:
    vocab = live.engine.vocab_size
    r = post(live, "/v1/completions", {"model": live.engine.model_name, "prompt": [5, vocab], "max_tokens": 2})
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith(
        f"prompt.1: token id {vocab} is outside this model's vocabulary [0, {vocab})")


def test_models_report_max_model_len(client, live) -> None:
    card = client.models.list().data[0]
    assert card.id == live.engine.model_name
    assert card.max_model_len == live.engine.max_model_len == 128


# ---------------------------------------------------------------- /tokenize, /detokenize


def test_tokenize_a_prompt(live) -> None:
    tok = live.engine.tokenizer
    body = post(live, "/tokenize", {"model": live.engine.model_name, "prompt": PROMPT}).json()
    assert body["tokens"] == tok.encode(PROMPT, add_special_tokens=True)
    assert body["count"] == len(body["tokens"]) and body["max_model_len"] == 128
    assert body["token_strs"] is None
    plain = post(live, "/tokenize", {"prompt": PROMPT, "add_special_tokens": False,
                                     "return_token_strs": True}).json()
    assert plain["tokens"] == tok.encode(PROMPT, add_special_tokens=False)
    assert "".join(plain["token_strs"]) == PROMPT


def test_tokenize_counts_past_the_context(live) -> None:
    body = post(live, "/tokenize", {"prompt": "z" * 500}).json()
    assert body["count"] > body["max_model_len"]


def test_tokenize_messages_is_the_chat_endpoints_prompt(client, live) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Héllo <b>"}]
    body = post(live, "/tokenize", {"messages": messages}).json()
    assert body["tokens"] == live.engine.tokenizer.encode_chat(messages)
    chat = client.chat.completions.create(model=live.engine.model_name, messages=messages, max_tokens=2)
    assert body["count"] == chat.usage.prompt_tokens
    no_prompt = post(live, "/tokenize", {"messages": messages, "add_generation_prompt": False}).json()
    assert no_prompt["tokens"] == live.engine.tokenizer.encode_chat(messages, add_generation_prompt=False)
    assert no_prompt["count"] < body["count"]
    bos = post(live, "/tokenize", {"messages": messages, "add_special_tokens": True}).json()
    assert bos["tokens"] == [live.engine.tokenizer.bos_token_id, *body["tokens"]]


@pytest.mark.parametrize("body, status, fragment", [
    ({"prompt": "x", "messages": [{"role": "user", "content": "x"}]}, 400, "give prompt or messages, not both"),
    ({}, 400, "give prompt (a text) or messages (a conversation)"),
    ({"prompt": 5}, 400, "prompt: Input should be a valid string"),
    ({"prompt": "x", "model": "other"}, 404, "the model `other` does not exist"),
    ({"messages": [{"role": "user", "content": "x"}], "continue_final_message": True}, 400,
     "continue_final_message: not supported by this server"),
    ({"messages": [{"role": "user", "content": "z" * 600_000}] * 2}, 400,
     "messages hold 1200000 characters (with documents, tools and template arguments); the limit for /tokenize is"),
])
def test_tokenize_refusals(live, body, status, fragment) -> None:
    r = post(live, "/tokenize", body)
    assert r.status_code == status and fragment in r.json()["error"]["message"], r.text


def test_detokenize_round_trip(live) -> None:
    ids = post(live, "/tokenize", {"prompt": PROMPT, "add_special_tokens": False}).json()["tokens"]
    assert post(live, "/detokenize", {"model": live.engine.model_name, "tokens": ids}).json() == {"prompt": PROMPT}
    with_bos = post(live, "/tokenize", {"prompt": PROMPT}).json()["tokens"]
    assert post(live, "/detokenize", {"tokens": with_bos}).json()["prompt"] == "<|bos|>" + PROMPT  # as vLLM: shown
    assert post(live, "/detokenize", {"tokens": []}).json() == {"prompt": ""}
    bad = post(live, "/detokenize", {"tokens": [5, 10**6]})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith(
        "tokens.1: token id 1000000 is outside this model's vocabulary")


def test_tokenize_needs_the_api_key_like_v1(live) -> None:
    for path, body in (("/tokenize", {"prompt": "x"}), ("/detokenize", {"tokens": [5]})):
        assert post(live, path, body, headers={}).status_code == 401
        assert post(live, path, body, headers={"Authorization": "Bearer wrong"}).status_code == 401


# ---------------------------------------------------------------- every template fixture vs transformers

CONVERSATION = [{"role": "user", "content": "Héllo <b>wörld</b> — 你好"},
                {"role": "assistant", "content": "Hi there!"},
                {"role": "user", "content": "What is 2+2?"}]
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city, °C",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
DOCUMENTS = [{"title": "Tides", "text": "High tide at 06:12 — low at 12:30."}]
KWARGS = {"date_string": "26 Jul 2024"}  # fixes the date of templates that call strftime_now
CASES = {
    "conversation": {},
    "no generation prompt": {"add_generation_prompt": False},
    "system": {"messages": [{"role": "system", "content": "Be brief."}, *CONVERSATION]},
    "tools": {"tools": TOOLS},
    "documents": {"documents": DOCUMENTS},
    "a custom role": {"messages": [*CONVERSATION, {"role": "stop", "content": "Stop here."}]},  # as vLLM passes it
}


@pytest.fixture(scope="module")
def base_model(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("llama")
    make_hf_model(path, vocab=320)
    return path


def served_with_template(base: Path, template: Path, workdir: Path) -> LiveServer:
    model_dir = workdir / template.stem
    shutil.copytree(base, model_dir)
    (model_dir / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "chat_template": template.read_text()}))
    engine = LLMEngine.create(EngineOptions(model_dir=model_dir, profile_path=workdir / "absent.yaml",
                                            device="cpu", measurements=stated()))
    app = create_app(engine, ServerConfig())
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    server = make_server(app.state.ctx, app, "127.0.0.1", listener.getsockname()[1])
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, name="uvicorn", daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    wait_healthy(url)
    return LiveServer(url=url, engine=engine, server=server, thread=thread, api_key=None)


def transformers_ids(model_dir: Path, case: dict) -> list[int] | Exception:
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(model_dir))
    messages = case.get("messages", CONVERSATION)
    try:
        out = tok.apply_chat_template(messages, tools=case.get("tools"), documents=case.get("documents"),
                                      add_generation_prompt=case.get("add_generation_prompt", True),
                                      tokenize=True, **KWARGS)
    except Exception as exc:  # the template refused the conversation (raise_exception)
        return exc
    return list(out["input_ids"] if hasattr(out, "keys") else out)


@pytest.mark.skipif(not TEMPLATES, reason="no template fixtures in tests/runner/chat_templates")
@pytest.mark.parametrize("template", TEMPLATES, ids=[t.stem for t in TEMPLATES])
def test_tokenize_of_a_conversation_equals_transformers(base_model, template, tmp_path) -> None:
    server = served_with_template(base_model, template, tmp_path)
    try:
        compared = 0
        for name, case in CASES.items():
            expected = transformers_ids(tmp_path / template.stem, case)
            body = {"messages": case.get("messages", CONVERSATION), "chat_template_kwargs": KWARGS,
                    **{k: v for k, v in case.items() if k != "messages"}}
            r = post(server, "/tokenize", body)
            if isinstance(expected, Exception):
                assert r.status_code == 400, (name, r.text)
                assert "chat template" in r.json()["error"]["message"]
                continue
            assert r.status_code == 200, (name, r.text)
            assert r.json()["tokens"] == expected, name
            compared += 1
        assert compared >= 3  # most cases render on every fixture
    finally:
        server.stop()
