"""The official openai client against a live server on the built-in model (API key configured)."""

from __future__ import annotations

import json
import subprocess

import httpx
import openai
import pytest

from tests.server.serve_live import API_KEY, LiveServer, spawn_cli, start_server

PROMPT = "The quick brown fox"


@pytest.fixture(scope="module")
def offline_generate(tmp_path_factory) -> subprocess.Popen:
    """`bringup generate` for PROMPT in a child process, started first so it overlaps the server start."""
    workdir = tmp_path_factory.mktemp("generate")
    return spawn_cli(["generate", PROMPT, "--max-tokens", "24", "--ignore-eos", "--device", "cpu",
                      "--profile", str(workdir / "absent.yaml"), "--json"], cwd=workdir)


@pytest.fixture(scope="module")
def live(tmp_path_factory, offline_generate) -> LiveServer:
    server = start_server(tmp_path_factory.mktemp("profiles"), api_key=API_KEY)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def client(live: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(api_key=API_KEY, base_url=live.base_url, max_retries=0, timeout=60)


@pytest.fixture(scope="module")
def model(client: openai.OpenAI) -> str:
    return client.models.list().data[0].id


@pytest.fixture(scope="module")
def greedy(client: openai.OpenAI, model: str):
    """A greedy 24-token completion the other tests compare against."""
    return client.completions.create(model=model, prompt=PROMPT, max_tokens=24, temperature=0,
                                     extra_body={"ignore_eos": True})


def test_models_lists_the_engines_model(client: openai.OpenAI, live: LiveServer) -> None:
    models = client.models.list().data
    assert [m.id for m in models] == [live.engine.model_name]


def test_completion_usage_counts_real_tokens(greedy, live: LiveServer) -> None:
    choice = greedy.choices[0]
    assert choice.finish_reason == "length"
    assert greedy.usage.prompt_tokens == len(live.engine.tokenizer.encode(PROMPT, add_special_tokens=True))
    assert greedy.usage.completion_tokens == 24
    assert greedy.usage.total_tokens == greedy.usage.prompt_tokens + 24


def test_greedy_output_equals_bringup_generate(greedy, live: LiveServer, offline_generate) -> None:
    stdout, stderr = offline_generate.communicate(timeout=120)
    assert offline_generate.returncode == 0, stderr
    offline = json.loads(stdout)
    assert offline["completion_tokens"] == 24
    assert greedy.choices[0].text == offline["text"]
    assert greedy.usage.prompt_tokens == offline["prompt_tokens"]
    ids = live.engine.tokenizer.encode(PROMPT, add_special_tokens=True)
    by_ids = httpx.post(f"{live.base_url}/completions", headers=live.headers(), timeout=60,
                        json={"model": live.engine.model_name, "prompt": ids, "max_tokens": 24,
                              "temperature": 0, "ignore_eos": True, "logprobs": 0})
    assert by_ids.json()["choices"][0]["text"] == offline["text"]
    tokens = by_ids.json()["choices"][0]["logprobs"]["tokens"]
    assert tokens == [live.engine.tokenizer.decode([t], skip_special_tokens=False) for t in offline["token_ids"]]


def test_streamed_completion_equals_the_non_streamed_one(client, model, greedy) -> None:
    stream = client.completions.create(model=model, prompt=PROMPT, max_tokens=24, temperature=0, stream=True,
                                       stream_options={"include_usage": True}, extra_body={"ignore_eos": True})
    chunks = list(stream)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == greedy.choices[0].text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["length"]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 24
    assert all(c.usage is None for c in chunks[:-1])


def test_chat_completion_and_its_stream_agree(client, model, live: LiveServer) -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hi"}]
    full = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0)
    choice = full.choices[0]
    assert choice.message.role == "assistant"
    prompt_ids = live.engine.tokenizer.encode(live.engine.tokenizer.apply_chat_template(messages),
                                              add_special_tokens=False)
    assert full.usage.prompt_tokens == len(prompt_ids)
    assert 1 <= full.usage.completion_tokens <= 12
    assert choice.finish_reason in ("stop", "length")

    stream = client.chat.completions.create(model=model, messages=messages, max_tokens=12, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == choice.message.content
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == \
        [choice.finish_reason]


def test_n_choices_are_distinct_and_counted(client, model) -> None:
    r = client.completions.create(model=model, prompt=PROMPT, max_tokens=8, n=3, temperature=1.0, seed=11,
                                  extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert r.usage.completion_tokens == 24
    assert len({c.text for c in r.choices}) > 1  # per-choice seeds differ

    stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}],
                                            max_tokens=6, n=2, temperature=1.0, seed=3, stream=True,
                                            extra_body={"ignore_eos": True})
    finished = {c.choices[0].index for c in stream if c.choices and c.choices[0].finish_reason}
    assert finished == {0, 1}


