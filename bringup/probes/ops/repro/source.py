"""Assemble one reproducer file for a failing op case or compiled comparison, and prove it faithful."""

from __future__ import annotations

import math
import re
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from bringup.probes.ops import execute, inputs, sync
from bringup.probes.ops.compiled import execute as compiled_execute
from bringup.probes.ops.compiled import rule
from bringup.probes.ops.compiled.blocks import BLOCKS
from bringup.probes.ops.inputs import generator, seed_for
from bringup.probes.ops.judge import arithmetic, error_kinds, metrics, tolerances
from bringup.probes.ops.repro.check import Comparer, same_arguments
from bringup.probes.ops.repro.extract import NotExpressible, SourceBundle
from bringup.probes.ops.repro.template import COMMON, COMPILED_RUN, ENTRY, IMPORTS, OP_RUN, SYNCHRONIZE
from bringup.probes.ops.spec import STATISTICAL_JUDGES, CaseKey, Catalog
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord

SUBSTITUTES = {("bringup.probes.ops.sync", "synchronize"): SYNCHRONIZE}
ISOLATED_STATUSES = ("crashed", "timeout")
DEFAULT_TIMEOUT_S = 300.0
CHECK_MODULE = "bringup_repro_check"

# verify-ops' own judging, copied into every file by name (their helpers follow automatically)
OP_JUDGING: tuple[tuple[types.ModuleType, str], ...] = (
    (inputs, "prepare_inputs"), (inputs, "snapshot"), (inputs, "changed_inputs"), (metrics, "flatten_outputs"),
    (execute, "judge_outputs"), (error_kinds, "is_unsupported_error"), (arithmetic, "Arithmetic"),
)
GUARD_JUDGING = ((execute, "_guard_check"),)  # only for cases with an out= variant
MULTINOMIAL_JUDGING = ((execute, "_judge_multinomial"),)  # only for statistically judged cases
COMPILED_JUDGING: tuple[tuple[types.ModuleType, str], ...] = (
    (inputs, "prepare_inputs"), (metrics, "flatten_outputs"), (compiled_execute, "_call"), (rule, "rmse"),
    (rule, "judge"), (tolerances, "row_for"), (error_kinds, "is_unsupported_error"),
)


@dataclass(frozen=True)
class Recipe:
    """What a reproducer rebuilds: seed parts, the input builder, the op and its reference, layout, out=."""

    seed_parts: tuple[str, ...]
    inputs: Callable[..., Any]
    fn: Callable[..., Any]
    ref: Callable[..., Any]
    layout: Callable[..., Any] | None = None
    out: Callable[..., Any] | None = None
    keep_dtype: tuple[int, ...] = ()
    facts: dict[str, Any] | None = None  # judge, accum, step_rounding, accumulator (and why) of an op case


def op_recipe(record: OpCaseRecord, catalog: Catalog) -> Recipe:
    if record.op not in catalog.ops:
        raise NotExpressible(f"op {record.op!r} is not in this process's catalog (a plugin that is not loaded?)")
    spec = catalog.get(record.op)
    case = spec.find(CaseKey(record.op, record.dtype, record.case, record.case_id or ""))
    facts = {"judge": case.judge, "accum": case.accum, "step_rounding": case.step_rounding,
             "accumulator": case.accumulator, "accumulator_reason": case.accumulator_reason,
             "dim": arithmetic.dim_of(case.params)}
    return Recipe(spec.seed_parts(case), case.inputs, case.fn, case.ref or case.fn, case.layout, case.out,
                  case.keep_dtype, facts)


def compiled_recipe(record: CompiledRecord, catalog: Catalog) -> Recipe:
    if record.case is None:
        block = BLOCKS.get(record.target)
        if block is None:
            raise NotExpressible(f"compiled block {record.target!r} is not in this bringup")
        if block.build is not None or block.fn is None:
            raise NotExpressible("runs the runner's own model (bringup.runner), which a standalone file cannot "
                                 "carry; rerun `bringup verify-ops --compiled --op " + record.target + "`")
        return Recipe(("block", block.name), block.inputs, block.fn, block.ref or block.fn)
    recipe = op_recipe(OpCaseRecord(op=record.target, dtype=record.dtype, case=record.case, case_id=record.case_id,
                                    status="fail"), catalog)
    return Recipe(recipe.seed_parts, recipe.inputs, recipe.fn, recipe.ref, recipe.layout, None, recipe.keep_dtype)


