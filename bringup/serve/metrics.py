"""Prometheus metrics, kept in memory and rendered in the text exposition format (version 0.0.4)."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

PREFIX = "bringup"

TTFT_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
ITL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
E2E_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        self.counts = [0] * len(self.buckets)

    def observe(self, value: float) -> None:
        index = bisect.bisect_left(self.buckets, value)
        if index < len(self.counts):
            self.counts[index] += 1
        self.total += value
        self.count += 1

    def lines(self, name: str) -> Iterable[str]:
        cumulative = 0
        for bound, n in zip(self.buckets, self.counts):
            cumulative += n
            yield f'{name}_bucket{{le="{bound:g}"}} {cumulative}'
        yield f'{name}_bucket{{le="+Inf"}} {self.count}'
        yield f"{name}_sum {self.total:.9g}"
        yield f"{name}_count {self.count}"


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
    return "{" + inner + "}"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class ServerMetrics:
    """Counters and histograms updated by the server; gauges read from the engine at scrape time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.http_requests: dict[tuple[str, str], int] = {}
        self.finished: dict[str, int] = {}
        self.errors: dict[str, int] = {}
        self.stalled_streams = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.ttft = Histogram(TTFT_BUCKETS)
        self.itl = Histogram(ITL_BUCKETS)
        self.e2e = Histogram(E2E_BUCKETS)

    def count_http(self, endpoint: str, status: int) -> None:
        with self._lock:
            key = (endpoint, str(status))
            self.http_requests[key] = self.http_requests.get(key, 0) + 1

    def count_prompt_tokens(self, n: int) -> None:
        with self._lock:
            self.prompt_tokens += n

    def count_generated(self, n_tokens: int, gap_s: float | None) -> None:
        """n_tokens new tokens arrived gap_s after the previous ones (None for the first)."""
        with self._lock:
            self.generation_tokens += n_tokens
            if gap_s is not None and n_tokens > 0:
                for _ in range(n_tokens):
                    self.itl.observe(gap_s / n_tokens)

    def observe_ttft(self, seconds: float) -> None:
        with self._lock:
            self.ttft.observe(seconds)

    def count_finished(self, finish_reason: str, e2e_s: float) -> None:
        with self._lock:
            self.finished[finish_reason] = self.finished.get(finish_reason, 0) + 1
            self.e2e.observe(e2e_s)

    def count_aborted(self, n: int) -> None:
        """Sequences stopped before they finished (client gone, shutdown timeout)."""
        with self._lock:
            self.finished["abort"] = self.finished.get("abort", 0) + n

    def count_error(self, code: str, n: int = 1) -> None:
        """Sequences the server ended with an error: untrustworthy numbers, the drain timeout."""
        with self._lock:
            self.errors[code] = self.errors.get(code, 0) + n

    def count_stalled_stream(self) -> None:
        """A stream cut because its client read nothing for the write timeout."""
        with self._lock:
            self.stalled_streams += 1

    def render(self, gauges: Callable[[], dict]) -> str:
        """The exposition text; gauges() returns the engine's stats snapshot plus server state."""
        g = gauges()
        out: list[str] = []

        def metric(name: str, kind: str, help_text: str, samples: Iterable[tuple[dict[str, str], float]]):
            full = f"{PREFIX}_{name}"
            out.append(f"# HELP {full} {help_text}")
            out.append(f"# TYPE {full} {kind}")
            for labels, value in samples:
                out.append(f"{full}{_labels(labels)} {value:.9g}" if isinstance(value, float)
                           else f"{full}{_labels(labels)} {value}")

        def histogram(name: str, help_text: str, h: Histogram) -> None:
            full = f"{PREFIX}_{name}"
            out.append(f"# HELP {full} {help_text}")
            out.append(f"# TYPE {full} histogram")
            out.extend(h.lines(full))

        with self._lock:
            metric("http_requests_total", "counter", "HTTP requests answered, by endpoint and status code.",
                   [({"endpoint": e, "status": s}, n) for (e, s), n in sorted(self.http_requests.items())])
            metric("requests_finished_total", "counter", "Generation sequences finished, by finish reason.",
                   [({"finish_reason": r}, n) for r, n in sorted(self.finished.items())])
            metric("request_errors_total", "counter", "Generation sequences ended with an error, by error code "
                   "(non_finite_logits: the model's numbers could not be trusted; drain_timeout: cut at shutdown).",
                   [({"code": c}, n) for c, n in sorted(self.errors.items())])
            metric("stream_write_timeouts_total", "counter", "Streams cut because the client read nothing for "
                   "the write timeout (--stream-write-timeout).", [({}, self.stalled_streams)])
            metric("prompt_tokens_total", "counter", "Prompt tokens admitted to the engine.",
                   [({}, self.prompt_tokens)])
            metric("generation_tokens_total", "counter", "Tokens generated.", [({}, self.generation_tokens)])
            histogram("time_to_first_token_seconds", "Time from admission to the first generated token.",
                      self.ttft)
            histogram("inter_token_latency_seconds", "Time between successive generated tokens.", self.itl)
            histogram("request_latency_seconds", "Time from admission to the last token.", self.e2e)
        metric("requests_in_flight", "gauge", "HTTP generation requests admitted and not yet answered.",
               [({}, g.get("in_flight", 0))])
        metric("queue_length", "gauge", "Sequences waiting in the engine for a batch slot.",
               [({}, g.get("num_waiting", 0))])
        metric("running_sequences", "gauge", "Sequences in the running batch.", [({}, g.get("num_running", 0))])
        metric("kv_blocks_used", "gauge", "KV-cache blocks in use.", [({}, g.get("kv_blocks_used", 0))])
        metric("kv_blocks_total", "gauge", "KV-cache blocks in the pool.", [({}, g.get("kv_blocks_total", 0))])
        metric("fallbacks_total", "counter", "Runner fallbacks, by level (op, path, global).",
               [({"level": lvl}, n) for lvl, n in sorted((g.get("fallbacks") or {}).items())])
        metric("engine_alive", "gauge", "1 while the engine loop runs, 0 after it failed or stopped.",
               [({}, 1 if g.get("alive") else 0)])
        metric("draining", "gauge", "1 after shutdown began (no new requests admitted).",
               [({}, 1 if g.get("draining") else 0)])
        return "\n".join(out) + "\n"


def parse_metrics(text: str) -> dict[str, float]:
    """Sample name with labels -> value; the inverse of render for tests and the benchmark."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        values[name] = float(value)
    return values
