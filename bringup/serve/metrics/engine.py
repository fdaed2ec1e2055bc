"""The metrics read at scrape time: the engine's gauges, the execution plan and the fallbacks it took.

Each scrape reads the last stats snapshot the engine thread published (never the engine itself, which is not
thread-safe), the frozen plan, and a copy of the fallback recorder's event list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import fields
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bringup.runner.plan.plan import Choice, ExecutionPlan
from bringup.serve.metrics.placement import placement_metrics, replica_metrics
from bringup.serve.protocol import Engine

PLAN_LABELS_SKIPPED = ("profile", "warnings")  # prose, not a setting


class EngineStateCollector(Collector):
    def __init__(self, model_name: str, engine: Engine, state: Callable[[], dict]) -> None:
        self.model_name = model_name
        self.engine = engine
        self.state = state

    def collect(self) -> Iterator[Metric]:
        s = self.state()
        model = [self.model_name]

        def gauge(name: str, help_text: str, value: float, vllm: bool = False) -> GaugeMetricFamily:
            family = GaugeMetricFamily(name, help_text, labels=["model_name"] if vllm else None)
            if vllm:
                family.add_metric(model, value)
            else:
                family.add_metric([], value)
            return family

        total, used = s.get("kv_blocks_total", 0), s.get("kv_blocks_used", 0)
        usage = used / total if total else 0.0
        yield gauge("vllm:num_requests_running", "Sequences in the running batch.", s.get("num_running", 0), True)
        yield gauge("vllm:num_requests_waiting", "Sequences waiting in the engine for a batch slot.",
                    s.get("num_waiting", 0), True)
        yield gauge("vllm:kv_cache_usage_perc", "KV-cache blocks in use / blocks in the pool (1 = full).", usage,
                    True)
        yield gauge("vllm:gpu_cache_usage_perc", "The same value as vllm:kv_cache_usage_perc, under the older "
                    "name vLLM's dashboard reads (whatever the device).", usage, True)
        preemptions = CounterMetricFamily("vllm:num_preemptions", "Sequences preempted (KV blocks freed, to be "
                                          "recomputed) because the KV cache ran out.", labels=["model_name"])
        preemptions.add_metric(model, s.get("num_preemptions", 0))
        yield preemptions
        for name, help_text in (("queries", "Prompt tokens looked up in the prefix cache."),
                                ("hits", "Prompt tokens found in the prefix cache (not computed again).")):
            family = CounterMetricFamily(f"vllm:prefix_cache_{name}", help_text, labels=["model_name"])
            family.add_metric(model, s.get(f"prefix_cache_{name}", 0))
            yield family
        yield gauge("bringup_kv_blocks_used", "KV-cache blocks in use.", used)
        yield gauge("bringup_kv_blocks_total", "KV-cache blocks in the pool.", total)
        yield gauge("bringup_requests_in_flight", "HTTP generation requests admitted and not yet answered.",
                    s.get("in_flight", 0))
        yield gauge("bringup_engine_alive", "1 while the engine loop runs, 0 after it failed or stopped.",
                    1 if s.get("alive") else 0)
        yield gauge("bringup_draining", "1 after shutdown began (no new requests admitted).",
                    1 if s.get("draining") else 0)
        yield self._fallbacks()
        yield self._plan()
        yield from placement_metrics(self.engine.plan)
        yield from replica_metrics(s)

    def _fallbacks(self) -> CounterMetricFamily:
        family = CounterMetricFamily("bringup_fallbacks", "Runner fallbacks, by level (op, path, global), what fell "
                                     "back and what is used instead; each is also logged at WARNING.",
                                     labels=["level", "what", "instead"])
        events = Counter((e.level, e.what, e.instead) for e in list(self.engine.fallbacks.events))
        for labels, n in sorted(events.items()):
            family.add_metric(list(labels), n)
        return family

    def _plan(self) -> GaugeMetricFamily:
        labels = plan_labels(self.engine.plan)
        family = GaugeMetricFamily("bringup_plan_info", "The execution plan in force: 1, with one label per "
                                   "setting (see /v1/plan for the evidence of each).",
                                   labels=["model_name", *labels])
        family.add_metric([self.model_name, *labels.values()], 1)
        return family


def plan_labels(plan: ExecutionPlan) -> dict[str, str]:
    """Every setting of the plan as a label value: lists joined with ' > ', no compile backend as 'eager', host
    fallbacks joined with ', ' and no fallback as 'none'."""
    labels = {}
    for f in fields(plan):
        if f.name in PLAN_LABELS_SKIPPED:
            continue
        value: Any = getattr(plan, f.name)
        if isinstance(value, Choice):
            value = value.value
            if f.name == "compiled" and not value:
                value = "eager"
            if f.name in ("placement", "mixed_steps"):
                value = plan.shown(f.name)
            if f.name in ("host_fallbacks", "global_fallback"):
                value = ", ".join(value) if isinstance(value, list) else value
                value = value or "none"
        labels[f.name] = " > ".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
    return labels


class IgnoredFieldsCollector(Collector):
    def __init__(self, counts: Callable[[], dict[str, int]]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily("bringup_ignored_request_fields", "Request fields accepted and ignored (not "
                                     "part of the OpenAI API this server implements), by field name.",
                                     labels=["field"])
        for name, n in sorted(self.counts().items()):
            family.add_metric([name], n)
        yield family
