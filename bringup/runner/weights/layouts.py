"""The plain layouts of a linear weight, on any device: in_out (x @ W), out_in (F.linear), packed (oneDNN's inner
product) and slices; and the width of the host kernel's panels.

"slices": W [in, out] cut into P column slices stacked as a [P*in, out/P] table; `embedding_bag` (mode sum, per-sample
weights = x) computes each slice's x @ W_p as one bag, and bags run in parallel, so a one-row product streams the
weights on every core where a BLAS GEMV may use one.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

SLICE_COUNTS = (8, 4, 2, 1)  # the most column slices that divide `out`
PANEL = 16  # output columns per panel of the panels kind (kernels/panels.py)


def in_out_place(w: torch.Tensor) -> torch.Tensor:
    return w.t().contiguous()


def in_out_apply(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return torch.matmul(x, w) if b is None else torch.addmm(b, x, w)


def out_in_place(w: torch.Tensor) -> torch.Tensor:
    return w.contiguous()


def packed_place(w: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._reorder_linear_weight(w.contiguous(), None)


def packed_apply(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, w, b, "none", [], "")


def slices_place(w: torch.Tensor) -> torch.Tensor:
    p = next(n for n in SLICE_COUNTS if w.shape[0] % n == 0)
    return torch.cat(w.t().chunk(p, 1), 0).contiguous()  # [p*in, out/p]


def slices_apply(x: torch.Tensor, table: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    rows, k = x.shape
    p = table.shape[0] // k
    indices, offsets = _bag_indices(rows, k, p, x.device)
    y = F.embedding_bag(indices, table, offsets, mode="sum", per_sample_weights=x.repeat(1, p).view(-1))
    y = y.view(rows, p * table.shape[1])
    return y if b is None else y + b


def slices_to_out_in(table: torch.Tensor, in_features: int) -> torch.Tensor:
    """The [out, in] weight a slices table holds (its reference needs it; the model never turns slices back)."""
    return torch.cat(table.split(in_features, 0), 1).t().contiguous()


@functools.lru_cache(maxsize=64)
def _bag_indices(rows: int, k: int, p: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Bag r*p + j sums table rows j*k .. (j+1)*k - 1 weighted by x[r]."""
    return (torch.arange(p * k, device=device).repeat(rows), torch.arange(rows * p, device=device) * k)


def float64_linear(x: torch.Tensor, w_out_in: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """x @ W^T + b in float64, on the host: a kind's reference once its weight is back as [out, in]."""
    bias = None if b is None else b.detach().cpu().double()
    return F.linear(x.detach().cpu().double(), w_out_in.detach().cpu().double(), bias)


def storage_key(t: torch.Tensor) -> int:
    """Identity of a tensor's storage, for counting shared weights once (packed tensors have no data_ptr)."""
    return id(t) if t.is_mkldnn else t.data_ptr()
