"""The `environment` section: versions and settings that explain "what changed since it last worked"."""

import os
import platform
import re
import sys
from collections.abc import Mapping
from pathlib import Path

import torch

from bringup import __version__
from bringup.backends.reconcile import VISIBILITY_VARIABLES
from bringup.profiles.schema import EnvironmentSection
from bringup.profiles.store import now_iso

RECORDED_PREFIXES = (
    "PYTORCH_", "TORCH_", "TORCHINDUCTOR_", "TRITON_", "OMP_", "MKL_", "KMP_", "GOMP_", "CUDA_", "CUBLAS_",
    "CUDNN_", "NCCL_", "HIP_", "ROCM_", "ROCR_", "HSA_", "MIOPEN_", "ZE_", "SYCL_", "ONEAPI_", "CCL_",
    "ASCEND_", "HCCL_", "PT_HPU_", "HABANA_", "GLOO_", "BRINGUP_", "OPENBLAS_",
)
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|PRIVATE", re.IGNORECASE)


def recorded_env(env: Mapping[str, str]) -> dict[str, str]:
    """Variables that change device behaviour; never ones whose name suggests a secret."""
    keep = {}
    for name, value in sorted(env.items()):
        if SECRET_NAME.search(name):
            continue
        if name in VISIBILITY_VARIABLES or name.startswith(RECORDED_PREFIXES):
            keep[name] = value
    return keep


def runtime_versions() -> dict[str, str | None]:
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "xpu": getattr(torch.version, "xpu", None),
        "cudnn": str(cudnn) if cudnn else None,
        "torch_git": getattr(torch.version, "git_version", None),
        "cpu_capability": str(torch.backends.cpu.get_cpu_capability()),
        "openmp": str(torch.backends.openmp.is_available()),
        "mkldnn": str(torch.backends.mkldnn.is_available()),
    }


def driver_version(root: Path = Path("/")) -> str | None:
    nvidia = root / "proc" / "driver" / "nvidia" / "version"
    amd = root / "sys" / "module" / "amdgpu" / "version"
    for path, label in ((nvidia, "nvidia"), (amd, "amdgpu")):
        try:
            first = path.read_text(encoding="utf-8").splitlines()[0].strip()
        except (OSError, IndexError):
            continue
        return f"{label}: {first}"
    return None


def collect_environment(env: Mapping[str, str] | None = None) -> EnvironmentSection:
    return EnvironmentSection(
        bringup=__version__,
        torch=torch.__version__,
        python=sys.version.split()[0],
        runtime=runtime_versions(),
        driver=driver_version(),
        os=f"{platform.system()} {platform.release()} ({platform.platform()})",
        env=recorded_env(os.environ if env is None else env),
        captured=now_iso(),
    )
