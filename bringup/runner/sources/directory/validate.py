"""Check a model directory completely before any weight is used.

Every safetensors header is read (8-byte length + JSON, cheap) and checked against the file's size, every
tensor's name, shape and dtype against config.json, and every weight's values for NaN/Inf. A problem is
one line naming the file and the tensor: a truncated download, a checkpoint for another config, a quantized
checkpoint or corrupt weights are refused here, not found at the first forward pass (or never). A checkpoint whose
config.json declares a quantization bringup loads (compressed_tensors/scheme.py) is checked for the tensors that
quantization stores, in their dtypes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from bringup.errors import BringupError
from bringup.log import get_logger
from bringup.profiles.store import printable
from bringup.runner.model.checkpoint import LM_HEAD
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.families import hf_tensor_shapes
from bringup.runner.model_files import decode_json, open_regular
from bringup.runner.weights.formats.compressed_tensors.scheme import PACK_QUANTIZED, stored_dtypes, stored_shapes

log = get_logger("runner.validate")

MAX_HEADER_BYTES = 100_000_000  # the safetensors library refuses larger headers
DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
               "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8}
FLOAT_DTYPES = ("F32", "F16", "BF16", "F64")  # what the runner converts to its dtype exactly as stored (no scales)
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)  # buffers some older checkpoints carry; recomputed from config.json
SCAN_CHUNK = 1 << 24  # elements per NaN/Inf check, so the check's own memory stays small
HEAD = LM_HEAD
FLOAT8_DTYPES = (torch.float8_e4m3fn, torch.float8_e5m2)


@dataclass(frozen=True)
class TensorSpec:
    """One tensor as its safetensors header describes it."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    file: Path


def check_model_dir(model_dir: Path, config: ModelConfig, files: list[Path], allow_nonfinite: bool = False,
                    scan_values: bool = True) -> list[TensorSpec]:
    """The tensors of `files`, each checked; BringupError (one line) on the first problem.

    allow_nonfinite (--force): load weights holding NaN/Inf anyway, each such tensor logged at WARNING.
    scan_values False: headers, names and shapes only; no weight is read (check_values does that later).
    """
    found = read_headers(files)
    check_dtypes(config, found)
    check_specs(model_dir, config, found)
    check_packed_shapes(config, found)
    if scan_values:
        check_values(list(found.values()), allow_nonfinite)
    return list(found.values())


# ---------------------------------------------------------------- headers


def read_headers(files: list[Path]) -> dict[str, TensorSpec]:
    """Every tensor of every file by name; a name in two files is refused."""
    found: dict[str, TensorSpec] = {}
    for path in files:
        for spec in read_header(path):
            if spec.name in found:
                raise BringupError(f"tensor {_name(spec.name)} is in both {found[spec.name].file} and {path}; "
                                   "the shards overlap: re-download the model")
            found[spec.name] = spec
    return found


def read_header(path: Path) -> list[TensorSpec]:
    """The tensors of one safetensors file, after checking that the header and every tensor fit the file."""
    try:
        with open_regular(path, str(path)) as f:
            size = os.fstat(f.fileno()).st_size
            length = _header_length(path, f.read(8), size)
            raw = f.read(length)
    except OSError as exc:
        raise BringupError(f"{path} cannot be read: {exc.strerror or exc}") from None
    try:
        header = decode_json(raw)
    except ValueError as exc:
        raise _corrupt(path, f"its header {printable(str(exc))[:120]}") from None
    if not isinstance(header, dict):
        raise _corrupt(path, "its header is not a JSON object")
    _check_metadata(path, header.pop("__metadata__", {}))
    placed = [_placed_tensor(path, name, entry) for name, entry in header.items()]
    _check_packing(path, placed, size - 8 - length)
    return [spec for spec, _, _ in placed]


