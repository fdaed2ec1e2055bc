"""RMSNorm: the float32 path is the fused op; lower precisions keep their statistics in float32."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if x.dtype == torch.float32:  # the fused op: one call instead of eight, the same float32 arithmetic
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


class RMSNorm(nn.Module):
    """Root-mean-square normalisation with a learned scale (filled at load time)."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.empty(size, device="meta"), requires_grad=False)

    def load(self, weight: torch.Tensor) -> None:
        self.weight = nn.Parameter(weight, requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)


class OffsetRMSNorm(RMSNorm):
    """Gemma's RMSNorm: the scale is (offset + weight), applied in float32 before the cast back (where Llama's
    casts first)."""

    def __init__(self, size: int, eps: float, offset: float = 1.0) -> None:
        super().__init__(size, eps)
        self.offset = offset

    def load(self, weight: torch.Tensor) -> None:
        super().load((weight.float() + self.offset).to(weight.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight).to(x.dtype)
