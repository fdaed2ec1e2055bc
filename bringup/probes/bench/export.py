"""Flat rows of a bench section, for --json and --csv."""

from __future__ import annotations

import csv
import io
from typing import Any

from bringup.profiles.sections.bench import BenchSection

CSV_COLUMNS = ("group", "key", "name", "dtype", "status", "reason", "verified", "median_s", "iqr_s", "min_s",
               "reps", "calls_per_rep", "noisy", "stop", "flops", "bytes", "tflops", "gbps", "intensity",
               "pct_measured", "pct_datasheet", "bound", "baseline_key", "speedup")


def rows(section: BenchSection, groups: list[str] | None = None) -> list[dict[str, Any]]:
    out = []
    for group, found in section.groups.items():
        if groups is not None and group not in groups:
            continue
        for record in found.records:
            out.append({"group": group, **record.model_dump(exclude={"params"}), "params": record.params})
    return out


def to_csv(section: BenchSection, groups: list[str] | None = None) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[*CSV_COLUMNS, "params"], extrasaction="ignore")
    writer.writeheader()
    for row in rows(section, groups):
        writer.writerow({**row, "params": ";".join(f"{k}={v}" for k, v in row["params"].items())})
    return buffer.getvalue()
