"""Declarative description of an op under test: an OpSpec with its CaseSpecs."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

Judge = Literal["close", "exact", "multinomial", "sampler"]
# judged by a chi-square test of their draws, never element by element: multinomial against its input
# probabilities, the runner's sampler against the float64 distribution its reference builds
STATISTICAL_JUDGES: tuple[str, ...] = ("multinomial", "sampler")
InputFn = Callable[[torch.Generator], list[Any]]
OpFn = Callable[..., Any]

MODEL_CASE_PREFIX = "model: "  # labels of the cases built at one model's shapes (verify-ops --model)

# Float dtypes the catalog runs by default (the speed goal is stated for these three).
DEFAULT_FLOAT_DTYPES: tuple[str, ...] = ("float32", "bfloat16", "float16")


Shape = tuple[int, ...]
Param = tuple[str, Any]


@dataclass(frozen=True)
class CaseSpec:
    """One case of an op: how to build its inputs and how to call it, and the typed fields that name it.

    inputs(gen) returns the arguments on the CPU, floating tensors in float64 (they are cast to the
    dtype under test, and the reference runs on exactly those cast values upcast back to float64).
    layout(args) is applied after the move to the device (and to the reference copy): it makes
    non-contiguous / transposed views so the device sees strided inputs; `view` names it.
    fn(*args) is the op as a model calls it; ref(*args) (default fn) computes the float64 reference.
    out(*args, out=buffer) is the op's out= variant, used for the guard-region check.
    accum is the accumulation length (reduction / inner-product length) for tolerance scaling; the
    catalog's case builders compute it from the shapes and params.

    The case's identity (case_id) is derived from what determines its inputs and its call: shapes, view, params
    and variant; its inputs are seeded from it and verify-ops resumes by it. The label, derived from role,
    shapes, view and params by case_label, is display only: editing the role or the label format changes no
    input and no resume key.
    """

    inputs: InputFn
    fn: OpFn
    shapes: tuple[Shape, ...] = ()  # the input shapes as generated (before `layout`)
    role: str = ""  # a few words the shapes do not say: "decode", "odd", "vocab logits", "ties"
    view: str = ""  # what `layout` does to the inputs: "transposed", "b transposed", "[:, ::2]"
    params: tuple[Param, ...] = ()  # the op's arguments that tell cases apart: (("dim", -1), ("k", 7))
    ref: OpFn | None = None
    out: Callable[..., Any] | None = None
    layout: Callable[[list[Any]], list[Any]] | None = None
    judge: Judge = "close"
    accum: int = 1
    dtypes: tuple[str, ...] | None = None  # overrides the op's dtypes for this case
    keep_dtype: tuple[int, ...] = ()  # argument positions whose floating tensors are NOT cast
    step_rounding: bool = False  # every partial result is rounded to the dtype (read-modify-write)
    # the dtype whose tolerance row judges a floating result, when the kernel's contract allows an accumulator
    # coarser than the result's dtype (None: the result's own dtype)
    accumulator: str | None = None
    accumulator_reason: str = ""
    # what tells this case from another of its op with the same shapes, view and params, left out of the label:
    # a different call ("padded bmm"), or the model weight it stands for ("q_proj")
    variant: tuple[Param, ...] = ()

    @property
    def label(self) -> str:
        return case_label(self.role, self.shapes, self.view, self.params)

    @property
    def identity(self) -> str:
        """The canonical text of what determines the case's inputs and call (never its role or label); a param
        value JSON has no form for (a plugin's torch.dtype, say) is written as str() gives it."""
        return json.dumps({"shapes": self.shapes, "view": self.view, "params": self.params, "variant": self.variant},
                          sort_keys=True, separators=(",", ":"), default=str)

    @property
    def case_id(self) -> str:
        return case_id_of(self.identity)


CASE_ID_DIGITS = 16


def case_id_of(identity: str) -> str:
    """The short stable name of an identity: the first hex digits of its sha256."""
    return hashlib.sha256(identity.encode()).hexdigest()[:CASE_ID_DIGITS]


def shape_text(shape: Shape) -> str:
    return "[" + ",".join(str(n) for n in shape) + "]"


def param_text(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return "(" + ",".join(param_text(v) for v in value) + ")"
    return str(value)


def case_label(role: str, shapes: Sequence[Shape], view: str = "", params: Sequence[Param] = ()) -> str:
    """'role [shape] [shape] view name=value ...': the one formatting rule of every case label."""
    parts = [role, " ".join(shape_text(s) for s in shapes), view,
             " ".join(f"{name}={param_text(value)}" for name, value in params)]
    return " ".join(part for part in parts if part)


def seen_shape(shape: Shape, transposed: bool) -> Shape:
    """The shape an op sees of an input generated as `shape`: a transposed one has its last two dims swapped."""
    return (*shape[:-2], shape[-1], shape[-2]) if transposed else shape


def reduced_length(shape: Shape, dims: int | Sequence[int]) -> int:
    """How many elements one output of a reduction over `dims` of `shape` sums (1 when it sums none)."""
    length = 1
    for dim in (dims,) if isinstance(dims, int) else dims:
        length *= shape[dim]
    return max(length, 1)


@dataclass(frozen=True)
class OpSpec:
    """An op of the catalog: a name, a family for grouping, the dtypes it applies to, its cases."""

    name: str
    family: str
    cases: tuple[CaseSpec, ...]
    dtypes: tuple[str, ...] = DEFAULT_FLOAT_DTYPES
    note: str = ""

    def case(self, label: str) -> CaseSpec:
        """The case with this label (what a person names; a recorded case is found by its id: by_id)."""
        for case in self.cases:
            if case.label == label:
                return case
        if label.startswith(MODEL_CASE_PREFIX):
            raise KeyError(f"{self.name}: no case {label!r}; cases at a model's shapes exist only with that model "
                           "given (`bringup verify-ops --model DIR`)")
        raise KeyError(f"{self.name}: no case {label!r}")

    def by_id(self, case_id: str) -> CaseSpec:
        for case in self.cases:
            if case.case_id == case_id:
                return case
        raise KeyError(f"{self.name}: no case with id {case_id!r} (the catalog no longer has a case with those "
                       "shapes and params)")

    def find(self, key: CaseKey) -> CaseSpec:
        """The case a key names: by its id when the key has one, else by its label."""
        return self.by_id(key.case_id) if key.case_id else self.case(key.case)

    def case_dtypes(self, case: CaseSpec) -> tuple[str, ...]:
        return case.dtypes if case.dtypes is not None else self.dtypes

    def seed_parts(self, case: CaseSpec) -> tuple[str, str]:
        """What the case's inputs are seeded from: the op and the case's id (never its label)."""
        return (self.name, case.case_id)


@dataclass(frozen=True, order=True)
class CaseKey:
    """One case on one dtype: (op, dtype, case_id) is its identity and its resume key in the profile; `case` is
    its label, for display (a key made by hand from a label alone has no case_id: the op finds it by label)."""

    op: str
    dtype: str
    case: str
    case_id: str = ""

    def __str__(self) -> str:
        return f"{self.op}[{self.dtype}] {self.case}"


def op(name: str, family: str, cases: Sequence[CaseSpec], *, dtypes: Sequence[str] | None = None,
       note: str = "") -> OpSpec:
    """Shorthand constructor used by the catalog modules."""
    return OpSpec(name=name, family=family, cases=tuple(cases),
                  dtypes=tuple(dtypes) if dtypes is not None else DEFAULT_FLOAT_DTYPES, note=note)


@dataclass
class Catalog:
    """All ops by name, in catalog order."""

    ops: dict[str, OpSpec] = field(default_factory=dict)

    def add(self, spec: OpSpec) -> None:
        if spec.name in self.ops:
            raise ValueError(f"duplicate op {spec.name!r} in the catalog")
        labels = [c.label for c in spec.cases]
        if len(set(labels)) != len(labels):
            raise ValueError(f"{spec.name}: duplicate case labels")
        ids = [c.case_id for c in spec.cases]
        if len(set(ids)) != len(ids):
            twins = [c.label for c in spec.cases if ids.count(c.case_id) > 1]
            raise ValueError(f"{spec.name}: cases {twins[0]!r} and {twins[1]!r} have the same shapes, view and params, "
                             "so the same identity; tell them apart by their variant")
        self.ops[spec.name] = spec

    def get(self, name: str) -> OpSpec:
        return self.ops[name]

    def all_dtypes(self) -> list[str]:
        seen: dict[str, None] = {}
        for spec in self.ops.values():
            for case in spec.cases:
                for dt in spec.case_dtypes(case):
                    seen.setdefault(dt, None)
        return list(seen)
