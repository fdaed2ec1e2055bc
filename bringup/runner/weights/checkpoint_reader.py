"""The reader that fills linear layers from a checkpoint: tensors by name on the model's device and dtype,
projections fused (q, k, v as one qkv_proj), and a weight the checkpoint already holds in a kind's storage taken as
it is (held.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import torch

from bringup.runner.weights.held import StoredGetter, held_rows
from bringup.runner.weights.layout_linear import LayoutLinear

EMBED, LM_HEAD = "model.embed_tokens.weight", "lm_head.weight"  # the checkpoint names the output head is read from
TensorGetter = Callable[[str], "torch.Tensor | None"]  # a checkpoint tensor by name, None when absent


class CheckpointReader:
    """Reads tensors by name and converts them to the model's device and dtype; `stored` gives the linear weights
    the checkpoint holds pre-quantized (weights/held.py), None when it holds none."""

    def __init__(self, get: TensorGetter, device: torch.device, dtype: torch.dtype,
                 stored: StoredGetter | None = None) -> None:
        self.get, self.device, self.dtype, self.stored = get, device, dtype, stored

    def tensor(self, name: str) -> torch.Tensor:
        """The tensor `name` on the model's device and dtype; KeyError when the checkpoint lacks it."""
        return self._raw(name).to(self.device, self.dtype).contiguous()

    def optional(self, name: str) -> torch.Tensor | None:
        t = self.get(name)
        return None if t is None else t.to(self.device, self.dtype).contiguous()

    def fused(self, names: Iterable[str]) -> torch.Tensor:
        """The tensors `names` concatenated along their first dimension, on the model's device and dtype."""
        parts = [self._raw(name) for name in names]
        joined = parts[0] if len(parts) == 1 else torch.cat(parts, 0)
        return joined.to(self.device, self.dtype).contiguous()

    def fill(self, linear: LayoutLinear, prefix: str, parts: Iterable[str], kinds: Iterable[str]) -> None:
        """Load `linear` from the checkpoint projections `prefix + part` (fused when several)."""
        parts = [prefix + part for part in parts]
        bias = self.fused(p + ".bias" for p in parts) if linear.has_bias else None
        names = [p + ".weight" for p in parts]
        self.load_linear(linear, names, bias, kinds, lambda: self.fused(names))

    def load_linear(self, linear: LayoutLinear, names: list[str], bias: torch.Tensor | None, kinds: Iterable[str],
                    weight: Callable[[], torch.Tensor]) -> None:
        """Store `linear`'s weight (the checkpoint's `names`, fused) for each kind: a kind whose storage the checkpoint
        holds it in already takes those bytes as they are (weights/held.py); the others are placed from `weight()`,
        read only when one of them needs it."""
        held = {kind: held_rows(names, kind, self.stored, self.tensor, self.device) for kind in kinds}
        rest = [kind for kind, rows in held.items() if rows is None]
        linear.load(weight() if rest else None, bias, rest)
        for kind, rows in held.items():
            if rows is not None:
                linear.keep(kind, rows.to(self.device))

    def fill_head(self, head: LayoutLinear, embed: torch.Tensor, kinds: Iterable[str], tied: bool) -> None:
        """Load the output head: the checkpoint's lm_head, or the embedding table when tied (or absent); a head the
        file holds pre-quantized (a tied GGUF token_embd's blocks) is kept as it is."""

        def weight() -> torch.Tensor:
            untied = None if tied else self.optional(LM_HEAD)
            return embed if untied is None else untied  # out_in shares the table

        self.load_linear(head, [EMBED if tied else LM_HEAD], None, kinds, weight)

    def _raw(self, name: str) -> torch.Tensor:
        t = self.get(name)
        if t is None:
            raise KeyError(name)
        return t
