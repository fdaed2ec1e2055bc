"""Which ranks are not like the others -- pure functions over the ranks' summaries (plain data, no torch).

Figures (bench, link bandwidth) use the median absolute deviation: a value is an outlier when
median - x > max(k x 1.4826 x MAD, min_deviation x |median|). 1.4826 x MAD estimates the standard
deviation of normal data while one or two wild values cannot drag it (k = 3.5 is Iglewicz & Hoaglin's
modified z-score cut); the relative floor keeps a fleet of near-identical ranks (MAD ~ 0) from naming a
rank for noise. Only the slow side is named (bench figures and links alike): a rank faster than the fleet
is no bring-up problem -- a different part shows up in the device facts -- and on a shared host the fast
side is where contention noise lands (busy turns pull the median down, so a quiet turn looks fast).

Verdicts (op cases, selftest, capabilities) and facts (driver, torch, environment) are compared with the
most common value among the ranks that recorded that section: a rank that differs is named. When the top
value is tied there is no majority and every rank that holds a value other than the lowest rank's is named.
Verdicts are compared only among ranks whose every stage ran to its end (exit code 0 or 1): a rank stopped or
crashed mid-stage holds as many op cases and capabilities as it reached before it stopped, which differ from rank to
rank by timing alone (when one rank is killed during verify-ops, the others are stopped wherever they were); that
rank is a fault, reported as such, not a verdict outlier.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from bringup.probes.fleet.summary import RankSummary

MAD_SCALE = 1.4826
MAX_ITEMS = 6   # items quoted in one outlier's detail; the figures hold all of them


@dataclass(frozen=True)
class Threshold:
    figure: str
    median: float
    mad: float
    limit: float            # the largest shortfall below the median that is not an outlier
    rule: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Outlier:
    rank: int
    host: str
    kind: str               # bench | link | ops | selftest | capability | environment | fault
    detail: str
    figures: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def mad_threshold(figure: str, values: list[float], k: float, min_deviation: float) -> Threshold:
    median = statistics.median(values)
    mad = statistics.median(abs(v - median) for v in values)
    spread, floor = k * MAD_SCALE * mad, min_deviation * abs(median)
    rule = (f"median - x > max({k:g} x 1.4826 x MAD = {spread:.4g}, {min_deviation:.0%} of median = "
            f"{floor:.4g})")
    return Threshold(figure, median, mad, max(spread, floor), rule)


def beyond(value: float, threshold: Threshold, low_only: bool = False) -> bool:
    deviation = value - threshold.median
    return (-deviation if low_only else abs(deviation)) > threshold.limit


def figure_thresholds(ranks: list[RankSummary], read: Callable[[RankSummary], dict[str, float]], k: float,
                      min_deviation: float) -> dict[str, Threshold]:
    """One threshold per figure that at least three ranks measured (fewer have no median to stand on)."""
    names = sorted({name for r in ranks for name in read(r)})
    thresholds = {}
    for name in names:
        values = [read(r)[name] for r in ranks if name in read(r)]
        if len(values) >= 3:
            thresholds[name] = mad_threshold(name, values, k, min_deviation)
    return thresholds


def _figure_outliers(ranks: list[RankSummary], kind: str, read: Callable[[RankSummary], dict[str, float]],
                     thresholds: dict[str, Threshold], low_only: bool) -> list[Outlier]:
    found = []
    for summary in ranks:
        hits = {name: value for name, value in read(summary).items()
                if name in thresholds and beyond(value, thresholds[name], low_only)}
        if not hits:
            continue
        parts = []
        for name, value in hits.items():
            t = thresholds[name]
            ratio = value / t.median if t.median else float("inf")
            parts.append(f"{name} {value:.4g} vs fleet median {t.median:.4g} ({ratio:.2f}x; "
                         f"more than {t.limit:.4g} below it)")
        found.append(Outlier(summary.rank, summary.host, kind, "; ".join(parts),
                             {n: {"value": v, "median": thresholds[n].median, "limit": thresholds[n].limit}
                              for n, v in hits.items()}))
    return found


def majority(values: dict[int, str]) -> str | None:
    """The most common value, or None when the top count is tied."""
    ranked = Counter(values.values()).most_common()
    if not ranked or (len(ranked) > 1 and ranked[0][1] == ranked[1][1]):
        return None
    return ranked[0][0]


def _verdict_outliers(ranks: list[RankSummary], kind: str, read: Callable[[RankSummary], dict[str, str]],
                      what: str) -> list[Outlier]:
    """Ranks whose value for some key differs from the other ranks' most common value."""
    recorded = [r for r in ranks if read(r)]
    if len(recorded) < 2:
        return []
    keys = sorted({key for r in recorded for key in read(r)})
    differing: dict[int, dict[str, dict[str, Any]]] = {}
    for key in keys:
        values = {r.rank: read(r).get(key, "not recorded") for r in recorded}
        if len(set(values.values())) == 1:
            continue
        reference = majority(values)
        if reference is None:
            reference = values[min(values)]
        agreeing = sum(v == reference for v in values.values())
        for rank, value in values.items():
            if value != reference:
                differing.setdefault(rank, {})[key] = {"value": value, "majority": reference,
                                                       "ranks_with_majority": agreeing, "ranks": len(values)}
    found = []
    for summary in recorded:
        items = differing.get(summary.rank)
        if not items:
            continue
        quoted = [f"{key}: {v['value']} here, {v['majority']} on {v['ranks_with_majority']} of {v['ranks']} ranks"
                  for key, v in list(items.items())[:MAX_ITEMS]]
        more = f"; and {len(items) - MAX_ITEMS} more" if len(items) > MAX_ITEMS else ""
        found.append(Outlier(summary.rank, summary.host, kind,
                             f"{len(items)} {what} differ from the other ranks: " + "; ".join(quoted) + more, items))
    return found


def _selftest(summary: RankSummary) -> dict[str, str]:
    return {"selftest": summary.selftest} if summary.selftest else {}


def find_outliers(ranks: list[RankSummary], k: float, min_deviation: float, link_min_deviation: float | None = None
                  ) -> tuple[list[Outlier], dict[str, Threshold]]:
    """Every outlier among the ranks, and the thresholds the figures were judged by."""
    bench = figure_thresholds(ranks, lambda r: r.figures, k, min_deviation)
    links: dict[str, Threshold] = {}
    per_link: dict[str, Threshold] = {}
    link_values = [v for r in ranks for v in r.links.values()]
    if len(link_values) >= 3:  # every link is a sample of the same figure: one threshold over all of them
        floor = min_deviation if link_min_deviation is None else link_min_deviation
        links["link GB/s"] = mad_threshold("link GB/s", link_values, k, floor)
        per_link = {name: links["link GB/s"] for r in ranks for name in r.links}
    finished = [r for r in ranks if all(stage.exit_code in (0, 1) for stage in r.stages.values())]
    outliers = [
        *_figure_outliers(ranks, "bench", lambda r: r.figures, bench, low_only=True),
        *_figure_outliers(ranks, "link", lambda r: r.links, per_link, low_only=True),
        *_verdict_outliers(finished, "ops", lambda r: r.ops, "op verdicts"),
        *_verdict_outliers(finished, "selftest", _selftest, "selftest verdicts"),
        *_verdict_outliers(finished, "capability", lambda r: r.capabilities, "capabilities"),
        *_verdict_outliers(ranks, "environment", lambda r: r.facts, "facts"),
    ]
    outliers.sort(key=lambda o: (o.rank, o.kind))
    return outliers, {**bench, **links}
