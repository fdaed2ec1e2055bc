"""The plan from each profile recorded on a real machine (reference/profiles/) is sane and explained.

Each rule is checked against the profile's own records, not against the planning code: the dtype is the
fastest verified one, every planned attention path passed at that dtype, compiled only where the compiled
checks passed, and the KV cache with the weights fits the memory the profile recorded.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from bringup.profiles.schema import Profile
from bringup.profiles.store import load_profile
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.kv_cache import bytes_per_block
from bringup.runner.plan.kv_sizing import size_kv_cache
from bringup.runner.plan.layout import linear_weight_bytes
from bringup.runner.plan.plan import LOW_PRECISION, PLAIN_ATTENTION, PLAIN_OPS, RUNNER_OPS, build_plan
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.sources.builtin_model import builtin_config

REFERENCE = Path(__file__).resolve().parents[2] / "reference" / "profiles"
PROFILES = sorted(REFERENCE.glob("*.yaml"))
LLAMA_125M = replace(builtin_config(), vocab_size=32000, hidden_size=768, intermediate_size=3072, num_layers=12,
                     num_heads=12, num_kv_heads=12, head_dim=64, max_position_embeddings=2048)
MODELS = {"builtin": builtin_config(), "llama-125m": LLAMA_125M}


def test_reference_profiles_are_present_and_say_which_machine():
    assert len(PROFILES) >= 2
    for path in PROFILES:
        assert path.read_text().startswith("# machine: "), f"{path.name} does not say what machine it came from"


@pytest.fixture(scope="module", params=PROFILES, ids=[p.stem for p in PROFILES])
def profile(request) -> Profile:
    return load_profile(request.param)


def _verified(profile: Profile, dtype: str) -> bool:
    cap = profile.capabilities.dtypes.get(dtype) if profile.capabilities else None
    records = [r for r in profile.ops if r.dtype == dtype and r.op in RUNNER_OPS]
    return (cap is not None and cap.status == "supported" and bool(records)
            and all(r.status == "pass" for r in records))


def _tflops(profile: Profile, dtype: str) -> float:
    return (profile.bench.ceilings.tflops.get(dtype) or 0.0) if profile.bench and profile.bench.ceilings else 0.0


@pytest.mark.parametrize("model", list(MODELS))
def test_plan_is_sane_and_explained(profile, model):
    config: ModelConfig = MODELS[model]
    plan = build_plan(ProfileFacts(profile), "reference", profile.device.id, config, None, None)
    dtype = plan.dtype.value

    faster = [d for d in LOW_PRECISION if _verified(profile, d) and _tflops(profile, d) > _tflops(profile, "float32")]
    assert dtype == (max(faster, key=lambda d: _tflops(profile, d)) if faster else "float32"), plan.dtype.evidence

    assert plan.attention.value
    for path in plan.attention.value:
        if path == PLAIN_ATTENTION:
            ops = [r for r in profile.ops if r.dtype == dtype and r.op in PLAIN_OPS]
        else:
            cap = profile.capabilities.attention[path]
            assert cap.status == "supported", path
            per_dtype = (cap.details or {}).get("dtypes") or {}
            assert not per_dtype or str(per_dtype.get(dtype, "")).startswith("pass"), (path, per_dtype)
            ops = [r for r in profile.ops if r.dtype == dtype and r.op in {"scaled_dot_product_attention", path}]
        assert all(r.status == "pass" for r in ops), (path, [r.case for r in ops if r.status != "pass"])

    backend = plan.compiled.value
    if backend is not None:
        assert profile.capabilities.compile[backend].status == "supported"
        records = [r for r in profile.compiled if r.dtype == dtype and r.backend == backend]
        assert records and all(r.status == "pass" for r in records)

    decided_at_start_up = {"weight_layout", "kv_blocks"}  # from device measurements: test_layout_choice, below
    for setting, value, evidence in plan.rows():
        assert setting in decided_at_start_up or (value and evidence), setting


@pytest.mark.parametrize("model", list(MODELS))
def test_kv_cache_and_weights_fit_the_recorded_memory(profile, model):
    config = MODELS[model]
    plan = build_plan(ProfileFacts(profile), "reference", profile.device.id, config, None, None)
    dtype = getattr(torch, plan.dtype.value)
    free = profile.device.memory_free_bytes or profile.device.memory_total_bytes
    weights = linear_weight_bytes(config, dtype) + config.vocab_size * config.hidden_size * dtype.itemsize
    blocks = size_kv_cache(config, dtype, plan.block_size, plan.max_num_seqs.value, plan.max_model_len.value,
                           plan.max_num_batched_tokens.value, free - weights, weights)
    assert blocks.value * bytes_per_block(config, plan.block_size, dtype) + weights <= free
    assert blocks.value >= -(-plan.max_model_len.value // plan.block_size)  # one whole sequence fits
