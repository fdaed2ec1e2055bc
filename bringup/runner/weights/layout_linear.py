"""Linear layers whose weights are stored for the kernel that measured fastest (see weights/kinds.py and registry.py).

The execution plan picks a `WeightLayout`: one kind of storage for small steps (decode) and one for large
ones (prefill). A `LayoutLinear` keeps a copy of its weight per kind in use and applies the one chosen for
the step's size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import nn

from bringup.runner.weights.kinds import OUT_IN
from bringup.runner.weights.registry import apply, place, to_out_in

WEIGHT_PREFIX = "weight_"  # the buffer holding the copy stored for kind k is `weight_<k>`


@dataclass(frozen=True)
class WeightLayout:
    """Linear-weight layout per step size: `small` for steps of at most `switch_tokens` tokens, else `large`.

    "in_out" stores W as [in, out] and computes x @ W; "out_in" stores [out, in] for F.linear; "packed"
    pre-packs it for oneDNN. When the two differ, both copies are kept (twice the linear weights' memory)
    and each step uses the faster.
    """

    small: str = OUT_IN
    large: str = OUT_IN
    switch_tokens: int = 0

    @property
    def kinds(self) -> list[str]:
        return sorted({self.small, self.large})

    def for_tokens(self, tokens: int) -> str:
        return self.small if tokens <= self.switch_tokens else self.large

    def describe(self) -> str:
        if self.small == self.large:
            return self.small
        return f"{self.small} for steps of <= {self.switch_tokens} tokens, else {self.large}"


class LayoutLinear(nn.Module):
    """y = x W^T + b with W stored once per kind in use (buffers `weight_<kind>`) and one plain bias."""

    def __init__(self, in_features: int, out_features: int, bias: bool) -> None:
        super().__init__()
        self.in_features, self.out_features, self.has_bias = in_features, out_features, bias
        self.register_buffer("bias", None)

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, bias={self.has_bias}, kinds={self.kinds}"

    @property
    def kinds(self) -> list[str]:
        return sorted(name.removeprefix(WEIGHT_PREFIX) for name in self._buffers if name.startswith(WEIGHT_PREFIX))

    def weight(self, kind: str) -> torch.Tensor:
        return getattr(self, WEIGHT_PREFIX + kind)

    def load(self, weight: torch.Tensor | None, bias: torch.Tensor | None, kinds: Iterable[str]) -> None:
        """Store `weight` ([out, in], already on the model's device and dtype) for each kind (None: no kind)."""
        for kind in kinds:
            self.register_buffer(WEIGHT_PREFIX + kind, place(weight, kind))
        self.bias = bias

    def keep(self, kind: str, stored: torch.Tensor) -> None:
        """Keep `stored`, the weight already in `kind`'s storage (a pre-quantized checkpoint's), as it is."""
        self.register_buffer(WEIGHT_PREFIX + kind, stored)

    def store(self, stored: torch.Tensor, bias: torch.Tensor | None, kind: str) -> None:
        """Keep `stored`, already in `kind`'s storage (a checkpoint's own quantized weight), as the only copy."""
        for old in self.kinds:
            self.drop_kind(old)
        self.register_buffer(WEIGHT_PREFIX + kind, stored)
        self.bias = bias

    def add_kind(self, new: str, source: str) -> None:
        """Also store the weight for `new`, converted from the copy stored for `source`."""
        self.register_buffer(WEIGHT_PREFIX + new, place(to_out_in(self.weight(source), source), new))

    def drop_kind(self, kind: str) -> None:
        delattr(self, WEIGHT_PREFIX + kind)

    def forward(self, x: torch.Tensor, kind: str) -> torch.Tensor:
        return apply(x, self.weight(kind), self.bias, kind)
