"""What a tune record must hold for start-up to replay it, checked once, where start-up finds the record and before
any of it is used (the profile's schema checked its types when the file was read).

A record is timings, and replay makes the same choices from them as the run that measured them: every time a
positive, finite number of seconds, every spread finite and not negative, only the candidates, weight kinds and
row counts start-up times, the rows the layout choice reads (row 1 with both plain kinds, every row with row 1's
kinds), and batch sizes no larger than the sweep could have timed (MAX_BATCH, and the cache tune's sweep held).
A record that breaks one is refused as a whole, naming the field; start-up then times as if there were none.
Where the batch limit is replayed, its batches must also fit this start's KV cache and step budget
(beyond_this_start); if not, the decode steps are timed afresh. engine/startup/ records either as a fallback:
a WARNING, an error under --strict.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping

from bringup.profiles.sections.models import ModelPlanRecord
from bringup.profiles.store import field_path
from bringup.runner.plan.confirm import MAX_BATCH, PLAN_FIELD
from bringup.runner.plan.layout import ROWS
from bringup.runner.weights.kinds import PACKED, PANELS, PLAIN_KINDS, SLICES

TIMED_KINDS = (*PLAIN_KINDS, SLICES, PACKED, PANELS)  # the weight kinds start-up's layout timing may time
CANDIDATES = tuple(PLAN_FIELD)  # what the confirmation times on the served model

Loc = tuple[str | int, ...]


def record_problem(key: str, record: ModelPlanRecord) -> str | None:
    """None when start-up can replay the record as written; otherwise `field models.<key>.<field>: why` for the
    first field it cannot."""
    problem = next(_problems(record), None)
    return None if problem is None else f"field {field_path(('models', key, *problem[0]))}: {problem[1]}"


def beyond_this_start(key: str, record: ModelPlanRecord, limit: int) -> str | None:
    """None when every batch the record's sweep timed is one this start's sweep could time (`limit`: what its KV
    cache holds of the sweep's sequences and its step budget allow); otherwise the field that is not."""
    largest = max(record.by_batch, default=0)
    if largest <= limit:
        return None
    return (f"field {field_path(('models', key, 'by_batch', largest))}: tune timed batch {largest}, but this "
            f"start's KV cache and step budget hold {limit} sequences of the sweep's context")


def _problems(r: ModelPlanRecord) -> Iterator[tuple[Loc, str]]:
    yield from _layouts(r)
    yield from _names(("candidates",), r.candidates, CANDIDATES, "a candidate start-up times")
    yield from _names(("candidates_skipped",), r.candidates_skipped, CANDIDATES, "a candidate start-up times")
    for name, c in r.candidates.items():
        yield from _seconds(("candidates", name, "candidate_s"), c.candidate_s)
        yield from _seconds(("candidates", name, "plain_s"), c.plain_s)
        yield from _spread(("candidates", name, "spread"), c.spread)
    yield from _batches(r)
    for batch, c in r.fused_rows.items():
        if not 1 <= batch <= MAX_BATCH:
            yield ("fused_rows", batch), f"{batch} is not a batch size from 1 to {MAX_BATCH}"
        yield from _seconds(("fused_rows", batch, "candidate_s"), c.candidate_s)
        yield from _seconds(("fused_rows", batch, "plain_s"), c.plain_s)
        yield from _spread(("fused_rows", batch, "spread"), c.spread)
    yield from _late(r)
    if r.cpu_share is not None and not (math.isfinite(r.cpu_share) and 0 < r.cpu_share <= 1):
        yield ("cpu_share",), f"{r.cpu_share!r} is not a share of the CPU above 0 and at most 1"


def _layouts(r: ModelPlanRecord) -> Iterator[tuple[Loc, str]]:
    times = r.layout_times
    if 1 not in times:
        yield ("layout_times",), "no row 1: the one-row (decode) layout is chosen from it"
        return
    yield from _names(("layout_times",), times, ROWS, "a row count start-up times")
    first = times[1]
    yield from _names(("layout_times", 1), first, TIMED_KINDS, "a weight kind start-up times")
    for kind in PLAIN_KINDS:
        if kind not in first:
            yield ("layout_times", 1), f"no {kind}: row 1 needs both plain kinds ({', '.join(PLAIN_KINDS)})"
    for rows, row in times.items():
        if set(row) != set(first):
            yield ("layout_times", rows), (f"kinds {', '.join(row) or 'none'} differ from row 1's "
                                           f"({', '.join(first)}): each row compares the same kinds")
        for kind, seconds in row.items():
            yield from _seconds(("layout_times", rows, kind), seconds)
    yield from _names(("layout_spreads",), r.layout_spreads, times, "a row of layout_times")
    for rows, row in r.layout_spreads.items():
        yield from _names(("layout_spreads", rows), row, times.get(rows, {}), "a kind of that row of layout_times")
        for kind, spread in row.items():
            yield from _spread(("layout_spreads", rows, kind), spread)
    yield from _names(("layout_skipped",), r.layout_skipped, TIMED_KINDS, "a weight kind start-up times")
    if r.layout_stream_bytes < 1:
        yield ("layout_stream_bytes",), f"{r.layout_stream_bytes} is not a positive number of bytes"


def _late(r: ModelPlanRecord) -> Iterator[tuple[Loc, str]]:
    """The graphs', prefill chunk's, attention check's and prompt layers' timings (late_timings.py)."""
    if r.graph_decode is not None:
        yield from _seconds(("graph_decode", "candidate_s"), r.graph_decode.candidate_s)
        yield from _seconds(("graph_decode", "plain_s"), r.graph_decode.plain_s)
        yield from _spread(("graph_decode", "spread"), r.graph_decode.spread)
    if r.prefill is not None:
        yield from _seconds(("prefill", "decode_step"), r.prefill.decode_step)
        for tokens, seconds in r.prefill.by_tokens.items():
            if tokens < 1:
                yield ("prefill", "by_tokens", tokens), f"{tokens} is not a number of prompt tokens"
            yield from _seconds(("prefill", "by_tokens", tokens), seconds)
        if r.prefill.decodes < 1:
            yield ("prefill", "decodes"), f"{r.prefill.decodes} is not a number of decoding sequences"
        if r.prefill.decodes_step:
            yield from _seconds(("prefill", "decodes_step"), r.prefill.decodes_step)
        if r.prefill.context < 0:
            yield ("prefill", "context"), f"{r.prefill.context} is not a number of context tokens"
        for tokens, seconds in r.prefill.at_context.items():
            if tokens not in r.prefill.by_tokens:
                yield ("prefill", "at_context", tokens), f"{tokens} is not a chunk timed at no context"
            yield from _seconds(("prefill", "at_context", tokens), seconds)
    check = r.attention_check
    if check is not None:
        yield from _seconds(("attention_check", "plain_s"), check.plain_s)
        for name, seconds in check.seconds.items():
            yield from _seconds(("attention_check", "seconds", name), seconds)
        errors = {("plain_error",): check.plain_error, **{("errors", n): e for n, e in check.errors.items()}}
        for loc, error in errors.items():
            if not error >= 0:  # inf passes: a candidate's output was not finite, which its verdict says
                yield ("attention_check", *loc), f"{error!r} is not an error of at least 0"
    prompt = r.prompt
    if prompt is not None:
        if prompt.tokens < 2:
            yield ("prompt", "tokens"), f"{prompt.tokens} is not a prompt of at least 2 tokens"
        for path in ("kernels", "modules"):
            runs = getattr(prompt, path)
            if not runs:
                yield ("prompt", path), "no runs: the choice compares the fastest of each path"
            for run, seconds in enumerate(runs):
                yield from _seconds(("prompt", path, run), seconds)
    yield from _mixed(r)


def _mixed(r: ModelPlanRecord) -> Iterator[tuple[Loc, str]]:
    mixed = r.mixed
    if mixed is None:
        return
    if mixed.decodes < 1:
        yield ("mixed", "decodes"), f"{mixed.decodes} is not a number of decoding sequences"
    if mixed.tokens < 2:
        yield ("mixed", "tokens"), f"{mixed.tokens} is not a prompt chunk of at least 2 tokens"
    if sorted(mixed.one) != sorted(mixed.two) or len(mixed.one) != 2:
        yield ("mixed",), "not two contexts timed both ways: the choice draws a line through two gains"
    for side in ("one", "two"):
        for context, runs in getattr(mixed, side).items():
            if context < 1:
                yield ("mixed", side, context), f"{context} is not a context of at least 1 token"
            if not runs:
                yield ("mixed", side, context), "no runs: the choice compares the fastest of each side"
            for run, seconds in enumerate(runs):
                yield from _seconds(("mixed", side, context, run), seconds)


def _batches(r: ModelPlanRecord) -> Iterator[tuple[Loc, str]]:
    ceiling, most = MAX_BATCH, f"{MAX_BATCH}, the most the batch sweep times"
    held = r.memory_batch
    if held is not None and not 1 <= held <= ceiling:
        yield ("memory_batch",), f"{held} is not a batch size from 1 to {most}"
        return
    if held is not None and held < ceiling:
        ceiling, most = held, f"{held}, the sequences tune's sweep held (memory_batch)"
    for field, sizes in (("by_batch", r.by_batch), ("by_batch_again", r.by_batch_again)):
        for batch, seconds in sizes.items():
            if not 1 <= batch <= ceiling:
                yield (field, batch), f"{batch} is not a batch size from 1 to {most}"
            yield from _seconds((field, batch), seconds)
    yield from _names(("by_batch_again",), r.by_batch_again, r.by_batch, "a batch size of by_batch")
    yield from _names(("batch_spreads",), r.batch_spreads, r.by_batch, "a batch size of by_batch")
    for batch, spread in r.batch_spreads.items():
        yield from _spread(("batch_spreads", batch), spread)


def _names(loc: Loc, given: Mapping, known: Iterable, what: str) -> Iterator[tuple[Loc, str]]:
    """Each key of `given` that is not one of `known`."""
    allowed = list(known)
    for name in given:
        if name not in allowed:
            shown = ", ".join(map(str, allowed[:12])) or "none"
            yield (*loc, name), f"not {what} ({shown})"


def _seconds(loc: Loc, value: float) -> Iterator[tuple[Loc, str]]:
    if not (math.isfinite(value) and value > 0):
        yield loc, f"{value!r} is not a positive, finite number of seconds"


def _spread(loc: Loc, value: float) -> Iterator[tuple[Loc, str]]:
    if not (math.isfinite(value) and value >= 0):
        yield loc, f"{value!r} is not a finite spread of at least 0"