def _header_length(path: Path, prefix: bytes, size: int) -> int:
    if len(prefix) < 8:
        raise _corrupt(path, f"it has {size} bytes, fewer than the 8-byte header length every safetensors file "
                             "starts with")
    length = int.from_bytes(prefix, "little")
    if length > size - 8:
        raise _corrupt(path, f"its header claims {length} bytes but only {size - 8} follow")
    if length > MAX_HEADER_BYTES:
        raise _corrupt(path, f"its header claims {length} bytes, more than the {MAX_HEADER_BYTES} safetensors "
                             "allows")
    return length


def _check_metadata(path: Path, metadata: Any) -> None:
    ok = isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())
    if not ok:
        raise _corrupt(path, "its __metadata__ is not a JSON object of strings")


def _placed_tensor(path: Path, name: str, entry: Any) -> tuple[TensorSpec, int, int]:
    """(spec, begin, end) of one header entry: dtype known, shape and offsets non-negative integers that agree."""
    if not isinstance(entry, dict):
        raise _corrupt(path, f"tensor {_name(name)} is described by a JSON {type(entry).__name__}, not an object")
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not _naturals(shape):
        raise _corrupt(path, f"tensor {_name(name)} has shape {_value(shape)}, not a list of non-negative integers")
    if not _naturals(offsets) or len(offsets) != 2 or offsets[0] > offsets[1]:
        raise _corrupt(path, f"tensor {_name(name)} has data_offsets {_value(offsets)}, not [begin, end]")
    if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
        raise _not_float(TensorSpec(name, tuple(shape), str(dtype), path))
    begin, end = offsets
    if _numel(shape) * DTYPE_BYTES[dtype] != end - begin:
        raise _corrupt(path, f"tensor {_name(name)} ({dtype} {list(shape)}) needs "
                             f"{_numel(shape) * DTYPE_BYTES[dtype]} bytes but its data_offsets span {end - begin}")
    return TensorSpec(name, tuple(shape), dtype, path), begin, end


def _check_packing(path: Path, placed: list[tuple[TensorSpec, int, int]], data_bytes: int) -> None:
    """The tensors' data lie back to back inside the file and fill it, as the safetensors library requires."""
    position = 0
    for spec, begin, end in sorted(placed, key=lambda p: (p[1], p[2])):
        if end > data_bytes:
            raise _corrupt(path, f"tensor {_name(spec.name)} ends at byte {end} of the data but the file holds only "
                                 f"{data_bytes} bytes of data (truncated)")
        if begin != position:
            raise _corrupt(path, f"tensor {_name(spec.name)} starts at byte {begin} of the data, expected "
                                 f"{position} (tensors must be packed back to back)")
        position = end
    if position != data_bytes:
        raise _corrupt(path, f"it has {data_bytes - position} bytes after its last tensor")


# ---------------------------------------------------------------- names, shapes, dtypes


def check_dtypes(config: ModelConfig, found: dict[str, TensorSpec]) -> None:
    """Every tensor in a float dtype, except those the checkpoint's own quantization stores in others."""
    stored = config.stored_quantization
    expected = hf_tensor_shapes(config) if stored else {}
    for spec in found.values():
        allowed = stored_dtypes(stored, spec.name, expected) if stored else None
        if allowed is None and spec.dtype not in FLOAT_DTYPES:
            raise _not_float(spec)
        if allowed is not None and spec.dtype not in allowed:
            raise BringupError(f"{spec.file}: tensor {_name(spec.name)} has dtype {_value(spec.dtype)} but "
                               f"config.json's quantization_config ({stored.describe()}) stores it as "
                               f"{' or '.join(allowed)}; the checkpoint does not match its config.json")


def _not_float(spec: TensorSpec) -> BringupError:
    return BringupError(f"{spec.file}: tensor {_name(spec.name)} has dtype {_value(spec.dtype)}, not a float dtype "
                        f"the runner loads ({', '.join(FLOAT_DTYPES)}); quantized checkpoints are not supported: use "
                        "the unquantized model")


@dataclass(frozen=True)
class CheckpointWords:
    """How messages name a checkpoint's settings and its weight files."""

    settings: str = "config.json"
    weights: str = "the safetensors files"
    these_settings: str = "this config.json"


