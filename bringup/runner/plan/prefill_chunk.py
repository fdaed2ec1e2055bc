"""The prefill chunk: how many prompt tokens a step may carry beside running decodes, from measured step times.

A step that carries a prompt chunk beside decodes runs them in one forward (executor: each group attends apart,
every weight is read once). The chunk is the largest size timed whose step -- one decode and the chunk -- takes at
most CHUNK_STEP_RATIO x a one-sequence decode step, so a running stream's step with a chunk in it takes at most that
many times its step without one. A chunk's step grows with the context its prompt has reached (attention reads it
all), so the steps are timed at no context and at a long one, and the chunk is chosen for each context from the line
through them: a table that shrinks the chunk as the prompt grows. A step of more decodes takes longer, so a chunk
beside them may take more before their step passes the ratio: a decode step of a full batch (DECODES_TIMED
sequences) is timed too, and the table holds a column for it, used from that many decodes on. At least MIN_CHUNK
tokens, so a prompt always moves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.runner.plan.choice import Choice

# a step that carries a prompt chunk takes at most this many times a decode step alone (issue 55 asks the streams'
# inter-token p99 with a long prompt arriving to stay within 3x of theirs without; 2.5 leaves room for noise)
CHUNK_STEP_RATIO = 2.5
MIN_CHUNK = 4  # the smallest chunk timed: a prompt always moves at least this many tokens a step
MAX_CHUNK = 1024  # the largest chunk timed
CONTEXT_TIMED = 2048  # the context the chunk steps are timed at again, where the cache and context allow
FIRST_CONTEXT = 256  # the table's first context past 0; then doubling up to the model's context
DECODES_TIMED = 8  # the full batch whose decode step is timed too (or the plan's max_num_seqs, when fewer)


@dataclass(frozen=True)
class PrefillTimings:
    """Seconds of one decode step (one sequence), of steps of one decode and a prompt chunk by the chunk's tokens
    at no context (`by_tokens`), and at `context` tokens of context (`at_context`; empty: not timed there), and of a
    decode step of `decodes` sequences (`decodes_step`; 0: not timed)."""

    decode_step: float
    by_tokens: dict[int, float] = field(default_factory=dict)
    how: str = ""
    context: int = 0
    at_context: dict[int, float] = field(default_factory=dict)
    decodes: int = 1
    decodes_step: float = 0.0


def chunk_sizes(max_model_len: int) -> list[int]:
    """The chunk sizes to time, ascending: MIN_CHUNK, 2 x, 4 x, ... tokens, up to MAX_CHUNK or the context."""
    sizes, tokens = [], MIN_CHUNK
    while tokens <= MAX_CHUNK and tokens < max_model_len:
        sizes.append(tokens)
        tokens *= 2
    return sizes or [1]


def predicted_step(timings: PrefillTimings, tokens: int, context: int) -> float:
    """Seconds of a step of one decode and a `tokens` chunk whose prompt has `context` tokens cached: the line
    through the two timings (flat where the long context was not timed)."""
    at_zero = timings.by_tokens[tokens]
    if tokens not in timings.at_context or timings.context <= 0:
        return at_zero
    return at_zero + max(timings.at_context[tokens] - at_zero, 0.0) * context / timings.context


def chunk_table(timings: PrefillTimings, max_model_len: int) -> list[list[int]]:
    """[decodes, context, chunk] rows, ascending, each chunk from that many decodes and that context on (plain lists:
    the table is plan data that JSON carries unchanged): the largest size timed whose predicted cost beside the
    decodes -- its step with one decode less that decode -- is within (CHUNK_STEP_RATIO - 1) x their decode step,
    at the end of the span it serves (the next context in the table, or the model's context)."""
    steps = {1: timings.decode_step}
    if timings.decodes > 1 and timings.decodes_step > 0:
        steps[timings.decodes] = max(timings.decodes_step, timings.decode_step)
    sizes = sorted(timings.by_tokens)
    starts, context = [0], FIRST_CONTEXT
    while timings.at_context and context < max_model_len:
        starts.append(context)
        context *= 2
    table: list[list[int]] = []
    for decodes, decode_step in steps.items():
        allowed = (CHUNK_STEP_RATIO - 1) * decode_step + timings.decode_step
        column: list[list[int]] = []
        for start, end in zip(starts, [*starts[1:], max_model_len], strict=True):
            fitting = [n for n in sizes if predicted_step(timings, n, end) <= allowed]
            chunk = fitting[-1] if fitting else sizes[0]
            if not column or chunk != column[-1][2]:
                column.append([decodes, start, chunk])
        table += column
    return table


def chunk_at(table: list[list[int]], decodes: int, context: int) -> int:
    """The chunk beside `decodes` running decodes for a prompt with `context` tokens cached."""
    column = max([d for d, _, _ in table if d <= decodes], default=table[0][0])
    return [chunk for d, start, chunk in table if d == column and start <= context][-1]


def choose_prefill_chunk(timings: PrefillTimings | None, max_model_len: int) -> Choice:
    if timings is None:
        return Choice(None, "not measured (start-up timings given as data): prompts run whole")
    table = chunk_table(timings, max_model_len)
    allowed = CHUNK_STEP_RATIO * timings.decode_step
    timed = ", ".join(f"{n}: {seconds * 1e3:.1f}" for n, seconds in sorted(timings.by_tokens.items()))
    measured = f"decode step {timings.decode_step * 1e3:.1f} ms; one decode + a chunk, ms by tokens at context 0: " \
               f"{timed}"
    if timings.at_context:
        at = ", ".join(f"{n}: {seconds * 1e3:.1f}" for n, seconds in sorted(timings.at_context.items()))
        measured += f"; at context {timings.context}: {at}"
    else:
        measured += "; not timed at a long context (the cache or context is too small): the chunk does not shrink"
    if timings.decodes > 1 and timings.decodes_step > 0:
        measured += f"; a decode step of {timings.decodes} sequences {timings.decodes_step * 1e3:.1f} ms"
    how = f" ({timings.how})" if timings.how else ""
    return Choice(table, f"the largest chunk whose cost beside the decodes is predicted within "
                         f"{CHUNK_STEP_RATIO - 1:g} × their decode step (a step with it at most {CHUNK_STEP_RATIO:g} × "
                         f"theirs: {allowed * 1e3:.1f} ms beside one), at each context; {measured}{how}")


def shown_chunks(table: list[list[int]] | None) -> str:
    if not table:
        return "whole prompts"
    if len(table) == 1:
        return f"{table[0][2]} tokens beside decodes"
    columns = sorted({d for d, _, _ in table})
    return "; ".join(f"beside {d}+ decodes: " + ", ".join(f"{chunk} tokens from context {start}"
                                                         for column, start, chunk in table if column == d)
                     for d in columns)


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
        return Choice([[1, 0, int(value)]], f"{value} tokens at every context (--prefill-chunk), not measured")
    return None
