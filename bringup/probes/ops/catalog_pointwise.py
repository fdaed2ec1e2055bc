"""Catalog: activations, elementwise math, elementwise binary ops and masking."""

from __future__ import annotations

from collections.abc import Callable

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
    def mk(shape: tuple[int, ...]):
        return lambda g: [domain(g, shape)]
    return [
        CaseSpec("[2,64,1024]", mk((2, 64, 1024)), fn, out=out, judge=judge),
        CaseSpec("odd [3,37,101]", mk((3, 37, 101)), fn, out=out, judge=judge),
        CaseSpec("non-contiguous [64,256][:, ::2]", mk((64, 256)), fn, out=out, judge=judge, layout=_noncontig),
        CaseSpec("transposed [33,65]^T", mk((33, 65)), fn, out=out, judge=judge, layout=_transposed),
        CaseSpec("long [16411]", mk((16411,)), fn, out=out, judge=judge),
        CaseSpec("empty [0,7]", mk((0, 7)), fn, out=out, judge=judge),
    ]


def _out(torch_fn):
    return lambda *args, out: torch_fn(*args, out=out)


def activation_ops() -> list[OpSpec]:
    def gelu_out(x, *, out):
        return torch._C._nn.gelu(x, out=out)

    def gelu_tanh_out(x, *, out):
        return torch._C._nn.gelu(x, approximate="tanh", out=out)

    gelu_cases = [
        *[CaseSpec(f"exact {c.label}", c.inputs, F.gelu, layout=c.layout, out=gelu_out)
          for c in unary_cases(F.gelu, normal(3.0))],
        *[CaseSpec(f"tanh {c.label}", c.inputs, lambda x: F.gelu(x, approximate="tanh"), layout=c.layout,
                   out=gelu_tanh_out)
          for c in unary_cases(F.gelu, normal(3.0))[:4]],
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
            CaseSpec("x^2 [2,64,1024]", lambda g: [randn(g, 2, 64, 1024)], lambda x: torch.pow(x, 2),
                     out=lambda x, *, out: torch.pow(x, 2, out=out)),
            CaseSpec("x^0.5 odd [37,101]", lambda g: [uniform(g, 37, 101, low=0.0, high=50.0)],
                     lambda x: torch.pow(x, 0.5)),
            CaseSpec("x^-1.5 transposed [33,65]^T", lambda g: [uniform(g, 33, 65, low=0.1, high=10.0)],
                     lambda x: torch.pow(x, -1.5), layout=_transposed),
            CaseSpec("tensor exponent broadcast [17,1]^[1,23]",
                     lambda g: [uniform(g, 17, 1, low=0.5, high=2.0), uniform(g, 1, 23, low=-3.0, high=3.0)],
                     torch.pow, out=_out(torch.pow)),
            CaseSpec("empty [0,5]", lambda g: [randn(g, 0, 5)], lambda x: torch.pow(x, 3)),
        ]),
    ]


def _binary(fn, label_extra: str = "", denom: bool = False, out=None) -> list[CaseSpec]:
    second = interval(0.5, 4.0) if denom else normal()

    def mk(a_shape, b_shape, signed_denominator=False):
        def make(g: torch.Generator) -> list:
            b = second(g, b_shape)
            if denom and signed_denominator:
                b = b * (randint(g, 2, *b_shape) * 2 - 1)
            return [randn(g, *a_shape), b]
        return make

    def noncontig(args: list) -> list:
        return [args[0][:, ::3], args[1].t()]

    return [
        CaseSpec(f"same shape [4,128,512]{label_extra}", mk((4, 128, 512), (4, 128, 512)), fn, out=out),
        CaseSpec(f"broadcast [4,1,64] . [1,7,64]{label_extra}", mk((4, 1, 64), (1, 7, 64), True), fn, out=out),
        CaseSpec(f"row broadcast odd [37,129] . [129]{label_extra}", mk((37, 129), (129,)), fn, out=out),
        CaseSpec(f"strided and transposed [40,90][:, ::3] . [40,30]^T{label_extra}",
                 mk((40, 90), (30, 40)), fn, out=out, layout=noncontig),
        CaseSpec(f"0-d tensor [16411] . []{label_extra}", mk((16411,), ()), fn, out=out),
        CaseSpec(f"empty [0,3] . [3]{label_extra}", mk((0, 3), (3,)), fn, out=out),
    ]


