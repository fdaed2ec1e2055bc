"""A plan value as people read it: the one place a setting's value becomes text (plain data, no imports).

The plan's values are data (a dtype's name, a list of attention implementations in the order tried, a compile backend
or None, a count of KV blocks, the ops through the host); the start-up table, the report's draft, `bringup all`'s plan
line, a tune record's `shown` and /v1/plan's `shown` are written from them here, and nothing reads a value back out of
this text.
"""

from __future__ import annotations

from typing import Any

from bringup.runner.plan.placement.placement import shown_placement
from bringup.runner.plan.prefill_chunk import shown_chunks

LISTED = ("host_fallbacks", "global_fallback")  # a list of names, or one, shown as `none` when empty


def shown(setting: str, value: Any, block_size: int) -> str:
    """`setting`'s `value` as the plan table shows it; `block_size` (tokens per KV block) for the KV cache."""
    if setting == "placement":
        return shown_placement(value)
    if setting in LISTED:
        return str((", ".join(value) if isinstance(value, list) else value) or "none")
    if setting == "graphs":
        return "batch " + ", ".join(str(size) for size in value) if value else "off"
    if setting == "prefill_chunk":
        return shown_chunks(value)
    if setting == "mixed_steps":  # the decodes' average context from which a step splits (plan/mixed_steps.py)
        return "one forward" if value is None else "split" if value == 0 else f"split from context {value}"
    if isinstance(value, list):
        return " > ".join(value)  # the implementations in the order tried
    if setting == "compiled":
        return f"compiled ({value})" if value else "eager"
    if setting == "prefix_caching":
        return "on" if value else "off"
    if setting == "kv_blocks":
        return f"{value} × {block_size} tokens"
    return str(value)
