"""What other engines call a torch device family, for the export of a placement (torch-free: the export reads plan
documents, not devices): the family whose devices llama.cpp's and vLLM's GPU backends take a placement on, and
llama.cpp's name for its device N. A family missing here is left out of a placement's export, saying so."""

from __future__ import annotations

PEER_GPU_FAMILY = "cuda"  # torch's cuda:N (CUDA, and ROCm builds under the same name)


def llama_cpp_device(index: int) -> str:
    """llama.cpp's name for the peer GPU family's device `index` (its CUDA backend's `CUDA{N}`)."""
    return f"CUDA{index}"
