"""Load, disconnects and bad input against one live server: nothing leaks, nothing else is disturbed."""

from __future__ import annotations

import asyncio
import json
import sys
import time

import httpx
import openai
import pytest

from tests.server.scrape import delta, parse_metrics
from tests.server.serve_live import LiveServer, start_server

CLIENTS = 32
REQUESTS_PER_CLIENT = 4
MAX_MODEL_LEN = 256


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> LiveServer:
    server = start_server(tmp_path_factory.mktemp("profiles"), max_model_len=MAX_MODEL_LEN)
    yield server
    server.stop()


async def _client_session(client: openai.AsyncOpenAI, model: str, index: int) -> list[dict]:
    """One client: four streaming requests in a row, alternating completions and chat."""
    results = []
    for j in range(REQUESTS_PER_CLIENT):
        max_tokens = 3 + (index + j) % 6
        common = {"model": model, "max_tokens": max_tokens, "stream": True, "temperature": 0.8,
                  "seed": index * 10 + j, "stream_options": {"include_usage": True},
                  "extra_body": {"ignore_eos": True}}
        if j % 2 == 0:
            stream = await client.completions.create(prompt=f"client {index} request {j}", **common)
            endpoint = "completions"
        else:
            stream = await client.chat.completions.create(
                messages=[{"role": "user", "content": f"client {index} request {j}"}], **common)
            endpoint = "chat"
        finish, usage, chunks = None, None, 0
        async for chunk in stream:
            chunks += 1
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
            if chunk.usage is not None:
                usage = chunk.usage
        results.append({"endpoint": endpoint, "max_tokens": max_tokens, "finish": finish, "usage": usage,
                        "chunks": chunks})
    return results


async def _watch_gauges(live: LiveServer, stop: asyncio.Event) -> dict[str, float]:
    """Peaks of the running-batch and waiting-queue gauges while the load runs."""
    peaks = {"vllm:num_requests_running": 0.0, "vllm:num_requests_waiting": 0.0}
    async with httpx.AsyncClient() as http:
        while not stop.is_set():
            m = parse_metrics((await http.get(f"{live.url}/metrics")).text)
            for name in peaks:
                peaks[name] = max(peaks[name], m.value(name))
            await asyncio.sleep(0.02)
    return peaks


async def _load(live: LiveServer) -> tuple[list, dict[str, float]]:
    client = openai.AsyncOpenAI(api_key="unused", base_url=live.base_url, max_retries=0, timeout=120)
    stop = asyncio.Event()
    watcher = asyncio.create_task(_watch_gauges(live, stop))
    outcomes = await asyncio.gather(*(_client_session(client, live.engine.model_name, i) for i in range(CLIENTS)),
                                    return_exceptions=True)
    stop.set()
    peaks = await watcher
    await client.close()
    return outcomes, peaks


def test_32_streaming_clients_x4_complete_and_leave_nothing_behind(live: LiveServer) -> None:
    before = live.metrics()
    started = time.perf_counter()
    outcomes, peaks = asyncio.run(_load(live))
    elapsed = time.perf_counter() - started
    errors = [o for o in outcomes if isinstance(o, BaseException)]
    assert errors == []
    results = [r for session in outcomes for r in session]
    assert len(results) == CLIENTS * REQUESTS_PER_CLIENT
    for r in results:
        assert r["finish"] == "length"
        assert r["usage"].completion_tokens == r["max_tokens"]
    assert peaks["vllm:num_requests_running"] > 1, "requests from different clients were never batched together"
    # 32 clients against a 16-sequence batch: some must have waited, and the gauge must have shown it
    assert peaks["vllm:num_requests_waiting"] > 0

    after = live.wait_idle()
    assert after["bringup_kv_blocks_used"] == 0
    assert after["bringup_requests_in_flight"] == 0
    sent = {"completions": 0, "chat": 0}
    for r in results:
        sent[r["endpoint"]] += 1
    assert delta(after, before, "bringup_http_requests_total", endpoint="/v1/completions", status="200") \
        == sent["completions"]
    assert delta(after, before, "bringup_http_requests_total", endpoint="/v1/chat/completions", status="200") \
        == sent["chat"]
    assert delta(after, before, "vllm:generation_tokens_total") == sum(r["max_tokens"] for r in results)
    assert delta(after, before, "vllm:prompt_tokens_total") == sum(r["usage"].prompt_tokens for r in results)
    assert delta(after, before, "vllm:request_success_total", finished_reason="length") == len(results)
    assert delta(after, before, "vllm:time_to_first_token_seconds_count") == len(results)
    gaps = sum(r["max_tokens"] - 1 for r in results)
    assert delta(after, before, "vllm:inter_token_latency_seconds_count") == gaps
    print(f"\n{len(results)} streamed requests from {CLIENTS} clients in {elapsed:.2f} s; peak batch "
          f"{peaks['vllm:num_requests_running']:.0f}, peak queue {peaks['vllm:num_requests_waiting']:.0f}")


