"""What the caller asks of an engine at start: the model, the profile, the device and the limits.

Declared once: each field a command line can set carries its flag, help text and option group (`flag` below),
and its default is the flag's. The CLI builds its options from these fields (bringup/cli/engine_flags.py);
the fields without a flag are for code (tests, replays, `tune`). Importing this module stays torch-free: every
command's `--help` reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from bringup.runner.plan.measurements import StartupMeasurements

# option groups: a command takes the groups it needs
TARGET = "target"  # where it runs and with which profile: --device, --profile, --strict
MODEL = "model"  # what runs: --model, --dtype, --quantization, --force
CPU_FALLBACK = "cpu fallback"  # --allow-cpu-fallback
CONTEXT = "context"  # --max-model-len
BATCH = "batch"  # --max-num-seqs
CHAT = "chat"  # --chat-template


@dataclass(frozen=True)
class Flag:
    """How a field is given on the command line."""

    group: str
    help: str
    names: tuple[str, ...] = ()  # the flag's spellings; none: --field-name
    min: int | None = None
    metavar: str | None = None


def flag(group: str, help: str, names: tuple[str, ...] = (), **limits: Any) -> dict[str, Flag]:
    """The metadata of a field settable from the command line: its group, help and spelling."""
    return {"flag": Flag(group, help, names, **limits)}


MODEL_HELP = ("Hugging Face style model directory (config.json, *.safetensors, tokenizer.json), or a GGUF file "
              "(FILE.gguf: llama, qwen2, qwen3, gemma3; F32/F16/BF16, Q8_0/Q4_0/Q4_1/Q5_0/Q5_1 and Q2_K-Q6_K tensors, "
              "dequantized at load); default: the built-in reference model.")
PROFILE_HELP = "Profile YAML to read and update (default: profiles/<device>.yaml)."
DEVICE_HELP = ("Device to use, e.g. cpu, cuda:1, xpu:0, mps; several as a list (emu:0,emu:1 or cuda:0,cpu) or a "
               "family name for all its devices, placed by the planner from each device's profile (default: "
               "BRINGUP_DEVICE, then the profile's device, then automatic).")
DTYPE_HELP = ("Model dtype: auto (the plan's choice from the profile) or float32, bfloat16, float16. A dtype the "
              "profile says does not run correctly here is refused unless --force.")
QUANTIZATION_HELP = (
    "Linear weights: none (the plan dtype's), int8 (a scale per block of 32, GGUF Q8_0's values), int4 (a scale and "
    "a minimum per group of 32, Q4_1's; int4_g64 / int4_g128: per group of 64 / 128); all quantize the activations "
    "per block of 32 as llama.cpp does; fp8 (weight-only float8_e4m3fn, a scale per output channel), or auto (the "
    "plan quantizes only where the kernel checked out here, decode measured faster on this model and the KL "
    "divergence stayed under its budget). These are the host's kernels; on an accelerator int8, int4 and fp8 run "
    "torch's _weight_int8pack_mm / _weight_int4pack_mm / _scaled_mm where the probe's record verified them there "
    "(else refused, quoting it). A "
    "compressed-tensors checkpoint is served in its own scheme.")
GRAPHS_HELP = ("Decode steps from captured graphs: auto (captured per batch-size bucket only where verify-ops passed "
               "eager against replay, the runner's own replay check passes and replay measures faster on this "
               "model) or off (every step eager).")
FORCE_HELP = ("Run a --dtype the profile marks broken, and load weights with non-finite values (NaN/Inf; each such "
              "tensor is logged).")
CPU_FALLBACK_HELP = "If the device cannot run the model, run on the CPU instead of refusing (a global fallback)."
MAX_NUM_SEQS_HELP = "Cap on sequences per batch (default: the plan's)."
PREFILL_CHUNK_HELP = ("Prompt tokens a step may carry while other sequences decode: auto (the largest prefill step "
                      "measured within 1x a decode step, so running streams' inter-token gaps at most double), off "
                      "(prompts run whole: the fastest prefill, the longest stalls) or a number of tokens.")
MAX_MODEL_LEN_HELP = ("Cap on prompt + generated tokens: the context the plan is made for (default: the model's, "
                      "capped at 4096).")
PREFIX_CACHING_HELP = ("Keep full KV blocks and reuse them for a later prompt that starts with the same tokens "
                       "(keyed by the weights, dtype, quantization and KV layout too); --no-prefix-caching computes "
                       "every prompt from scratch.")
DEVICE_MEMORY_HELP = ("Cap a device's memory for this run, DEVICE=SIZE[,DEVICE=SIZE...] (e.g. emu:1=2GiB): the "
                      "placement plans under it and the device's KV cache is sized under it (rehearse a split on a "
                      "large device).")
LAYER_SPLIT_HELP = ("Split the layers in these proportions, in the order of --device (as llama.cpp's -ts), in place "
                    "of the planned split: P1,P2,... (for experts and benchmarks).")
PLACEMENT_HELP = ("How the model is placed on the devices --device names: auto (the planner's choice from their "
                  "profiles), single, split (the layers across them) or replicas (one engine per device, requests "
                  "routed by predicted completion); for benchmarks and experts.")
CHAT_TEMPLATE_HELP = (
    "A Jinja chat template to render chats with, in place of the model's (a GGUF file or a directory without one "
    "gets bringup's plain 'role: content' fallback, recorded as a fallback). It sees messages, "
    "add_generation_prompt, tools and the special tokens, as transformers' templates do.")


@dataclass
class EngineOptions:
    model_dir: Path | None = field(default=None, metadata=flag(MODEL, MODEL_HELP, ("--model", "-m")))
    profile_path: Path | None = field(default=None, metadata=flag(TARGET, PROFILE_HELP, ("--profile", "-p")))
    device: str | None = field(default=None, metadata=flag(TARGET, DEVICE_HELP, ("--device", "-d")))
    strict: bool = field(default=False, metadata=flag(TARGET, "Treat any fallback as an error.", ("--strict",)))
    allow_cpu_fallback: bool = field(default=False, metadata=flag(CPU_FALLBACK, CPU_FALLBACK_HELP))
    max_num_seqs: int | None = field(default=None, metadata=flag(BATCH, MAX_NUM_SEQS_HELP, min=1))
    prefill_chunk: str = field(default="auto", metadata=flag(BATCH, PREFILL_CHUNK_HELP, ("--prefill-chunk",),
                                                             metavar="auto|off|N"))
    max_model_len: int | None = field(default=None, metadata=flag(CONTEXT, MAX_MODEL_LEN_HELP, min=1))
    prefix_caching: bool = field(default=True, metadata=flag(BATCH, PREFIX_CACHING_HELP,
                                                             ("--prefix-caching/--no-prefix-caching",)))
    weight_layout: str | None = None  # "in_out" | "out_in" to override the measured choice (benchmarks)
    measurements: StartupMeasurements | None = None  # given as data (tests, replays) instead of timed here
    dtype: str = field(default="auto", metadata=flag(MODEL, DTYPE_HELP))  # "auto" (or None): the plan's choice
    quantization: str = field(default="none", metadata=flag(MODEL, QUANTIZATION_HELP))  # quantize/scheme.py
    force: bool = field(default=False, metadata=flag(MODEL, FORCE_HELP, ("--force",)))
    graphs: str = field(default="auto", metadata=flag(MODEL, GRAPHS_HELP, ("--graphs",), metavar="auto|off"))
    use_record: bool = True  # replay the plan `bringup tune` recorded for this model, if any (tune itself: False)
    on_measured: Callable[[StartupMeasurements], None] | None = None  # given what start-up timed (tune collects it)
    device_memory: str | None = field(default=None, metadata=flag(TARGET, DEVICE_MEMORY_HELP, metavar="DEV=SIZE"))
    layer_split: str | None = field(default=None, metadata=flag(TARGET, LAYER_SPLIT_HELP, metavar="P1,P2"))
    placement: str = field(default="auto", metadata=flag(TARGET, PLACEMENT_HELP, metavar="MODE"))
    chat_template: Path | None = field(default=None, metadata=flag(CHAT, CHAT_TEMPLATE_HELP, ("--chat-template",),
                                                                    metavar="FILE"))


def batch_one_options(device: str, profile_path: Path | None, model_dir: Path | None, max_model_len: int,
                      dtype: str | None = None) -> EngineOptions:
    """One sequence at a time with room for `max_model_len` tokens: how the timed runs (throughput.py,
    serving_latency.py) start an engine."""
    return EngineOptions(model_dir=model_dir, profile_path=profile_path, device=device, max_num_seqs=1,
                         max_model_len=max_model_len, dtype=dtype or "auto")
