"""The prefill chunk: how many prompt tokens a step may carry beside running decodes, from measured step times.

A step that carries a prompt chunk beside decodes takes the decodes' time plus the chunk's (the executor runs them
as separate forwards, executor.forward_groups). The chunk is the largest size timed whose prefill step takes at most
(CHUNK_STEP_RATIO - 1) × a one-sequence decode step, so a running stream's step with a chunk in it takes at most
CHUNK_STEP_RATIO × its step without one. Sizes are whole KV blocks; one block at least, so a prompt always moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.runner.plan.choice import Choice

# a decode step that carries a prompt chunk takes at most this many times a decode step alone (issue 55 asks the
# streams' inter-token p99 with a long prompt arriving to stay within 3x of theirs without; 2 leaves room for noise)
CHUNK_STEP_RATIO = 2.0
MAX_CHUNK_BLOCKS = 64  # the largest chunk timed: 64 blocks (1,024 tokens of 16)


@dataclass(frozen=True)
class PrefillTimings:
    """Seconds of one decode step (one sequence) and of prefill steps by their prompt tokens (the best of a few)."""

    decode_step: float
    by_tokens: dict[int, float] = field(default_factory=dict)
    how: str = ""


def chunk_sizes(block_size: int, max_model_len: int) -> list[int]:
    """The chunk sizes to time, ascending: 1, 2, 4, ... blocks, up to MAX_CHUNK_BLOCKS or the context."""
    sizes, blocks = [], 1
    while blocks <= MAX_CHUNK_BLOCKS and blocks * block_size < max_model_len:
        sizes.append(blocks * block_size)
        blocks *= 2
    return sizes or [block_size]


def choose_prefill_chunk(timings: PrefillTimings | None, block_size: int) -> Choice:
    if timings is None:
        return Choice(None, "not measured (start-up timings given as data): prompts run whole")
    allowed = (CHUNK_STEP_RATIO - 1) * timings.decode_step
    fitting = [n for n, seconds in sorted(timings.by_tokens.items()) if seconds <= allowed]
    timed = ", ".join(f"{n}: {seconds * 1e3:.1f}" for n, seconds in sorted(timings.by_tokens.items()))
    measured = (f"decode step {timings.decode_step * 1e3:.1f} ms; prefill ms by tokens {timed}"
                f"{f' ({timings.how})' if timings.how else ''}")
    if not fitting:
        return Choice(block_size, f"one block: no timed prefill step fits {CHUNK_STEP_RATIO - 1:g} × the decode "
                                  f"step ({allowed * 1e3:.1f} ms); {measured}")
    return Choice(fitting[-1], f"the largest prefill step within {CHUNK_STEP_RATIO - 1:g} × a decode step "
                               f"({allowed * 1e3:.1f} ms), so a stream's step with a chunk takes at most "
                               f"{CHUNK_STEP_RATIO:g} × its step without; {measured}")


def check_prefill_chunk_option(value: str) -> str | None:
    """One line saying why `value` is not a --prefill-chunk value, or None."""
    if value in ("auto", "off") or (value.isdigit() and int(value) > 0):
        return None
    return (f"--prefill-chunk {value!r} is not auto, off or a positive number of tokens; pass auto (measured), off "
            "(prompts run whole) or e.g. 256")


def chunk_option(value: str) -> Choice | None:
    """The row --prefill-chunk sets (None: auto, measured)."""
    if value == "off":
        return Choice(None, "off (--prefill-chunk off): prompts run whole, stalling running streams for their prefill")
    if value.isdigit():
        return Choice(int(value), f"{value} tokens (--prefill-chunk), not measured")
    return None
