"""The dtype of a layer split whose members' own plans differ, from profiles recorded on real machines: one that
every member verified (the member holding the most layers' choice first), and float32 where a member refused the
others; the evidence names each member's choice and what it did not verify."""

from __future__ import annotations

from pathlib import Path

from bringup.profiles.schema import Capability, Profile
from bringup.profiles.store import load_profile
from bringup.runner.plan.placement.split_dtype import common_dtype, verified_dtypes
from bringup.runner.plan.plan import choose_dtype
from bringup.runner.plan.profile_facts import ProfileFacts

REFERENCE = Path(__file__).resolve().parents[2] / "reference" / "profiles"


def refusing(profile: Profile, dtype: str) -> Profile:
    """`profile` as a device that refuses `dtype` records it (the emulator's refused_dtypes, MPS's float64)."""
    caps = profile.capabilities.model_copy(deep=True)  # type: ignore[union-attr]
    caps.dtypes[dtype] = Capability(status="unsupported", reason=f"{dtype} refused by the device")
    return profile.model_copy(update={"capabilities": caps})


def test_a_split_runs_in_a_dtype_every_member_verified_and_says_which() -> None:
    gpu = ProfileFacts(load_profile(REFERENCE / "nvidia-h200-sxm-torch2.11-cu130.yaml"))
    cpu = ProfileFacts(load_profile(REFERENCE / "cpu-amd-epyc-2core-avx512-bf16.yaml"))
    assert (choose_dtype(gpu).value, choose_dtype(cpu).value) == ("float16", "bfloat16")  # the recorded choices
    verified = {"cuda:0": verified_dtypes(gpu), "cpu": verified_dtypes(cpu)}
    assert verified["cpu"] == ["bfloat16", "float16", "float32"]
    split = common_dtype({"cuda:0": "float16", "cpu": "bfloat16"}, verified)  # the GPU holds the most layers
    assert split.dtype == "float16"
    assert split.evidence == ("the split runs in float16, which every member verified, so activations cross "
                              "unconverted (cuda:0's plan chose float16; cpu's plan chose bfloat16, it also "
                              "verified float16)")
    no_bf16 = ProfileFacts(refusing(cpu.profile, "bfloat16"))  # type: ignore[arg-type]
    no_half = ProfileFacts(refusing(refusing(gpu.profile, "float16"), "bfloat16"))  # type: ignore[arg-type]
    assert verified_dtypes(no_bf16) == ["float16", "float32"] and verified_dtypes(no_half) == ["float32"]
    assert common_dtype({"cpu": "bfloat16", "cuda:0": "float16"},
                        {"cpu": verified["cpu"], "cuda:0": verified_dtypes(no_bf16)}).dtype == "float16"
    full = common_dtype({"cpu": "bfloat16", "x:1": "float32"}, {"cpu": verified["cpu"], "x:1": ["float32"]})
    assert full.dtype == "float32" and full.evidence.endswith("x:1's plan chose float32; x:1 did not verify "
                                                              "bfloat16)")