def check_specs(where: Path, config: ModelConfig, found: dict[str, TensorSpec],
                words: CheckpointWords = CheckpointWords()) -> None:
    """Every tensor the family of `config` reads is in `found` (by Hugging Face name) with the shape it implies,
    and nothing else is; BringupError (one line) on the first problem."""
    expected = hf_tensor_shapes(config)
    if config.stored_quantization is not None:
        expected = stored_shapes(config.stored_quantization, expected)
    _check_names(where, config, found, expected, words)
    for spec in found.values():
        _check_tensor(spec, expected.get(spec.name), words)


def _check_names(model_dir: Path, config: ModelConfig, found: dict[str, TensorSpec],
                 expected: dict[str, tuple[int, ...]], words: CheckpointWords) -> None:
    missing = [name for name in expected if name not in found]
    if HEAD in missing:
        raise BringupError(f"{model_dir}: tensor {HEAD!r} is missing and {words.settings} has tie_word_embeddings "
                           "false, so the output head is not the embedding matrix; add the tensor, or set "
                           "tie_word_embeddings to true if this model really ties them")
    if missing:
        raise BringupError(f"{model_dir}: {len(missing)} tensor(s) that {words.settings} implies are missing from "
                           f"{words.weights}: {_names(missing)}; the checkpoint is incomplete or does not match "
                           f"{words.settings}")
    tolerated = {HEAD} if config.tie_word_embeddings else set()  # a tied head may be saved as well; it is not read
    unexpected = [name for name in found if name not in expected and name not in tolerated
                  and not name.endswith(IGNORED_SUFFIXES)]
    if unexpected:
        raise BringupError(f"{model_dir}: {len(unexpected)} tensor(s) in {words.weights} are not part of a "
                           f"{config.architecture} with {words.these_settings}: {_names(unexpected)}; the checkpoint "
                           f"does not match {words.settings}")


def _check_tensor(spec: TensorSpec, shape: tuple[int, ...] | None, words: CheckpointWords) -> None:
    """`shape` is None for a tensor the model does not read (a tied model's saved lm_head)."""
    if shape is not None and spec.shape != shape:
        raise BringupError(f"{spec.file}: tensor {_name(spec.name)} has shape {list(spec.shape)} but "
                           f"{words.settings} implies {list(shape)}; the checkpoint does not match {words.settings}")


def check_packed_shapes(config: ModelConfig, found: dict[str, TensorSpec]) -> None:
    """Each `M.weight_shape` of a pack-quantized checkpoint (two integers, read before any weight) holds the
    [out, in] config.json implies for M: the codes are cut to it, so a narrower one would load a narrower weight."""
    stored = config.stored_quantization
    if stored is None or stored.format != PACK_QUANTIZED:
        return
    expected = hf_tensor_shapes(config)
    by_file: dict[Path, list[TensorSpec]] = {}
    for spec in found.values():
        if spec.name.endswith(".weight_shape"):
            by_file.setdefault(spec.file, []).append(spec)
    for path, specs in by_file.items():
        with safe_open(str(path), framework="pt") as handle:
            for spec in specs:
                held = handle.get_tensor(spec.name).tolist()
                implied = list(expected[spec.name.removesuffix("_shape")])
                if held != implied:
                    raise BringupError(f"{path}: tensor {_name(spec.name)} holds {_value(held)} but config.json "
                                       f"implies {implied} for that weight; the checkpoint does not match "
                                       "config.json, or is corrupt: re-download it")


# ---------------------------------------------------------------- memory


class WeightsDoNotFit(BringupError):
    """The weights, in the plan's dtype, are larger than the device's free memory (found before any is read)."""


def check_fits(model: Path | str, specs: list[TensorSpec], dtype: torch.dtype, free_bytes: int | None,
               device: str) -> None:
    """The weights of `model` (a path, or the built-in model's name), held in `dtype`, fit the `free_bytes` the
    device has (no check when the backend cannot say); read from the headers only, before any weight is."""
    need = weight_bytes(specs, dtype)
    if free_bytes is not None and need > free_bytes:
        raise WeightsDoNotFit(f"{model}: the weights need {_size(need)} as {str(dtype).removeprefix('torch.')} "
                           f"({len(specs)} tensors) but {device} has {_size(free_bytes)} free; nothing was loaded: "
                           "use a smaller model, a smaller --dtype, or a device with more free memory")


