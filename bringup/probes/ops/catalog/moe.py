"""Catalog: the mixture-of-experts path — router, grouping tokens by expert, combining, grouped matmuls.

The case builders take the shapes as arguments: the built-in catalog calls them at fixed odd shapes,
`verify-ops --model` at a model's own (catalog/model.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from bringup.probes.ops.inputs import generator, randint, randn, randperm, uniform
from bringup.probes.ops.spec import CaseSpec, OpSpec, op

ROUTER_NOTE = ("inputs built without near-ties: the router logits are placed (through an orthonormal router "
               "weight) so the k chosen experts are separated by a wide gap, so the chosen ids are judged exactly "
               "and the weights closely")


def route(x: torch.Tensor, w_router: torch.Tensor, top_k: int, renormalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Router as MoE models run it: logits in the model dtype, softmax in (at least) float32, top-k, the
    chosen weights optionally renormalised to sum 1, back in the model dtype. Returns (weights, expert ids)."""
    logits = F.linear(x, w_router)
    compute = torch.promote_types(logits.dtype, torch.float32)
    probs = torch.softmax(logits.to(compute), dim=-1)
    weights, ids = torch.topk(probs, top_k, dim=-1, sorted=True)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights.to(x.dtype), ids


def router_inputs(tokens: int, hidden: int, experts: int, top_k: int):
    """x [tokens, hidden] and w_router [experts, hidden] whose product has a wide gap around the top k.

    Per token the logits are: the k chosen experts at 1, 1-gap, ..., the rest uniform in [-1, k-th - gap]; so
    rounding the logits to bfloat16 (half an ulp at 1 is 2^-8) cannot reorder them. Logits stay within [-1, 1]
    so their rounding moves the softmax weights by well under the dtype's tolerance.
    The router weight has orthonormal rows, so x = logits @ w_router realises them exactly (experts <= hidden).
    """
    def make(g: torch.Generator) -> list:
        gap = min(0.25, 1.5 / (top_k + 1))
        logits = torch.empty(tokens, experts, dtype=torch.float64)
        for t in range(tokens):
            order = randperm(g, experts)
            top = 1.0 - gap * torch.arange(top_k, dtype=torch.float64)
            rest = uniform(g, experts - top_k, low=-1.0, high=float(top[-1]) - gap)
            logits[t, order[:top_k]] = top
            logits[t, order[top_k:]] = rest
        if experts > hidden:  # arbitrary logits cannot be realised: random inputs, near-ties possible
            return [randn(g, tokens, hidden), randn(g, experts, hidden, scale=1.0 / math.sqrt(hidden))]
        basis, _ = torch.linalg.qr(randn(g, hidden, experts))
        w_router = basis.t().contiguous()
        return [logits @ w_router, w_router]
    return make


def router_case(tokens: int, hidden: int, experts: int, top_k: int, renormalize: bool, role: str = "",
                params=()) -> CaseSpec:
    """x [tokens, hidden] through the router weight [experts, hidden]; the role says whether weights are
    renormalised."""
    def fn(x, w):
        return route(x, w, top_k, renormalize)
    weights = "renormalised" if renormalize else "not renormalised"
    return CaseSpec(router_inputs(tokens, hidden, experts, top_k), fn, shapes=((tokens, hidden), (experts, hidden)),
                    role=" ".join(part for part in (role, weights) if part), params=(*params, ("top", top_k)),
                    accum=max(hidden, experts))


def group_tokens(ids: torch.Tensor, x: torch.Tensor, experts: int) -> tuple[torch.Tensor, ...]:
    """Token->expert assignments [tokens, k] grouped by expert: the stable order of the flattened ids, the
    count per expert, the token each slot reads, and the token rows gathered into expert order."""
    flat = ids.flatten()
    _, order = torch.sort(flat, stable=True)
    counts = torch.bincount(flat, minlength=experts)
    token_of_slot = order // ids.shape[-1]
    return order, counts, token_of_slot, x.index_select(0, token_of_slot)


