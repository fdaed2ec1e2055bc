"""Reading a pre-quantized checkpoint (compressed_tensors/scheme.py) into the decoder's linear layers.

Into the fp8 kind, an FP8 checkpoint's codes and scales are kept as stored (a per-tensor scale repeated on each
row; q, k and v fused by stacking their rows), and a module the checkpoint left unquantized keeps its plain weight
(weights/formats/fp8.py). Into any other kind, and for int8 checkpoints always, a quantized weight is dequantized to
float32 (w = scale * q) and then converted to the model's dtype like any float weight.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from bringup.errors import BringupError
from bringup.runner.weights.checkpoint_reader import LM_HEAD, CheckpointReader, StoredGetter, TensorGetter
from bringup.runner.weights.formats.compressed_tensors.scheme import (
    GROUP,
    PACK_QUANTIZED,
    WORD_BITS,
    StoredQuantization,
)
from bringup.runner.weights.formats.fp8 import FP8_DTYPE, pack_fp8
from bringup.runner.weights.kinds import FP8
from bringup.runner.weights.layout_linear import LayoutLinear


def checkpoint_reader(get: TensorGetter, device: torch.device, dtype: torch.dtype, stored: StoredQuantization | None,
                      held: StoredGetter | None = None) -> CheckpointReader:
    """The reader for a checkpoint: plain (`held`: the linear weights a GGUF file holds in a kind's own storage), or
    one that reads its own compressed-tensors quantization (`stored`, from its config.json)."""
    return CheckpointReader(get, device, dtype, held) if stored is None else StoredReader(get, device, dtype, stored)


def unpack_codes(packed: torch.Tensor, shape: tuple[int, int], bits: int) -> torch.Tensor:
    """pack-quantized int32 words [out, ceil(in / (32 / bits))] as the signed codes [out, in] (int8) they hold: code
    j of a word in bits j*bits.., stored plus 2^(bits - 1)."""
    words = packed.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(WORD_BITS // bits, dtype=torch.int64) * bits
    codes = ((words.unsqueeze(-1) >> shifts) & ((1 << bits) - 1)) - (1 << (bits - 1))
    return codes.reshape(packed.shape[0], -1)[:, : shape[1]].to(torch.int8)


class StoredReader(CheckpointReader):
    """A CheckpointReader for a checkpoint that stores its linear weights quantized."""

    def __init__(self, get: TensorGetter, device: torch.device, dtype: torch.dtype,
                 stored: StoredQuantization) -> None:
        super().__init__(get, device, dtype)
        self.quantization = stored

    def fill(self, linear: LayoutLinear, prefix: str, parts: Iterable[str], kinds: Iterable[str]) -> None:
        kinds = list(kinds)
        if FP8 not in kinds:
            super().fill(linear, prefix, parts, kinds)
            return
        modules = [prefix + part for part in parts]
        bias = self.fused(m + ".bias" for m in modules) if linear.has_bias else None
        linear.store(self._fp8_rows(modules), bias, FP8)

    def fill_head(self, head: LayoutLinear, embed: torch.Tensor, kinds: Iterable[str], tied: bool) -> None:
        kinds = list(kinds)
        if FP8 not in kinds:
            super().fill_head(head, embed, kinds, tied)
        elif tied or self.get(LM_HEAD) is None:
            head.store(embed, None, FP8)  # the embedding is never quantized: the tied head stays plain
        else:
            head.store(self._fp8_rows([LM_HEAD.removesuffix(".weight")]), None, FP8)

    def optional(self, name: str) -> torch.Tensor | None:
        if name.endswith(".weight") and self._quantized(name.removesuffix(".weight")):
            return self.tensor(name)
        return super().optional(name)

    def _raw(self, name: str) -> torch.Tensor:
        module = name.removesuffix(".weight")
        if name.endswith(".weight") and self._quantized(module):
            return self._dequantized(module)
        return super()._raw(name)

    def _quantized(self, module: str) -> bool:
        return self.quantization.quantizes(module) and self.get(f"{module}.weight_scale") is not None

    def _fp8_rows(self, modules: list[str]) -> torch.Tensor:
        """The fp8 kind's storage of `modules` stacked by rows: the checkpoint's codes and scales, or (modules it
        left unquantized) their plain weight in the model's dtype."""
        quantized = [self._quantized(m) for m in modules]
        if not any(quantized):
            return self.fused(m + ".weight" for m in modules)
        if not all(quantized):
            raise BringupError(f"{self.quantization.source}: {', '.join(modules)} are served as one fused projection "
                               "but "
                               "the checkpoint quantizes only some of them; bringup needs all or none quantized: "
                               "use the unquantized model")
        rows = []
        for module in modules:
            codes = super()._raw(f"{module}.weight")
            scale = self._scale(module, codes.shape[0])
            rows.append(pack_fp8(codes.to(FP8_DTYPE), scale))
        return torch.cat(rows, 0).to(self.device).contiguous()

    def _scale(self, module: str, rows: int) -> torch.Tensor:
        """The module's weight_scale as float32, one per output row (a per-tensor scale repeated)."""
        return super()._raw(f"{module}.weight_scale").to(torch.float32).reshape(-1).expand(rows).contiguous()

    def _scales(self, module: str, shape: tuple[int, int]) -> torch.Tensor:
        """The module's weight_scale as float32 per weight [out, in]: a group's scale repeated over its inputs, a
        row's over the row."""
        if self.quantization.strategy != GROUP:
            return self._scale(module, shape[0]).unsqueeze(1)
        size = int(self.quantization.group_size or 1)
        per_group = super()._raw(f"{module}.weight_scale").to(torch.float32)
        return per_group.repeat_interleave(size, dim=1)[:, : shape[1]]

    def _dequantized(self, module: str) -> torch.Tensor:
        """The module's weight as float32: scale * q."""
        if self.quantization.format == PACK_QUANTIZED:
            out, inputs = (int(v) for v in super()._raw(f"{module}.weight_shape").tolist())  # validate.py checked it
            codes = unpack_codes(super()._raw(f"{module}.weight_packed"), (out, inputs), self.quantization.bits)
        else:
            codes = super()._raw(f"{module}.weight")
        return codes.to(torch.float32) * self._scales(module, (codes.shape[0], codes.shape[1]))
