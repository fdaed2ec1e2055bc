"""What `bringup all --level N` runs: 1 a readiness check in seconds, 2 the default, 3 the full catalog and
bench, 4 level 3 and a soak."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.profiles.attention_kinds import SDPA_MATH

SMOKE_OPS = ("matmul", "linear", "softmax", "rms_norm", "silu", "embedding", "rotary", SDPA_MATH)
QUICK_BENCH_GROUPS = "matmul,bandwidth,transfer,dispatch,attention,ops,e2e,serve"
DEFAULT_LEVEL = 2
DEFAULT_SOAK_MINUTES = 10.0


@dataclass(frozen=True)
class Stage:
    name: str
    args: list[str]
    takes_model: bool = False


def stages_for(level: int, soak_minutes: float = DEFAULT_SOAK_MINUTES, tune_model: bool = False) -> list[Stage]:
    """With `tune_model` (a --model given), levels 2 and up tune it before selftest, which then replays its plan."""
    stages = _level_stages(level, soak_minutes)
    if tune_model and level > 1:
        at = next(i for i, s in enumerate(stages) if s.name == "selftest")
        stages.insert(at, Stage("tune", ["tune"], takes_model=True))
    return stages


def _level_stages(level: int, soak_minutes: float) -> list[Stage]:
    devices = Stage("devices", ["devices"])
    if level == 1:
        return [devices, Stage("probe", ["probe", "--only", "dtypes", "--only", "attention"]),
                Stage("verify-ops", ["verify-ops", "--resume", *(a for op in SMOKE_OPS for a in ("--op", op))]),
                Stage("selftest", ["selftest", "--steps", "4"], takes_model=True)]
    verify = Stage("verify-ops", ["verify-ops", "--resume", "--compiled"])
    if level == 2:
        return [devices, Stage("probe", ["probe"]), verify,
                Stage("bench", ["bench", "--quick", "--only", QUICK_BENCH_GROUPS], takes_model=True),
                Stage("selftest", ["selftest"], takes_model=True)]
    full = [devices, Stage("probe", ["probe"]), verify, Stage("bench", ["bench"], takes_model=True),
            Stage("selftest", ["selftest", "--steps", "32"], takes_model=True)]
    if level == 3:
        return full
    return [*full, Stage("soak", ["soak", "--minutes", f"{soak_minutes:g}"])]


STAGE_NAMES = ["devices", "probe", "verify-ops", "bench", "tune", "selftest", "soak"]
LEVEL_HELP = ("Depth of the run: 1 a readiness check in seconds (dtypes and attention probed, a few core ops "
              "verified, a short selftest; no bench); 2 the default (every probe, the op catalog with compiled "
              "comparisons, a quick bench, tune when --model is given, selftest); 3 the full bench and a longer "
              "selftest; 4 level 3 and a soak "
              "(--soak-minutes) watching for rate drift and intermittent wrong results. A stage recorded at a "
              "lower level runs again.")
