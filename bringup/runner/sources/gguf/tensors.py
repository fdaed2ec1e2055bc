"""A GGUF file's tensors: described as the loader's TensorSpecs (Hugging Face names and shapes, checked before any
value is read) and read as torch tensors, dequantized, with llama's rope permutation of q and k undone; or, for the
int8/int4 kinds, a linear weight's blocks re-packed as they are where the kind holds them exactly
(weights/formats/gguf_blocks.py), its rows unpermuted alike."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from bringup.errors import BringupError
from bringup.runner.model.config import ModelConfig
from bringup.runner.sources.directory.validate import TensorSpec
from bringup.runner.sources.gguf.finite import nonfinite_count
from bringup.runner.sources.gguf.reader import GGUFFile, gguf_package
from bringup.runner.sources.gguf.tensor_names import hf_name, rope_permuted
from bringup.runner.weights.formats.gguf_blocks import holds, repacked

# dequantized at load by gguf.quants.dequantize: the float types, the legacy blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0,
# Q5_1) and the K-quants' super-blocks of 256 (what Q4_K_M / Q5_K_M files mix); IQ* and the rest are refused by name
LOADED_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K")


def tensor_specs(file: GGUFFile) -> dict[str, TensorSpec]:
    """Every tensor by Hugging Face name (shape in PyTorch order, dtype the GGML type's name); a type bringup
    does not load, or two tensors with one name, refused in one line naming the tensor."""
    specs: dict[str, TensorSpec] = {}
    for name, tensor in file.tensors.items():
        kind = tensor.tensor_type.name
        if kind not in LOADED_TYPES:
            raise BringupError(f"{file.path}: tensor {name!r} is {kind}, a GGUF tensor type bringup does not load "
                               f"(it loads {', '.join(LOADED_TYPES)}); use a file quantized to one of those")
        spec = TensorSpec(hf_name(name), tuple(int(d) for d in reversed(tensor.shape)), kind, file.path)
        if spec.name in specs:
            raise BringupError(f"{file.path}: two tensors map to {spec.name!r}; the file is corrupt: re-convert it")
        specs[spec.name] = spec
    return specs


class TensorValues:
    """Reads the file's tensors by Hugging Face name as float32 torch tensors in the layout the families expect."""

    def __init__(self, file: GGUFFile, config: ModelConfig, rope_permuted_file: bool) -> None:
        self.file, self.config, self.permuted = file, config, rope_permuted_file
        self.by_hf_name = {hf_name(name): name for name in file.tensors}

    def get(self, name: str) -> torch.Tensor | None:
        gguf_name = self.by_hf_name.get(name)
        return None if gguf_name is None else self._read(gguf_name)

    def stored(self, name: str, scheme: str) -> torch.Tensor | None:
        """The weight `name` as `scheme` ("int8", "int4") stores it, re-packed from the file's blocks, when the file
        holds it in blocks that scheme stores exactly (weights/held.py's StoredGetter); else None."""
        gguf_name = self.by_hf_name.get(name)
        if gguf_name is None:
            return None
        tensor = self.file.tensors[gguf_name]
        kind = tensor.tensor_type.name
        if not holds(scheme, kind):
            return None
        return self._in_hf_order(gguf_name, repacked(kind, tensor.data, scheme))

    def nonfinite(self, specs: list[TensorSpec]) -> Iterator[tuple[TensorSpec, int]]:
        """Each spec's NaN/Inf count (validate.check_values' `counts`), from the blocks' scales where it can."""
        for spec in specs:
            name = self.by_hf_name[spec.name]
            yield spec, nonfinite_count(self.file.tensors[name], lambda name=name: self._read(name))

    def _read(self, gguf_name: str) -> torch.Tensor:
        tensor = self.file.tensors[gguf_name]
        values = gguf_package().quants.dequantize(tensor.data, tensor.tensor_type)
        out = torch.from_numpy(np.array(values, dtype=np.float32))  # a copy: the mapped file stays read-only
        return self._in_hf_order(gguf_name, out)

    def _in_hf_order(self, gguf_name: str, rows: torch.Tensor) -> torch.Tensor:
        """A tensor's rows (values, or stored rows: whole output channels either way) with llama's rope permutation of
        q and k undone."""
        which = rope_permuted(gguf_name) if self.permuted else None
        if which is None:
            return rows
        return unpermute_rope(rows, self.config.num_heads if which == "attn_q" else self.config.num_kv_heads)


def unpermute_rope(weight: torch.Tensor, heads: int) -> torch.Tensor:
    """Undo llama.cpp's permutation of a q or k projection (weight or bias): within each head, llama.cpp stores the
    rows as interleaved (real, imaginary) pairs where Hugging Face has the first half then the second half."""
    half = weight.shape[0] // heads // 2
    rest = weight.shape[1:]
    return weight.reshape(heads, half, 2, *rest).transpose(1, 2).reshape(weight.shape).contiguous()
