"""The GGUF architectures (`general.architecture`) bringup serves, and the Hugging Face class each one is."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.errors import BringupError
from bringup.runner.model.families.llama import LLAMA
from bringup.runner.model.families.qwen2 import QWEN2
from bringup.runner.model.families.qwen3 import QWEN3
from bringup.runner.sources.gguf import metadata
from bringup.runner.sources.gguf.reader import GGUFFile
from bringup.terminal_text import shown


@dataclass(frozen=True)
class GGUFArchitecture:
    name: str  # general.architecture, also the prefix of its hyper-parameter keys ("llama.block_count")
    hf_architecture: str
    model_type: str
    rope_permuted: bool  # llama.cpp's converter stores q and k rows permuted for its rope; undone at load


ARCHITECTURES = {a.name: a for a in (GGUFArchitecture("llama", LLAMA, "llama", rope_permuted=True),
                                     GGUFArchitecture("qwen2", QWEN2, "qwen2", rope_permuted=False),
                                     GGUFArchitecture("qwen3", QWEN3, "qwen3", rope_permuted=False))}


def architecture(file: GGUFFile) -> GGUFArchitecture:
    """The file's architecture; BringupError naming it when bringup has no family for it."""
    name = metadata.text(file, "general.architecture")
    if name not in ARCHITECTURES:
        raise BringupError(f"{file.path}: GGUF architecture {shown(name)[:60]!r} is not supported; supported: "
                           f"{', '.join(ARCHITECTURES)} (or load the model's Hugging Face directory)")
    return ARCHITECTURES[name]
