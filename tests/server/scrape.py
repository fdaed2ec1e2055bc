"""/metrics text parsed with prometheus_client's own parser, for the server tests."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families


class Samples(dict):
    """Sample key (`name{label="value",...}`, labels sorted) -> value; value() sums the samples whose labels match."""

    def value(self, name: str, **labels: str) -> float:
        return sum(v for (n, ls), v in self.by_labels.items()
                   if n == name and all(dict(ls).get(k) == want for k, want in labels.items()))

    by_labels: dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse_metrics(text: str) -> Samples:
    samples = Samples()
    samples.by_labels = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = tuple(sorted(s.labels.items()))
            samples.by_labels[(s.name, labels)] = s.value
            inner = ",".join(f'{k}="{v}"' for k, v in labels)
            samples[f"{s.name}{{{inner}}}" if inner else s.name] = s.value
    return samples


def delta(after: Samples, before: Samples, name: str, **labels: str) -> float:
    return after.value(name, **labels) - before.value(name, **labels)
