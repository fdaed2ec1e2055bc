"""The attention implementations by name, as profiles, plans, logs and the op catalog spell them (plain data, no
torch): the one module that spells them.

It sits in profiles, below every layer that reads the names: the capability probe and the op catalog (one op per SDPA
backend), the attention bench, the plan, the model, the
verdict's hot path (profiles/hot_path.py), `bringup all`'s smoke level and the export.
The SDPA backends are one table: each name with its `torch.nn.attention.SDPBackend` member, its place in the plan's
order of preference, and whether it is a fused kernel (flash, memory-efficient, cuDNN) or the math reference.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SdpaBackend:
    name: str  # in profiles and plans, and the verify-ops op of its cases
    member: str  # torch.nn.attention.SDPBackend's member
    preference: int  # the plan tries a lower one first
    fused: bool = True  # a fused kernel; False: the math reference every build has


SDPA_MATH = "sdpa_math"
SDPA = (  # in the order the probe checks them (and the profile lists them): math first, the one every build has
    SdpaBackend(SDPA_MATH, "MATH", 4, fused=False),
    SdpaBackend("sdpa_flash", "FLASH_ATTENTION", 1),
    SdpaBackend("sdpa_efficient", "EFFICIENT_ATTENTION", 3),
    SdpaBackend("sdpa_cudnn", "CUDNN_ATTENTION", 2),
)
SDPA_BACKENDS = {backend.name: backend.member for backend in SDPA}  # name -> SDPBackend member
SDPA_BY_PREFERENCE = tuple(backend.name for backend in sorted(SDPA, key=lambda b: b.preference))
FUSED_SDPA = tuple(backend.name for backend in SDPA if backend.fused)  # in the probe's order
SDPA_ALIASES = {"sdpa_mem_efficient": "sdpa_efficient"}  # another name for a backend, accepted from a profile
PLAIN_ATTENTION = "matmul_softmax"  # matmul and softmax over the gathered K/V: runs wherever those ops do
PAGED_DECODE = "paged_decode"  # the host kernel for decode steps only (runner/host/paged_decode.py)