def weight_bytes(specs: list[TensorSpec], dtype: torch.dtype) -> int:
    """The bytes `specs` take once converted to `dtype`."""
    return sum(_numel(list(spec.shape)) for spec in specs) * dtype.itemsize


def _size(n: int) -> str:
    return f"{n / (1 << 30):.2f} GiB" if n >= 1 << 30 else f"{n / (1 << 20):.2f} MiB"


# ---------------------------------------------------------------- values


NonfiniteCounts = Callable[[list[TensorSpec]], Iterator[tuple[TensorSpec, int]]]  # each spec's NaN/Inf count


def check_values(specs: list[TensorSpec], allow_nonfinite: bool, counts: NonfiniteCounts | None = None) -> None:
    """Every weight finite, or (allow_nonfinite) each tensor that is not logged at WARNING. `counts` counts each
    tensor's NaN/Inf values (default: read from the specs' safetensors files)."""
    start = time.perf_counter()
    bad = [(spec, count) for spec, count in (counts or safetensors_counts)(specs) if count]
    log.info("checked %d tensors for NaN/Inf in %.2f s", len(specs), time.perf_counter() - start)
    if not bad:
        return
    first, count = bad[0]
    more = f" (and {len(bad) - 1} more tensor(s))" if len(bad) > 1 else ""
    if not allow_nonfinite:
        raise BringupError(f"{first.file}: tensor {_name(first.name)} holds {count} NaN/Inf value(s){more}; the "
                           "weights are corrupt: re-download or re-convert them, or pass --force to load them anyway")
    for spec, n in bad:
        log.warning("loading tensor %s with %d NaN/Inf value(s) because of --force; its outputs may be NaN",
                    _name(spec.name), n)


def safetensors_counts(specs: list[TensorSpec]) -> Iterator[tuple[TensorSpec, int]]:
    by_file: dict[Path, list[TensorSpec]] = {}
    for spec in specs:
        by_file.setdefault(spec.file, []).append(spec)
    for path, in_file in by_file.items():
        with safe_open(str(path), framework="pt") as handle:
            for spec in in_file:
                yield spec, count_nonfinite(handle.get_tensor(spec.name))


def count_nonfinite(tensor: torch.Tensor) -> int:
    """NaN/Inf values in `tensor`: its min and max first (a vectorised pass at memory speed; NaN propagates and
    an infinity is an extreme), counted element by element only when one of them is not finite."""
    if tensor.dtype in FLOAT8_DTYPES:
        tensor = tensor.float()  # min/max are not implemented for float8; e4m3fn holds NaN but no infinity
    if tensor.numel() == 0 or all(bool(torch.isfinite(x)) for x in torch.aminmax(tensor)):
        return 0
    flat = tensor.reshape(-1)
    return sum(int((~torch.isfinite(flat[i:i + SCAN_CHUNK])).sum()) for i in range(0, flat.numel(), SCAN_CHUNK))


# ---------------------------------------------------------------- messages


def _corrupt(path: Path, why: str) -> BringupError:
    return BringupError(f"{path} is not a valid safetensors file: {why}; the download is truncated or corrupt: "
                        "re-download it")


def _naturals(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)


def _numel(shape: list[int]) -> int:
    n = 1
    for dim in shape:
        n *= dim
    return n


def _name(name: str) -> str:
    """A tensor name for a message: quoted, escaped to one line, bounded."""
    return repr(name if len(name) <= 80 else name[:77] + "...")


def _names(names: list[str], limit: int = 3) -> str:
    more = f" (and {len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(_name(n) for n in names[:limit]) + more


def _value(value: Any) -> str:
    text = printable(repr(value))
    return text if len(text) <= 40 else text[:37] + "..."
