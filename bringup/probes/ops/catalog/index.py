"""Catalog: indexing, KV-cache movement, concatenation and casts."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from bringup.probes.ops.inputs import randint, randn, randperm
from bringup.probes.ops.spec import DEFAULT_FLOAT_DTYPES, CaseSpec, OpSpec, op

CAST_TARGETS: tuple[str, ...] = ("float64", "float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")
CAST_SOURCES: tuple[str, ...] = (*DEFAULT_FLOAT_DTYPES, "float8_e4m3fn", "float8_e5m2")


def _transposed(args: list) -> list:
    return [args[0].t(), *args[1:]]


def _exact(make, fn, shapes, role: str = "", **kw) -> CaseSpec:
    return CaseSpec(make, fn, shapes=shapes, role=role, judge="exact", **kw)


def gather_like_ops() -> list[OpSpec]:
    embedding = op("embedding", "indexing", [
        _exact(lambda g: [randint(g, 5000, 4, 37), randn(g, 5000, 128)], F.embedding, ((4, 37), (5000, 128)),
               "ids", out=lambda i, w, *, out: torch.ops.aten.embedding.out(w, i, out=out)),
        _exact(lambda g: [randint(g, 11, 64), randn(g, 11, 67)], F.embedding, ((64,), (11, 67)), "repeated ids"),
        _exact(lambda g: [randint(g, 300, 2, 5), randn(g, 96, 300)], F.embedding, ((2, 5), (96, 300)),
               view="transposed table", layout=lambda a: [a[0], a[1].t()]),
        _exact(lambda g: [randint(g, 10, 0), randn(g, 10, 16)], F.embedding, ((0,), (10, 16)), "empty ids"),
    ])
    index_select = op("index_select", "indexing", [
        _exact(lambda g: [randn(g, 4096, 128), randint(g, 4096, 300)], lambda x, i: torch.index_select(x, 0, i),
               ((4096, 128), (300,)), "rows", params=(("dim", 0),),
               out=lambda x, i, *, out: torch.index_select(x, 0, i, out=out)),
        _exact(lambda g: [randn(g, 37, 131), randint(g, 131, 29)], lambda x, i: torch.index_select(x, 1, i),
               ((37, 131), (29,)), "columns odd", params=(("dim", 1),)),
        _exact(lambda g: [randn(g, 65, 33), randint(g, 33, 40)], lambda x, i: torch.index_select(x, 0, i),
               ((65, 33), (40,)), view="transposed", params=(("dim", 0),), layout=_transposed),
        _exact(lambda g: [randn(g, 10, 8), randint(g, 10, 0)], lambda x, i: torch.index_select(x, 0, i),
               ((10, 8), (0,)), "empty index", params=(("dim", 0),)),
    ])
    gather = op("gather", "indexing", [
        _exact(lambda g: [randn(g, 4, 32000), randint(g, 32000, 4, 50)], lambda x, i: torch.gather(x, -1, i),
               ((4, 32000), (4, 50)), params=(("dim", -1),),
               out=lambda x, i, *, out: torch.gather(x, -1, i, out=out)),
        _exact(lambda g: [randn(g, 37, 131), randint(g, 37, 5, 131)], lambda x, i: torch.gather(x, 0, i),
               ((37, 131), (5, 131)), "odd", params=(("dim", 0),)),
        _exact(lambda g: [randn(g, 65, 33), randint(g, 65, 33, 7)], lambda x, i: torch.gather(x, 1, i),
               ((65, 33), (33, 7)), view="transposed", params=(("dim", 1),), layout=_transposed),
        _exact(lambda g: [randn(g, 3, 5), randint(g, 5, 3, 0)], lambda x, i: torch.gather(x, 1, i),
               ((3, 5), (3, 0)), "empty index", params=(("dim", 1),)),
    ])

    def unique_rows(g: torch.Generator, rows: int, n: int, k: int) -> torch.Tensor:
        return torch.stack([randperm(g, n)[:k] for _ in range(rows)])

    scatter = op("scatter", "indexing", [
        _exact(lambda g: [randn(g, 8, 1000), unique_rows(g, 8, 1000, 100), randn(g, 8, 100)],
               lambda x, i, s: torch.scatter(x, 1, i, s), ((8, 1000), (8, 100), (8, 100)), "unique per row",
               params=(("dim", 1),)),
        _exact(lambda g: [randn(g, 37, 13), unique_rows(g, 13, 37, 5).t().contiguous(), randn(g, 5, 13)],
               lambda x, i, s: torch.scatter(x, 0, i, s), ((37, 13), (5, 13), (5, 13)), "odd", params=(("dim", 0),)),
        _exact(lambda g: [randn(g, 4, 32000), unique_rows(g, 4, 32000, 20)],
               lambda x, i: torch.scatter(x, 1, i, float("-inf")), ((4, 32000), (4, 20)), "logit masking",
               params=(("dim", 1), ("value", float("-inf")))),
        _exact(lambda g: [randn(g, 3, 5), randint(g, 5, 3, 0), randn(g, 3, 0)],
               lambda x, i, s: torch.scatter(x, 1, i, s), ((3, 5), (3, 0), (3, 0)), "empty index",
               params=(("dim", 1),)),
    ])
    return [embedding, index_select, gather, scatter]


def kv_cache_ops() -> list[OpSpec]:
    def kv_write(role: str, blocks: int, block: int, heads: int, dim: int, n: int) -> CaseSpec:
        """A paged KV cache [blocks, block, heads, dim] and n tokens written to distinct slots."""
        def make(g: torch.Generator) -> list:
            slots = randperm(g, blocks * block)[:n]
            return [randn(g, blocks, block, heads, dim), slots // block, slots % block, randn(g, n, heads, dim)]
        return _exact(make, lambda c, b, o, v: torch.index_put(c, (b, o), v), ((blocks, block, heads, dim),),
                      role, params=(("tokens", n),))

    index_put = op("index_put", "kv-cache", [
        kv_write("paged write", 64, 16, 8, 64, 37),
        kv_write("decode write", 16, 16, 2, 128, 1),
        kv_write("odd head dim", 7, 5, 3, 80, 5),
        # 120 rows into 60: 8 is a generous bound on the duplicates any one row receives
        CaseSpec(lambda g: [randn(g, 60, 64), randint(g, 60, 120), randn(g, 120, 64)],
                 lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True), shapes=((60, 64), (120,), (120, 64)),
                 role="accumulate with duplicates", accum=8, step_rounding=True),
        kv_write("empty write", 4, 4, 2, 8, 0),
    ], note="paged KV-cache writes (cache[block, offset] = values)")
    index_copy = op("index_copy", "kv-cache", [
        _exact(lambda g: [randn(g, 2048, 8, 64), randperm(g, 2048)[:37], randn(g, 37, 8, 64)],
               lambda c, i, v: c.index_copy(0, i, v), ((2048, 8, 64), (37,), (37, 8, 64)), "contiguous cache",
               params=(("dim", 0),)),
        _exact(lambda g: [randn(g, 3, 101, 80), randperm(g, 101)[:13], randn(g, 3, 13, 80)],
               lambda c, i, v: c.index_copy(1, i, v), ((3, 101, 80), (13,), (3, 13, 80)), "odd",
               params=(("dim", 1),)),
        _exact(lambda g: [randn(g, 50, 40), randperm(g, 50)[:7], randn(g, 40, 7)],
               lambda c, i, v: c.index_copy(0, i, v), ((50, 40), (7,), (40, 7)), view="transposed source",
               params=(("dim", 0),), layout=lambda a: [a[0], a[1], a[2].t()]),
        _exact(lambda g: [randn(g, 10, 4), randint(g, 10, 0), randn(g, 0, 4)],
               lambda c, i, v: c.index_copy(0, i, v), ((10, 4), (0,), (0, 4)), "empty index", params=(("dim", 0),)),
    ])
    cat = op("cat", "kv-cache", [
        _exact(lambda g: [randn(g, 1, 8, 512, 64), randn(g, 1, 8, 1, 64)], lambda a, b: torch.cat([a, b], dim=2),
               ((1, 8, 512, 64), (1, 8, 1, 64)), "append to cache", params=(("dim", 2),),
               out=lambda a, b, *, out: torch.cat([a, b], dim=2, out=out)),
        _exact(lambda g: [randn(g, 5, 7), randn(g, 5, 13), randn(g, 5, 1)],
               lambda a, b, c: torch.cat([a, b, c], dim=-1), ((5, 7), (5, 13), (5, 1)), "odd",
               params=(("dim", -1),)),
        _exact(lambda g: [randn(g, 33, 65), randn(g, 33, 10)], lambda a, b: torch.cat([a, b], dim=0),
               ((33, 65), (33, 10)), view="transposed", params=(("dim", 0),),
               layout=lambda a: [a[0].t(), a[1].t()]),
        _exact(lambda g: [randn(g, 4, 3), randn(g, 0, 3)], lambda a, b: torch.cat([a, b], dim=0),
               ((4, 3), (0, 3)), "with an empty part", params=(("dim", 0),)),
    ])
    stack = op("stack", "kv-cache", [
        _exact(lambda g: [randn(g, 2, 8, 128, 64), randn(g, 2, 8, 128, 64)], lambda a, b: torch.stack([a, b]),
               ((2, 8, 128, 64), (2, 8, 128, 64)), "k and v", params=(("dim", 0),),
               out=lambda a, b, *, out: torch.stack([a, b], out=out)),
        _exact(lambda g: [randn(g, 37, 131), randn(g, 37, 131)], lambda a, b: torch.stack([a, b], dim=-1),
               ((37, 131), (37, 131)), "odd", params=(("dim", -1),)),
        _exact(lambda g: [randn(g, 65, 33), randn(g, 65, 33)], lambda a, b: torch.stack([a, b], dim=1),
               ((65, 33), (65, 33)), view="transposed", params=(("dim", 1),),
               layout=lambda a: [a[0].t(), a[1].t()]),
        _exact(lambda g: [randn(g, 0, 4), randn(g, 0, 4)], lambda a, b: torch.stack([a, b]),
               ((0, 4), (0, 4)), "empty", params=(("dim", 0),)),
    ])

    def transposed(shape, dims: tuple[int, int], role: str = "", view: str = "", layout=None) -> CaseSpec:
        return _exact(lambda g: [randn(g, *shape)], lambda x: x.transpose(*dims).contiguous(), (shape,), role,
                      view=view, params=(("dims", dims),), layout=layout)

    transpose = op("transpose_contiguous", "kv-cache", [
        transposed((1, 128, 32, 128), (1, 2), "heads"),
        transposed((37, 131), (0, 1), "odd"),
        transposed((3, 40, 90), (1, 2), view="strided [..., ::3]", layout=lambda a: [a[0][..., ::3]]),
        transposed((0, 5, 3), (1, 2), "empty"),
    ])
    repeat_interleave = op("repeat_interleave", "kv-cache", [
        _exact(lambda g: [randn(g, 1, 2, 128, 64)], lambda x: x.repeat_interleave(4, dim=1), ((1, 2, 128, 64),),
               "GQA kv heads", params=(("repeats", 4), ("dim", 1))),
        _exact(lambda g: [randn(g, 5, 37)], lambda x: x.repeat_interleave(3, dim=0), ((5, 37),), "odd",
               params=(("repeats", 3), ("dim", 0))),
        _exact(lambda g: [randn(g, 7, 9), randint(g, 4, 7)], lambda x, r: x.repeat_interleave(r, dim=0),
               ((7, 9), (7,)), "per-row repeats tensor", params=(("dim", 0),)),
        _exact(lambda g: [randn(g, 33, 65)], lambda x: x.repeat_interleave(2, dim=1), ((33, 65),),
               view="transposed", params=(("repeats", 2), ("dim", 1)), layout=_transposed),
        _exact(lambda g: [randn(g, 0, 3)], lambda x: x.repeat_interleave(2, dim=0), ((0, 3),), "empty",
               params=(("repeats", 2), ("dim", 0))),
    ])
    return [index_put, index_copy, cat, stack, transpose, repeat_interleave]


def cast_op() -> OpSpec:
    def values(g: torch.Generator) -> list:
        x = randn(g, 64, 129) * torch.logspace(-10, 4, 129, dtype=torch.float64)
        x[0, :4] = torch.tensor([0.0, -0.0, 448.0, -57344.0], dtype=torch.float64)
        return [x]

    cases = []
    for target in CAST_TARGETS:
        sources = tuple(s for s in CAST_SOURCES if s != target)
        dtype = getattr(torch, target, None)
        if dtype is None:
            continue
        for transposed in (False, True):
            # the values span tiny, zero and large magnitudes (logspace columns, exact 0, -0, 448, -57344)
            cases.append(CaseSpec(values, (lambda x, d=dtype: x.to(d)), shapes=((64, 129),),
                                  view="transposed" if transposed else "", params=(("to", target),),
                                  judge="exact", dtypes=sources, layout=_transposed if transposed else None))
    return op("cast", "cast", cases, dtypes=CAST_SOURCES,
              note="every pair of floating dtypes; round-to-nearest-even is deterministic, so exact")
