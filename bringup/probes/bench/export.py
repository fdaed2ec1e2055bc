"""Flat rows of a bench section, for --json, --csv and -o md|csv|jsonl."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

from bringup.profiles.sections.bench import BenchSection
from bringup.terminal_text import shown

CSV_COLUMNS = ("group", "key", "name", "dtype", "status", "reason", "verified", "runs_on", "median_s", "iqr_s", "min_s",
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


MARKDOWN_COLUMNS = ("group", "name", "dtype", "status", "median_s", "iqr_s", "reps", "tflops", "gbps", "pct_measured",
                    "speedup", "params")


def markdown_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict):
        value = " ".join(f"{k}={v}" for k, v in value.items())
    return shown(str(value)).replace("|", "\\|")


def to_markdown(section: BenchSection, groups: list[str] | None = None) -> str:
    """One Markdown table of the measurements, as `llama-bench -o md` prints (seconds, TFLOP/s, GB/s, %)."""
    lines = ["| " + " | ".join(MARKDOWN_COLUMNS) + " |", "|" + "|".join(" --- " for _ in MARKDOWN_COLUMNS) + "|"]
    for row in rows(section, groups):
        lines.append("| " + " | ".join(markdown_cell(row.get(column)) for column in MARKDOWN_COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def to_jsonl(section: BenchSection, schema: str, groups: list[str] | None = None) -> str:
    """One JSON object per measurement and line, each naming its schema, as `llama-bench -o jsonl` prints."""
    return "".join(json.dumps({"schema": schema, **row}, default=str) + "\n" for row in rows(section, groups))
