"""The arrays of an eval reference file, checked where the file is read against its header and against what a
next-token distribution can be, so no figure is ever computed from a poisoned one.

Per scored position (row): `top_ids` [positions, k], integers in [0, vocab) and distinct; `top_logprobs`
[positions, k], floats, finite, at most 0, sorted from the most likely, and together at most a probability of 1;
`target_logprobs` [positions], floats, finite, at most 0 and at most the row's top log-probability (the next token
cannot be likelier than the likeliest). A little float32 rounding is allowed on each bound.
"""

from __future__ import annotations

import math

import torch

from bringup.runner.eval.divergence import TopK
from bringup.runner.eval.reference_header import ReferenceHeader
from bringup.terminal_text import shown

TENSORS = ("top_ids", "top_logprobs", "target_logprobs")
ID_DTYPES = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)
LOGPROB_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
LOGPROB_SLACK = 1e-4  # a float32 log-softmax's top value can come out a hair above 0
MASS_SLACK = 1e-3  # the k probabilities of a row may sum past 1 by rounding, by no more
CHUNK_ELEMENTS = 1 << 22  # rows checked a chunk at a time, so the checks' own memory stays small


class RowsRefused(ValueError):
    """What is wrong with the arrays, naming the tensor, as a phrase."""


def check_names(names: list[str]) -> None:
    """The file holds exactly the three tensors (checked before any is read)."""
    missing = [n for n in TENSORS if n not in names]
    unknown = [n for n in names if n not in TENSORS]
    if missing or unknown:
        raise RowsRefused(f"it lacks the tensor(s) {', '.join(missing)}" if missing else
                          f"it holds tensors a reference does not: {shown_names(unknown)}")


def rows_from_tensors(tensors: dict[str, torch.Tensor], header: ReferenceHeader) -> TopK:
    ids, logprobs, targets = (tensors[n] for n in TENSORS)
    positions = header.tokens - 1
    _check_dtype("top_ids", ids, ID_DTYPES, "an integer")
    _check_dtype("top_logprobs", logprobs, LOGPROB_DTYPES, "a float")
    _check_dtype("target_logprobs", targets, LOGPROB_DTYPES, "a float")
    for name, tensor, shape in (("top_ids", ids, (positions, header.k)), ("top_logprobs", logprobs,
                                (positions, header.k)), ("target_logprobs", targets, (positions,))):
        if tuple(tensor.shape) != shape:
            raise RowsRefused(f"{name} has shape {list(tensor.shape)}, which does not match its header "
                              f"({positions} positions, tokens - 1, and k={header.k}: {list(shape)})")
    rows = max(1, CHUNK_ELEMENTS // header.k)
    for first in range(0, positions, rows):
        part = slice(first, first + rows)
        _check_chunk(first, ids[part].long(), logprobs[part].double(), targets[part].double(), header.vocab_size)
    return TopK(ids.long(), logprobs.float(), targets.float())


def _check_dtype(name: str, tensor: torch.Tensor, allowed: tuple[torch.dtype, ...], kind: str) -> None:
    if tensor.dtype not in allowed:
        raise RowsRefused(f"{name} has dtype {str(tensor.dtype).removeprefix('torch.')}, not {kind} dtype "
                          f"({', '.join(str(d).removeprefix('torch.') for d in allowed)})")


def _check_chunk(first: int, ids: torch.Tensor, logprobs: torch.Tensor, targets: torch.Tensor, vocab: int) -> None:
    """Rows first.. of the file; RowsRefused naming the tensor and the first row that breaks a rule."""
    top = logprobs[:, 0]
    mass = torch.logsumexp(logprobs, dim=-1)
    ordered = ids.sort(dim=-1).values
    checks = (
        ("top_ids", ((ids < 0) | (ids >= vocab)).any(dim=-1), f"names a token outside the vocabulary of {vocab}"),
        ("top_ids", (ordered[:, 1:] == ordered[:, :-1]).any(dim=-1), "names one token twice"),
        ("top_logprobs", ~torch.isfinite(logprobs).all(dim=-1), "holds NaN or an infinity"),
        ("top_logprobs", (logprobs > LOGPROB_SLACK).any(dim=-1), "holds a log-probability above 0"),
        ("top_logprobs", (logprobs[:, :-1] < logprobs[:, 1:]).any(dim=-1), "is not sorted from the most likely"),
        ("top_logprobs", mass > math.log1p(MASS_SLACK), "gives its tokens a total probability above 1"),
        ("target_logprobs", ~torch.isfinite(targets), "holds NaN or an infinity"),
        ("target_logprobs", targets > LOGPROB_SLACK, "holds a log-probability above 0"),
        ("target_logprobs", targets > top + LOGPROB_SLACK, "is likelier than the row's top token"),
    )
    for name, bad, rule in checks:
        rows = bad.nonzero().flatten()
        if rows.numel():
            row = int(rows[0])
            raise RowsRefused(f"{name} at position {first + row} {rule} ({_row(name, ids, logprobs, targets, row)})")


def _row(name: str, ids: torch.Tensor, logprobs: torch.Tensor, targets: torch.Tensor, row: int) -> str:
    """The offending row, cut to a few values."""
    values = {"top_ids": ids, "top_logprobs": logprobs, "target_logprobs": targets}[name][row]
    first = [round(v, 4) if isinstance(v, float) else v for v in values.reshape(-1)[:4].tolist()]
    return f"{first}{' ...' if values.numel() > 4 else ''}"


def shown_names(names: list[str]) -> str:
    text = ", ".join(shown(repr(n)) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return text if len(text) <= 120 else text[:117] + "..."
