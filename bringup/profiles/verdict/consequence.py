"""Grading a wrong op case by its consequence: on the plan's hot path it fails the verdict, off it it warns.

A case is off the hot path when the runner never runs its op (profiles/hot_path.py), or runs it only in another
dtype: the sampling ops run on the step's float32 logits (runner/engine/sampling.py), so bfloat16 multinomial can be
wrong without any served token being drawn by it. The profile still records the case's own status.
"""

from __future__ import annotations

from bringup.profiles.hot_path import DECODER_OPS, FUSED_NORM_OPS, SAMPLING_OPS, on_hot_path

SAMPLING_DTYPE = "float32"  # the dtype of the logits every sampling step works on


def off_hot_path(op: str, dtype: str) -> str | None:
    """Why a wrong `op` in `dtype` cannot reach what the runner serves, or None where it can."""
    if not on_hot_path(op):
        return f"the runner's plan never runs {op}"
    sampling_only = op in SAMPLING_OPS and op not in DECODER_OPS | FUSED_NORM_OPS
    if sampling_only and dtype != SAMPLING_DTYPE:
        return f"the runner runs {op} only in sampling, on {SAMPLING_DTYPE} logits, never in {dtype}"
    return None
