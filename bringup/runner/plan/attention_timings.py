"""The start-up attention check's numbers as data, and the choice they give (engine/attention_check.py measures them;
a tune record stores them and a later start replays the timings).

Each SDPA candidate's error against float64 attention beside the plain path's error on the same inputs, and the
seconds of one PROMPT_TOKENS-token prompt's attention with it and with the plain path (long enough for the [heads, T,
T] scores to cost what they cost in a long prompt: at 512 tokens SmolLM2's two paths took the same time in bfloat16,
at 920 flash took 0.47 x plain's, at 2,048 0.28 x). The first candidate, in the
order given, that is not materially less accurate than the plain path (PyTorch's accuracy-checker rule, DESIGN.md)
and is faster is planned; a candidate that raised is named with why.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PROMPT_TOKENS = 1024
EARLIER_PROMPT_TOKENS = 512  # what records from before timed (they carry no `tokens`)
CHECK_PROMPTS = 2  # two ragged prompts under the runner's boolean mask
ERROR_FACTOR, ERROR_SLACK = 2.0, 1e-6  # err <= 2 x plain's + slack (relative to the largest output)


@dataclass(frozen=True)
class AttentionTimings:
    plain_error: float
    plain_s: float
    errors: dict[str, float] = field(default_factory=dict)  # candidate -> relative max error against float64
    seconds: dict[str, float] = field(default_factory=dict)  # candidate -> seconds (only those timed)
    cannot_run: dict[str, str] = field(default_factory=dict)  # candidate -> why it cannot run here
    tokens: int = PROMPT_TOKENS  # the prompt the seconds are of


def accurate(t: AttentionTimings, name: str) -> bool:
    return t.errors[name] <= ERROR_FACTOR * t.plain_error + ERROR_SLACK


def needs_timing(t: AttentionTimings, candidates: list[str]) -> list[str]:
    """The candidates, in order, whose seconds the choice reads and `t` lacks (none: `t` decides alone)."""
    missing = []
    for name in candidates:
        if name in t.cannot_run or name not in t.errors or not accurate(t, name):
            continue
        if name not in t.seconds:
            missing.append(name)
        elif t.seconds[name] < t.plain_s:
            break
    return missing


def attention_verdicts(t: AttentionTimings, candidates: list[str]) -> tuple[str | None, list[str]]:
    """The first candidate correct here and faster than the plain path (None if none), and each verdict."""
    notes = []
    for name in candidates:
        if name in t.cannot_run:
            notes.append(f"{name} cannot run here ({t.cannot_run[name]})")
            continue
        verdict = f"{name}: error {t.errors[name]:.2g} vs plain {t.plain_error:.2g} against float64 on " \
                  f"{CHECK_PROMPTS} ragged prompts"
        if not accurate(t, name):
            notes.append(f"{verdict}: less accurate than the plain path, not used")
            continue
        seconds = t.seconds[name]
        verdict += (f"; a {t.tokens}-token prompt's attention {seconds * 1e3:.2f} ms vs plain "
                    f"{t.plain_s * 1e3:.2f} ms")
        if seconds >= t.plain_s:
            notes.append(f"{verdict}: not faster, not used")
        else:
            return name, [*notes, f"{verdict}: checked at start-up, used"]
    return None, notes
