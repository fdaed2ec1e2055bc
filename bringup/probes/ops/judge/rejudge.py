"""Re-judge a recorded profile's failing op cases by the error bound, from the figures it recorded.

A profile keeps no device outputs, only each case's largest errors: max_abs, max_rel, and the element where the error
was largest against the tolerance it was judged by (worst_index, rtol, atol). The inputs are regenerated (seeded) and
the float64 reference recomputed. A case passes the bound test when its largest error lies inside the op's error
bound at the element the recorded judge found worst; every element's error is at most min(max_abs, max_rel*|ref|,
allowed*max_abs/allowed[worst]) with allowed = atol + rtol*|ref|, and the share of elements that this proves inside
their bound is written into the message. The bias test needs the outputs, so it is not run here (the record says
so). Sampling cases keep their verdict: their chi-square was computed against the probabilities as the dtype holds
them already. Only the case blocks that change are rewritten; the rest of the file stays byte for byte.

    python -m bringup.probes.ops.judge.rejudge reference/profiles/nvidia-h200-sxm-torch2.11-cu130.yaml
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import torch
import yaml

from bringup.probes.ops.catalog import load_catalog
from bringup.probes.ops.inputs import dtype_from_name, generator, prepare_inputs
from bringup.probes.ops.judge.arithmetic import Arithmetic, dim_of
from bringup.probes.ops.judge.bounds import error_bound
from bringup.probes.ops.spec import Catalog
from bringup.profiles.sections.ops import OpCaseRecord
from bringup.profiles.store import load_profile, write_atomically

RECORD_START = re.compile(r"^- op: ", re.MULTILINE)


def _reference(record: OpCaseRecord, catalog: Catalog) -> tuple[Arithmetic, torch.Tensor] | None:
    spec = catalog.get(record.op)
    try:
        case = spec.case(record.case)
    except KeyError:  # a case this catalog no longer has (or not yet: labels migrate with the profile)
        return None
    if case.judge != "close":
        return None
    raw = case.inputs(generator(*spec.seed_parts(case)))
    _, ref_args = prepare_inputs(raw, dtype_from_name(record.dtype), torch.device("cpu"), case.keep_dtype,
                                 case.layout)
    fn = case.ref or case.fn
    with torch.no_grad():
        reference = fn(*ref_args)
    if not isinstance(reference, torch.Tensor):
        return None
    return Arithmetic(record.op, fn, ref_args, dim_of(case.params)), reference


def error_ceiling(record: OpCaseRecord, reference: torch.Tensor) -> torch.Tensor:
    """The most each element's error can have been, from the recorded max_abs, max_rel, worst_index, rtol, atol."""
    ref = reference.abs()
    ceiling = torch.full_like(ref, float(record.max_abs))
    if record.max_rel is not None:
        ceiling = torch.minimum(ceiling, torch.where(ref > 0, record.max_rel * ref, ceiling))
    if record.rtol is not None and record.atol is not None and record.worst_index is not None:
        allowed = record.atol + record.rtol * ref
        ceiling = torch.minimum(ceiling, allowed * (record.max_abs / float(allowed[tuple(record.worst_index)])))
    return ceiling


def rejudged(record: OpCaseRecord, catalog: Catalog) -> OpCaseRecord | None:
    """The record passed by the error bound, or None where its figures cannot show that: the largest error
    (max_abs) must lie inside the bound at the element the recorded judge found worst; the share of elements whose
    error ceiling is inside their bound is stated (the rest the recorded figures cannot tighten)."""
    if record.status != "fail" or record.max_abs is None or not record.worst_index or record.op not in catalog.ops:
        return None
    found = _reference(record, catalog)
    if found is None:
        return None
    arith, reference = found
    bound = error_bound(arith, reference, dtype_from_name(record.dtype))
    if bound is None:
        return None
    at_worst = float(bound[tuple(record.worst_index)])
    if record.max_abs > at_worst:
        return None
    proven = float((error_ceiling(record, reference) <= bound).to(torch.float64).mean())
    return record.model_copy(update={
        "status": "pass", "rtol": None, "atol": None, "bound": at_worst, "bound_ratio": record.max_abs / at_worst,
        "decided_by": "bound (re-judged from the recorded errors)",
        "message": (f"re-judged from the recorded errors: the largest, {record.max_abs:.3g}, is "
                    f"{record.max_abs / at_worst:.2g} of the error bound at the worst element; {proven:.1%} of the "
                    "elements are proven inside their bound by the recorded figures, the rest cannot be tightened by "
                    "them; no outputs were recorded, so no bias test. Judged before by a per-dtype tolerance: "
                    f"{record.message or 'fail'}")[:600]})


def _block_text(record: OpCaseRecord) -> str:
    document = record.model_dump(mode="json", exclude_none=True)
    return yaml.safe_dump([document], sort_keys=False, allow_unicode=True, width=120)


def rewrite(text: str, changed: dict[tuple[str, str, str], OpCaseRecord]) -> str:
    """`text` with the op-case blocks of `changed` replaced, everything else as it was."""
    starts = [m.start() for m in RECORD_START.finditer(text)]
    pieces, last = [], 0
    for start, end in zip(starts, [*starts[1:], None]):
        block = text[start:end]
        body = block if end is not None else block.split("\n", 1)[0] + "\n" + _first_record_rest(block)
        item = yaml.safe_load(body)[0]
        key = (item.get("op"), item.get("dtype"), item.get("case_id") or item.get("case"))
        if key in changed:
            pieces += [text[last:start], _block_text(changed[key])]
            last = start + len(body)
    return "".join([*pieces, text[last:]])


def _first_record_rest(block: str) -> str:
    """The last record's indented lines (the block runs on to the next top-level key)."""
    lines = block.split("\n")[1:]
    rest = []
    for line in lines:
        if line and not line.startswith("  "):
            break
        rest.append(line)
    return "\n".join(rest).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bringup.probes.ops.judge.rejudge PROFILE.yaml", file=sys.stderr)
        return 2
    path = Path(argv[0])
    try:
        profile = load_profile(path)
    except Exception as exc:  # a missing or invalid profile: one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    catalog = load_catalog()
    changed = {}
    for record in profile.ops:
        new = rejudged(record, catalog)
        if new is not None:
            changed[record.key()] = new
        if record.status == "fail":
            print(f"{record.op}[{record.dtype}] {record.case}: "
                  f"{'pass (bound, ' + format(new.bound_ratio, '.2g') + ' of it)' if new else 'still fail'}")
    write_atomically(path, rewrite(path.read_text(encoding="utf-8"), changed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
