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


def _exact(label, make, fn, **kw) -> CaseSpec:
    return CaseSpec(label, make, fn, judge="exact", **kw)


def gather_like_ops() -> list[OpSpec]:
    embedding = op("embedding", "indexing", [
        _exact("ids [4,37] from [5000,128]", lambda g: [randint(g, 5000, 4, 37), randn(g, 5000, 128)], F.embedding,
               out=lambda i, w, *, out: torch.ops.aten.embedding.out(w, i, out=out)),
        _exact("repeated ids [64] from [11,67]", lambda g: [randint(g, 11, 64), randn(g, 11, 67)], F.embedding),
        _exact("transposed table [96,300]^T", lambda g: [randint(g, 300, 2, 5), randn(g, 96, 300)], F.embedding,
               layout=lambda a: [a[0], a[1].t()]),
        _exact("empty ids [0]", lambda g: [randint(g, 10, 0), randn(g, 10, 16)], F.embedding),
    ])
    index_select = op("index_select", "indexing", [
        _exact("rows [4096,128] by 300 ids", lambda g: [randn(g, 4096, 128), randint(g, 4096, 300)],
               lambda x, i: torch.index_select(x, 0, i), out=lambda x, i, *, out: torch.index_select(x, 0, i, out=out)),
        _exact("columns odd [37,131] dim=1", lambda g: [randn(g, 37, 131), randint(g, 131, 29)],
               lambda x, i: torch.index_select(x, 1, i)),
        _exact("transposed [65,33]^T dim=0", lambda g: [randn(g, 65, 33), randint(g, 33, 40)],
               lambda x, i: torch.index_select(x, 0, i), layout=_transposed),
        _exact("empty index", lambda g: [randn(g, 10, 8), randint(g, 10, 0)],
               lambda x, i: torch.index_select(x, 0, i)),
    ])
    gather = op("gather", "indexing", [
        _exact("[4,32000] pick 50 per row", lambda g: [randn(g, 4, 32000), randint(g, 32000, 4, 50)],
               lambda x, i: torch.gather(x, -1, i), out=lambda x, i, *, out: torch.gather(x, -1, i, out=out)),
        _exact("dim=0 odd [37,131]", lambda g: [randn(g, 37, 131), randint(g, 37, 5, 131)],
               lambda x, i: torch.gather(x, 0, i)),
        _exact("transposed [65,33]^T", lambda g: [randn(g, 65, 33), randint(g, 65, 33, 7)],
               lambda x, i: torch.gather(x, 1, i), layout=_transposed),
        _exact("empty index [3,0]", lambda g: [randn(g, 3, 5), randint(g, 5, 3, 0)],
               lambda x, i: torch.gather(x, 1, i)),
    ])

    def unique_rows(g: torch.Generator, rows: int, n: int, k: int) -> torch.Tensor:
        return torch.stack([randperm(g, n)[:k] for _ in range(rows)])

    scatter = op("scatter", "indexing", [
        _exact("[8,1000] scatter 100 unique per row", lambda g: [randn(g, 8, 1000), unique_rows(g, 8, 1000, 100),
                                                               randn(g, 8, 100)],
               lambda x, i, s: torch.scatter(x, 1, i, s)),
        _exact("dim=0 odd [37,13]", lambda g: [randn(g, 37, 13), unique_rows(g, 13, 37, 5).t().contiguous(),
                                              randn(g, 5, 13)],
               lambda x, i, s: torch.scatter(x, 0, i, s)),
        _exact("scalar value (logit masking) [4,32000]", lambda g: [randn(g, 4, 32000),
                                                                  unique_rows(g, 4, 32000, 20)],
               lambda x, i: torch.scatter(x, 1, i, float("-inf"))),
        _exact("empty index [3,0]", lambda g: [randn(g, 3, 5), randint(g, 5, 3, 0), randn(g, 3, 0)],
               lambda x, i, s: torch.scatter(x, 1, i, s)),
    ])
    return [embedding, index_select, gather, scatter]


