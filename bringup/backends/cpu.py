"""The host CPU as a device."""

import os
import platform

import psutil
import torch

from bringup.backends.base import Backend, DeviceInfo, LseAttentionFn

FP8_DTYPES = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu")

def cpuinfo_field(name: str) -> str | None:
    """The first `name : value` line of /proc/cpuinfo, or None where there is no such file or line."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(name):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def isa_level() -> str:
    """torch's own view of the CPU's vector ISA (e.g. AVX512, AVX2, DEFAULT)."""
    try:
        return str(torch.backends.cpu.get_cpu_capability())
    except Exception as exc:  # older torch
        return f"unknown ({exc})"


class CpuBackend(Backend):
    family = "cpu"
    torch_device_type = "cpu"
    visibility_variable = None
    collective_libraries = {"cpu": ("gloo", "gloo, torch's CPU collective library")}
    not_applicable = {
        **{f"dtypes.{fp8}": "a CPU has no FP8 arithmetic units; FP8 is a storage format here" for fp8 in FP8_DTYPES},
        "attention.sdpa_efficient": "the memory-efficient SDPA kernel is a GPU kernel; a CPU has none",
        "attention.sdpa_cudnn": "cuDNN is NVIDIA's GPU library; a CPU has none",
        "features.graphs": "a CPU has no graph-capture API",
        "features.pinned_memory": "the device is the host: there is no host-to-device copy to pin memory for",
        "features.peer_access": "a host has one CPU device: there is no peer to access",
        "ops._weight_int4pack_mm": "the byte-packed int4 kernel is the GPUs' (CUDA, ROCm, MPS, XPU); a CPU runs "
                                   "_weight_int4pack_mm_for_cpu, verified on its own",
    }

    def availability_facts(self) -> dict[str, str]:
        return {}  # the host is described by the cpu topic

    def availability(self) -> tuple[bool, str]:
        return True, ""

    def device_count(self) -> int:
        return 1

    def device_string(self, index: int) -> str:
        return "cpu"

    def memory(self, index: int) -> tuple[int | None, int | None]:
        vm = psutil.virtual_memory()
        return int(vm.total), int(vm.available)

    def memory_source(self, index: int) -> str | None:
        return "psutil.virtual_memory()"

    def device_info(self, index: int) -> DeviceInfo:
        total, free = self.memory(index)
        affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        return DeviceInfo(
            id="cpu",
            backend="cpu",
            name=cpuinfo_field("model name") or platform.processor() or platform.machine(),
            vendor=cpuinfo_field("vendor_id"),
            arch=platform.machine(),
            integrated=None,
            memory_total_bytes=total,
            memory_free_bytes=free,
            extra={
                "isa_level": isa_level(),
                "logical_cores": psutil.cpu_count(logical=True),
                "physical_cores": psutil.cpu_count(logical=False),
                "usable_cores": affinity,
                "torch_threads": torch.get_num_threads(),
            },
        )

    def synchronize(self, device: torch.device) -> None:
        return None

    attention_with_lse_backend = "sdpa_flash"

    def attention_with_lse(self) -> LseAttentionFn | None:
        flash = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
        if flash is None:
            return None

        def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool, scale: float
                   ) -> tuple[torch.Tensor, torch.Tensor]:
            out, lse = flash(q, k, v, 0.0, is_causal, scale=scale)  # the kernel SDPA's flash backend runs here
            return out, lse

        return attend