def judging_for(recipe: Recipe) -> tuple[tuple[types.ModuleType, str], ...]:
    """The bringup functions a file copies to judge as verify-ops does (what this case needs, no more)."""
    if recipe.facts is None:
        return COMPILED_JUDGING
    extra = GUARD_JUDGING if recipe.out is not None else ()
    if recipe.facts["judge"] in STATISTICAL_JUDGES:
        extra += MULTINOMIAL_JUDGING
    return OP_JUDGING + extra


def _recorded(record: OpCaseRecord | CompiledRecord) -> dict[str, Any]:
    if isinstance(record, OpCaseRecord):
        names = ("status", "max_abs", "max_rel", "worst_index", "rtol", "atol", "message")
    else:
        names = ("status", "eager_err", "compiled_err", "allowed", "failing_backend", "message")
    return {name: getattr(record, name) for name in names}


def _timeout(record: OpCaseRecord | CompiledRecord) -> float:
    match = re.search(r"within ([0-9.]+) s", record.message or "")
    return float(match.group(1)) if match else DEFAULT_TIMEOUT_S


def _header(record: OpCaseRecord | CompiledRecord, recipe: Recipe, device: str, title: str, filename: str) -> str:
    seed_text = _docstring_safe(repr("|".join(recipe.seed_parts)))
    first = (record.message or record.status).splitlines()[0][:160] if record.message else record.status
    title, device, first, filename = (_docstring_safe(t) for t in (title, device, first, filename))
    return f'''#!/usr/bin/env python3
"""Reproducer: {title} — {record.status}.

verify-ops on {device} recorded: {first}
Run: python {filename} [--device DEV]   (needs only torch)
Exit status: 1 while the defect is there, 0 once fixed (judged as verify-ops judges it), 2 when it
cannot run here.
Inputs: a CPU torch.Generator seeded with zlib.crc32({seed_text}) = {seed_for(*recipe.seed_parts)}, floating
tensors built in float64, cast to {record.dtype}; the reference is the op in float64 on the CPU on exactly the
cast values. Written by `bringup verify-ops --repro-dir` (bringup-reproducer).
"""
'''


def _docstring_safe(text: str) -> str:
    """`text` as it must be written inside a docstring to read back exactly: backslashes and double quotes
    escaped, other unprintable characters as escapes (pasted as it is, `\\U`, `\\N{`, `\\x`, a `\"\"\"` or a
    final backslash would break the file). The full message is also in RECORDED, written as a repr."""
    return "".join("\\" + c if c in '\\"' else c if c.isprintable() else repr(c)[1:-1] for c in text)


def _constants(record: OpCaseRecord | CompiledRecord, recipe: Recipe, device: str) -> str:
    lines = []
    if isinstance(record, OpCaseRecord):
        lines += [f"OP = {record.op!r}", f"CASE = {record.case!r}"]
        facts = recipe.facts or {}
        lines += [f"JUDGE = {facts['judge']!r}", f"ACCUM = {facts['accum']!r}",
                  f"STEP_ROUNDING = {facts['step_rounding']!r}",
                  f"ACCUMULATOR = {facts['accumulator']!r}  # the dtype whose tolerance judges it (None: the result's)",
                  f"ACCUMULATOR_REASON = {facts['accumulator_reason']!r}",
                  f"DIM = {facts.get('dim')!r}  # the dim the op works along (the error bound and bias test read it)"]
    else:
        lines += [f"TARGET = {record.target!r}", f"CASE = {record.case!r}", f"BACKEND = {record.backend!r}"]
    lines += [
        f"DTYPE = {record.dtype!r}",
        f"SEED = {seed_for(*recipe.seed_parts)}  # zlib.crc32({'|'.join(recipe.seed_parts)!r})",
        f"KEEP_DTYPE = {recipe.keep_dtype!r}  # argument positions not cast to DTYPE",
        f"DEVICE = {device!r}",
        f"ISOLATE = {record.status in ISOLATED_STATUSES!r}  # verify-ops saw a crash or a hang: run in a child",
        f"TIMEOUT_S = {_timeout(record)!r}",
        f"RECORDED = {_literal(_recorded(record))}",
    ]
    return "\n".join(lines)


