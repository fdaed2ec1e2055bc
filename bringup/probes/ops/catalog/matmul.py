"""Catalog: the matmul family (matmul, linear, bmm, addmm, baddbmm); _int_mm and _scaled_mm are in quantized.py."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bringup.probes.ops.inputs import randn
from bringup.probes.ops.spec import CaseSpec, OpSpec, op, seen_shape


def _mm_inputs(a_shape: tuple[int, ...], b_shape: tuple[int, ...], k: int):
    def make(g: torch.Generator) -> list:
        return [randn(g, *a_shape), randn(g, *b_shape, scale=1.0 / math.sqrt(max(k, 1)))]
    return make


def _t_last(i: int):
    """Layout: argument i is generated as [..., n, k] and seen as its transpose [..., k, n]."""
    def layout(args: list) -> list:
        args = list(args)
        args[i] = args[i].transpose(-1, -2)
        return args
    return layout


def _matmul_out(a, b, *, out):
    return torch.matmul(a, b, out=out)


def matmul_ops() -> list[OpSpec]:
    def mm(role: str, a, b, t: str = "", out=True) -> CaseSpec:
        """t names the transposed argument ("a" or "b"); K is the inner length of the shapes the op sees."""
        k = seen_shape(a, t == "a")[-1]
        return CaseSpec(_mm_inputs(a, b, k), torch.matmul, shapes=(a, b), role=role,
                        view=f"{t} transposed" if t else "", out=_matmul_out if out else None,
                        layout=_t_last(1 if t == "b" else 0) if t else None, accum=k)

    matmul = op("matmul", "matmul", [
        mm("decode", (1, 4096), (4096, 1024)),
        mm("prefill", (64, 1024), (1024, 1024)),
        mm("odd", (37, 129), (129, 67)),
        mm("", (33, 256), (100, 256), t="b"),
        mm("", (80, 48), (80, 24), t="a"),
        mm("broadcast", (2, 3, 17, 64), (64, 31), out=False),
        mm("long K", (4, 8192), (8192, 8)),
        mm("empty", (0, 64), (64, 32)),
    ])

    def lin(role: str, x, w, bias: bool, w_transposed: bool = False) -> CaseSpec:
        k = x[-1]

        def make(g: torch.Generator) -> list:
            args = [randn(g, *x), randn(g, *w, scale=1.0 / math.sqrt(k))]
            args.append(randn(g, w[1] if w_transposed else w[0]) if bias else None)
            return args
        return CaseSpec(make, F.linear, shapes=(x, w), role=role, view="weight transposed" if w_transposed else "",
                        params=(("bias", bias),), layout=_t_last(1) if w_transposed else None, accum=k)

    linear = op("linear", "matmul", [
        lin("", (7, 512), (384, 512), False),
        lin("", (3, 5, 127), (61, 127), True),
        lin("decode", (1, 2048), (2048, 2048), True),
        lin("", (9, 96), (96, 40), False, w_transposed=True),
        lin("long K", (2, 8192), (16, 8192), True),
        lin("empty batch", (0, 64), (32, 64), True),
    ])

    def bmm_case(role: str, a, b, b_transposed: bool = False) -> CaseSpec:
        k = a[-1]
        return CaseSpec(_mm_inputs(a, b, k), torch.bmm, shapes=(a, b), role=role,
                        view="b transposed" if b_transposed else "",
                        out=lambda x, y, *, out: torch.bmm(x, y, out=out),
                        layout=_t_last(1) if b_transposed else None, accum=k)

    bmm = op("bmm", "matmul", [
        bmm_case("", (8, 33, 64), (8, 64, 17)),
        bmm_case("attention scores", (16, 128, 128), (16, 128, 128)),
        bmm_case("", (4, 21, 96), (4, 40, 96), b_transposed=True),
        bmm_case("long K", (2, 3, 8192), (2, 8192, 5)),
        bmm_case("empty", (0, 4, 8), (0, 8, 4)),
    ])

    def addmm_case(role: str, bias, a, b, beta=1.0, alpha=1.0, b_transposed: bool = False) -> CaseSpec:
        k = a[-1]

        def make(g: torch.Generator) -> list:
            return [randn(g, *bias), randn(g, *a), randn(g, *b, scale=1.0 / math.sqrt(k))]

        def fn(c, x, y):
            return torch.addmm(c, x, y, beta=beta, alpha=alpha)

        def out(c, x, y, *, out):
            return torch.addmm(c, x, y, beta=beta, alpha=alpha, out=out)
        return CaseSpec(make, fn, shapes=(bias, a, b), role=role, view="b transposed" if b_transposed else "",
                        params=_scaling(beta, alpha), out=out, layout=_t_last(2) if b_transposed else None,
                        accum=k)

    addmm = op("addmm", "matmul", [
        addmm_case("bias row", (256,), (16, 512), (512, 256)),
        addmm_case("full bias odd", (13, 29), (13, 77), (77, 29), 0.5, 2.0),
        addmm_case("", (64,), (8, 128), (64, 128), b_transposed=True),
        addmm_case("long K", (8,), (3, 8192), (8192, 8)),
        addmm_case("empty", (8,), (0, 16), (16, 8)),
    ])

    def baddbmm_case(role: str, c, a, b, beta=1.0, alpha=1.0) -> CaseSpec:
        k = a[-1]

        def make(g: torch.Generator) -> list:
            return [randn(g, *c), randn(g, *a), randn(g, *b, scale=1.0 / math.sqrt(k))]

        def fn(c_, x, y):
            return torch.baddbmm(c_, x, y, beta=beta, alpha=alpha)

        def out(c_, x, y, *, out):
            return torch.baddbmm(c_, x, y, beta=beta, alpha=alpha, out=out)
        return CaseSpec(make, fn, shapes=(c, a, b), role=role, params=_scaling(beta, alpha), out=out, accum=k)

    baddbmm = op("baddbmm", "matmul", [
        baddbmm_case("", (4, 32, 32), (4, 32, 64), (4, 64, 32)),
        baddbmm_case("broadcast bias", (1, 1, 19), (3, 11, 45), (3, 45, 19), 1.0, 0.125),
        baddbmm_case("long K", (2, 2, 3), (2, 2, 8192), (2, 8192, 3)),
        baddbmm_case("empty", (0, 2, 2), (0, 2, 4), (0, 4, 2)),
    ])

    return [matmul, linear, bmm, addmm, baddbmm]


def _scaling(beta: float, alpha: float) -> tuple[tuple[str, float], ...]:
    """beta/alpha as params, only where they differ from 1."""
    return tuple((name, value) for name, value in (("beta", beta), ("alpha", alpha)) if value != 1.0)
