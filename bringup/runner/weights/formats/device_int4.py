"""int4 weight-only storage for torch's device kernels `_weight_int4pack_mm` (the `int4_pack` kind) and its CPU
variant `_weight_int4pack_mm_for_cpu` (`int4_pack_cpu`): the kernel the probe's `int4_weight_only_matmul` record
names, verified on the accelerator.

The values: codes q in 0..15 per group of GROUP = 32 input features, w = (q - 8) * scale + zero, the op's own
convention, with scale and zero in bfloat16 (the activations' dtype: the CUDA kernel takes bfloat16 only, so both
kinds compute in it). They come from bringup's host int4 storage (formats/integer.py: GGUF Q4_1's w = q * d + m,
d and m float16 per group of 32), mapped without a second rounding of the codes: w = (q - 8) * d + (m + 8 d), so
scale = d and zero = m + 8 d; only d and m + 8 d are rounded to bfloat16. A float weight is first quantized as the
host's int4 is (quantize_int4), a GGUF Q4_0 / Q4_1 weight is taken as the file holds it (weights/held.py).

The packed layout is the device's own (the op's packing kernel, run on the device at load; it is never written to
disk). The bytes, one uint8 tensor [out, 5 * in / 8] per weight: its first out * in / 2 bytes the packed codes (a
contiguous view in the dtype and shape the packing kernel returned), then the scales and zeros, bfloat16
[in / 32, out, 2], as the op reads them.

The reference: the codes read back through the kernel itself with scale 1 and zero 8 (each output then is one code,
exact in bfloat16; anything but integers 0..15 is a kernel that does not decode its own packing), dequantized with
the stored scales and zeros, times x rounded to bfloat16 as the kernel's caller does, in float64.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bringup.runner.weights.formats.integer import quantize_int4, unpack_int4
from bringup.runner.weights.layouts import float64_linear

GROUP = 32
ACTIVATIONS = torch.bfloat16
CODE_OFFSET = 8  # the op's zero point: w = (q - 8) * scale + zero


@dataclass(frozen=True)
class Int4Kernel:
    """A weight-only int4 matmul and the kernel that packs its codes."""

    matmul: str
    pack: str
    packs_bytes: bool  # the packing kernel takes uint8 [N, K/2] (even k in the high nibble), not int32 [N, K]


KERNELS = {"_weight_int4pack_mm": Int4Kernel("_weight_int4pack_mm", "_convert_weight_to_int4pack", True),
           "_weight_int4pack_mm_for_cpu": Int4Kernel("_weight_int4pack_mm_for_cpu",
                                                     "_convert_weight_to_int4pack_for_cpu", False)}
_PACKED: dict[tuple, tuple[torch.Size, torch.dtype]] = {}  # (kernel, device, out, in) -> the packing's shape, dtype


def inner_k_tiles(k: int) -> int:
    """The largest of 8, 4, 2 whose tile (16 * tiles) divides K, as the packing kernels need."""
    return next((tiles for tiles in (8, 4, 2) if k % (16 * tiles) == 0), 2)


def _device_pack(kernel: Int4Kernel, codes: torch.Tensor) -> torch.Tensor:
    """Codes [N, K] (0..15) through the op's packing kernel, on their device."""
    codes = codes.to(torch.int32)
    arg = (codes[:, ::2] << 4 | codes[:, 1::2]).to(torch.uint8) if kernel.packs_bytes else codes
    packed = getattr(torch.ops.aten, kernel.pack)(arg.contiguous(), inner_k_tiles(codes.shape[1]))
    _PACKED[(kernel.matmul, str(codes.device), *codes.shape)] = (packed.shape, packed.dtype)
    return packed


def _packed_form(kernel: Int4Kernel, device: torch.device, out: int, k: int) -> tuple[torch.Size, torch.dtype]:
    key = (kernel.matmul, str(device), out, k)
    if key not in _PACKED:  # a weight packed in another process: learn the shape from a packing of zeros
        _device_pack(kernel, torch.zeros(out, k, dtype=torch.int32, device=device))
    return _PACKED[key]


OUT_MULTIPLE, IN_MULTIPLE = 16, GROUP * 2  # what the packing kernels take


def shapes_why_not(outs: list[int], ins: list[int]) -> str | None:
    """Why linear layers with these output and input sizes cannot be packed, or None."""
    odd_out = [n for n in outs if n % OUT_MULTIPLE]
    odd_in = [k for k in ins if k % IN_MULTIPLE]
    if not odd_out and not odd_in:
        return None
    sizes = ", ".join([*(f"{n} outputs" for n in odd_out), *(f"{k} inputs" for k in odd_in)])
    return (f"the int4 packing kernels take output sizes in multiples of {OUT_MULTIPLE} and input sizes in multiples "
            f"of {IN_MULTIPLE}; this model's linear layers have {sizes}")