def _literal(value: Any) -> str:
    """Python source that evaluates to `value` (plain data): a repr, but NaN and infinities as float('nan')..."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return repr(value)


def _bind_case(bundle: SourceBundle, recipe: Recipe) -> None:
    bundle.bind("build_inputs", recipe.inputs)
    bundle.bind("op_fn", recipe.fn)
    bundle.bind("reference_fn", recipe.ref)
    bundle.bind("layout", recipe.layout)
    bundle.bind("out_variant", recipe.out)


def render(record: OpCaseRecord | CompiledRecord, recipe: Recipe, device: str, title: str, filename: str) -> str:
    """The whole file's text. NotExpressible when some part has no faithful standalone source."""
    bundle = SourceBundle(substitutes=dict(SUBSTITUTES))
    for line in IMPORTS:
        bundle.imports[line] = None
    _bind_case(bundle, recipe)
    case_blocks = len(bundle.blocks)
    for module, name in judging_for(recipe):
        bundle.bind(name, getattr(module, name), module.__name__)
    bundle.bind("synchronize", sync.synchronize, sync.__name__)  # the run functions call it, out= variant or not
    runner = OP_RUN if isinstance(record, OpCaseRecord) else COMPILED_RUN
    return "\n".join([
        _header(record, recipe, device, title, filename).rstrip(),
        "from __future__ import annotations\n",
        "\n".join(bundle.import_lines()),
        "\n# --- the case, as the bringup op catalog defines it " + "-" * 40,
        _constants(record, recipe, device) + "\n\n",
        "\n\n\n".join(bundle.blocks[:case_blocks]),
        "\n\n# --- how verify-ops judges it (copied from bringup/probes) " + "-" * 33,
        "\n\n\n".join(bundle.blocks[case_blocks:]),
        "\n\n# --- running it " + "-" * 75,
        COMMON.strip() + "\n\n\n" + runner.strip() + "\n\n\n" + ENTRY.strip(),
    ]) + "\n"


def verify(text: str, recipe: Recipe, names: dict[str, Any]) -> None:
    """Load the file as a module (without running main) and prove it rebuilds the catalog's objects and inputs."""
    module = types.ModuleType(CHECK_MODULE)
    module.__file__ = f"<{CHECK_MODULE}>"
    sys.modules[CHECK_MODULE] = module  # dataclasses look their module up while the file defines them
    try:
        exec(compile(text, module.__file__, "exec"), module.__dict__)
    except Exception as exc:
        raise NotExpressible(f"the generated file does not load ({type(exc).__name__}: {exc})") from None
    finally:
        sys.modules.pop(CHECK_MODULE, None)
    namespace = module.__dict__
    comparer = Comparer(frozenset(SUBSTITUTES))
    for name, original in names.items():
        comparer.same(original, namespace.get(name), name)
    raw = recipe.inputs(generator(*recipe.seed_parts))
    gen = torch.Generator(device="cpu")
    gen.manual_seed(namespace["SEED"])
    again = namespace["build_inputs"](gen)
    same_arguments(raw, again, "inputs")
    if recipe.layout is not None:
        same_arguments(recipe.layout(list(raw)), namespace["layout"](list(again)), "laid-out inputs")


def reproducer_source(record: OpCaseRecord | CompiledRecord, catalog: Catalog, device: str, title: str,
                      filename: str) -> str:
    """A verified reproducer's text for a failing record; NotExpressible (with the reason) when there is none."""
    recipe = op_recipe(record, catalog) if isinstance(record, OpCaseRecord) else compiled_recipe(record, catalog)
    text = render(record, recipe, device, title, filename)
    names = {"build_inputs": recipe.inputs, "op_fn": recipe.fn, "reference_fn": recipe.ref, "layout": recipe.layout,
             "out_variant": recipe.out, **{name: getattr(module, name) for module, name in judging_for(recipe)}}
    verify(text, recipe, names)
    return text
