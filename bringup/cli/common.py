"""Options every stage shares, and the context a stage starts from.

Importing this module stays light (no torch, no profiles): `--help` of every command reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from bringup.cli.checks import device_name

if TYPE_CHECKING:
    import torch

    from bringup.backends.base import DeviceInfo
    from bringup.backends.selection.select import Selection

DeviceOption = Annotated[
    Optional[str],
    typer.Option("--device", "-d", help="Device to use, e.g. cpu, cuda:1, xpu:0, mps (default: BRINGUP_DEVICE, "
                 "then the profile's device, then automatic).", callback=device_name),
]
ProfileOption = Annotated[
    Optional[Path],
    typer.Option("--profile", "-p", help="Profile YAML to read and update (default: profiles/<device>.yaml)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout instead of tables.")]
VerboseOption = Annotated[bool, typer.Option("--verbose", "-v", help="Show debug logs.")]
DetailsOption = Annotated[bool, typer.Option("--details", help="Print the full tables, not only the summary.")]
StrictOption = Annotated[bool, typer.Option("--strict", help="Treat any fallback as an error.")]
DtypeOption = Annotated[
    str,
    typer.Option("--dtype", help="Model dtype: auto (the plan's choice from the profile) or float32, bfloat16, "
                 "float16. A dtype the profile says does not run correctly here is refused unless --force."),
]
QuantizationOption = Annotated[
    str,
    typer.Option("--quantization", help="Linear weights: none (the plan dtype's), int8 (a scale per block of 32, "
                 "GGUF Q8_0's values), int4 (a scale and a minimum per group of 32, Q4_1's; int4_g64 / int4_g128: "
                 "per group of 64 / 128); all quantize the activations per block of 32 as llama.cpp does; fp8 "
                 "(weight-only float8_e4m3fn, a scale per output channel; any device with float8 casts), or auto "
                 "(the plan "
                 "quantizes only where the kernel checked out here, decode measured faster on this model and the "
                 "KL divergence stayed under its budget). int8/int4: host (CPU) kernels. A compressed-tensors "
                 "checkpoint is served in its own scheme."),
]
ChatTemplateOption = Annotated[
    Optional[Path],
    typer.Option("--chat-template", metavar="FILE", help="A Jinja chat template to render chats with, in place of "
                 "the model's (a GGUF file or a directory without one gets bringup's plain 'role: content' "
                 "fallback, recorded as a fallback). It sees messages, add_generation_prompt, tools and the "
                 "special tokens, as transformers' templates do."),
]
ForceDtypeOption = Annotated[
    bool, typer.Option("--force", help="Run a --dtype the profile marks broken, and load weights with non-finite "
                       "values (NaN/Inf; each such tensor is logged).")
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Overwrite a profile recorded for another device or schema version.")
]
ForceRunnerOption = Annotated[
    bool, typer.Option("--force", help="Overwrite a profile recorded for another device or schema version, and run a "
                       "--dtype the profile says does not run correctly here.")
]
AllowCpuFallbackOption = Annotated[bool, typer.Option(help="Run on the CPU if the device fails.")]
MODEL_HELP = ("Hugging Face style model directory (config.json, *.safetensors, tokenizer.json), or a GGUF file "
              "(FILE.gguf: llama, qwen2, qwen3, gemma3; F32/F16/BF16, Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 and Q2_K-Q6_K tensors, "
              "dequantized at load); default: "
              "the built-in reference model.")
ModelOption = Annotated[Optional[Path], typer.Option("--model", "-m", help=MODEL_HELP)]


@dataclass
class StageContext:
    selection: Selection
    profile_path: Path
    strict: bool
    json: bool
    force: bool

    @property
    def device(self) -> torch.device:
        return self.selection.device

    @property
    def info(self) -> DeviceInfo:
        return self.selection.info


def recorded_device(profile: Path | None, force: bool) -> str | None:
    from bringup.errors import BringupError
    from bringup.profiles.store import load_profile

    if profile is None or not profile.exists():
        return None
    try:
        loaded = load_profile(profile)
    except BringupError:
        if force:
            return None
        raise
    return loaded.device.id if loaded.device else None


def stage_context(
    device: str | None,
    profile: Path | None,
    json: bool,
    verbose: bool,
    strict: bool = False,
    force: bool = False,
) -> StageContext:
    from bringup.backends.selection.select import select_device
    from bringup.log import configure_logging, get_logger
    from bringup.profiles.store import default_profile_path, ensure_profile_matches

    configure_logging(verbose)
    selection = select_device(device, recorded_device(profile, force))
    path = profile if profile is not None else default_profile_path(selection.info)
    ensure_profile_matches(path, selection.info, force)
    get_logger("cli").debug("profile path: %s", path)
    return StageContext(selection, path, strict, json, force)
