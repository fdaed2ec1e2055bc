"""The prefill chunk: how many prompt tokens a step may carry beside running decodes, from measured step times.

A step that carries a prompt chunk beside decodes runs them in one forward (executor: each group attends apart, every
weight is read once). The chunk is the largest size (between the sizes timed, on the line through their timings) whose
cost beside the decodes keeps their step within CHUNK_STEP_RATIO x their step without it. A chunk's step grows with the
context its prompt has reached (attention reads it all), so the steps are timed at no context and at a long one, and the
chunk is chosen for each context from the line through them: a table that shrinks the chunk as the prompt grows. A step
of more decodes takes longer, so a chunk beside them may take more before their step passes the ratio: a decode step of
a full batch (DECODES_TIMED sequences) is timed too, and the table holds a column for it, used from that many decodes
on, and columns for twice as many, four times, ... up to max_num_seqs, their step on the line through the one decode
and the full batch timed (a host's decode step grows about linearly with its rows: SmolLM2 bfloat16 on the 2-core
Xeon, 40 decodes at context 500 predicted 69.9 ms from 1 and 8, measured 67.6). Decodes that have reached a long
context take a longer step too (each reads its context: the seconds per row and context token come from the same two
timings), so the table also holds columns by the decodes' own average context. At least MIN_CHUNK tokens, so a prompt
always moves.
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
SLOW_PROGRESS = 2.0  # a prompt beside one decode prefilling this many times slower than in the largest chunk is said
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


def _at(points: dict[int, float], tokens: int) -> float:
    """A step's seconds at `tokens` on the line between the two timed sizes around it (the timed sizes: exact)."""
    if tokens in points:
        return points[tokens]
    below = max(n for n in points if n < tokens)
    above = min((n for n in points if n > tokens), default=below)
    if above == below:
        return points[below]
    return points[below] + (points[above] - points[below]) * (tokens - below) / (above - below)


def predicted_step(timings: PrefillTimings, tokens: int, context: int) -> float:
    """Seconds of a step of one decode and a `tokens` chunk whose prompt has `context` tokens cached: the line
    through the two timings (flat where the long context was not timed), between the sizes timed."""
    at_zero = _at(timings.by_tokens, tokens)
    if not timings.at_context or timings.context <= 0:
        return at_zero
    return at_zero + max(_at(timings.at_context, tokens) - at_zero, 0.0) * context / timings.context


def row_seconds(timings: PrefillTimings) -> float:
    """Seconds a decode row adds for each token of its context: the smallest chunk's rows at the long context less
    at none (0 where the long context was not timed)."""
    tokens = min(timings.by_tokens)
    if tokens not in timings.at_context or timings.context <= 0:
        return 0.0
    return max(timings.at_context[tokens] - timings.by_tokens[tokens], 0.0) / (tokens * timings.context)


def decodes_step(timings: PrefillTimings, decodes: int, their_context: int) -> float:
    """Seconds of a step of `decodes` decodes alone, each at `their_context` tokens: one timed, the full batch timed,
    or more on the line through those two (what a decode row adds at no context), plus what their rows read of their
    contexts. Fewer than the full batch count as one (their step is not over-estimated)."""
    if decodes < timings.decodes or timings.decodes_step <= 0:
        timed = timings.decode_step
    else:
        per_row = max(timings.decodes_step - timings.decode_step, 0.0) / (timings.decodes - 1)
        timed = max(timings.decodes_step, timings.decode_step) + (decodes - timings.decodes) * per_row
    return timed + decodes * their_context * row_seconds(timings)


def decode_counts(timings: PrefillTimings, max_decodes: int) -> list[int]:
    """The table's columns by decodes: one, the full batch timed, then doubling while at most `max_decodes`."""
    if timings.decodes <= 1 or timings.decodes_step <= 0:
        return [1]
    counts = [1, timings.decodes]
    while counts[-1] * 2 <= max_decodes:
        counts.append(counts[-1] * 2)
    return counts


def span_starts(timings: PrefillTimings, max_model_len: int) -> list[int]:
    """The contexts the table's spans start at: 0, then FIRST_CONTEXT doubling (0 alone: no long context timed)."""
    starts, context = [0], FIRST_CONTEXT
    while timings.at_context and context < max_model_len:
        starts.append(context)
        context *= 2
    return starts


def _column(timings: PrefillTimings, starts: list[int], max_model_len: int, allowed: float) -> list[list[int]]:
    """[context, chunk] rows: for each span of prompt context, the largest chunk (any size from the smallest timed
    to the largest) whose step, less its one decode, is predicted within `allowed` at the span's end."""
    smallest, largest = min(timings.by_tokens), max(timings.by_tokens)
    rows: list[list[int]] = []
    for start, end in zip(starts, [*starts[1:], max_model_len], strict=True):
        chunk = next((n for n in range(largest, smallest - 1, -1)
                      if predicted_step(timings, n, end) - timings.decode_step <= allowed), smallest)
        if not rows or chunk != rows[-1][1]:
            rows.append([start, chunk])
    return rows


