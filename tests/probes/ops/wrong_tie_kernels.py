"""CPU kernels (installed with torch.library for one test) that break the tie rules torch documents, for float32
only — the float64 reference path keeps the documented behaviour, like a device bug would."""

from __future__ import annotations

import numpy as np
import torch


def _np(t: torch.Tensor) -> np.ndarray:
    t = t.detach().contiguous()
    return (t.to(torch.float64) if t.is_floating_point() else t).numpy()


def _first_or_last_max(a: np.ndarray, axis: int, last: bool) -> np.ndarray:
    if not last:
        return np.argmax(a, axis=axis)
    flipped = np.flip(a, axis=axis)
    return a.shape[axis] - 1 - np.argmax(flipped, axis=axis)


def argmax_last_on_ties(t: torch.Tensor, dim: int | None = None, keepdim: bool = False) -> torch.Tensor:
    a = _np(t)
    last = t.dtype == torch.float32
    if dim is None:
        out = torch.tensor(int(_first_or_last_max(a.reshape(-1), 0, last)))
        return out.reshape([1] * t.dim()) if keepdim else out
    idx = torch.from_numpy(np.ascontiguousarray(_first_or_last_max(a, dim, last))).to(torch.int64)
    return idx.unsqueeze(dim) if keepdim else idx


def max_dim_last_on_ties(t: torch.Tensor, dim: int, keepdim: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    idx = argmax_last_on_ties(t, dim, keepdim=True)
    values = t.gather(dim, idx)
    return (values, idx) if keepdim else (values.squeeze(dim), idx.squeeze(dim))


def sort_ties_reversed(t: torch.Tensor, *, stable: bool | None = None, dim: int = -1,
                       descending: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Stable sort (np.argsort kind=stable), except float32 stable sorts put equal elements in reverse order."""
    a = np.moveaxis(_np(t), dim, -1)
    key = -a if descending else a
    if t.dtype == torch.float32 and stable:
        positions = np.broadcast_to(np.arange(a.shape[-1]), a.shape)
        order = np.lexsort((-positions, key), axis=-1)
    else:
        order = np.argsort(key, axis=-1, kind="stable")
    idx = torch.from_numpy(np.ascontiguousarray(np.moveaxis(order, -1, dim))).to(torch.int64)
    return t.gather(dim, idx), idx


def topk_ascending(t: torch.Tensor, k: int, dim: int = -1, largest: bool = True,
                   sorted: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The right k elements, but float32 results come in ascending order although sorted=True."""
    a = np.moveaxis(_np(t), dim, -1)
    order = np.argsort(-a if largest else a, axis=-1, kind="stable")[..., :k]
    if t.dtype == torch.float32:
        order = order[..., ::-1]
    idx = torch.from_numpy(np.ascontiguousarray(np.moveaxis(order, -1, dim))).to(torch.int64)
    return t.gather(dim, idx), idx
