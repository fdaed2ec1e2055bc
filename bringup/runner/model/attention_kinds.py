"""The attention implementations by name, as profiles, plans and logs spell them (plain data, no torch).

The SDPA backends are one table, read by the capability probe, the attention bench, the plan and the model: each
name with its `torch.nn.attention.SDPBackend` member and its place in the plan's order of preference.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SdpaBackend:
    name: str  # in profiles and plans
    member: str  # torch.nn.attention.SDPBackend's member
    preference: int  # the plan tries a lower one first


SDPA = (  # in the order the probe checks them (and the profile lists them): math first, the one every build has
    SdpaBackend("sdpa_math", "MATH", 4),
    SdpaBackend("sdpa_flash", "FLASH_ATTENTION", 1),
    SdpaBackend("sdpa_efficient", "EFFICIENT_ATTENTION", 3),
    SdpaBackend("sdpa_cudnn", "CUDNN_ATTENTION", 2),
)
SDPA_BACKENDS = {backend.name: backend.member for backend in SDPA}  # name -> SDPBackend member
SDPA_BY_PREFERENCE = tuple(backend.name for backend in sorted(SDPA, key=lambda b: b.preference))
SDPA_ALIASES = {"sdpa_mem_efficient": "sdpa_efficient"}  # another name for a backend, accepted from a profile
PLAIN_ATTENTION = "matmul_softmax"  # matmul and softmax over the gathered K/V: runs wherever those ops do
PAGED_DECODE = "paged_decode"  # the host kernel for decode steps only (host/paged_decode.py)