def kv_cache_ops() -> list[OpSpec]:
    def kv_write(blocks: int, block: int, heads: int, dim: int, n: int):
        """A paged KV cache [blocks, block, heads, dim] and n tokens written to distinct slots."""
        def make(g: torch.Generator) -> list:
            slots = randperm(g, blocks * block)[:n]
            return [randn(g, blocks, block, heads, dim), slots // block, slots % block, randn(g, n, heads, dim)]
        return make

    index_put = op("index_put", "kv-cache", [
        _exact("paged write 37 tokens into [64,16,8,64]", kv_write(64, 16, 8, 64, 37),
               lambda c, b, o, v: torch.index_put(c, (b, o), v)),
        _exact("decode write 1 token into [16,16,2,128]", kv_write(16, 16, 2, 128, 1),
               lambda c, b, o, v: torch.index_put(c, (b, o), v)),
        _exact("odd head dim 5 tokens into [7,5,3,80]", kv_write(7, 5, 3, 80, 5),
               lambda c, b, o, v: torch.index_put(c, (b, o), v)),
        CaseSpec("accumulate with duplicates [60,64]",
                 lambda g: [randn(g, 60, 64), randint(g, 60, 120), randn(g, 120, 64)],
                 lambda x, i, v: torch.index_put(x, (i,), v, accumulate=True), accum=8, step_rounding=True),
        _exact("empty write into [4,4,2,8]", kv_write(4, 4, 2, 8, 0),
               lambda c, b, o, v: torch.index_put(c, (b, o), v)),
    ], note="paged KV-cache writes (cache[block, offset] = values)")
    index_copy = op("index_copy", "kv-cache", [
        _exact("contiguous cache [2048,8,64] 37 slots", lambda g: [randn(g, 2048, 8, 64), randperm(g, 2048)[:37],
                                                                  randn(g, 37, 8, 64)],
               lambda c, i, v: c.index_copy(0, i, v)),
        _exact("dim=1 odd [3,101,80]", lambda g: [randn(g, 3, 101, 80), randperm(g, 101)[:13], randn(g, 3, 13, 80)],
               lambda c, i, v: c.index_copy(1, i, v)),
        _exact("transposed source [40,7]^T", lambda g: [randn(g, 50, 40), randperm(g, 50)[:7], randn(g, 40, 7)],
               lambda c, i, v: c.index_copy(0, i, v), layout=lambda a: [a[0], a[1], a[2].t()]),
        _exact("empty index", lambda g: [randn(g, 10, 4), randint(g, 10, 0), randn(g, 0, 4)],
               lambda c, i, v: c.index_copy(0, i, v)),
    ])
    cat = op("cat", "kv-cache", [
        _exact("append to cache [1,8,512,64]+[1,8,1,64] dim=2",
               lambda g: [randn(g, 1, 8, 512, 64), randn(g, 1, 8, 1, 64)],
               lambda a, b: torch.cat([a, b], dim=2), out=lambda a, b, *, out: torch.cat([a, b], dim=2, out=out)),
        _exact("three odd parts dim=-1", lambda g: [randn(g, 5, 7), randn(g, 5, 13), randn(g, 5, 1)],
               lambda a, b, c: torch.cat([a, b, c], dim=-1)),
        _exact("transposed parts dim=0", lambda g: [randn(g, 33, 65), randn(g, 33, 10)],
               lambda a, b: torch.cat([a, b], dim=0), layout=lambda a: [a[0].t(), a[1].t()]),
        _exact("with an empty part", lambda g: [randn(g, 4, 3), randn(g, 0, 3)],
               lambda a, b: torch.cat([a, b], dim=0)),
    ])
    stack = op("stack", "kv-cache", [
        _exact("k and v [2,8,128,64] dim=0", lambda g: [randn(g, 2, 8, 128, 64), randn(g, 2, 8, 128, 64)],
               lambda a, b: torch.stack([a, b]), out=lambda a, b, *, out: torch.stack([a, b], out=out)),
        _exact("odd [37,131] dim=-1", lambda g: [randn(g, 37, 131), randn(g, 37, 131)],
               lambda a, b: torch.stack([a, b], dim=-1)),
        _exact("transposed inputs [65,33]^T", lambda g: [randn(g, 65, 33), randn(g, 65, 33)],
               lambda a, b: torch.stack([a, b], dim=1), layout=lambda a: [a[0].t(), a[1].t()]),
        _exact("empty [0,4]", lambda g: [randn(g, 0, 4), randn(g, 0, 4)], lambda a, b: torch.stack([a, b])),
    ])
    transpose = op("transpose_contiguous", "kv-cache", [
        _exact("heads [1,128,32,128] (1,2)", lambda g: [randn(g, 1, 128, 32, 128)],
               lambda x: x.transpose(1, 2).contiguous()),
        _exact("odd [37,131] (0,1)", lambda g: [randn(g, 37, 131)], lambda x: x.transpose(0, 1).contiguous()),
        _exact("strided [3,40,90][..., ::3] (1,2)", lambda g: [randn(g, 3, 40, 90)],
               lambda x: x.transpose(1, 2).contiguous(), layout=lambda a: [a[0][..., ::3]]),
        _exact("empty [0,5,3]", lambda g: [randn(g, 0, 5, 3)], lambda x: x.transpose(1, 2).contiguous()),
    ])
    repeat_interleave = op("repeat_interleave", "kv-cache", [
        _exact("GQA kv heads x4 [1,2,128,64] dim=1", lambda g: [randn(g, 1, 2, 128, 64)],
               lambda x: x.repeat_interleave(4, dim=1)),
        _exact("odd x3 [5,37] dim=0", lambda g: [randn(g, 5, 37)], lambda x: x.repeat_interleave(3, dim=0)),
        _exact("per-row repeats tensor [7,9]", lambda g: [randn(g, 7, 9), randint(g, 4, 7)],
               lambda x, r: x.repeat_interleave(r, dim=0)),
        _exact("transposed [33,65]^T dim=1", lambda g: [randn(g, 33, 65)],
               lambda x: x.repeat_interleave(2, dim=1), layout=_transposed),
        _exact("empty [0,3]", lambda g: [randn(g, 0, 3)], lambda x: x.repeat_interleave(2, dim=0)),
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
        cases.append(CaseSpec(f"to {target} [64,129] incl. tiny, zero, large", values,
                              (lambda x, d=dtype: x.to(d)), judge="exact", dtypes=sources))
        cases.append(CaseSpec(f"to {target} transposed [129,64]^T", values, (lambda x, d=dtype: x.to(d)),
                              judge="exact", dtypes=sources, layout=_transposed))
    return op("cast", "cast", cases, dtypes=CAST_SOURCES,
              note="every pair of floating dtypes; round-to-nearest-even is deterministic, so exact")