def _read_chunks(lines, n: int) -> list[dict]:
    """The next n JSON chunks from an SSE line iterator (kept open by the caller: dropping a
    half-read httpx line iterator closes the connection)."""
    chunks = []
    for line in lines:
        if line.startswith("data: {"):
            chunks.append(json.loads(line[6:]))
            if len(chunks) == n:
                break
    return chunks


def test_disconnect_mid_stream_aborts_and_frees_blocks(live: LiveServer) -> None:
    before = live.wait_idle()
    body = {"model": live.engine.model_name, "prompt": "a long story", "max_tokens": 200, "stream": True,
            "temperature": 0, "ignore_eos": True}
    with httpx.Client(timeout=30) as http, http.stream("POST", f"{live.base_url}/completions", json=body) as r:
        assert r.status_code == 200
        lines = r.iter_lines()
        assert len(_read_chunks(lines, 3)) == 3
        during = live.metrics()
        assert during["bringup_kv_blocks_used"] > 0
        assert during.value("vllm:num_requests_running") == 1
    after = live.wait_idle()
    assert after["bringup_kv_blocks_used"] == 0
    assert delta(after, before, "vllm:request_success_total", finished_reason="abort") == 1
    assert delta(after, before, "vllm:generation_tokens_total") < 200


def test_client_timeout_on_non_streaming_request_aborts_it(live: LiveServer) -> None:
    before = live.wait_idle()
    body = {"model": live.engine.model_name, "prompt": "x", "max_tokens": MAX_MODEL_LEN - 8, "n": 8,
            "temperature": 0, "ignore_eos": True}
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{live.base_url}/completions", json=body, timeout=httpx.Timeout(5, read=0.2))
    after = live.wait_idle(timeout=15)
    assert after["bringup_kv_blocks_used"] == 0
    assert delta(after, before, "vllm:request_success_total", finished_reason="abort") == 8


def _invalid_bodies(model: str) -> list[tuple[str, object]]:
    too_long = "a" * (MAX_MODEL_LEN + 10)  # the built-in byte tokenizer: one token per ASCII character
    return [
        ("completions", b"{not json"),
        ("completions", []),
        ("completions", "just a string"),
        ("completions", {"model": model}),
        ("completions", {"model": model, "prompt": 5}),
        ("completions", {"model": model, "prompt": "x", "max_tokens": -1}),
        ("completions", {"model": model, "prompt": "x", "max_tokens": 0}),
        ("completions", {"model": model, "prompt": "x", "max_tokens": "5"}),
        ("completions", {"model": model, "prompt": "x", "temperature": "hot"}),
        ("completions", {"model": model, "prompt": "x", "temperature": 5}),
        ("completions", {"model": model, "prompt": "x", "stream": "yes"}),
        ("completions", {"model": model, "prompt": "x", "response_format": {"type": "json_object"}}),
        ("completions", {"model": model, "prompt": "x", "stream": True,
                         "stream_options": {"include_usage": "yes"}}),
        ("completions", {"model": model, "prompt": "x", "n": 0}),
        ("completions", {"model": model, "prompt": "x", "top_p": 0}),
        ("completions", {"model": model, "prompt": "x", "top_p": 1e-300}),  # float32 rounds it to 0
        ("completions", {"model": model, "prompt": "x", "temperature": 1e-40}),
        ("completions", {"model": model, "prompt": "x", "stop": [""]}),
        ("completions", {"model": model, "prompt": "x", "logprobs": 50}),
        ("completions", {"model": model, "prompt": "x", "seed": -1}),
        ("completions", {"model": model, "prompt": "x", "presence_penalty": 0.5}),
        ("completions", {"model": model, "prompt": too_long}),
        ("completions", {"model": model, "prompt": "x", "max_tokens": MAX_MODEL_LEN}),
        ("completions", {"model": model, "prompt": [1, 2, 10**6]}),
        ("completions", {"model": model, "prompt": []}),
        ("chat/completions", {"model": model, "messages": []}),
        ("chat/completions", {"model": model, "messages": [{"role": "assistant", "content": "hi",
                                                             "tool_calls": [{"id": "1"}]}]}),
        ("chat/completions", {"model": model, "messages": [{"role": "", "content": "hi"}]}),
        ("chat/completions", {"model": model, "messages": [{"role": "user", "content": too_long}]}),
        ("chat/completions", {"model": model, "messages": [{"role": "user", "content": "hi"}],
                              "max_tokens": -3}),
    ]


