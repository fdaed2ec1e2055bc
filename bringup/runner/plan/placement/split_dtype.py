"""The dtype a layer split runs in where its members' own plans would differ (a dtype one device refused or did not
verify): one that every member verified, so the activations cross between devices in that dtype unconverted. The
members' own choices come first (the member holding the most layers first), then the low-precision dtypes in the
plan's order, then float32, the conservative dtype every plan can run."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.runner.plan.plan import LOW_PRECISION, RUNNER_OPS
from bringup.runner.plan.profile_facts import ProfileFacts

FULL = "float32"


@dataclass(frozen=True)
class SplitDtype:
    dtype: str
    evidence: str


def verified_dtypes(facts: ProfileFacts) -> list[str]:
    """The low-precision dtypes the profile proved (capability supported, the runner's ops verified), and float32."""
    return [name for name in LOW_PRECISION
            if facts.capability("dtypes", name)[0] == "supported" and facts.ops(name, RUNNER_OPS).verified] + [FULL]


def common_dtype(chosen: dict[str, str], verified: dict[str, list[str]]) -> SplitDtype:
    """`chosen`: each member's own dtype, the member holding the most layers first; `verified`: what each proved."""
    order = [*dict.fromkeys([*chosen.values(), *LOW_PRECISION, FULL])]
    dtype = next(d for d in order if all(d in verified[device] for device in chosen))
    own = "; ".join(f"{device}'s plan chose {name}" + ("" if dtype == name else
                                                      f", it also verified {dtype}" if dtype != FULL else "")
                    for device, name in chosen.items())
    refused = "; ".join(f"{device} did not verify {name}" for name in dict.fromkeys(chosen.values())
                        for device in chosen if name not in verified[device])
    return SplitDtype(dtype, f"the split runs in {dtype}, which every member verified, so activations cross "
                             f"unconverted ({'; '.join(part for part in (own, refused) if part)})")
