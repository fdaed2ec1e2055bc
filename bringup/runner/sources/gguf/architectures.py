"""The GGUF architectures (`general.architecture`) bringup serves, and the Hugging Face class each one is."""

from __future__ import annotations

from dataclasses import dataclass, field

from bringup.errors import BringupError
from bringup.runner.model.families.gemma3 import GEMMA3
from bringup.runner.model.families.llama import LLAMA
from bringup.runner.model.families.qwen2 import QWEN2
from bringup.runner.model.families.qwen3 import QWEN3
from bringup.runner.sources.gguf import metadata
from bringup.runner.sources.gguf.reader import GGUFFile
from bringup.runner.sources.gguf.tensor_names import GEMMA_IN_LAYER, IN_LAYER
from bringup.terminal_text import shown


@dataclass(frozen=True)
class GGUFArchitecture:
    name: str  # general.architecture, also the prefix of its hyper-parameter keys ("llama.block_count")
    hf_architecture: str
    model_type: str
    rope_permuted: bool  # llama.cpp's converter stores q and k rows permuted for its rope; undone at load
    in_layer: dict[str, str] = field(default_factory=lambda: IN_LAYER)  # a layer's tensor names (tensor_names.py)
    norm_offset: float = 0.0  # llama.cpp's converter added this to every norm weight; taken off at load


ARCHITECTURES = {a.name: a for a in (GGUFArchitecture("llama", LLAMA, "llama", rope_permuted=True),
                                     GGUFArchitecture("qwen2", QWEN2, "qwen2", rope_permuted=False),
                                     GGUFArchitecture("qwen3", QWEN3, "qwen3", rope_permuted=False),
                                     GGUFArchitecture("gemma3", GEMMA3, "gemma3_text", rope_permuted=False,
                                                      in_layer=GEMMA_IN_LAYER, norm_offset=1.0))}


def architecture(file: GGUFFile) -> GGUFArchitecture:
    """The file's architecture; BringupError naming it when bringup has no family for it."""
    name = metadata.text(file, "general.architecture")
    if name not in ARCHITECTURES:
        raise BringupError(f"{file.path}: GGUF architecture {shown(name)[:60]!r} is not supported; supported: "
                           f"{', '.join(ARCHITECTURES)} (or load the model's Hugging Face directory)")
    return ARCHITECTURES[name]
