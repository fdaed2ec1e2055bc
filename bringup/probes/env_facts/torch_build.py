"""How the installed torch was built and which of its accelerator backends can run here."""

import re
from collections.abc import Callable

import torch

from bringup.backends.privateuse1 import registered_name
from bringup.backends.registry import all_backends
from bringup.probes.env_facts.tools import guarded

BUILD_SETTING_KEYS = {"BUILD_TYPE": "build_type", "BLAS_INFO": "blas", "LAPACK_INFO": "lapack",
                      "CXX_COMPILER": "cxx_compiler"}
ENABLED_VALUES = {"ON", "1", "TRUE", "YES"}


def build_settings(config: str) -> dict[str, str]:
    """`KEY=value` pairs of the "Build settings:" line of `torch.__config__.show()`."""
    match = re.search(r"Build settings:(.*)", config)
    if not match:
        return {}
    settings = {}
    for part in re.split(r",\s+(?=[A-Z0-9_]+=)", match.group(1).strip().rstrip(",")):
        key, _, value = part.partition("=")
        settings[key.strip()] = value.strip()
    return settings


def config_line(config: str, pattern: str) -> str | None:
    match = re.search(pattern, config, re.MULTILINE)
    return match.group(1).strip() if match else None


def config_facts(config: str) -> dict[str, str]:
    """The essentials of `torch.__config__.show()`: compiler, build type, BLAS, enabled features."""
    settings = build_settings(config)
    facts = {name: settings[key] for key, name in BUILD_SETTING_KEYS.items() if settings.get(key)}
    compiler = config_line(config, r"^\s*-\s*((?:GCC|clang|MSVC|Clang)\b.*)$")
    if compiler:
        facts["built_with"] = compiler
    enabled = sorted(k.removeprefix("USE_") for k, v in settings.items()
                     if k.startswith("USE_") and v.upper() in ENABLED_VALUES)
    if settings:
        facts["enabled_features"] = " ".join(enabled) or "none"
    return facts


def library_versions(config: str) -> dict[str, str | None]:
    return {
        "onednn_version": config_line(config, r"MKL-DNN\s+(v[\w.]+)") or config_line(config, r"oneDNN\s+(v[\w.]+)"),
        "mkl_version": config_line(config, r"Math Kernel Library Version\s+([\w.]+)"),
        "openmp_version": config_line(config, r"OpenMP \d+ \(a\.k\.a\. OpenMP ([\d.]+)\)"),
    }


def nccl_version() -> str | None:
    if not (torch.version.cuda or getattr(torch.version, "hip", None)):
        return None
    version = torch.cuda.nccl.version()
    return ".".join(str(part) for part in version) if isinstance(version, tuple) else str(version)


def dnn_version() -> str | None:
    """cuDNN on CUDA builds, MIOpen on ROCm builds (torch reports both through `torch.backends.cudnn`)."""
    if not torch.backends.cudnn.is_available():
        return None
    version = torch.backends.cudnn.version()
    return str(version) if version else None


def optional(probe: Callable[[], str | None]) -> str | None:
    return guarded(probe, lambda reason: reason)


def runtime_versions(config: str) -> dict[str, str | None]:
    """The runtimes torch was built with (None: not part of this build). The first eight keys predate `env`."""
    hip = getattr(torch.version, "hip", None)
    dnn = optional(dnn_version)
    return {
        "cuda": torch.version.cuda,
        "hip": hip,
        "xpu": getattr(torch.version, "xpu", None),
        "cudnn": None if hip else dnn,
        "torch_git": getattr(torch.version, "git_version", None),
        "cpu_capability": optional(lambda: str(torch.backends.cpu.get_cpu_capability())),
        "openmp": str(torch.backends.openmp.is_available()),
        "mkldnn": str(torch.backends.mkldnn.is_available()),
        "miopen": dnn if hip else None,
        "nccl": optional(nccl_version),
        "mkl": str(torch.backends.mkl.is_available()),
        **{name: value for name, value in library_versions(config).items() if value},
    }


def accelerator_availability() -> dict[str, str]:
    """Each family's own availability facts (Backend.availability_facts), and the name PrivateUse1 was given."""
    facts: dict[str, str] = {}
    for backend in all_backends():
        facts.update(guarded(backend.availability_facts,
                             lambda reason, b=backend: {f"{b.family}_available": reason}))
    privateuse1 = registered_name()
    if privateuse1 is not None:
        facts["privateuse1_backend"] = privateuse1
    return facts


def thread_facts() -> dict[str, str]:
    info = torch.__config__.parallel_info()
    backend = config_line(info, r"ATen parallel backend:\s*(.+)$") or "?"
    return {"threads": f"{torch.get_num_threads()} intra-op, {torch.get_num_interop_threads()} inter-op "
                       f"({backend})"}


def torch_build_facts(config: str) -> dict[str, str]:
    facts = {
        "debug": str(torch.version.debug),
        "cxx11_abi": str(torch.compiled_with_cxx11_abi()),
        **config_facts(config),
    }
    facts.update(accelerator_availability())
    facts.update(guarded(thread_facts, lambda reason: {"threads": reason}))
    return facts


def torch_config() -> str:
    return guarded(torch.__config__.show, lambda reason: "")
