"""Seeded input generation on the CPU and materialisation for the device and the reference."""

from __future__ import annotations

import zlib
from typing import Any

import torch


def dtype_from_name(name: str) -> torch.dtype:
    """'bfloat16' -> torch.bfloat16; ValueError for names torch doesn't know."""
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return value


def seed_for(*parts: str) -> int:
    """A stable seed from strings (crc32, identical in every process, unlike hash())."""
    return zlib.crc32("|".join(parts).encode())


def generator(*parts: str) -> torch.Generator:
    gen = torch.Generator(device="cpu")
    gen.manual_seed(seed_for(*parts))
    return gen


def randn(gen: torch.Generator, *shape: int, scale: float = 1.0) -> torch.Tensor:
    return torch.randn(shape, generator=gen, dtype=torch.float64) * scale


def uniform(gen: torch.Generator, *shape: int, low: float, high: float) -> torch.Tensor:
    return torch.rand(shape, generator=gen, dtype=torch.float64) * (high - low) + low


def randint(gen: torch.Generator, high: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, high, shape, generator=gen, dtype=torch.int64)


def randperm(gen: torch.Generator, n: int) -> torch.Tensor:
    return torch.randperm(n, generator=gen, dtype=torch.int64)


def _cast(arg: Any, dtype: torch.dtype) -> Any:
    if isinstance(arg, torch.Tensor) and arg.is_floating_point():
        return arg.to(dtype)
    return arg


def cast_inputs(args: list[Any], dtype: torch.dtype, keep: tuple[int, ...] = ()) -> list[Any]:
    """Floating tensors to the dtype under test (positions in keep stay as they are)."""
    return [a if i in keep else _cast(a, dtype) for i, a in enumerate(args)]


def to_device(args: list[Any], device: torch.device) -> list[Any]:
    return [a.to(device) if isinstance(a, torch.Tensor) else a for a in args]


def to_reference(args: list[Any]) -> list[Any]:
    """The reference copy: the very values the device got, upcast to float64 on the CPU."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            a = a.detach().to("cpu")
            if a.is_floating_point():
                a = a.to(torch.float64)
        out.append(a)
    return out


def snapshot(args: list[Any]) -> list[Any]:
    """Clones of tensor arguments, to detect ops that modify their inputs."""
    return [a.detach().clone() if isinstance(a, torch.Tensor) else None for a in args]


def changed_inputs(args: list[Any], before: list[Any]) -> list[int]:
    """Positions of tensor arguments whose contents changed since snapshot()."""
    changed = []
    for i, (a, b) in enumerate(zip(args, before)):
        if not isinstance(a, torch.Tensor) or b is None or torch.equal(a, b):
            continue
        same = a == b
        if a.is_floating_point():
            same |= a.isnan() & b.isnan()  # NaN != NaN, yet an unchanged NaN is unchanged
        if not bool(same.all()):
            changed.append(i)
    return changed


def prepare_inputs(raw: list[Any], dtype: torch.dtype, device: torch.device, keep: tuple[int, ...] = (),
                   layout: Any = None) -> tuple[list[Any], list[Any]]:
    """(device args, float64 reference args) from raw CPU inputs, with the case's layout applied to both."""
    cast = cast_inputs(raw, dtype, keep)
    ref_args = to_reference(cast)
    dev_args = to_device(cast, device)
    if layout is not None:
        ref_args, dev_args = layout(ref_args), layout(dev_args)
    return dev_args, ref_args
