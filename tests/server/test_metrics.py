"""/metrics against a live server, read with prometheus_client's parser: vLLM's names, types and labels; counters
and histograms equal to what the responses say; a real fallback counted with its level; the documented table and
the exposition list the same metrics."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bringup.backends.registry import device_info
from bringup.profiles.schema import Capabilities, Capability
from bringup.profiles.store import update_profile
from bringup.serve.metrics import ServerMetrics
from tests.server.scrape import Samples, delta, parse_metrics
from tests.server.serve_live import REPO, LiveServer, start_server

MAX_MODEL_LEN = 256
DOC = REPO / "docs" / "metrics.md"
VLLM_FAMILIES = {  # family name as the parser reports it (counters without _total) -> type
    "vllm:num_requests_running": "gauge", "vllm:num_requests_waiting": "gauge", "vllm:kv_cache_usage_perc": "gauge",
    "vllm:gpu_cache_usage_perc": "gauge", "vllm:num_preemptions": "counter", "vllm:prompt_tokens": "counter",
    "vllm:generation_tokens": "counter", "vllm:request_success": "counter",
    "vllm:time_to_first_token_seconds": "histogram", "vllm:inter_token_latency_seconds": "histogram",
    "vllm:time_per_output_token_seconds": "histogram", "vllm:e2e_request_latency_seconds": "histogram",
    "vllm:request_prompt_tokens": "histogram", "vllm:request_generation_tokens": "histogram",
}
PER_SEQUENCE_HISTOGRAMS = ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds",
                           "vllm:request_prompt_tokens", "vllm:request_generation_tokens")


def _profile_claiming_a_kernel_the_cpu_lacks(directory: Path) -> Path:
    """The CPU has no memory-efficient SDPA kernel: a profile that claims it makes the engine fall back (op level)
    to plain SDPA when its warm-up really runs it."""
    def mutate(p):
        p.capabilities = Capabilities(attention={
            "sdpa_efficient": Capability(status="supported", evidence="wrongly claimed"),
            "sdpa_math": Capability(status="supported", evidence="executed check")})

    path = directory / "claims_efficient_sdpa.yaml"
    update_profile(path, device_info("cpu"), mutate, stage="probe", status="complete", force=True)
    return path


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> LiveServer:
    profiles = tmp_path_factory.mktemp("profiles")
    _profile_claiming_a_kernel_the_cpu_lacks(profiles)
    server = start_server(profiles, profile_name="claims_efficient_sdpa.yaml", max_model_len=MAX_MODEL_LEN)
    yield server
    server.stop()


def _families(live: LiveServer) -> dict:
    return {f.name: f for f in text_string_to_metric_families(httpx.get(f"{live.url}/metrics").text)}


def _stream_usage(live: LiveServer, body: dict) -> tuple[dict, str]:
    """A streamed completion with include_usage: its usage and finish reason."""
    usage, finish = None, None
    with httpx.Client(timeout=60) as http, http.stream("POST", f"{live.base_url}/completions", json={
            **body, "stream": True, "stream_options": {"include_usage": True}}) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if chunk["choices"] and chunk["choices"][0]["finish_reason"]:
                finish = chunk["choices"][0]["finish_reason"]
            if chunk.get("usage"):
                usage = chunk["usage"]
    return usage, finish


def _mixed_requests(live: LiveServer) -> list[tuple[dict, str]]:
    """Greedy completions and a chat (finish: length), one stopped by a stop string, one streamed: (usage, finish)."""
    model = live.engine.model_name
    done = []
    with httpx.Client(timeout=60) as http:
        for prompt, max_tokens in (("metrics one", 5), ("metrics two, a longer prompt", 9)):
            r = http.post(f"{live.base_url}/completions", json={
                "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True})
            done.append((r.json()["usage"], r.json()["choices"][0]["finish_reason"]))
        text = r.json()["choices"][0]["text"]
        assert len(text) >= 2, text
        r = http.post(f"{live.base_url}/completions", json={  # the same greedy request, stopped inside its text
            "model": model, "prompt": "metrics two, a longer prompt", "max_tokens": 9, "temperature": 0,
            "ignore_eos": True, "stop": [text[len(text) // 2]]})
        done.append((r.json()["usage"], r.json()["choices"][0]["finish_reason"]))
        r = http.post(f"{live.base_url}/chat/completions", json={
            "model": model, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 4,
            "temperature": 0, "ignore_eos": True})
        done.append((r.json()["usage"], r.json()["choices"][0]["finish_reason"]))
    done.append(_stream_usage(live, {"model": model, "prompt": "streamed", "max_tokens": 7, "temperature": 0,
                                     "ignore_eos": True}))
    return done


def test_counters_and_histograms_equal_what_the_responses_say(live: LiveServer) -> None:
    before = live.wait_idle()
    done = _mixed_requests(live)
    after = live.wait_idle()
    assert Counter(finish for _, finish in done) == {"length": 4, "stop": 1}
    prompt = sum(u["prompt_tokens"] for u, _ in done)
    generated = sum(u["completion_tokens"] for u, _ in done)
    assert delta(after, before, "vllm:prompt_tokens_total") == prompt
    assert delta(after, before, "vllm:generation_tokens_total") == generated
    for reason in ("stop", "length", "abort", "error"):
        assert delta(after, before, "vllm:request_success_total", finished_reason=reason) \
            == sum(finish == reason for _, finish in done), reason
    for name in PER_SEQUENCE_HISTOGRAMS:
        assert delta(after, before, f"{name}_count") == len(done), name
        assert after.value(f"{name}_bucket", le="+Inf") == after.value(f"{name}_count"), name
    assert delta(after, before, "vllm:request_prompt_tokens_sum") == prompt
    assert delta(after, before, "vllm:request_generation_tokens_sum") == generated
    gaps = sum(u["completion_tokens"] - 1 for u, _ in done)
    assert delta(after, before, "vllm:inter_token_latency_seconds_count") == gaps
    assert delta(after, before, "vllm:time_per_output_token_seconds_count") == gaps
    assert delta(after, before, "bringup_http_requests_total", endpoint="/v1/completions", status="200") == 4
    assert delta(after, before, "bringup_http_requests_total", endpoint="/v1/chat/completions", status="200") == 1


def test_vllm_names_types_and_model_name_label(live: LiveServer) -> None:
    _mixed_requests(live)
    families = _families(live)
    for name, kind in VLLM_FAMILIES.items():
        assert families[name].type == kind, name
        assert families[name].samples, name
        for sample in families[name].samples:
            assert sample.labels["model_name"] == live.engine.model_name, sample
    reasons = {s.labels["finished_reason"] for s in families["vllm:request_success"].samples}
    assert reasons == {"stop", "length", "abort", "error"}  # every reason present from the start, as on vLLM
    bounds = [float(s.labels["le"]) for s in families["vllm:request_prompt_tokens"].samples
              if s.name.endswith("_bucket") and s.labels["le"] != "+Inf"]
    assert bounds[:4] == [1, 2, 5, 10] and bounds[-1] <= MAX_MODEL_LEN


def test_gauges_read_the_engine(live: LiveServer) -> None:
    m = live.wait_idle()
    stats = live.engine.stats()
    assert m["bringup_kv_blocks_total"] == stats["kv_blocks_total"] > 0
    assert m.value("vllm:kv_cache_usage_perc") == m.value("vllm:gpu_cache_usage_perc") == 0
    assert m.value("vllm:num_preemptions_total") == stats["num_preemptions"]
    assert m["bringup_engine_alive"] == 1 and m["bringup_draining"] == 0


def test_an_injected_fallback_is_counted_with_its_level(live: LiveServer) -> None:
    m = live.metrics()
    assert m.value("bringup_fallbacks_total", level="op", what="attention", instead="sdpa_math") == 1
    for level in ("op", "path", "global"):
        assert m.value("bringup_fallbacks_total", level=level) == live.engine.fallbacks.counts[level]
    plan = live.engine.plan
    (info,) = [labels for (name, labels) in m.by_labels if name == "bringup_plan_info"]
    info = dict(info)
    assert info["model_name"] == live.engine.model_name and info["device"] == plan.device
    assert info["dtype"] == plan.dtype.value and info["compiled"] == "eager"
    # the plan's order; the fallback counter says what runs now
    assert info["attention"] == " > ".join(plan.attention.value) and "sdpa_efficient > sdpa_math" in info["attention"]
    assert info["kv_blocks"] == str(plan.kv_blocks.value)
    assert info["host_fallbacks"] == "none" and info["global_fallback"] == "none"  # the CPU is the host
    assert m.value("bringup_plan_info") == 1


def test_metrics_content_type_is_the_0_0_4_text_format(live: LiveServer) -> None:
    r = httpx.get(f"{live.url}/metrics")
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "_created" not in r.text


def _documented() -> dict[str, tuple[str, set[str], str]]:
    """name -> (type, labels, vLLM-compatible) from the table in docs/metrics.md."""
    rows = {}
    for line in DOC.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and re.fullmatch(r"`[a-z0-9_:]+`", cells[0]):
            rows[cells[0].strip("`")] = (cells[1], set(re.findall(r"`([a-z_]+)`", cells[2])), cells[4])
    return rows


def _exposed_name(family) -> str:
    return family.name + "_total" if family.type == "counter" else family.name


def test_the_documented_table_and_the_exposition_list_the_same_metrics(live: LiveServer) -> None:
    _mixed_requests(live)
    documented = _documented()
    assert len(documented) >= 20
    exposed = {_exposed_name(f): f for f in _families(live).values()}
    assert set(documented) == set(exposed)
    for name, (kind, labels, compatible) in documented.items():
        family = exposed[name]
        assert family.type == kind, name
        assert compatible.startswith("yes") == name.startswith("vllm:"), name
        seen = {k for s in family.samples for k in s.labels if k != "le"}
        if family.samples:  # a labelled counter nothing has counted yet has no samples to show its labels
            assert seen == labels, name


def test_two_servers_in_one_process_count_separately() -> None:
    a, b = ServerMetrics("model-a"), ServerMetrics("model-b")
    a.count_generated(3, None)
    a.count_error("non_finite_logits")
    sa, sb = parse_metrics(a.render().decode()), parse_metrics(b.render().decode())
    assert isinstance(sa, Samples)
    assert sa.value("vllm:generation_tokens_total", model_name="model-a") == 3
    assert sb.value("vllm:generation_tokens_total") == 0
    assert sa["bringup_request_errors_total{code=\"non_finite_logits\"}"] == 1
    assert sb.value("bringup_request_errors_total") == 0
