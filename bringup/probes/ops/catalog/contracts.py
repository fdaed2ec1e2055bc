"""Exact contract cases for argmax/max, sort and topk: the tie rules torch documents, which greedy decoding
and MoE routing depend on. Inputs are small integers cast to the dtype, so ties are real in every dtype.

Documented (torch docs, 2.x) and checked here:
- torch.argmax / torch.max(dim): "If there are multiple maximal values then the indices of the first maximal
  value are returned."
- torch.sort(stable=True): "makes the sorting routine stable, which guarantees that the order of equivalent
  elements is preserved" (ascending and descending alike).
- torch.topk(sorted=True): the k largest elements, "themselves sorted" (descending for largest=True).
Not documented, so not checked: which of several tied elements topk picks or in what order their indices come
(only that each returned index holds its returned value and that the k indices are distinct elements).
The references are computed without relying on the tie behaviour of the kernel under test.
"""

from __future__ import annotations

import torch

from bringup.probes.ops.inputs import randint
from bringup.probes.ops.spec import CaseSpec

CONTRACT = "contract: "


def small_integers(*shape: int, high: int = 8):
    """Integers in [0, high) as float64 (cast exactly to every float dtype): many ties per row."""
    return lambda g: [randint(g, high, *shape).to(torch.float64)]


def first_max_index(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The first position of the maximum along dim, without argmax: the smallest position holding the max."""
    n = x.shape[dim]
    shape = [1] * x.dim()
    shape[dim] = n
    positions = torch.arange(n).view(shape).expand_as(x)
    is_max = x == torch.amax(x, dim=dim, keepdim=True)
    return torch.where(is_max, positions, torch.full_like(positions, n)).amin(dim=dim)


def stable_order(x: torch.Tensor, descending: bool) -> torch.Tensor:
    """Stable sort indices along the last dim from unique keys (value, position): no tie is left to the kernel.

    Exact for the small integer inputs used here (value * n + position fits float64's 53 bits)."""
    n = x.shape[-1]
    positions = torch.arange(n, dtype=torch.float64).expand_as(x)
    keys = (-x if descending else x).to(torch.float64) * n + positions
    return torch.sort(keys, dim=-1).indices


def stable_sort_reference(x: torch.Tensor, descending: bool) -> tuple[torch.Tensor, torch.Tensor]:
    order = stable_order(x, descending)
    return x.gather(-1, order), order


def topk_contract(x: torch.Tensor, k: int) -> tuple[torch.Tensor, ...]:
    """(values, input at the indices, values non-increasing per row, indices distinct per row)."""
    values, idx = torch.topk(x, k, dim=-1, largest=True, sorted=True)
    descending = (values[..., :-1] >= values[..., 1:]).all(dim=-1)
    ordered = torch.sort(idx, dim=-1).values
    distinct = (ordered[..., 1:] != ordered[..., :-1]).all(dim=-1)
    return values, x.gather(-1, idx), descending, distinct


def topk_contract_reference(x: torch.Tensor, k: int) -> tuple[torch.Tensor, ...]:
    values = x.gather(-1, stable_order(x, descending=True)[..., :k])
    rows = torch.ones(x.shape[:-1], dtype=torch.bool)
    return values, values, rows, rows


def contract_case(rule: str, shape: tuple[int, ...], high: int, fn, ref, params=(), call: str = "") -> CaseSpec:
    """A case of a documented contract on small integers in [0, high): many ties per row. `call` names the call
    where two contracts share shapes and params (it is part of the case's identity, the rule text is not)."""
    return CaseSpec(small_integers(*shape, high=high), fn, shapes=(shape,), role=f"{CONTRACT}{rule}",
                    params=(*params, ("integers below", high)), ref=ref, judge="exact",
                    variant=(("call", call),) if call else ())


def argmax_contract_cases() -> list[CaseSpec]:
    return [
        contract_case("first maximal index on ties", (8, 1000), 8, lambda x: torch.argmax(x, dim=-1),
                      lambda x: first_max_index(x, -1)),
        contract_case("first maximal index on ties", (37, 131), 4, lambda x: torch.argmax(x, dim=0, keepdim=True),
                      lambda x: first_max_index(x, 0).unsqueeze(0), params=(("dim", 0), ("keepdim", True))),
        contract_case("flattened argmax, first on ties", (16, 2000), 8, torch.argmax,
                      lambda x: first_max_index(x.flatten(), 0)),
        contract_case("max(dim) values and first index on ties", (8, 1000), 8, lambda x: tuple(torch.max(x, dim=-1)),
                      lambda x: (torch.amax(x, dim=-1), first_max_index(x, -1)), call="max"),
    ]


def sort_contract_cases() -> list[CaseSpec]:
    return [
        contract_case("stable ascending keeps ties in input order", (8, 1000), 16,
                      lambda x: tuple(torch.sort(x, dim=-1, stable=True)), lambda x: stable_sort_reference(x, False)),
        contract_case("stable descending keeps ties in input order", (8, 1000), 16,
                      lambda x: tuple(torch.sort(x, dim=-1, descending=True, stable=True)),
                      lambda x: stable_sort_reference(x, True), call="sort descending"),
        contract_case("stable ascending, long row with ties", (20000,), 64,
                      lambda x: tuple(torch.sort(x, dim=-1, stable=True)), lambda x: stable_sort_reference(x, False)),
    ]


def topk_contract_cases() -> list[CaseSpec]:
    # ~4 copies of each value per row: the top k spans several distinct values, with ties inside and at the k-th
    return [
        contract_case("sorted=True descending values with ties", (8, 1000), 256, lambda x: topk_contract(x, 50),
                      lambda x: topk_contract_reference(x, 50), params=(("k", 50),)),
        contract_case("sorted=True with ties in the k-th place", (37, 131), 32, lambda x: topk_contract(x, 7),
                      lambda x: topk_contract_reference(x, 7), params=(("k", 7),)),
    ]
