"""What a fleet run does -- identical on every rank; travels to the ranks as JSON in the environment."""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

OPTIONS_ENV_VAR = "BRINGUP_FLEET_OPTIONS"
STAGES = ("devices", "probe", "verify-ops", "bench", "selftest", "links")
DEFAULT_STAGES = STAGES
# The quick verify-ops: the core ops of a decoder at float32 (a few seconds per rank on a small CPU).
QUICK_OPS = ("matmul", "linear", "softmax", "rms_norm", "silu")
QUICK_PROBE_GROUPS = ("dtypes", "attention")
SELFTEST_STEPS = 4
MAD_K = 3.5            # modified z-score cut of Iglewicz & Hoaglin: |x - median| > 3.5 x 1.4826 x MAD
MIN_DEVIATION = 0.10   # and at least this share of the median, so a fleet of near-identical ranks flags no one
# links carry other traffic and scheduling noise that a device does not: a link is named when it falls 40 % below
# the fleet's (a link at half bandwidth is); 4 CPU ranks on 2 cores put clean loopback links up to 0.67x apart
LINK_MIN_DEVIATION = 0.40


@dataclass
class FleetOptions:
    out_dir: str
    stages: list[str] = field(default_factory=lambda: list(DEFAULT_STAGES))
    ops: list[str] = field(default_factory=lambda: list(QUICK_OPS))
    selftest_steps: int = SELFTEST_STEPS
    link_bytes: int = 4 * 1024 * 1024
    mad_k: float = MAD_K
    min_deviation: float = MIN_DEVIATION
    link_min_deviation: float = LINK_MIN_DEVIATION
    device_type: str = "cpu"
    timeout_s: float = 600.0

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> FleetOptions:
        return cls(**json.loads(text))

    @classmethod
    def from_env(cls) -> FleetOptions:
        return cls.from_json(os.environ[OPTIONS_ENV_VAR])


def parse_stages(values: list[str]) -> list[str]:
    """'devices,probe' or repeated values -> the stages in their run order; ValueError names an unknown one."""
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    unknown = [n for n in names if n not in STAGES]
    if unknown:
        raise ValueError(f"unknown stage(s) {', '.join(unknown)}; choose from {', '.join(STAGES)}")
    return [s for s in STAGES if s in names] if names else list(DEFAULT_STAGES)
