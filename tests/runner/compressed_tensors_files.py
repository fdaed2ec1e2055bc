"""Pre-quantized checkpoints in compressed-tensors' on-disk layout, made from a saved float model directory: each
linear weight rewritten as compressed-tensors stores it (written here from the format, not with its library) and
config.json given the quantization_config it writes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from tests.cli.run_cli import CliResult, run_cli

FP8_MAX = 448.0
EMBED = "model.embed_tokens.weight"


def linear_weights(tensors: dict[str, torch.Tensor], ignore: tuple[str, ...]) -> list[str]:
    """The names of the 2-D linear weights compressed-tensors quantizes (not the embedding, not `ignore`)."""
    return [name for name, t in tensors.items() if t.dim() == 2 and name.endswith(".weight") and name != EMBED
            and name.removesuffix(".weight") not in ignore]


def fp8_tensors(w: torch.Tensor, strategy: str) -> dict[str, torch.Tensor]:
    """float-quantized: codes = w / scale clamped to +-448 and cast to e4m3; scale = max|w| / 448."""
    scale = (w.abs().amax(dim=1, keepdim=True) if strategy == "channel" else w.abs().amax().reshape(1, 1)) / FP8_MAX
    codes = (w / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return {"weight": codes, "weight_scale": scale if strategy == "channel" else scale.reshape(1)}


def int8_codes(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int8 per output channel: scale = max|w| / 127, q = round(w / scale) in [-128, 127]."""
    scale = w.abs().amax(dim=1, keepdim=True) / 127
    return torch.round(w / scale).clamp(-128, 127).to(torch.int8), scale


def pack_int32(codes: torch.Tensor, bits: int = 8) -> torch.Tensor:
    """32 / bits codes per int32 word, code j of a word (plus 2^(bits-1), unsigned) in bits j*bits.."""
    per_word = 32 // bits
    unsigned = (codes.to(torch.int64) + (1 << (bits - 1))).reshape(codes.shape[0], -1, per_word)
    words = (unsigned << (torch.arange(per_word) * bits)).sum(dim=-1)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def int4_group_codes(w: torch.Tensor, group: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric int4 per group of inputs (W4A16): scale = max|w| / 7 per group, q = round(w / scale) in [-8, 7];
    scales [out, in / group]."""
    groups = w.reshape(w.shape[0], -1, group)
    scale = groups.abs().amax(dim=-1) / 7
    codes = torch.round(groups / scale.unsqueeze(-1)).clamp(-8, 7).to(torch.int8)
    return codes.reshape(w.shape), scale


def int4_tensors(w: torch.Tensor, group: int) -> dict[str, torch.Tensor]:
    codes, scale = int4_group_codes(w, group)
    return {"weight_packed": pack_int32(codes, bits=4),
            "weight_shape": torch.tensor(list(w.shape), dtype=torch.int32), "weight_scale": scale.bfloat16()}


def int8_tensors(w: torch.Tensor, fmt: str) -> dict[str, torch.Tensor]:
    codes, scale = int8_codes(w)
    if fmt == "int-quantized":
        return {"weight": codes, "weight_scale": scale}
    return {"weight_packed": pack_int32(codes), "weight_shape": torch.tensor(list(w.shape), dtype=torch.int32),
            "weight_scale": scale}


def dequantized(w: torch.Tensor, fmt: str, strategy: str = "channel", group: int | None = None) -> torch.Tensor:
    """The float32 weight a compressed-tensors checkpoint of `w` holds: scale * q."""
    if group is not None:
        codes, scale = int4_group_codes(w, group)
        per_input = scale.bfloat16().float().repeat_interleave(group, dim=1)  # the checkpoint keeps bfloat16 scales
        return codes.float() * per_input
    if fmt == "float-quantized":
        parts = fp8_tensors(w, strategy)
        return parts["weight"].float() * parts["weight_scale"].reshape(-1, 1)
    codes, scale = int8_codes(w)
    return codes.float() * scale


def quantization_config(fmt: str, strategy: str, ignore: tuple[str, ...], activations: dict | None,
                        group: int | None = None) -> dict:
    kind = "float" if fmt == "float-quantized" else "int"
    weights = {"num_bits": 8 if group is None else 4, "type": kind, "strategy": strategy if group is None else "group",
               "symmetric": True, "dynamic": False, "group_size": group, "observer": "minmax", "observer_kwargs": {},
               "actorder": None, "block_structure": None}
    return {"quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                          "input_activations": activations, "output_activations": None,
                                          "format": fmt}},
            "ignore": list(ignore), "kv_cache_scheme": None, "sparsity_config": {}}


DYNAMIC_TOKENS = {"num_bits": 8, "type": "float", "strategy": "token", "dynamic": True, "symmetric": True,
                  "observer": None}


def write_compressed(src: Path, dst: Path, fmt: str, strategy: str = "channel", ignore: tuple[str, ...] = (),
                     activations: dict | None = None, group: int | None = None) -> Path:
    """`src` (a float model directory) as a compressed-tensors checkpoint in `dst` (`group`: 4-bit pack-quantized
    weights with a scale per group of that many inputs)."""
    shutil.copytree(src, dst)
    tensors = load_file(str(src / "model.safetensors"))
    out: dict[str, torch.Tensor] = {}
    quantized = set(linear_weights(tensors, ignore))
    for name, t in tensors.items():
        if name not in quantized:
            out[name] = t
            continue
        module = name.removesuffix(".weight")
        if group is not None:
            parts = int4_tensors(t.float(), group)
        else:
            parts = fp8_tensors(t.float(), strategy) if fmt == "float-quantized" else int8_tensors(t.float(), fmt)
        out |= {f"{module}.{part}": value.contiguous() for part, value in parts.items()}
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})
    edit_config(dst, {"quantization_config": quantization_config(fmt, strategy, ignore, activations, group)})
    return dst


def write_dequantized(src: Path, dst: Path, fmt: str, group: int | None = None) -> Path:
    """`src` with every linear weight replaced by what its compressed-tensors `fmt` checkpoint holds, in float32."""
    shutil.copytree(src, dst)
    tensors = load_file(str(src / "model.safetensors"))
    for name in linear_weights(tensors, ()):
        tensors[name] = dequantized(tensors[name].float(), fmt, group=group)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    return dst


def edit_config(model: Path, changes: dict[str, Any]) -> None:
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps(config | changes))


def quantization(method: str, **weights) -> dict:
    """A hand-written quantization_config: one int-quantized int8 group per channel, `weights` changed."""
    base = {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True, "dynamic": False,
            "group_size": None}
    group = {"targets": ["Linear"], "weights": base | weights, "input_activations": None}
    return {"quant_method": method, "format": "int-quantized", "config_groups": {"group_0": group}}


def generate(model: Path, work: Path, *extra: str) -> CliResult:
    """`bringup generate` of three tokens from `model` on the CPU, through the real CLI."""
    return run_cli(["generate", "the quick", "--model", str(model), "--device", "cpu", "--profile",
                    str(work / "p.yaml"), "--max-tokens", "3", "--max-model-len", "128", *extra])
