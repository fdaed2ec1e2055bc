"""Shared helpers for the bench tests: a tiny preset and a context on the CPU."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from bringup.backends.registry import device_info
from bringup.probes.bench.cache import CacheSize
from bringup.probes.bench.context import BenchContext
from bringup.probes.bench.harness import Harness, HarnessSettings
from bringup.probes.bench.presets import QUICK, DecoderShape
from bringup.profiles.schema import Profile

TINY_SETTINGS = HarnessSettings(warmup=1, min_reps=3, max_reps=20, rel_iqr_threshold=0.5, budget_s=0.05,
                                min_rep_s=1e-4)
TINY_PRESET = replace(
    QUICK,
    settings=TINY_SETTINGS,
    square_sizes=(32, 64),
    decoder=DecoderShape("tiny", hidden=64, intermediate=128, heads=4, kv_heads=2),
    llm_m=(1, 8),
    stream_llc_multiple=1,
    attention_seq=(16, 32),
    attention_heads=2,
    attention_head_dim=8,
    max_call_s=30.0,  # tiny sizes: never skipped for time, even on a loaded machine
)


def make_context(profile: Profile | None = None, include_unverified: bool = False,
                 llc_bytes: int = 1 << 20) -> BenchContext:
    device = torch.device("cpu")
    return BenchContext(device=device, info=device_info(device), harness=Harness(lambda: None, TINY_SETTINGS),
                        preset=TINY_PRESET, profile=profile, llc=CacheSize(llc_bytes, "test"),
                        include_unverified=include_unverified)


@pytest.fixture
def tiny_context() -> BenchContext:
    return make_context()


@pytest.fixture
def context_for():
    """make_context as a fixture: context_for(profile, include_unverified=...)."""
    return make_context
