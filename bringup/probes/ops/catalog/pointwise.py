"""Catalog: activations, elementwise math, elementwise binary ops and masking."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch
import torch.nn.functional as F

from bringup.probes.ops.inputs import randint, randn, uniform
from bringup.probes.ops.spec import CaseSpec, OpSpec, op

Domain = Callable[[torch.Generator, tuple[int, ...]], torch.Tensor]


def normal(scale: float = 1.0) -> Domain:
    return lambda g, shape: randn(g, *shape, scale=scale)


def interval(low: float, high: float) -> Domain:
    return lambda g, shape: uniform(g, *shape, low=low, high=high)


def _noncontig(args: list) -> list:
    return [args[0][:, ::2], *args[1:]]


def _transposed(args: list) -> list:
    return [args[0].t(), *args[1:]]


def unary_cases(fn, domain: Domain, out=None, judge="close") -> list[CaseSpec]:
    """The standard unary case set: LLM shape, odd sizes, strided, transposed, long, empty."""
    def case(shape: tuple[int, ...], role: str = "", view: str = "", layout=None) -> CaseSpec:
        return CaseSpec(lambda g: [domain(g, shape)], fn, shapes=(shape,), role=role, view=view, out=out,
                        judge=judge, layout=layout)
    return [
        case((2, 64, 1024)),
        case((3, 37, 101), "odd"),
        case((64, 256), view="non-contiguous [:, ::2]", layout=_noncontig),
        case((33, 65), view="transposed", layout=_transposed),
        case((16411,), "long"),
        case((0, 7), "empty"),
    ]


def _out(torch_fn):
    return lambda *args, out: torch_fn(*args, out=out)


def activation_ops() -> list[OpSpec]:
    def gelu_out(x, *, out):
        return torch._C._nn.gelu(x, out=out)

    def gelu_tanh_out(x, *, out):
        return torch._C._nn.gelu(x, approximate="tanh", out=out)

    def approximated(cases: list[CaseSpec], approximate: str, fn, out) -> list[CaseSpec]:
        return [replace(c, fn=fn, out=out, params=(("approximate", approximate), *c.params)) for c in cases]

    gelu_cases = [
        *approximated(unary_cases(F.gelu, normal(3.0)), "none", F.gelu, gelu_out),
        *approximated(unary_cases(F.gelu, normal(3.0))[:4], "tanh", lambda x: F.gelu(x, approximate="tanh"),
                      gelu_tanh_out),
    ]
    return [
        op("gelu", "activation", gelu_cases),
        op("silu", "activation", unary_cases(F.silu, normal(4.0), out=_out(torch._C._nn.silu))),
        op("relu", "activation", unary_cases(torch.relu, normal(), judge="exact")),
        op("sigmoid", "activation", unary_cases(torch.sigmoid, normal(4.0), out=_out(torch.sigmoid))),
        op("tanh", "activation", unary_cases(torch.tanh, normal(2.0), out=_out(torch.tanh))),
        op("exp", "math", unary_cases(torch.exp, interval(-8.0, 8.0), out=_out(torch.exp))),
        op("log", "math", unary_cases(torch.log, interval(0.01, 100.0), out=_out(torch.log))),
        op("rsqrt", "math", unary_cases(torch.rsqrt, interval(0.01, 100.0), out=_out(torch.rsqrt))),
        op("sqrt", "math", unary_cases(torch.sqrt, interval(0.0, 100.0), out=_out(torch.sqrt))),
        op("reciprocal", "math", unary_cases(torch.reciprocal, interval(0.05, 20.0),
                                             out=_out(torch.reciprocal))),
        op("pow", "math", [
            power_case(2, (2, 64, 1024), normal(), out=True),
            power_case(0.5, (37, 101), interval(0.0, 50.0), role="odd"),
            power_case(-1.5, (33, 65), interval(0.1, 10.0), transposed=True),
            CaseSpec(lambda g: [uniform(g, 17, 1, low=0.5, high=2.0), uniform(g, 1, 23, low=-3.0, high=3.0)],
                     torch.pow, shapes=((17, 1), (1, 23)), role="tensor exponent broadcast", out=_out(torch.pow)),
            power_case(3, (0, 5), normal(), role="empty"),
        ]),
    ]


def power_case(exponent: float, shape: tuple[int, ...], domain: Domain, role: str = "", transposed: bool = False,
               out: bool = False) -> CaseSpec:
    def fn(x):
        return torch.pow(x, exponent)

    def fn_out(x, *, out):
        return torch.pow(x, exponent, out=out)
    return CaseSpec(lambda g: [domain(g, shape)], fn, shapes=(shape,), role=role,
                    view="transposed" if transposed else "", params=(("exponent", exponent),),
                    layout=_transposed if transposed else None, out=fn_out if out else None)


def _binary(fn, denom: bool = False, out=None) -> list[CaseSpec]:
    second = interval(0.5, 4.0) if denom else normal()

    def case(a_shape, b_shape, role: str = "", signed_denominator=False, view: str = "", layout=None) -> CaseSpec:
        def make(g: torch.Generator) -> list:
            b = second(g, b_shape)
            if denom and signed_denominator:
                b = b * (randint(g, 2, *b_shape) * 2 - 1)
            return [randn(g, *a_shape), b]
        return CaseSpec(make, fn, shapes=(a_shape, b_shape), role=role, view=view, out=out, layout=layout)

    def noncontig(args: list) -> list:
        return [args[0][:, ::3], args[1].t()]

    return [
        case((4, 128, 512), (4, 128, 512), "same shape"),
        case((4, 1, 64), (1, 7, 64), "broadcast", signed_denominator=True),
        case((37, 129), (129,), "row broadcast odd"),
        case((40, 90), (30, 40), view="strided a [:, ::3] and transposed b", layout=noncontig),
        case((16411,), (), "0-d tensor"),
        case((0, 3), (3,), "empty"),
    ]


def elementwise_ops() -> list[OpSpec]:
    def scalar_case(fn, accum: int = 1) -> CaseSpec:
        # accum=2 for add/sub: the scalar is rounded to the dtype, so results that cancel to ~0 carry
        # an absolute error of about eps * |scalar| (the mixed atol covers it)
        return CaseSpec(lambda g: [randn(g, 3, 37, 101)], fn, shapes=((3, 37, 101),), role="python scalar",
                        params=(("scalar", 0.3),), accum=accum)

    add = [
        *_binary(torch.add, out=_out(torch.add)),
        CaseSpec(lambda g: [randn(g, 64, 100), randn(g, 64, 100)], lambda a, b: torch.add(a, b, alpha=-0.5),
                 shapes=((64, 100), (64, 100)), params=(("alpha", -0.5),)),
        scalar_case(lambda a: a + 0.3, accum=2),
    ]
    sub = [*_binary(torch.sub, out=_out(torch.sub)), scalar_case(lambda a: a - 0.3, accum=2)]
    mul = [*_binary(torch.mul, out=_out(torch.mul)), scalar_case(lambda a: a * 0.3)]
    div = [*_binary(torch.div, denom=True, out=_out(torch.div)), scalar_case(lambda a: a / 0.3)]

    def where_case(shapes, role: str = "", other: float | None = None, out: bool = False) -> CaseSpec:
        """shapes: condition, x, y; with `other` a Python scalar replaces y."""
        def make(g: torch.Generator) -> list:
            return [randint(g, 2, *shapes[0]).bool(), *(randn(g, *shape) for shape in shapes[1:])]
        fn = torch.where if other is None else (lambda c, x, y: torch.where(c, x, other))
        return CaseSpec(make, fn, shapes=shapes, role=role, params=() if other is None else (("other", other),),
                        out=_out(torch.where) if out else None, judge="exact")

    where = op("where", "elementwise", [
        where_case(((4, 128, 256), (4, 128, 256), (4, 128, 256)), out=True),
        where_case(((1, 37, 1), (5, 37, 19), (19,)), "broadcast", out=True),
        where_case(((9, 33), (9, 33), ()), "masking", other=float("-inf")),
        where_case(((0, 4), (0, 4), (0, 4)), "empty"),
    ])

    def clamp_case(shape, low: float | None, high: float | None, role: str = "", scale: float = 1.0,
                   transposed: bool = False, out: bool = False) -> CaseSpec:
        def fn(x):
            return torch.clamp(x, low, high)

        def fn_out(x, *, out):
            return torch.clamp(x, low, high, out=out)
        bounds = tuple((name, value) for name, value in (("min", low), ("max", high)) if value is not None)
        return CaseSpec(lambda g: [randn(g, *shape, scale=scale)], fn, shapes=(shape,), role=role,
                        view="transposed" if transposed else "", params=bounds,
                        layout=_transposed if transposed else None, out=fn_out if out else None, judge="exact")

    clamp = op("clamp", "elementwise", [
        clamp_case((2, 64, 1024), -1.5, 2.0, scale=3.0, out=True),
        clamp_case((37, 101), 0.25, None, "odd"),
        CaseSpec(lambda g: [randn(g, 17, 33), -uniform(g, 33, low=0, high=1), uniform(g, 17, 1, low=0, high=1)],
                 torch.clamp, shapes=((17, 33), (33,), (17, 1)), role="tensor bounds broadcast", judge="exact"),
        clamp_case((33, 65), -0.5, 0.5, transposed=True),
        clamp_case((0, 3), -1, 1, "empty"),
    ])

    def causal(g: torch.Generator, n: int, m: int) -> torch.Tensor:
        return torch.ones(n, m, dtype=torch.bool).triu(1)

    def fill_case(shapes, value: float, make, role: str = "", transposed: bool = False) -> CaseSpec:
        return CaseSpec(make, lambda x, m: x.masked_fill(m, value), shapes=shapes, role=role,
                        view="transposed input" if transposed else "", params=(("value", value),),
                        layout=_transposed if transposed else None, judge="exact")

    masked_fill = op("masked_fill", "elementwise", [
        fill_case(((2, 8, 128, 128), (128, 128)), float("-inf"),
                  lambda g: [randn(g, 2, 8, 128, 128), causal(g, 128, 128)], "causal"),
        fill_case(((3, 37, 101), (3, 37, 101)), -1e4,
                  lambda g: [randn(g, 3, 37, 101), randint(g, 2, 3, 37, 101).bool()], "random mask odd"),
        fill_case(((33, 65), (65, 33)), 0.0, lambda g: [randn(g, 33, 65), randint(g, 2, 65, 33).bool()],
                  transposed=True),
        fill_case(((0, 9), (0, 9)), 1.0, lambda g: [randn(g, 0, 9), randint(g, 2, 0, 9).bool()], "empty"),
    ])

    def tri_cases(fn_name: str) -> list[CaseSpec]:
        f = getattr(torch, fn_name)

        def case(shape, diagonal: int = 0, role: str = "", transposed: bool = False, out: bool = False) -> CaseSpec:
            return CaseSpec(lambda g: [randn(g, *shape)], lambda x: f(x, diagonal=diagonal), shapes=(shape,),
                            role=role, view="transposed" if transposed else "",
                            params=(("diagonal", diagonal),) if diagonal else (),
                            layout=_transposed if transposed else None,
                            out=(lambda x, *, out: f(x, out=out)) if out else None, judge="exact")
        return [
            case((2, 8, 128, 128), out=True),
            case((37, 101), 3, "odd rectangular"),
            case((65, 33), -2, transposed=True),
            case((0, 5), role="empty"),
        ]

    return [
        op("add", "elementwise", add), op("sub", "elementwise", sub), op("mul", "elementwise", mul),
        op("div", "elementwise", div), where, clamp, masked_fill,
        op("tril", "elementwise", tri_cases("tril")), op("triu", "elementwise", tri_cases("triu")),
    ]
