"""The LLM speed card: the serving run's batch-1 tokens/s and latency percentiles, with spread and samples."""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.profiles.sections.bench import BenchRecord, BenchSection
from bringup.report.text import MISSING, number, seconds


@dataclass
class Figure:
    label: str
    value: str
    spread: str


@dataclass
class Distribution:
    label: str
    samples_s: list[float]
    p50_s: float
    p90_s: float
    p99_s: float


@dataclass
class SpeedCard:
    model: str = ""
    note: str = ""
    figures: list[Figure] = field(default_factory=list)
    distributions: list[Distribution] = field(default_factory=list)


def rate_figure(label: str, r: BenchRecord | None) -> Figure:
    if r is None or r.status != "ok" or not r.median_s:
        return Figure(label, MISSING, r.reason or "" if r else "not measured")
    spread = (f"IQR {r.iqr_s / r.median_s:.0%} of the median over {r.reps} requests" if r.iqr_s is not None
              else "spread: one run, not recorded")
    return Figure(label, f"{number(1.0 / r.median_s)} tokens/s", spread)


def latency_figure(label: str, r: BenchRecord | None) -> Figure:
    if r is None or r.status != "ok" or "p50_s" not in r.params:
        return Figure(label, MISSING, "not measured")
    p = r.params
    return Figure(label, f"p50 {seconds(p['p50_s'])} · p90 {seconds(p['p90_s'])} · p99 {seconds(p['p99_s'])}",
                  f"IQR {seconds(r.iqr_s)} over {r.reps} samples")


def distribution(label: str, r: BenchRecord | None) -> list[Distribution]:
    if r is None or r.status != "ok" or not r.params.get("samples_s"):
        return []
    p = r.params
    return [Distribution(label, [float(s) for s in p["samples_s"]], p["p50_s"], p["p90_s"], p["p99_s"])]


def speed_card(section: BenchSection | None) -> SpeedCard | None:
    """From the serve group; a profile recorded before it has the e2e group's single run (no spread)."""
    if section is None:
        return None
    found = {r.key: r for r in section.records("serve")}
    if not found:
        e2e = {r.key: r for r in section.records("e2e")}
        if not e2e:
            return None
        model = str(next(iter(e2e.values())).params.get("model", ""))
        return SpeedCard(model, "one end-to-end run (the e2e group): no latency percentiles, no spread; "
                         "`bringup bench --only serve` measures them",
                         [rate_figure("decode, batch 1", e2e.get("decode_b1")),
                          rate_figure("prefill, batch 1", e2e.get("prefill_b1"))])
    model = str(next(iter(found.values())).params.get("model", ""))
    notes = section.groups["serve"].notes
    return SpeedCard(model, notes[0] if notes else "",
                     [rate_figure("decode, batch 1", found.get("decode_b1")),
                      rate_figure("prefill, batch 1", found.get("prefill_b1")),
                      latency_figure("time to first token", found.get("ttft")),
                      latency_figure("inter-token latency", found.get("inter_token"))],
                     distribution("time to first token", found.get("ttft"))
                     + distribution("inter-token latency", found.get("inter_token")))
