"""Versions of the Python packages that matter to a bug report, read from metadata (nothing is imported)."""

from importlib import metadata

NOT_INSTALLED = "not installed"
PACKAGES = (
    "torch", "numpy", "triton", "transformers", "safetensors", "tokenizers", "intel_extension_for_pytorch",
    "torch_npu", "fastapi", "uvicorn", "pydantic", "typer",
)
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
    facts = {name: installed_version(name) or NOT_INSTALLED for name in PACKAGES}
    facts["triton"] = triton_version()
    return facts
