"""Catalog: the matmul family (matmul, linear, bmm, addmm, baddbmm, _int_mm, _scaled_mm)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bringup.probes.ops.inputs import randn
from bringup.probes.ops.spec import CaseSpec, OpSpec, op


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
    def mm(label: str, a, b, k: int, layout=None, out=True) -> CaseSpec:
        return CaseSpec(label, _mm_inputs(a, b, k), torch.matmul, out=_matmul_out if out else None,
                        layout=layout, accum=k)

    matmul = op("matmul", "matmul", [
        mm("decode [1,4096]x[4096,1024]", (1, 4096), (4096, 1024), 4096),
        mm("prefill [64,1024]x[1024,1024]", (64, 1024), (1024, 1024), 1024),
        mm("odd [37,129]x[129,67]", (37, 129), (129, 67), 129),
        mm("b transposed [33,256]x[100,256]^T", (33, 256), (100, 256), 256, layout=_t_last(1)),
        mm("a transposed [80,48]^T x[80,24]", (80, 48), (80, 24), 80, layout=_t_last(0)),
        mm("broadcast [2,3,17,64]x[64,31]", (2, 3, 17, 64), (64, 31), 64, out=False),
        mm("long K=8192 [4,8192]x[8192,8]", (4, 8192), (8192, 8), 8192),
        mm("empty [0,64]x[64,32]", (0, 64), (64, 32), 64),
    ])

    def lin(label: str, x, w, bias: bool, k: int, layout=None) -> CaseSpec:
        def make(g: torch.Generator) -> list:
            args = [randn(g, *x), randn(g, *w, scale=1.0 / math.sqrt(k))]
            args.append(randn(g, w[0] if layout is None else w[1]) if bias else None)
            return args
        return CaseSpec(label, make, F.linear, layout=layout, accum=k)

    linear = op("linear", "matmul", [
        lin("no bias [7,512]->384", (7, 512), (384, 512), False, 512),
        lin("bias [3,5,127]->61", (3, 5, 127), (61, 127), True, 127),
        lin("bias decode [1,2048]->2048", (1, 2048), (2048, 2048), True, 2048),
        lin("weight non-contiguous [9,96]->40", (9, 96), (96, 40), False, 96, layout=_t_last(1)),
        lin("long K=8192 [2,8192]->16", (2, 8192), (16, 8192), True, 8192),
        lin("empty batch [0,64]->32", (0, 64), (32, 64), True, 64),
    ])

    def bmm_case(label: str, a, b, k: int, layout=None) -> CaseSpec:
        return CaseSpec(label, _mm_inputs(a, b, k), torch.bmm,
                        out=lambda x, y, *, out: torch.bmm(x, y, out=out), layout=layout, accum=k)

    bmm = op("bmm", "matmul", [
        bmm_case("[8,33,64]x[8,64,17]", (8, 33, 64), (8, 64, 17), 64),
        bmm_case("attention scores [16,128,128]x[16,128,128]", (16, 128, 128), (16, 128, 128), 128),
        bmm_case("b transposed [4,21,96]x[4,40,96]^T", (4, 21, 96), (4, 40, 96), 96, layout=_t_last(1)),
        bmm_case("long K=8192 [2,3,8192]x[2,8192,5]", (2, 3, 8192), (2, 8192, 5), 8192),
        bmm_case("empty [0,4,8]x[0,8,4]", (0, 4, 8), (0, 8, 4), 8),
    ])

    def addmm_case(label: str, bias, a, b, k: int, beta=1.0, alpha=1.0, layout=None) -> CaseSpec:
        def make(g: torch.Generator) -> list:
            return [randn(g, *bias), randn(g, *a), randn(g, *b, scale=1.0 / math.sqrt(k))]

        def fn(c, x, y):
            return torch.addmm(c, x, y, beta=beta, alpha=alpha)

        def out(c, x, y, *, out):
            return torch.addmm(c, x, y, beta=beta, alpha=alpha, out=out)
        return CaseSpec(label, make, fn, out=out, layout=layout, accum=k)

    addmm = op("addmm", "matmul", [
        addmm_case("bias row [256] + [16,512]x[512,256]", (256,), (16, 512), (512, 256), 512),
        addmm_case("full bias odd [13,29] beta=0.5 alpha=2", (13, 29), (13, 77), (77, 29), 77, 0.5, 2.0),
        addmm_case("b transposed [8,128]x[64,128]^T", (64,), (8, 128), (64, 128), 128, layout=_t_last(2)),
        addmm_case("long K=8192", (8,), (3, 8192), (8192, 8), 8192),
        addmm_case("empty [0,16]x[16,8]", (8,), (0, 16), (16, 8), 16),
    ])

    def baddbmm_case(label: str, c, a, b, k: int, beta=1.0, alpha=1.0) -> CaseSpec:
        def make(g: torch.Generator) -> list:
            return [randn(g, *c), randn(g, *a), randn(g, *b, scale=1.0 / math.sqrt(k))]

        def fn(c_, x, y):
            return torch.baddbmm(c_, x, y, beta=beta, alpha=alpha)

        def out(c_, x, y, *, out):
            return torch.baddbmm(c_, x, y, beta=beta, alpha=alpha, out=out)
        return CaseSpec(label, make, fn, out=out, accum=k)

    baddbmm = op("baddbmm", "matmul", [
        baddbmm_case("[4,32,32] + [4,32,64]x[4,64,32]", (4, 32, 32), (4, 32, 64), (4, 64, 32), 64),
        baddbmm_case("broadcast bias [1,1,19] alpha=0.125", (1, 1, 19), (3, 11, 45), (3, 45, 19), 45, 1.0, 0.125),
        baddbmm_case("long K=8192", (2, 2, 3), (2, 2, 8192), (2, 8192, 3), 8192),
        baddbmm_case("empty [0,2,2]", (0, 2, 2), (0, 2, 4), (0, 4, 2), 4),
    ])

    def int_mm_case(label: str, m: int, k: int, n: int, b_transposed: bool = False) -> CaseSpec:
        def make(g: torch.Generator) -> list:
            a = torch.randint(-128, 128, (m, k), generator=g, dtype=torch.int64).to(torch.int8)
            shape = (n, k) if b_transposed else (k, n)
            b = torch.randint(-128, 128, shape, generator=g, dtype=torch.int64).to(torch.int8)
            return [a, b]

        def ref(a, b):
            return a.to(torch.int64) @ b.to(torch.int64)
        return CaseSpec(label, make, torch._int_mm, ref=ref, judge="exact", accum=k,
                        layout=_t_last(1) if b_transposed else None)

    int_mm = op("_int_mm", "matmul", [
        int_mm_case("[32,64]x[64,32]", 32, 64, 32),
        int_mm_case("[48,1024]x[1024,40]", 48, 1024, 40),
        int_mm_case("b column-major [32,128]x[128,64]", 32, 128, 64, b_transposed=True),
    ], dtypes=("int8",), note="where the device offers it; int32 results are exact")

    def scaled_mm_case(label: str, m: int, k: int, n: int) -> CaseSpec:
        def make(g: torch.Generator) -> list:
            scale_a = torch.tensor(0.5, dtype=torch.float32)
            scale_b = torch.tensor(0.25, dtype=torch.float32)
            return [randn(g, m, k), randn(g, n, k), scale_a, scale_b]

        def fn(a, b, sa, sb):
            return torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.float32)

        def ref(a, b, sa, sb):
            return (a * sa) @ (b * sb)
        return CaseSpec(label, make, fn, ref=ref, layout=_t_last(1), accum=k, keep_dtype=(2, 3))

    scaled_mm = op("_scaled_mm", "matmul", [
        scaled_mm_case("[32,64]x[64,32] (b column-major)", 32, 64, 32),
        scaled_mm_case("[16,256]x[256,48] (b column-major)", 16, 256, 48),
    ], dtypes=("float8_e4m3fn",), note="float8 inputs, float32 output; where the device offers it")

    return [matmul, linear, bmm, addmm, baddbmm, int_mm, scaled_mm]