async def _invalid_while_streaming(live: LiveServer, reference: str) -> tuple[list[str], list]:
    model = live.engine.model_name
    body = {"model": model, "prompt": "steady", "max_tokens": 32, "temperature": 0, "ignore_eos": True,
            "stream": True}

    async def stream_one(http: httpx.AsyncClient) -> str:
        text = ""
        async with http.stream("POST", f"{live.base_url}/completions", json=body) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if line.startswith("data: {"):
                    text += json.loads(line[6:])["choices"][0]["text"]
        return text

    async def bad_one(http: httpx.AsyncClient, path: str, payload: object) -> httpx.Response:
        await asyncio.sleep(0.01)
        if isinstance(payload, bytes):
            return await http.post(f"{live.base_url}/{path}", content=payload,
                                   headers={"content-type": "application/json"})
        return await http.post(f"{live.base_url}/{path}", json=payload)

    async with httpx.AsyncClient(timeout=60) as http:
        streams = [asyncio.create_task(stream_one(http)) for _ in range(4)]
        bad = await asyncio.gather(*(bad_one(http, p, b) for p, b in _invalid_bodies(model)))
        texts = await asyncio.gather(*streams)
    return texts, bad


def test_invalid_requests_get_400_without_disturbing_others(live: LiveServer) -> None:
    model = live.engine.model_name
    reference = httpx.post(f"{live.base_url}/completions", timeout=60, json={
        "model": model, "prompt": "steady", "max_tokens": 32, "temperature": 0, "ignore_eos": True,
    }).json()["choices"][0]["text"]
    before = live.metrics()
    texts, bad = asyncio.run(_invalid_while_streaming(live, reference))
    assert texts == [reference] * 4
    for (path, payload), response in zip(_invalid_bodies(model), bad):
        assert response.status_code == 400, (path, payload, response.text)
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"}
        assert error["type"] == "invalid_request_error" and error["message"]
    after = live.wait_idle()
    assert after["bringup_kv_blocks_used"] == 0
    assert delta(after, before, "bringup_http_requests_total", endpoint="/v1/completions", status="400") + \
        delta(after, before, "bringup_http_requests_total", endpoint="/v1/chat/completions", status="400") \
        == len(bad)
    assert not [k for k in after if 'status="500"' in k]


def test_serving_benchmark_reports_consistent_figures(live: LiveServer, tmp_path) -> None:
    """benchmarks/serve_bench.py against this server: every request counted, the figures add up."""
    import importlib.util

    from tests.server.serve_live import REPO

    spec = importlib.util.spec_from_file_location("serve_bench", REPO / "benchmarks" / "serve_bench.py")
    bench = importlib.util.module_from_spec(spec)
    sys.modules["serve_bench"] = bench  # dataclasses look their module up there
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.json"
    code = bench.main(["--url", live.url, "--num-prompts", "12", "--concurrency", "4", "--request-rate", "50",
                       "--output-len", "6", "--prompt-words", "4", "--json", "--json-out", str(out)])
    summary = json.loads(out.read_text())
    assert code == 0
    assert summary["completed"] == 12 and summary["failed"] == 0
    assert summary["output_tokens"] == 12 * 6
    assert summary["output_tokens_per_s"] == pytest.approx(72 / summary["duration_s"])
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        s = summary[key]
        assert 0 < s["median"] <= s["p99"]
    assert summary["ttft_ms"]["p99"] <= summary["e2e_ms"]["p99"]