def chunk_table(timings: PrefillTimings, max_model_len: int, max_decodes: int = 0) -> list[list[int]]:
    """[decodes, their_context, context, chunk] rows, ascending (plain lists: the table is plan data that JSON
    carries unchanged). Each chunk serves from that many decodes, whose context averages from `their_context`
    tokens, and from that prompt context on: the largest whose predicted cost beside the decodes -- its step less
    the one decode timed with it -- is within (CHUNK_STEP_RATIO - 1) x the decodes' own step at the start of their
    span (decodes with a longer context take a longer step, and may carry a larger chunk), at the end of the
    prompt's span. A decodes' span whose chunks equal the one before it is left out. Columns by decodes:
    decode_counts, up to `max_decodes` (the plan's max_num_seqs)."""
    counts = decode_counts(timings, max_decodes)
    starts = span_starts(timings, max_model_len)
    table: list[list[int]] = []
    for decodes in counts:
        previous: list[list[int]] = []
        for their_context in starts if row_seconds(timings) > 0 else [0]:
            allowed = (CHUNK_STEP_RATIO - 1) * decodes_step(timings, decodes, their_context)
            column = _column(timings, starts, max_model_len, allowed)
            if column != previous:
                table += [[decodes, their_context, start, chunk] for start, chunk in column]
            previous = column
    return table


def chunk_at(table: list[list[int]], decodes: int, their_context: int, context: int) -> int:
    """The chunk beside `decodes` running decodes whose context averages `their_context` tokens, for a prompt with
    `context` tokens cached."""
    column = max([d for d, _, _, _ in table if d <= decodes], default=table[0][0])
    theirs = max([t for d, t, _, _ in table if d == column and t <= their_context], default=0)
    return [chunk for d, t, start, chunk in table if d == column and t == theirs and start <= context][-1]


def choose_prefill_chunk(timings: PrefillTimings | None, max_model_len: int, max_decodes: int = 0) -> Choice:
    if timings is None:
        return Choice(None, "not measured (start-up timings given as data): prompts run whole")
    table = chunk_table(timings, max_model_len, max_decodes)
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
        more = decode_counts(timings, max_decodes)[2:]
        if more:
            measured += (f" (beside {', '.join(map(str, more))}+ decodes, their step on the line through the one and "
                         f"{timings.decodes} timed)")
    if row_seconds(timings) > 0:
        measured += f"; a decode row reads its context at {row_seconds(timings) * 1e9:.0f} ns a token"
    how = f" ({timings.how})" if timings.how else ""
    return Choice(table, f"the largest chunk whose cost beside the decodes is predicted within "
                         f"{CHUNK_STEP_RATIO - 1:g} × their decode step (a step with it at most {CHUNK_STEP_RATIO:g} × "
                         f"theirs: {allowed * 1e3:.1f} ms beside one), at each context; {measured}{how}"
                         f"{slow_progress(timings, table)}")


def slow_progress(timings: PrefillTimings, table: list[list[int]]) -> str:
    """What the bound costs a prompt beside one decode, said where it prefills at under half the rate of the largest
    chunk timed (a step's fixed cost beside a decode leaves room for a few tokens only): '' otherwise."""
    chunk, largest = chunk_at(table, 1, 0, 0), max(timings.by_tokens)
    per_token = (predicted_step(timings, chunk, 0) - timings.decode_step) / chunk
    at_largest = (timings.by_tokens[largest] - timings.decode_step) / largest
    if chunk >= largest or at_largest <= 0 or per_token < SLOW_PROGRESS * at_largest:
        return ""
    return (f"; beside one decode a prompt moves {chunk} tokens a step at {per_token * 1e3:.2f} ms a token, "
            f"{per_token / at_largest:.1f} × its cost in a {largest}-token chunk: while streams run, a prompt "
            f"prefills that much slower (`--prefill-chunk N` or `off` trade the streams' gaps for it)")


def shown_chunks(table: list[list[int]] | None) -> str:
    """The columns beside decodes at no context in full; those by the decodes' own context counted (the value holds
    them all)."""
    if not table:
        return "whole prompts"
    if len(table) == 1:
        return f"{table[0][3]} tokens beside decodes"
    shown = "; ".join(f"beside {d}+ decodes: " + ", ".join(f"{chunk} tokens from context {start}"
                                                          for cd, ct, start, chunk in table if (cd, ct) == (d, 0))
                      for d in sorted({d for d, _, _, _ in table}))
    longer = {(d, t) for d, t, _, _ in table if t}
    if longer:
        most = max(chunk for _, t, _, chunk in table if t)
        shown += f"; {len(longer)} more columns for decodes at a longer context of their own (up to {most} tokens)"
    return shown


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
        return Choice([[1, 0, 0, int(value)]], f"{value} tokens at every context (--prefill-chunk), not measured")
    return None