def in_features(stored: torch.Tensor) -> int:
    return stored.shape[1] * 8 // 5


def pack(kernel: str, codes: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor) -> torch.Tensor:
    """Codes [out, in] (0..15), scale and zero [out, in / 32] as the stored [out, 5 * in / 8] uint8."""
    out, k = codes.shape
    why = shapes_why_not([out], [k])
    if why:
        raise ValueError(why)
    packed = _device_pack(KERNELS[kernel], codes).contiguous().view(torch.uint8).reshape(-1)
    if packed.numel() != out * k // 2:
        raise ValueError(f"{KERNELS[kernel].pack} packed [{out}, {k}] codes into {packed.numel()} bytes, not "
                         f"{out * k // 2}: a layout this kind does not hold")
    pairs = torch.stack([scale, zero], dim=-1).to(ACTIVATIONS).transpose(0, 1).contiguous()  # [in / 32, out, 2]
    return torch.cat([packed, pairs.view(torch.uint8).reshape(-1)]).reshape(out, -1)


def unpack(kernel: str, stored: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the packed codes as the kernel reads them, scales and zeros [in / 32, out, 2] bfloat16): views, no copies."""
    out, k = stored.shape[0], in_features(stored)
    shape, dtype = _packed_form(KERNELS[kernel], stored.device, out, k)
    flat = stored.reshape(-1)
    packed = flat[: out * k // 2].view(dtype).reshape(shape)
    return packed, flat[out * k // 2:].view(ACTIVATIONS).reshape(k // GROUP, out, 2)


def from_int4(kernel: str, host: torch.Tensor) -> torch.Tensor:
    """bringup's host int4 storage (d, m, codes per group of 32; formats/integer.py) as this kind's: the codes as
    they are, scale = d, zero = m + 8 d."""
    d, m, codes = unpack_int4(host)
    return pack(kernel, codes.reshape(host.shape[0], -1), d, m + CODE_OFFSET * d)


def quantize(kernel: str, w: torch.Tensor) -> torch.Tensor:
    """W [out, in] (on its device) as the host's int4 rounds it, mapped onto this kind."""
    return from_int4(kernel, quantize_int4(w))


def _matmul(kernel: str, x: torch.Tensor, packed: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    return getattr(torch.ops.aten, KERNELS[kernel].matmul)(x.to(ACTIVATIONS).contiguous(), packed, GROUP, pairs)


def codes(kernel: str, stored: torch.Tensor) -> torch.Tensor:
    """The codes [out, in] read back through the kernel (float32); ValueError when they are not integers 0..15."""
    packed, pairs = unpack(kernel, stored)
    k = in_features(stored)
    unit = torch.tensor([1.0, float(CODE_OFFSET)], dtype=ACTIVATIONS, device=stored.device).expand_as(pairs)
    eye = torch.eye(k, dtype=ACTIVATIONS, device=stored.device)
    found = _matmul(kernel, eye, packed, unit.contiguous()).float().t().contiguous()
    if not bool(torch.all((found == found.round()) & (found >= 0) & (found <= 15))):
        raise ValueError(f"{KERNELS[kernel].matmul} does not read its packed codes back as integers 0..15 with "
                         "scale 1 and zero 8: its products cannot be referred to the stored codes")
    return found


def dequantize(kernel: str, stored: torch.Tensor) -> torch.Tensor:
    """The float32 weight [out, in] the stored codes, scales and zeros give."""
    q = codes(kernel, stored)
    pairs = unpack(kernel, stored)[1].float().transpose(0, 1).repeat_interleave(GROUP, dim=1)  # [out, in, 2]
    return (q - CODE_OFFSET) * pairs[..., 0] + pairs[..., 1]


def linear(kernel: str, x: torch.Tensor, stored: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x [T, in] @ W^T + b through the kernel, in bfloat16, returned in x's dtype (a float64 x: the reference)."""
    if x.dtype == torch.float64:
        return reference(kernel, x, stored, bias).to(x.device)
    packed, pairs = unpack(kernel, stored)
    y = _matmul(kernel, x, packed, pairs).to(x.dtype)
    return y if bias is None else y + bias.to(y.dtype)


def reference(kernel: str, x: torch.Tensor, stored: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    rounded = x.detach().to(ACTIVATIONS).cpu()
    return float64_linear(rounded, dequantize(kernel, stored).cpu(), None if bias is None else bias.cpu())
