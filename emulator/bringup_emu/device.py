"""torch.emu: the device module torch and bringup expect of an accelerator (the torch.cuda-style API)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from bringup_emu import runtime


@dataclass(frozen=True)
class EmuDeviceProperties:
    name: str
    is_integrated: bool
    total_memory: int
    index: int
    type: str = "emu"


def _index(device: Any = None) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        index = device
    else:
        parsed = torch.device(device)
        if parsed.type != "emu":
            raise ValueError(f"emu: expected an emu device, got {parsed}")
        index = current_device() if parsed.index is None else parsed.index
    if not 0 <= index < device_count():
        raise ValueError(f"emu: device index {index} is out of range: the spec has {device_count()} device(s)")
    return index


def is_available() -> bool:
    return runtime.is_active() and device_count() > 0


def is_initialized() -> bool:
    return runtime.is_active()


def init() -> None:
    runtime.extension()


def _lazy_init() -> None:
    runtime.extension()


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return runtime.extension().device_count() if runtime.is_active() else 0


def current_device() -> int:
    return runtime.extension().current_device()


def set_device(device: Any) -> None:
    runtime.extension().set_device(_index(device))


class device:
    """Context manager that makes `index` the current emu device."""

    def __init__(self, index: Any) -> None:
        self.index = _index(index)
        self.previous = -1

    def __enter__(self) -> None:
        self.previous = current_device()
        set_device(self.index)

    def __exit__(self, *exc: object) -> bool:
        set_device(self.previous)
        return False


def synchronize(device: Any = None) -> None:
    """Work on the emulated device runs synchronously: nothing to wait for."""
    _index(device)


def get_device_properties(device: Any = None) -> EmuDeviceProperties:
    index = _index(device)
    spec = runtime.spec().devices[index]
    return EmuDeviceProperties(spec.name, spec.integrated, spec.memory_bytes, index)


def get_device_name(device: Any = None) -> str:
    return get_device_properties(device).name


def _stats(device: Any = None) -> dict[str, int]:
    return dict(runtime.extension().memory_stats(_index(device)))


def memory_stats(device: Any = None) -> dict[str, Any]:
    """torch.cuda.memory_stats' keys ("allocated_bytes.all.current", ...), read from the same allocator."""
    return dict(torch.accelerator.memory_stats(_index(device)))


def mem_get_info(device: Any = None) -> tuple[int, int]:
    stats = _stats(device)
    return stats["cap_bytes"] - stats["allocated_bytes"], stats["cap_bytes"]


def memory_allocated(device: Any = None) -> int:
    return _stats(device)["allocated_bytes"]


def max_memory_allocated(device: Any = None) -> int:
    return _stats(device)["peak_allocated_bytes"]


def memory_reserved(device: Any = None) -> int:
    return memory_allocated(device)  # no caching: what is reserved is what is allocated


def max_memory_reserved(device: Any = None) -> int:
    return max_memory_allocated(device)


def reset_peak_memory_stats(device: Any = None) -> None:
    runtime.extension().reset_peak(_index(device))


def empty_cache() -> None:
    """Freed memory goes straight back to the host: there is no cache to empty."""


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return "bfloat16" not in runtime.spec().refused_dtypes


def get_amp_supported_dtype() -> list[torch.dtype]:
    refused = runtime.spec().refused_dtypes
    return [dtype for dtype in (torch.float16, torch.bfloat16) if str(dtype).removeprefix("torch.") not in refused]


def _generator(device: Any = None) -> torch.Generator:
    return runtime.extension().default_generator(_index(device))


def manual_seed(seed: int) -> None:
    _generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for index in range(device_count()):
        _generator(index).manual_seed(int(seed))


def seed() -> None:
    _generator().seed()


def seed_all() -> None:
    for index in range(device_count()):
        _generator(index).seed()


def initial_seed() -> int:
    return _generator().initial_seed()


def get_rng_state(device: Any = "emu") -> torch.Tensor:
    return _generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "emu") -> None:
    _generator(device).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(index) for index in range(device_count())]


def set_rng_state_all(new_states: list[torch.Tensor]) -> None:
    for index, state in enumerate(new_states):
        set_rng_state(state, index)


def default_generators() -> tuple[torch.Generator, ...]:
    return tuple(_generator(index) for index in range(device_count()))