def group_tokens_reference(ids: torch.Tensor, x: torch.Tensor, experts: int) -> tuple[torch.Tensor, ...]:
    """The same grouping without sort or bincount: expert by expert, slots in input order."""
    flat = ids.flatten()
    order = torch.cat([(flat == e).nonzero().flatten() for e in range(experts)]) if flat.numel() else flat
    counts = torch.tensor([int((flat == e).sum()) for e in range(experts)], dtype=torch.int64)
    token_of_slot = order // ids.shape[-1]
    return order, counts, token_of_slot, x[token_of_slot]


def assignments(g: torch.Generator, tokens: int, experts: int, top_k: int, used: int) -> torch.Tensor:
    """[tokens, top_k] distinct expert ids per token, drawn from `used` of the experts (the rest stay empty)."""
    pool = randperm(g, experts)[:max(used, top_k)]
    if tokens == 0:
        return torch.zeros(0, top_k, dtype=torch.int64)
    return torch.stack([pool[randperm(g, pool.numel())[:top_k]] for _ in range(tokens)])


def group_case(tokens: int, hidden: int, experts: int, top_k: int, used: int | None = None, role: str = "",
               params=()) -> CaseSpec:
    """Expert ids [tokens, top_k] drawn from `used` of the experts, token rows [tokens, hidden]."""
    def make(g: torch.Generator) -> list:
        return [assignments(g, tokens, experts, top_k, used or experts), randn(g, tokens, hidden)]
    unused = (("unused", experts - used),) if used else ()
    return CaseSpec(make, lambda ids, x: group_tokens(ids, x, experts), shapes=((tokens, top_k), (tokens, hidden)),
                    role=role, params=(("experts", experts), *unused, *params),
                    ref=lambda ids, x: group_tokens_reference(ids, x, experts), judge="exact")


def combine_inputs(tokens: int, hidden: int, duplicates: int, random_base: bool = False):
    """(base [tokens, hidden], target row per slot with every row exactly `duplicates` times, in shuffled order,
    weighted rows [tokens * duplicates, hidden]) — a MoE combine when duplicates = top-k and the base is zero."""
    def make(g: torch.Generator) -> list:
        base = randn(g, tokens, hidden) if random_base else torch.zeros(tokens, hidden, dtype=torch.float64)
        index = torch.arange(tokens, dtype=torch.int64).repeat_interleave(duplicates)
        index = index[randperm(g, index.numel())]
        rows = randn(g, index.numel(), hidden) * uniform(g, index.numel(), 1, low=0.05, high=1.0)
        return [base, index, rows]
    return make