def elementwise_ops() -> list[OpSpec]:
    def scalar_case(name: str, fn, accum: int = 1) -> CaseSpec:
        # accum=2 for add/sub: the scalar is rounded to the dtype, so results that cancel to ~0 carry
        # an absolute error of about eps * |scalar| (the mixed atol covers it)
        return CaseSpec(f"python scalar [3,37,101] . 0.3{name}", lambda g: [randn(g, 3, 37, 101)], fn, accum=accum)

    add = [
        *_binary(torch.add, out=_out(torch.add)),
        CaseSpec("alpha=-0.5 [64,100]", lambda g: [randn(g, 64, 100), randn(g, 64, 100)],
                 lambda a, b: torch.add(a, b, alpha=-0.5)),
        scalar_case("", lambda a: a + 0.3, accum=2),
    ]
    sub = [*_binary(torch.sub, out=_out(torch.sub)), scalar_case("", lambda a: a - 0.3, accum=2)]
    mul = [*_binary(torch.mul, out=_out(torch.mul)), scalar_case("", lambda a: a * 0.3)]
    div = [*_binary(torch.div, denom=True, out=_out(torch.div)), scalar_case("", lambda a: a / 0.3)]

    def where_make(shape_c, shape_x, shape_y):
        def make(g: torch.Generator) -> list:
            return [randint(g, 2, *shape_c).bool(), randn(g, *shape_x), randn(g, *shape_y)]
        return make

    where = op("where", "elementwise", [
        CaseSpec("[4,128,256]", where_make((4, 128, 256), (4, 128, 256), (4, 128, 256)), torch.where,
                 out=_out(torch.where), judge="exact"),
        CaseSpec("broadcast cond [1,37,1] x [5,37,19] y [19]", where_make((1, 37, 1), (5, 37, 19), (19,)),
                 torch.where, out=_out(torch.where), judge="exact"),
        CaseSpec("scalar other (masking with -inf)", where_make((9, 33), (9, 33), ()),
                 lambda c, x, y: torch.where(c, x, float("-inf")), judge="exact"),
        CaseSpec("empty [0,4]", where_make((0, 4), (0, 4), (0, 4)), torch.where, judge="exact"),
    ])
    clamp = op("clamp", "elementwise", [
        CaseSpec("scalar bounds [2,64,1024]", lambda g: [randn(g, 2, 64, 1024, scale=3.0)],
                 lambda x: torch.clamp(x, -1.5, 2.0), out=lambda x, *, out: torch.clamp(x, -1.5, 2.0, out=out),
                 judge="exact"),
        CaseSpec("min only odd [37,101]", lambda g: [randn(g, 37, 101)], lambda x: torch.clamp(x, min=0.25),
                 judge="exact"),
        CaseSpec("tensor bounds broadcast [17,33]", lambda g: [randn(g, 17, 33), -uniform(g, 33, low=0, high=1),
                                                             uniform(g, 17, 1, low=0, high=1)],
                 torch.clamp, judge="exact"),
        CaseSpec("transposed [33,65]^T", lambda g: [randn(g, 33, 65)], lambda x: torch.clamp(x, -0.5, 0.5),
                 layout=_transposed, judge="exact"),
        CaseSpec("empty [0,3]", lambda g: [randn(g, 0, 3)], lambda x: torch.clamp(x, -1, 1), judge="exact"),
    ])

    def causal(g: torch.Generator, n: int, m: int) -> torch.Tensor:
        return torch.ones(n, m, dtype=torch.bool).triu(1)

    masked_fill = op("masked_fill", "elementwise", [
        CaseSpec("causal -inf [2,8,128,128]", lambda g: [randn(g, 2, 8, 128, 128), causal(g, 128, 128)],
                 lambda x, m: x.masked_fill(m, float("-inf")), judge="exact"),
        CaseSpec("random mask odd [3,37,101] value -1e4", lambda g: [randn(g, 3, 37, 101),
                                                                  randint(g, 2, 3, 37, 101).bool()],
                 lambda x, m: x.masked_fill(m, -1e4), judge="exact"),
        CaseSpec("transposed input [33,65]^T", lambda g: [randn(g, 33, 65), randint(g, 2, 65, 33).bool()],
                 lambda x, m: x.masked_fill(m, 0.0), layout=_transposed, judge="exact"),
        CaseSpec("empty [0,9]", lambda g: [randn(g, 0, 9), randint(g, 2, 0, 9).bool()],
                 lambda x, m: x.masked_fill(m, 1.0), judge="exact"),
    ])

    def tri_cases(fn_name: str) -> list[CaseSpec]:
        f = getattr(torch, fn_name)
        return [
            CaseSpec("[2,8,128,128]", lambda g: [randn(g, 2, 8, 128, 128)], f,
                     out=lambda x, *, out: f(x, out=out), judge="exact"),
            CaseSpec("odd rectangular [37,101] diagonal=3", lambda g: [randn(g, 37, 101)],
                     lambda x: f(x, diagonal=3), judge="exact"),
            CaseSpec("transposed [65,33]^T diagonal=-2", lambda g: [randn(g, 65, 33)],
                     lambda x: f(x, diagonal=-2), layout=_transposed, judge="exact"),
            CaseSpec("empty [0,5]", lambda g: [randn(g, 0, 5)], f, judge="exact"),
        ]

    return [
        op("add", "elementwise", add), op("sub", "elementwise", sub), op("mul", "elementwise", mul),
        op("div", "elementwise", div), where, clamp, masked_fill,
        op("tril", "elementwise", tri_cases("tril")), op("triu", "elementwise", tri_cases("triu")),
    ]
