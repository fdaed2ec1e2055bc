"""A config.json's `quantization_config`: the compressed-tensors checkpoints whose math bringup computes exactly are
read into a StoredQuantization; every other method, format or setting is refused by name, in one line.

Loaded: one config group targeting ["Linear"], weights symmetric with a scale per output channel (or, for FP8,
per tensor; for 4-bit, per group of inputs), not dynamic, no zero point, no activation reordering:
  float-quantized 8-bit float weights (float8_e4m3fn)  -> the fp8 kind;
  int-quantized / pack-quantized 8-bit int weights    -> dequantized at load (w = scale * q in float32);
  pack-quantized 4-bit int weights (W4A16, groups)     -> dequantized at load, likewise.
Activations absent, or dynamic (per-token scales computed at run time: such a checkpoint is served weight-only,
and the plan says so). Refused: other quant_methods (gptq, awq, bitsandbytes, fp8, ...), other formats (naive,
sparse-24, marlin-24, nvfp4, ...), a sparsity_config, groups for 8-bit weights, asymmetric zero points,
static activation scales (input_scale), output activations, a quantized KV cache, several config groups.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bringup.errors import BringupError
from bringup.runner.weights.formats.compressed_tensors.ignore_patterns import read_ignore
from bringup.runner.weights.formats.compressed_tensors.scheme import (
    CHANNEL,
    FLOAT_QUANTIZED,
    GROUP,
    INT_QUANTIZED,
    PACK_QUANTIZED,
    TENSOR,
    StoredQuantization,
)
from bringup.terminal_text import shown

COMPRESSED_TENSORS = "compressed-tensors"
WHAT_USE = "use the unquantized model or a GGUF Q8_0/Q4_0/Q4_1 file"
METHODS = {"gptq": "GPTQ integer weights in groups", "awq": "AWQ int4 weights in groups with zero points",
           "bitsandbytes": "bitsandbytes 4-bit/8-bit weights", "fp8": "transformers' own FP8 layout",
           "gguf": "GGUF tensors inside a directory", "hqq": "HQQ weights", "eetq": "EETQ int8 weights",
           "quanto": "optimum-quanto weights", "torchao": "torchao tensor subclasses", "mxfp4": "MXFP4 weights",
           "modelopt": "NVIDIA ModelOpt weights", "quark": "AMD Quark weights", "bitnet": "BitNet ternary weights"}
# (format, type, bits) -> the math bringup computes for it
SCHEMES = {(FLOAT_QUANTIZED, "float", 8): "fp8", (INT_QUANTIZED, "int", 8): "int8", (PACK_QUANTIZED, "int", 8): "int8",
           (PACK_QUANTIZED, "int", 4): "int4"}
GROUP_SIZES = (32, 64, 128, 256)  # the group sizes a 4-bit checkpoint is read with


def _text(value: Any) -> str:
    text = shown(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _refused(where: Path, what: str) -> BringupError:
    return BringupError(f"{where}: quantization_config {what} is not loaded by bringup; {WHAT_USE}")


def read_quantization_config(cfg: dict[str, Any], where: Path) -> StoredQuantization | None:
    """The checkpoint's own quantization (None when config.json has no quantization_config); BringupError naming
    what is not loaded."""
    qc = cfg.get("quantization_config")
    if qc is None:
        return None
    if not isinstance(qc, dict):
        raise _refused(where, f"{_text(qc)} (not a JSON object)")
    method = qc.get("quant_method")
    if method != COMPRESSED_TENSORS:
        about = METHODS.get(str(method).lower(), "a format bringup does not read")
        raise _refused(where, f"quant_method={_text(method)} ({about})")
    if qc.get("sparsity_config"):
        kind = qc["sparsity_config"].get("format") if isinstance(qc["sparsity_config"], dict) else None
        raise _refused(where, f"compressed-tensors sparsity_config (format={_text(kind)}: sparse weights)")
    if qc.get("kv_cache_scheme"):
        raise _refused(where, "compressed-tensors kv_cache_scheme (a quantized KV cache with stored scales)")
    groups = qc.get("config_groups")
    if not isinstance(groups, dict) or len(groups) != 1:
        count = len(groups) if isinstance(groups, dict) else 0
        raise _refused(where, f"compressed-tensors with {count} config_groups (bringup reads exactly one: every "
                              "Linear layer in one scheme)")
    group = next(iter(groups.values()))
    if not isinstance(group, dict):
        raise _refused(where, f"compressed-tensors config group {_text(group)} (not a JSON object)")
    return _read_group(qc, group, where)


def _read_group(qc: dict[str, Any], group: dict[str, Any], where: Path) -> StoredQuantization:
    form = group.get("format") or qc.get("format")
    targets = group.get("targets")
    if targets != ["Linear"]:
        raise _refused(where, f"compressed-tensors targets={_text(targets)} (bringup reads groups that target "
                              "['Linear'])")
    weights = group.get("weights")
    if not isinstance(weights, dict):
        raise _refused(where, f"compressed-tensors format={_text(form)} without weight quantization")
    kind, bits = weights.get("type"), weights.get("num_bits")
    scheme = SCHEMES.get((form, kind, bits)) if isinstance(bits, int) else None
    if scheme is None:
        raise _refused(where, f"compressed-tensors format={_text(form)} with {_text(kind)} {_text(bits)}-bit "
                              "weights (bringup reads float-quantized 8-bit float, int-quantized or "
                              "pack-quantized 8-bit int, pack-quantized 4-bit int)")
    strategy, group_size = weights.get("strategy"), weights.get("group_size")
    allowed = {"fp8": (CHANNEL, TENSOR), "int8": (CHANNEL,), "int4": (CHANNEL, GROUP)}[scheme]
    grouped = strategy == GROUP and _is_int(group_size) and group_size in GROUP_SIZES
    sized = grouped if strategy == GROUP else group_size is None  # groups need a size; nothing else has one
    if strategy not in allowed or not sized:
        sizes = f" of {', '.join(map(str, GROUP_SIZES))} inputs" if GROUP in allowed else ", no groups"
        raise _refused(where, f"compressed-tensors {form} {scheme} weights with strategy={_text(strategy)}, "
                              f"group_size={_text(repr(group_size))}{_group_size_problem(strategy, group_size)} "
                              f"(bringup reads a scale per {' or per '.join(allowed)}{sizes})")
    if weights.get("symmetric") is not True:
        raise _refused(where, f"compressed-tensors {form} {scheme} weights with symmetric="
                              f"{_text(weights.get('symmetric'))} (zero points)")
    if weights.get("dynamic") or weights.get("actorder"):
        raise _refused(where, f"compressed-tensors {form} weights with dynamic={_text(weights.get('dynamic'))}, "
                              f"actorder={_text(weights.get('actorder'))}")
    if group.get("output_activations"):
        raise _refused(where, "compressed-tensors output_activations (quantized outputs)")
    return StoredQuantization(source=str(where), format=form, scheme=scheme, strategy=strategy,
                              dynamic_activations=_dynamic_activations(group.get("input_activations"), where),
                              ignore=read_ignore(qc.get("ignore"), where), bits=bits,
                              group_size=group_size if grouped else None)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _group_size_problem(strategy: Any, group_size: Any) -> str:
    """What is wrong with group_size itself, beyond it not being one bringup reads."""
    if group_size is None:
        return ": a group strategy needs its size" if strategy == GROUP else ""
    return "" if _is_int(group_size) else ", not an integer"


def _dynamic_activations(activations: Any, where: Path) -> bool:
    """True for per-token scales computed at run time (served weight-only), False for none; static is refused."""
    if not activations:
        return False
    if not isinstance(activations, dict) or activations.get("dynamic") is not True:
        dynamic = activations.get("dynamic") if isinstance(activations, dict) else activations
        raise _refused(where, f"compressed-tensors input_activations with dynamic={_text(dynamic)} (static "
                              "activation scales, input_scale)")
    return True