def index_add(base: torch.Tensor, index: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    return torch.index_add(base, 0, index, rows)


def scatter_add(base: torch.Tensor, index: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    return torch.scatter_add(base, 0, index[:, None].expand(-1, rows.shape[-1]), rows)


def combine_case(fn, tokens: int, hidden: int, duplicates: int, random_base: bool = False, role: str = "",
                 params=()) -> CaseSpec:
    """Accumulation length = the duplicates per row (+1 for a non-zero base); every partial sum is stored
    in the dtype (GPU kernels add atomically in it), hence step rounding."""
    return CaseSpec(combine_inputs(tokens, hidden, duplicates, random_base), fn, shapes=((tokens, hidden),),
                    role=" ".join(part for part in (role, "onto a base" if random_base else "") if part),
                    params=(("duplicates", duplicates), *params), accum=duplicates + (1 if random_base else 0),
                    step_rounding=True)


def grouped_matmul_loop(x: torch.Tensor, w: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """x [slots, in] grouped by expert (counts [experts]), w [experts, in, out]: one matmul per non-empty group."""
    parts, start = [], 0
    for expert, count in enumerate(counts.tolist()):
        if count:
            parts.append(x[start:start + count] @ w[expert])
        start += count
    return torch.cat(parts) if parts else x.new_zeros(0, w.shape[-1])


def grouped_matmul_padded(x: torch.Tensor, w: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """The same as one bmm: groups padded with zeros to the largest group, [experts, max, in] x [experts, in, out]."""
    sizes = counts.tolist()
    longest = max(sizes, default=0)
    padded = x.new_zeros(len(sizes), longest, x.shape[-1])
    start = 0
    for expert, count in enumerate(sizes):
        padded[expert, :count] = x[start:start + count]
        start += count
    out = torch.bmm(padded, w)
    parts = [out[expert, :count] for expert, count in enumerate(sizes) if count]
    return torch.cat(parts) if parts else x.new_zeros(0, w.shape[-1])


def grouped_inputs(counts: list[int], d_in: int, d_out: int):
    def make(g: torch.Generator) -> list:
        slots = sum(counts)
        return [randn(g, slots, d_in), randn(g, len(counts), d_in, d_out, scale=1.0 / math.sqrt(d_in)),
                torch.tensor(counts, dtype=torch.int64)]
    return make


def group_sizes(g_seed: str, slots: int, experts: int, empty_every: int = 3) -> list[int]:
    """Deterministic group sizes summing to `slots`, with every `empty_every`-th expert empty."""
    g = generator("group_sizes", g_seed)
    active = [e for e in range(experts) if empty_every <= 0 or e % empty_every != 1] or [0]
    picks = randint(g, len(active), slots)
    sizes = [0] * experts
    for p in picks.tolist():
        sizes[active[p]] += 1
    return sizes


def grouped_matmul_cases(role: str, slots: int, experts: int, d_in: int, d_out: int, params=()) -> list[CaseSpec]:
    """x [slots, d_in] in groups over the experts' weights [experts, d_in, d_out], some groups empty."""
    counts = group_sizes(f" {slots} {experts} {d_in} {d_out}", slots, experts)
    make = grouped_inputs(counts, d_in, d_out)
    shapes = ((slots, d_in), (experts, d_in, d_out))
    params = (*params, ("empty groups", counts.count(0)))

    def case(form: str, fn, ref=None) -> CaseSpec:
        return CaseSpec(make, fn, shapes=shapes, role=" ".join(part for part in (role, form) if part), params=params,
                        ref=ref, accum=d_in, variant=(("form", form),))
    return [case("loop of matmuls", grouped_matmul_loop),
            case("padded bmm", grouped_matmul_padded, ref=grouped_matmul_loop)]


def moe_ops() -> list[OpSpec]:
    router = op("moe_router", "moe", [
        router_case(37, 72, 8, 2, True),
        router_case(19, 136, 60, 4, False),
        router_case(1, 256, 128, 8, True, "decode"),
        router_case(0, 64, 8, 2, True, "empty batch"),
    ], note=ROUTER_NOTE)
    group = op("moe_group_tokens", "moe", [
        group_case(37, 72, 8, 2, used=5),
        group_case(19, 136, 60, 4),
        group_case(1, 64, 128, 8, role="decode"),
        group_case(0, 16, 8, 2, role="empty batch"),
    ], note="stable sort of the expert ids, bincount, gather into expert order: exact (reference: no sort)")
    combine_note = "sums of duplicates are order-dependent: judged close with accumulation length = duplicates per row"
    index_add_op = op("index_add", "moe", [
        combine_case(index_add, 37, 72, 2, role="MoE combine"),
        combine_case(index_add, 11, 131, 17, random_base=True),
        combine_case(index_add, 1, 256, 8, role="MoE combine decode"),
        combine_case(index_add, 0, 8, 2, role="empty"),
    ], note=combine_note)
    scatter_add_op = op("scatter_add", "moe", [
        combine_case(scatter_add, 37, 72, 2, role="MoE combine"),
        combine_case(scatter_add, 11, 131, 17, random_base=True),
        combine_case(scatter_add, 0, 8, 2, role="empty"),
    ], note=combine_note)
    grouped = op("grouped_matmul", "moe", [
        *grouped_matmul_cases("", 74, 8, 72, 40),
        *grouped_matmul_cases("", 76, 60, 136, 24),
        *grouped_matmul_cases("decode", 8, 128, 64, 48),
        *grouped_matmul_cases("empty", 0, 4, 16, 8),
    ], note="per-expert matmuls over contiguous token groups (with empty groups): a loop of matmuls and one "
            "padded bmm, both against the float64 loop")
    return [router, group, index_add_op, scatter_add_op, grouped]