def test_stop_string_cuts_the_text_streamed_or_not(client, model, greedy) -> None:
    text = greedy.choices[0].text
    start = next(i for i in range(2, len(text) - 1) if "\ufffd" not in text[i:i + 2])
    stop = text[start:start + 2]
    expected = text[: text.index(stop)]
    r = client.completions.create(model=model, prompt=PROMPT, max_tokens=24, temperature=0, stop=[stop],
                                  extra_body={"ignore_eos": True})
    assert r.choices[0].text == expected
    assert r.choices[0].finish_reason == "stop"
    streamed = client.completions.create(model=model, prompt=PROMPT, max_tokens=24, temperature=0, stop=stop,
                                         stream=True, extra_body={"ignore_eos": True})
    chunks = list(streamed)
    assert "".join(c.choices[0].text for c in chunks) == expected
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_seed_reproduces_sampling_and_another_seed_does_not(client, model) -> None:
    def sample(seed: int) -> str:
        r = client.completions.create(model=model, prompt=PROMPT, max_tokens=16, temperature=1.0, top_p=0.95,
                                      seed=seed, extra_body={"ignore_eos": True, "top_k": 50})
        return r.choices[0].text

    first = sample(1234)
    assert sample(1234) == first
    assert sample(4321) != first


def test_logprobs_shape_and_greedy_choice(client, model) -> None:
    r = client.completions.create(model=model, prompt=PROMPT, max_tokens=6, temperature=0, logprobs=3,
                                  extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == 6
    for chosen, top in zip(lp.token_logprobs, lp.top_logprobs):
        assert chosen <= 0.0
        assert 1 <= len(top) <= 3
        assert chosen == pytest.approx(max(top.values()), abs=1e-5)  # greedy picks the most likely
    assert "".join(lp.tokens) == r.choices[0].text or "\ufffd" in r.choices[0].text


def test_chat_logprobs(client, model) -> None:
    r = client.chat.completions.create(model=model, messages=[{"role": "user", "content": "hi"}], max_tokens=5,
                                       temperature=0, logprobs=True, top_logprobs=2,
                                       extra_body={"ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == 5
    for entry in content:
        assert entry.logprob <= 0.0 and 1 <= len(entry.top_logprobs) <= 2
        assert entry.logprob == pytest.approx(max(t.logprob for t in entry.top_logprobs), abs=1e-5)


def test_absent_profile_is_reported_in_the_plan(live: LiveServer) -> None:
    body = httpx.get(f"{live.base_url}/plan", headers=live.headers()).json()
    assert body["profile"]["loaded"] is False and body["profile"]["path"].endswith("absent.yaml")
    assert body["plan"]["warnings"]  # the conservative plan says why


def test_api_key_is_required_on_v1_only(live: LiveServer) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        r = httpx.get(f"{live.base_url}/models", headers=headers)
        assert r.status_code == 401
        assert r.json()["error"]["type"] == "authentication_error"
    wrong = openai.OpenAI(api_key="wrong", base_url=live.base_url, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong.completions.create(model=live.engine.model_name, prompt="x", max_tokens=1)
    assert httpx.get(f"{live.url}/health").status_code == 200


def test_unknown_model_is_404(client) -> None:
    with pytest.raises(openai.NotFoundError) as err:
        client.chat.completions.create(model="no-such-model", messages=[{"role": "user", "content": "x"}])
    assert err.value.body["code"] == "model_not_found"


def test_plan_endpoint_returns_the_engines_plan(live: LiveServer) -> None:
    r = httpx.get(f"{live.base_url}/plan", headers=live.headers())
    assert r.status_code == 200
    body = r.json()
    assert body["plan"] == live.engine.plan.to_dict()
    assert body["plan"]["dtype"]["evidence"]
    kv = body["plan"]["kv_blocks"]  # the value as data, the table's text beside it
    assert isinstance(kv["value"], int) and kv["value"] > 0 and kv["shown"] == f"{kv['value']} × 16 tokens"
    assert body["plan"]["attention"]["value"] == live.engine.plan.attention.value
    assert body["max_model_len"] == live.engine.max_model_len
    assert set(body["fallbacks"]) == {"op", "path", "global"}


def test_metrics_are_prometheus_text(greedy, live: LiveServer) -> None:  # greedy: one 24-token completion
    text = httpx.get(f"{live.url}/metrics").text
    assert "# TYPE vllm:time_to_first_token_seconds histogram" in text
    m = live.metrics()
    assert m['bringup_http_requests_total{endpoint="/v1/completions",status="200"}'] >= 1
    assert m.value("vllm:generation_tokens_total") >= 24
    assert m.value("vllm:time_to_first_token_seconds_bucket", le="+Inf") \
        == m.value("vllm:time_to_first_token_seconds_count")
    assert m["bringup_kv_blocks_total"] == live.engine.stats()["kv_blocks_total"]
    assert m["bringup_engine_alive"] == 1
    counts = live.engine.fallbacks.counts
    for level in ("op", "path", "global"):
        assert m.value("bringup_fallbacks_total", level=level) == counts[level]
