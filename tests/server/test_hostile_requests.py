"""A corpus of hostile and malformed requests, as data: each gets one clear answer (status and a message that
names the field and the rule), never a 5xx, a hang or a dropped connection; afterwards the server still serves.

Every case goes over its own raw socket, so bodies, headers and transfer encodings are sent exactly as written.
Bigger bodies (a 48 MB token list, an 80 MiB chunked upload) are in test_body_limits.py, with memory checks.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from tests.server import raw_http
from tests.server.serve_live import LiveServer, start_server

MODEL = "hostile-corpus"
KEY = "corpus-key"
MAX_MODEL_LEN = 64
BODY_LIMIT = 1024 * 1024
VALUES_LIMIT = 64 * MAX_MODEL_LEN + 65_536  # what the server allows in a body: see ServerContext.body_limits


@dataclass(frozen=True)
class Chunked:
    """A body sent with Transfer-Encoding: chunked, in pieces of `piece` bytes."""

    data: bytes
    piece: int = 64 * 1024


@dataclass(frozen=True)
class Case:
    name: str
    method: str
    path: str
    body: Any  # dict / list / str: JSON-encoded; bytes: sent as is; Chunked: sent chunked; None: no body
    status: int
    fragment: str  # expected in error.message (case-sensitive)
    headers: dict[str, str] = field(default_factory=dict)
    key: str | None = KEY  # the bearer token sent; None: no Authorization header


def cmpl(**fields: Any) -> dict:
    return {"model": MODEL, "prompt": "x", "max_tokens": 2, **fields}


def chat(**fields: Any) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": "x"}], "max_tokens": 2, **fields}


def nested(levels: int) -> Any:
    """A JSON value nested `levels` deep (lists and objects in turn)."""
    value: Any = 1
    for level in range(levels):
        value = [value] if level % 2 else {"k": value}
    return value


def text_part(kind: str) -> dict:
    return {"type": kind, "text": "x"}


C, CH = "/v1/completions", "/v1/chat/completions"

CORPUS: list[Case] = [
    # ---- bytes that are not a usable JSON object
    Case("malformed json", "POST", C, b'{"model": "hostile-corpus", "prompt": }', 400,
         "request body is not valid JSON: Expecting value at offset 38"),
    Case("truncated json", "POST", C, b'{"model": "hostile-corpus", "prom', 400, "request body is not valid JSON"),
    Case("empty body", "POST", C, b"", 400, "request body is missing"),
    Case("json array body", "POST", C, [1, 2], 400, "request body must be a JSON object"),
    Case("json string body", "POST", C, "hello", 400, "request body must be a JSON object"),
    Case("invalid utf-8", "POST", C, b'{"model": "hostile-corpus", "prompt": "\xff\xfe"}', 400,
         "request body is not valid JSON: 'utf-8' codec can't decode"),
    Case("utf-16 body", "POST", C, json.dumps(cmpl()).encode("utf-16"), 400, "JSON requests must be UTF-8"),
    Case("nesting too deep", "POST", C, b"[" * 100_000 + b"]" * 100_000, 400, "maximum recursion depth"),
    Case("nesting one level over the limit", "POST", C, b"[" * 65 + b"]" * 65, 400,
         "request body nests JSON deeper than 64 levels"),
    Case("nesting at the limit parses", "POST", C, b"[" * 64 + b"]" * 64, 400, "request body must be a JSON object"),
    Case("brackets inside strings are not nesting", "POST", C, cmpl(prompt="[{" * 200), 400,
         "this model's maximum context length is 64 tokens"),
    Case("chat_template_kwargs nested 900 deep", "POST", CH, chat(chat_template_kwargs={"x": nested(900)}), 400,
         "deeper than 64 levels"),
    Case("documents nested 500 deep", "POST", CH, chat(documents=[{"x": nested(500)}]), 400,
         "deeper than 64 levels"),
    Case("tools nested 700 deep on /tokenize", "POST", "/tokenize",
         {"messages": [{"role": "user", "content": "x"}], "tools": [{"x": nested(700)}]}, 400,
         "deeper than 64 levels"),
    Case("nesting split across chunks", "POST", C, Chunked(b'{"a": ' + b"[" * 70 + b"]" * 70 + b"}", piece=3),
         400, "deeper than 64 levels"),
    Case("NaN literal", "POST", C, b'{"model": "hostile-corpus", "prompt": "x", "temperature": NaN}', 400,
         "temperature: Input should be a finite number"),
    Case("Infinity literal", "POST", C, b'{"model": "hostile-corpus", "prompt": "x", "top_p": -Infinity}', 400,
         "top_p: Input should be a finite number"),
    Case("form content-type is still json", "POST", C, cmpl(), 200, "",
         headers={"Content-Type": "application/x-www-form-urlencoded"}),
    # ---- size and count limits, counted as the bytes arrive
    Case("declared content-length over the limit", "POST", C, None, 413, "is over the limit of 1 MiB",
         headers={"Content-Length": str(BODY_LIMIT + 1)}),
    Case("chunked body over the limit", "POST", C, Chunked(b'{"prompt": "' + b"a" * (2 * BODY_LIMIT) + b'"}'),
         413, "stopped reading it at"),
    Case("chunked body within the limit", "POST", C, Chunked(json.dumps(cmpl()).encode(), piece=7), 200, ""),
    Case("token list over the value count", "POST", C, cmpl(prompt=[1] * (VALUES_LIMIT + 10)), 413,
         f"request body holds more than {VALUES_LIMIT} JSON values"),
    Case("too many strings", "POST", C, b'{"logit_bias": {' + b'"a": "b", ' * 66_000 + b'"a": "b"}}', 413,
         "request body holds more than 131072 JSON strings"),  # 2 strings a comma: the value count stays low
    # ---- authentication, routing, model
    Case("missing api key", "POST", C, cmpl(), 401, "missing API key", key=None),
    Case("wrong api key", "POST", C, cmpl(), 401, "wrong API key", key="not-the-key"),
    Case("health needs no key", "GET", "/health", None, 200, "", key=None),
    Case("two authorization headers on /v1", "POST", C, cmpl(), 401, "2 Authorization headers: send exactly one",
         headers={"authorization": f"Bearer {KEY}"}),
    Case("two authorization headers, the second right", "POST", CH, chat(), 401, "2 Authorization headers",
         key="wrong", headers={"authorization": f"Bearer {KEY}"}),
    Case("two authorization headers on /tokenize", "POST", "/tokenize", {"prompt": "x"}, 401,
         "2 Authorization headers", headers={"authorization": f"Bearer {KEY}"}),
    Case("two authorization headers on /detokenize", "POST", "/detokenize", {"tokens": [1]}, 401,
         "2 Authorization headers", key="wrong", headers={"authorization": f"Bearer {KEY}"}),
    Case("tokenize without the key is refused before its 60 MB body", "POST", "/tokenize", None, 401,
         "missing API key", key=None, headers={"Content-Length": str(60 * 1024 * 1024)}),
    Case("detokenize with a wrong key", "POST", "/detokenize", {"tokens": [1]}, 401, "wrong API key", key="nope"),
    Case("unknown path", "GET", "/v1/nothing-here", None, 404, "Not Found"),
    Case("wrong method", "GET", C, None, 405, "Method Not Allowed"),
    Case("unknown model", "POST", C, cmpl(model="gpt-4"), 404, "the model `gpt-4` does not exist"),
    Case("empty model name", "POST", C, cmpl(model=""), 400, "model: String should have at least 1 character"),
    Case("missing model", "POST", C, {"prompt": "x"}, 400, "model: Field required"),
    # ---- prompt: counts, emptiness, token ids, shapes
    Case("missing prompt", "POST", C, {"model": MODEL}, 400, "prompt: Field required"),
    Case("65 prompts", "POST", C, cmpl(prompt=["x"] * 65), 400,
         "prompt: 65 prompts are over the limit of 64 per request"),
    Case("65 token-id prompts", "POST", C, cmpl(prompt=[[1]] * 65), 400, "prompt: 65 prompts are over the limit"),
    Case("prompts times n", "POST", C, cmpl(prompt=["x"] * 40, n=2), 400,
         "n: 40 prompts × n=2 make 80 sequences, over the limit of 64"),
    Case("empty prompt list", "POST", C, cmpl(prompt=[]), 400, "prompt: is an empty list"),
    Case("empty token-id prompt", "POST", C, cmpl(prompt=[[]]), 400, "prompt.0: is an empty list of token ids"),
    Case("second token-id prompt empty", "POST", C, cmpl(prompt=[[1], []]), 400,
         "prompt.1: is an empty list of token ids"),
    Case("negative token id", "POST", C, cmpl(prompt=[5, -1]), 400, "prompt.1: token id -1 is outside [0, "),
    Case("token id past the vocabulary", "POST", C, cmpl(prompt=[5, 6, 1_000_000]), 400,
         "prompt.2: token id 1000000 is outside this model's vocabulary [0, "),
    Case("token id past the vocabulary, nested", "POST", C, cmpl(prompt=[[5], [6, 99_999]]), 400,
         "prompt.1.1: token id 99999 is outside this model's vocabulary"),
    Case("fractional token id", "POST", C, cmpl(prompt=[1.5]), 400, "prompt.0: a token id must be an integer"),
    Case("boolean token id", "POST", C, cmpl(prompt=[1, True]), 400, "prompt.1: a token id must be an integer"),
    Case("texts and ids mixed", "POST", C, cmpl(prompt=["x", 1]), 400, "prompt.1: must be a text like the first"),
    Case("prompt is an object", "POST", C, cmpl(prompt={"text": "x"}), 400,
         "prompt: must be a text, a list of texts, a list of token ids or a list of token-id lists; got an object"),
    Case("prompt is null", "POST", C, cmpl(prompt=None), 400, "prompt: must be a text"),
    Case("prompt longer than the context", "POST", C, cmpl(prompt=list(range(1, 100))), 400,
         f"this model's maximum context length is {MAX_MODEL_LEN} tokens"),
    Case("text prompt far too long", "POST", C, cmpl(prompt="y" * (MAX_MODEL_LEN * 64 + 1)), 400,
         "it cannot fit the model's context"),
    # ---- stop
    Case("100 stop strings", "POST", C, cmpl(stop=["s"] * 100), 400,
         "stop: 100 stop strings are over the limit of 16"),
    Case("empty stop string", "POST", C, cmpl(stop=["a", ""]), 400, "stop.1: is empty"),
    Case("stop is a number", "POST", C, cmpl(stop=5), 400, "stop: must be a string or a list of at most 16 strings"),
    Case("stop list with a number", "POST", C, cmpl(stop=["a", 3]), 400, "stop.1: must be a string"),
    Case("stop token id negative", "POST", C, cmpl(stop_token_ids=[-1]), 400,
         "stop_token_ids.0: Input should be greater than or equal to 0"),
    # ---- sampling fields: types, ranges, unsupported
    Case("n as a string", "POST", C, cmpl(n="3"), 400, "n: Input should be a valid integer"),
    Case("n too large", "POST", C, cmpl(n=17), 400, "n: Input should be less than or equal to 16"),
    Case("temperature too high", "POST", C, cmpl(temperature=5), 400,
         "temperature: Input should be less than or equal to 2"),
    Case("temperature tiny", "POST", C, cmpl(temperature=1e-40), 400,
         "temperature: must be 0 (greedy) or in [0.01, 2]; smaller values overflow"),
    Case("top_p zero", "POST", C, cmpl(top_p=0), 400, "top_p: Input should be greater than or equal to"),
    Case("max_tokens zero", "POST", C, cmpl(max_tokens=0), 400, "max_tokens: Input should be greater than or equal"),
    Case("max_tokens past the context", "POST", C, cmpl(max_tokens=MAX_MODEL_LEN), 400, "maximum context length"),
    Case("max_tokens huge", "POST", C, cmpl(max_tokens=10**40), 400, "max_tokens: Input should be less than"),
    Case("logprobs too many", "POST", C, cmpl(logprobs=50), 400, "logprobs: Input should be less than or equal to 20"),
    Case("negative seed", "POST", C, cmpl(seed=-1), 400, "seed: Input should be greater than or equal to 0"),
    Case("stream as a string", "POST", C, cmpl(stream="yes"), 400, "stream: Input should be a valid boolean"),
    Case("stream_options without stream", "POST", C, cmpl(stream_options={"include_usage": True}), 400,
         "stream_options is only allowed when stream is true"),
    # unknown fields are ignored (as vLLM does, logged once per name); OpenAI's unimplemented ones are refused
    Case("unknown field", "POST", C, cmpl(temprature=0.5), 200, ""),
    Case("300 unknown field names", "POST", C, cmpl(**{f"x{i}": i for i in range(300)}), 200, ""),
    Case("unknown fields named like methods", "POST", C, cmpl(model_dump=1, __class__=2, model_fields=3), 200, ""),
    Case("unknown field name with a newline", "POST", C, cmpl(**{"a\nWARNING forged": 1}), 200, ""),
    Case("tools", "POST", CH, chat(tools=[{"type": "function", "function": {"name": "f"}}]), 400,
         "tools: not supported by this server (no tool calling)"),
    Case("response_format json", "POST", C, cmpl(response_format={"type": "json_object"}), 400,
         "response_format: not supported by this server (no structured output)"),
    Case("tool_choice false is not none", "POST", CH, chat(tool_choice=False), 400, "tool_choice: not supported"),
    Case("presence_penalty", "POST", C, cmpl(presence_penalty=0.5), 400, "presence_penalty is not supported"),
    Case("logit_bias", "POST", C, cmpl(logit_bias={"1": 5}), 400, "logit_bias is not supported"),
    Case("echo as a string", "POST", C, cmpl(echo="yes"), 400, "echo: Input should be a valid boolean"),
    Case("prompt_logprobs on chat", "POST", CH, chat(prompt_logprobs=1), 400,
         "prompt_logprobs: not supported by this server (no prompt logprobs on chat completions"),
    Case("best_of other than n", "POST", C, cmpl(best_of=3), 400, "best_of other than n is not supported"),
    Case("best_of equal to n", "POST", C, cmpl(best_of=2, n=2), 200, ""),
    Case("suffix", "POST", C, cmpl(suffix="end"), 400, "suffix is not supported"),
    Case("frequency_penalty out of OpenAI's range", "POST", C, cmpl(frequency_penalty=3), 400,
         "frequency_penalty: Input should be less than or equal to 2"),
    # ---- chat
    Case("no messages", "POST", CH, chat(messages=[]), 400, "messages: List should have at least 1 item"),
    Case("too many messages", "POST", CH, chat(messages=[{"role": "user", "content": "x"}] * 257), 400,
         "messages: List should have at most 256 items"),
    Case("a custom role", "POST", CH, chat(messages=[{"role": "wizard", "content": "x"}]), 200, ""),
    Case("an empty role", "POST", CH, chat(messages=[{"role": "", "content": "x"}]), 400, "messages.0.role:"),
    Case("a role of 65 characters", "POST", CH, chat(messages=[{"role": "r" * 65, "content": "x"}]), 400,
         "messages.0.role: String should have at most 64 characters"),
    Case("a role not a string", "POST", CH, chat(messages=[{"role": 1, "content": "x"}]), 400, "messages.0.role:"),
    Case("content a number", "POST", CH, chat(messages=[{"role": "user", "content": 5}]), 400,
         "messages.0.content: must be a string or a list; got the number 5"),
    Case("content part not text", "POST", CH, chat(messages=[{"role": "user", "content": [text_part("image")]}]),
         400, "messages.0.content.0.type: Input should be 'text'"),
    Case("extra field in a message", "POST", CH, chat(messages=[{"role": "user", "content": "x", "mood": 1}]), 200,
         ""),
    Case("tool calls in a message", "POST", CH,
         chat(messages=[{"role": "assistant", "content": "x", "tool_calls": [{"id": "1"}]}]), 400,
         "messages.0.tool_calls: not supported by this server"),
    Case("chat template kwargs not an object", "POST", CH, chat(chat_template_kwargs=[1]), 400,
         "chat_template_kwargs: Input should be a valid dictionary"),
    # ---- /tokenize, /detokenize (vLLM's, outside /v1)
    Case("tokenize without the key", "POST", "/tokenize", {"prompt": "x"}, 401, "missing API key", key=None),
    Case("tokenize with a form content-type is still json", "POST", "/tokenize", {"prompt": "x"}, 200, "",
         headers={"Content-Type": "application/x-www-form-urlencoded"}),
    Case("tokenize a number", "POST", "/tokenize", {"prompt": 5}, 400, "prompt: Input should be a valid string"),
    Case("tokenize an array body", "POST", "/tokenize", [1], 400, "request body must be a JSON object"),
    Case("tokenize malformed json", "POST", "/tokenize", b'{"prompt": ', 400, "request body is not valid JSON"),
    Case("tokenize prompt and messages", "POST", "/tokenize",
         {"prompt": "x", "messages": [{"role": "user", "content": "x"}]}, 400, "give prompt or messages, not both"),
    Case("tokenize a template that refuses", "POST", "/tokenize",
         {"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"messages": []}}, 400,
         "messages: the chat template refused them"),
    Case("detokenize past the vocabulary", "POST", "/detokenize", {"tokens": [1, 99_999]}, 400,
         "tokens.1: token id 99999 is outside this model's vocabulary"),
    Case("detokenize a fraction", "POST", "/detokenize", {"tokens": [1.5]}, 400, "tokens.0: Input should be"),
    Case("detokenize over the value count", "POST", "/detokenize", {"tokens": [1] * (VALUES_LIMIT + 10)}, 413,
         f"request body holds more than {VALUES_LIMIT} JSON values"),
    Case("top_logprobs without logprobs", "POST", CH, chat(top_logprobs=2), 400, "top_logprobs requires logprobs"),
    Case("two token limits", "POST", CH, chat(max_completion_tokens=3), 400,
         "give max_tokens or max_completion_tokens, not both"),
    Case("chat unknown model", "POST", CH, chat(model="nope"), 404, "does not exist"),
    Case("chat messages far too long", "POST", CH,
         chat(messages=[{"role": "user", "content": "z" * (MAX_MODEL_LEN * 64 + 1)}]), 400,
         "cannot fit the model's context"),
]


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> LiveServer:
    server = start_server(tmp_path_factory.mktemp("profiles"), api_key=KEY, max_model_len=MAX_MODEL_LEN,
                          server_config={"served_model_name": MODEL, "max_body_bytes": BODY_LIMIT})
    yield server
    server.stop()


def send(live: LiveServer, case: Case) -> raw_http.RawResponse | None:
    headers = {"Authorization": f"Bearer {case.key}"} if case.key is not None else {}
    headers.update(case.headers)
    with raw_http.connect(live.url) as sock:
        if isinstance(case.body, Chunked):
            data = case.body.data
            pieces = (data[i:i + case.body.piece] for i in range(0, len(data), case.body.piece))
            return raw_http.upload_chunked(sock, case.path, pieces, headers)[1]
        data = case.body if isinstance(case.body, bytes) else b"" if case.body is None else \
            json.dumps(case.body).encode()
        if case.body is not None or case.method == "POST":
            headers = {"Content-Type": "application/json", "Content-Length": str(len(data)), **headers}
        sock.sendall(raw_http.head(case.method, case.path, headers) + data)
        return raw_http.read_response(sock)


def test_the_corpus_is_big_and_named_uniquely() -> None:
    assert len(CORPUS) >= 60
    assert len({case.name for case in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=[case.name for case in CORPUS])
def test_hostile_request_gets_one_clear_answer(live: LiveServer, case: Case) -> None:
    response = send(live, case)
    assert response is not None, "the connection closed without an answer"
    assert response.status == case.status, response.body[:500]
    if case.status >= 400:
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert case.fragment in error["message"], error["message"]
        assert "\n" not in error["message"] and "Traceback" not in error["message"]


def test_after_the_corpus_the_server_still_serves(live: LiveServer) -> None:
    r = httpx.post(f"{live.base_url}/completions", headers=live.headers(), timeout=60,
                   json={"model": MODEL, "prompt": "still here", "max_tokens": 4, "temperature": 0})
    assert r.status_code == 200 and r.json()["choices"][0]["finish_reason"] in ("stop", "length")
    m = live.wait_idle()
    assert httpx.get(f"{live.url}/health").json()["status"] == "ok"
    assert m["bringup_kv_blocks_used"] == 0 and m["bringup_requests_in_flight"] == 0
    assert not [k for k in m if 'status="5' in k]
