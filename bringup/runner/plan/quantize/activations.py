"""The dtype of an integer-quantized plan's activations, and how the quantized plan compared with the unquantized one
on the served model: decisions over plain data (engine/quantized_activations.py rebuilds the plan, loads and times).

bringup's int8 / int4 host kernel takes float32 activations: a bfloat16 row is widened before every product and the
result rounded back after it, and the fused decode layers and the paged decode kernel read float32 only. So a
bfloat16 plan with int8 weights ran the modules' path, slower than bfloat16 alone (SmolLM2-135M on a 2-core Xeon:
43-45 tok/s against 57-62, and float32 + int8 121-129). An int8 / int4 scheme asked for a float checkpoint in a
bfloat16 or float16 plan is therefore served with float32 activations: the stored weights are the same, the
embedding, norms, rope tables and KV cache become float32. Not where the scheme runs as its dequantize fallback (the
fused layers do not read it) or memory does not hold the float32 parts: the requested dtype then stays, and its row
says why. Either way the served plan's decode steps are timed against the unquantized plan's in the requested
dtype; a quantized plan slower beyond the noise is still served (it was asked for, memory may be why), at WARNING.
"""

from __future__ import annotations

from dataclasses import dataclass

from bringup.runner.plan.kv_sizing import MEMORY_FRACTION
from bringup.runner.plan.noise import beyond_noise, contended, kept, percent
from bringup.runner.plan.plan import LOW_PRECISION, MARGIN, Choice
from bringup.runner.plan.quantize.scheme import NONE
from bringup.runner.weights.kinds import INT4_KINDS, INT8

FLOAT32 = "float32"
INTEGER_SCHEMES = (INT8, *INT4_KINDS)  # the schemes whose kernel takes float32 activations
WHY = ("the quantized products take float32 activations (a {dtype} row is widened before each product and the "
       "result rounded back), and the fused decode layers and the paged decode kernel read float32 only")


def applies(scheme: str, dtype: str, host: bool, pre_quantized: bool) -> bool:
    """Whether the question arises: an int8 / int4 scheme asked for a float checkpoint in a low-precision plan on the
    host (elsewhere the scheme is refused anyway)."""
    return scheme in INTEGER_SCHEMES and dtype in LOW_PRECISION and host and not pre_quantized


def float32_why_not(scheme: str, kernel_why: str | None, room_why: str | None) -> str | None:
    """Why the activations cannot be float32: the scheme runs as its dequantize fallback here, or memory is short."""
    if kernel_why is not None:
        return (f"the {scheme} products run as dequantize + F.linear here (the kernel {kernel_why}), which the fused "
                "decode layers do not read")
    return room_why


def room_why_not(free_bytes: int | None, weights: int, one_sequence: int, max_model_len: int) -> str | None:
    """Why float32 does not fit in `free_bytes` (None: unknown, no limit): the weights as float32 (the loader's size
    check) and, in MEMORY_FRACTION of what is left, one `max_model_len`-token sequence's float32 KV cache and largest
    step (the KV sizing's refusal)."""
    need = weights + one_sequence / MEMORY_FRACTION
    if free_bytes is None or need <= free_bytes:
        return None
    return (f"float32 needs about {_mib(need)}: the weights as float32 ({_mib(weights)}) and one {max_model_len}-token "
            f"sequence's float32 KV cache and largest step ({_mib(one_sequence)} in {MEMORY_FRACTION} of what is "
            f"left), and {_mib(free_bytes)} is free")


def in_float32(requested: Choice, scheme: str, kv_bytes_per_token: tuple[int, int], embedding_extra: int) -> Choice:
    """The dtype row for float32 activations: what was asked, why, and what it costs (KV bytes per token as asked
    and as float32, and the embedding's extra bytes)."""
    asked, full = kv_bytes_per_token
    return Choice(FLOAT32, f"float32 activations for the {scheme} products instead of {requested.value}: "
                           f"{WHY.format(dtype=requested.value)}; the {scheme} weights are the same; costs: the KV "
                           f"cache holds float32 ({full} B per token instead of {asked} B) and the embedding, norms "
                           f"and rope tables are float32 (+{_mib(embedding_extra)}); {requested.value} as planned: "
                           f"{requested.evidence}")


def kept_requested(requested: Choice, scheme: str, why: str) -> Choice:
    """The requested dtype's row when the activations cannot be float32, saying why and what that leaves."""
    return Choice(requested.value, f"{requested.evidence}; float32 activations for the {scheme} products not used: "
                                   f"{why}; so each {scheme} product widens its {requested.value} input and rounds "
                                   "the result back, and the fused decode layers and the paged decode kernel (float32 "
                                   "only) are not used")


@dataclass(frozen=True)
class Comparison:
    """Seconds per decode step of the served (quantized) plan and of the unquantized plan, timed in turn."""

    quantized_s: float
    unquantized_s: float
    spread: float  # the larger floor noise of the two sides' repeated timings (plan/noise.py)
    unquantized: str  # what the unquantized side ran: its dtype and path
    how: str = ""
    cpu_share: float | None = None  # the share of the CPU the timed threads got (plan/cpu_share.py; None: unknown)


def compared(choice: Choice, comparison: Comparison | None, why_not: str | None, activations: str
             ) -> tuple[Choice, str | None]:
    """The quantization row with the served plan against the unquantized plan (or why that was not measured), and a
    warning when the quantized plan measured slower beyond the noise. `activations`: the served activations' dtype."""
    if comparison is None:
        return Choice(choice.value, f"{choice.evidence}; against the unquantized plan: not measured ({why_not})"), None
    c, scheme = comparison, choice.value
    pair = (f"{scheme} ({activations} activations) {_ms(c.quantized_s)} vs unquantized {c.unquantized} "
            f"{_ms(c.unquantized_s)} per decode step")
    slower = beyond_noise(c.unquantized_s, c.quantized_s, c.spread)
    if kept(c.quantized_s, c.unquantized_s, c.spread):
        verdict = f"faster than the unquantized plan: {pair}"
    elif slower:
        verdict = f"SLOWER than the unquantized plan beyond the noise (spread {percent(c.spread)}): {pair}"
    else:
        verdict = (f"not faster than the unquantized plan (under {MARGIN:.0%} of its time, beyond the spread "
                   f"{percent(c.spread)}): {pair}")
    busy = (f"; on a busy machine: the timed threads had {percent(c.cpu_share or 0.0)} of the CPU"
            if contended(c.cpu_share) else "")
    how = f" ({c.how}{busy})" if c.how or busy else ""
    row = Choice(choice.value, f"{choice.evidence}; against the unquantized plan on this model: {verdict}{how}")
    if not slower:
        return row, None
    return row, (f"--quantization {scheme} measured slower than the unquantized plan on this model ({pair}, beyond "
                 f"the noise of {percent(c.spread)}{busy}): served as requested, since it was asked for; "
                 "--quantization none would decode faster")


def auto_withdrawn(row: Choice, comparison: Comparison | None) -> Choice | None:
    """`none`'s row when the scheme auto chose did not beat the unquantized plan once the plan was confirmed (auto
    timed it against the modules, before the fused decode layers were chosen); None when it did, or was not timed."""
    if comparison is None or kept(comparison.quantized_s, comparison.unquantized_s, comparison.spread):
        return None
    return Choice(NONE, f"auto: {row.value} withdrawn, not faster than the unquantized plan once the plan was "
                        f"confirmed (auto had timed it against the modules only); {row.evidence}")


def _mib(n: float) -> str:
    return f"{n / 2**20:.1f} MiB"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"