async def _cancel_mid_stream(live: LiveServer, index: int) -> int:
    """One streamed request read for a few chunks, then dropped; the chunks it got."""
    body = {"model": live.engine.model_name, "prompt": f"story {index}", "max_tokens": 200, "stream": True,
            "temperature": 0.7, "seed": index, "ignore_eos": True}
    if index % 2:
        body = {"model": live.engine.model_name, "messages": [{"role": "user", "content": f"story {index}"}],
                "max_tokens": 200, "stream": True, "ignore_eos": True, "n": 2}
    path = "completions" if index % 2 == 0 else "chat/completions"
    got = 0
    async with httpx.AsyncClient(timeout=30) as http, http.stream("POST", f"{live.base_url}/{path}",
                                                                   json=body) as r:
        assert r.status_code == 200
        async for line in r.aiter_lines():
            got += line.startswith("data: {")
            if got >= 2 + index % 3:
                break
    return got


def test_50_streams_cancelled_mid_stream_leave_running_requests_and_kv_blocks_at_idle(live: LiveServer) -> None:
    before = live.wait_idle()

    async def cancel_all() -> list[int]:
        return await asyncio.gather(*(_cancel_mid_stream(live, i) for i in range(50)))

    assert all(got >= 2 for got in asyncio.run(cancel_all()))
    after = live.wait_idle(timeout=30)
    assert after["bringup_kv_blocks_used"] == before["bringup_kv_blocks_used"] == 0
    assert after.value("vllm:num_requests_running") == 0 and after["bringup_requests_in_flight"] == 0
    assert delta(after, before, "vllm:request_success_total", finished_reason="abort") == 25 + 25 * 2
    # ignore_eos: sampled at the default temperature, the check could stop on an end-of-text token after one
    check = httpx.post(f"{live.base_url}/completions", json={"model": live.engine.model_name, "prompt": "ok",
                                                             "max_tokens": 2, "ignore_eos": True}, timeout=30)
    assert check.status_code == 200 and check.json()["usage"]["completion_tokens"] == 2


@pytest.mark.parametrize("extra, field", [
    ({"n": 17}, "n"), ({"n": 10**40}, "n"), ({"best_of": 2, "n": 3}, "best_of"), ({"best_of": 17}, "best_of"),
    ({"n": True}, "n"), ({"logprobs": 21}, "logprobs"), ({"logprobs": -1}, "logprobs"),
    ({"logprobs": 10**40}, "logprobs"), ({"logprobs": True}, "logprobs"), ({"logprobs": float("nan")}, None),
])
def test_n_best_of_and_logprob_extremes_are_400_naming_the_field(live: LiveServer, extra, field) -> None:
    body = {"model": live.engine.model_name, "prompt": "x", "max_tokens": 2, **extra}
    r = httpx.post(f"{live.base_url}/completions", content=json.dumps(body), timeout=30,
                   headers={"Content-Type": "application/json"})
    assert r.status_code == 400, r.text
    if field is not None:
        assert field in r.json()["error"]["message"]


def test_the_largest_n_and_logprobs_run(live: LiveServer) -> None:
    body = {"model": live.engine.model_name, "prompt": "x", "max_tokens": 2, "n": 16, "best_of": 16,
            "logprobs": 20, "echo": True, "temperature": 1.0, "seed": 3}
    r = httpx.post(f"{live.base_url}/completions", json=body, timeout=60)
    assert r.status_code == 200, r.text
    choices = r.json()["choices"]
    assert len(choices) == 16
    for choice in choices:
        top = choice["logprobs"]["top_logprobs"]
        # keyed by token text, as OpenAI's legacy format is: byte tokens that decode alike share one key
        assert all(1 <= len(t) <= 21 for t in top[1:]) and top[0] is None
        assert all(lp <= 0 and lp == lp for t in top[1:] for lp in t.values())
    live.wait_idle()


def test_prompts_at_max_model_len(live: LiveServer) -> None:
    model = live.engine.model_name
    fits = "a" * (MAX_MODEL_LEN - 2)  # one token per ASCII character, after the built-in BOS
    r = httpx.post(f"{live.base_url}/completions", json={"model": model, "prompt": fits, "max_tokens": 1,
                                                          "ignore_eos": True}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["usage"]["prompt_tokens"] + r.json()["usage"]["completion_tokens"] <= MAX_MODEL_LEN
    for prompt, max_tokens in (("a" * (MAX_MODEL_LEN - 1), 1), ("a" * MAX_MODEL_LEN, 1), (fits, 2)):
        r = httpx.post(f"{live.base_url}/completions", json={"model": model, "prompt": prompt,
                                                              "max_tokens": max_tokens}, timeout=60)
        assert (r.status_code == 400 and "max_model_len" in r.text) or "context" in r.text, r.text
    assert live.wait_idle()["bringup_kv_blocks_used"] == 0
