"""Versions of the Python packages that matter to a bug report, read from metadata (nothing is imported).
The device families' own packages (a vendor's torch extension) are named by their backends (Backend.packages)."""

from importlib import metadata

from bringup.backends.registry import registered

NOT_INSTALLED = "not installed"
MODEL_PACKAGES = ("torch", "numpy", "triton", "transformers", "safetensors", "tokenizers")
SERVING_PACKAGES = ("fastapi", "uvicorn", "pydantic", "typer")
PACKAGES = (*MODEL_PACKAGES, *SERVING_PACKAGES)
# builds of Triton that PyTorch ships under other distribution names
TRITON_DISTRIBUTIONS = ("pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu", "triton-xpu")


def installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except (metadata.PackageNotFoundError, ValueError):
        return None


def triton_version() -> str:
    for distribution in ("triton", *TRITON_DISTRIBUTIONS):
        version = installed_version(distribution)
        if version:
            return version if distribution == "triton" else f"{version} ({distribution})"
    return NOT_INSTALLED


def package_facts() -> dict[str, str]:
    family_packages = [name for backend in registered() for name in backend.packages]
    names = dict.fromkeys((*MODEL_PACKAGES, *family_packages, *SERVING_PACKAGES))
    facts = {name: installed_version(name) or NOT_INSTALLED for name in names}
    facts["triton"] = triton_version()
    return facts
