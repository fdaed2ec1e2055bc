"""llama.cpp's `llama-server` flags from a profile's evidence, spelled as the llama.cpp vendored in llama-cpp-python
0.3.36 spells them (its built llama-server's --help: version 0.5.0-dev, commit 0c1e570)."""

from __future__ import annotations

import os

from bringup.export.config import Note, Omitted, Setting
from bringup.export.engine_spec import EngineSpec, ExportInputs, Item
from bringup.export.evidence import (
    MEMORY_MARGIN,
    device_memory,
    dtype_verified,
    fused_attention,
    host_cores,
    is_host,
    quantized_kernel,
)
from bringup.export.graph_modes import llama_cpp_graphs

VERSION = "llama.cpp vendored in llama-cpp-python 0.3.36 (llama-server 0.5.0-dev, commit 0c1e570)"
GGML_TYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}  # -ctk/-ctv's names for the float types
GGUF_FLOATS = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}
GGUF_BLOCKS = {"int8": ("Q8_0",), "int4": ("Q4_0", "Q4_1")}  # the 32-element block types whose math the kernels share
K_QUANTS = "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K"
FIT = "llama-server's --fit (on by default) places the layers that fit"


def threads(x: ExportInputs) -> Item:
    cores = host_cores(x.profile)
    if cores.value is None:
        return Omitted("flag", "-t", f"{cores.reason}: llama-server picks a thread count itself", cores.evidence,
                       cores.to_get)
    c = cores.value
    count = min(c.usable, c.physical)
    per_core = ", one per physical core" if c.physical < c.usable else ""
    where = "" if is_host(x.profile) else " (the host's CPU runs what is not offloaded)"
    return Setting("flag", "-t", str(count), f"{count} thread(s): the host's usable cores{per_core}{where}",
                   cores.evidence)


def gpu_layers(x: ExportInputs) -> Item:
    host = is_host(x.profile)
    if host is None:
        return Omitted("flag", "-ngl", "the profile has no device section", (), "run `bringup devices`")
    if host:
        return Setting("flag", "-ngl", "0", "the device is the host: the weights already are in host memory, so "
                       "there is nothing to offload", (f"device.backend: {x.profile.device.backend}",))
    device = x.profile.device.id
    if x.plan is not None and x.plan.record.device == device:
        tokens = x.plan.kv_tokens()
        kv = f" and a KV cache of {tokens} tokens" if tokens else ""
        return Setting("flag", "-ngl", "all", f"{x.plan.about()} ran every layer of this file on {device}, its weights "
                       f"dequantized to {x.plan.dtype} (larger than the file's blocks){kv}, in {MEMORY_MARGIN} of the "
                       "memory left after them", (x.plan.line("kv_blocks"),))
    if not x.model.given:
        return Omitted("flag", "-ngl", f"no model file to size against the device's memory: {FIT}", (),
                       x.tune_hint())
    memory = device_memory(x.profile)
    if memory.value is None:
        return Omitted("flag", "-ngl", f"{memory.reason}: {FIT}", memory.evidence, memory.to_get)
    free, _ = memory.value
    try:
        size = os.stat(x.model.path).st_size
    except OSError as exc:
        return Omitted("flag", "-ngl", f"the model file cannot be sized ({exc.strerror}): {FIT}", memory.evidence)
    said = (*memory.evidence, f"{x.model.path}: {size} bytes")
    if size > MEMORY_MARGIN * free:
        return Omitted("flag", "-ngl", f"the file's {size / 1e9:.2f} GB do not fit in {MEMORY_MARGIN} of the "
                       f"{free / 1e9:.1f} GB free: {FIT}", said, x.tune_hint())
    return Setting("flag", "-ngl", "all", f"the file's {size / 1e9:.2f} GB fit in {MEMORY_MARGIN} of the "
                   f"{free / 1e9:.1f} GB free at probe time; llama-server's --fit (on by default) shrinks an unset "
                   "context to the memory left", said)


def flash_attention(x: ExportInputs) -> Item:
    dtype = x.dtype.value
    if dtype is None:
        return Omitted("flag", "-fa", f"no verified dtype to check attention at ({x.dtype.reason}); llama-server "
                       "decides (auto)", x.dtype.evidence, x.dtype.to_get)
    fact = fused_attention(x.profile, dtype)
    if fact.value is None:
        return Omitted("flag", "-fa", f"{fact.reason}; llama-server decides (auto)", fact.evidence, fact.to_get)
    return Setting("flag", "-fa", "on", f"{fact.reason}: llama.cpp's flash attention is the same fused, "
                   "online-softmax attention, in ggml's own kernels", fact.evidence)


def kv_types(x: ExportInputs) -> list[Item]:
    dtype = x.dtype.value
    names = ("-ctk", "-ctv")
    if dtype is None:
        return [Omitted("flag", name, f"{x.dtype.reason}; llama-server keeps its default (f16)", x.dtype.evidence,
                        x.dtype.to_get) for name in names]
    chosen = "the dtype the tuned plan served" if x.plan is not None and x.plan.dtype == dtype else (
        "the dtype the bundled runner chooses from this profile")
    return [Setting("flag", name, GGML_TYPES[dtype], f"the KV cache in {dtype}, {chosen}, verified here",
                    x.dtype.evidence) for name in names]


def plan_sizes(x: ExportInputs) -> list[Item]:
    """-c, -np, -b and -ub from the tuned plan: context per slot, slots, and tokens per step."""
    names = ("-c", "-np", "-b", "-ub")
    if x.plan is None:
        return [Omitted("flag", name, "no tuned plan: llama-server takes its defaults (the model's trained context, "
                        "slots and batches of its own)", (), x.tune_hint()) for name in names]
    plan = x.plan
    seqs, length = plan.number("max_num_seqs"), plan.number("max_model_len")
    step = plan.number("max_num_batched_tokens")
    found: list[Item] = []
    if seqs and length:
        want, tokens = seqs * length, plan.kv_tokens()
        context = min(want, tokens) if tokens else want
        capped = f", capped at the {tokens} tokens its KV cache holds" if context < want else ""
        found.append(Setting("flag", "-c", str(context), f"{seqs} slots × {length} tokens (max_num_seqs × "
                             f"max_model_len of {plan.about()}){capped}: llama-server divides -c among the -np slots",
                             (plan.line("max_num_seqs"), plan.line("max_model_len"), plan.line("kv_blocks"))))
    else:
        found.append(Omitted("flag", "-c", plan.holds_no("max_num_seqs or max_model_len"),
                             (plan.line("max_num_seqs"), plan.line("max_model_len")), x.tune_hint()))
    if seqs:
        found.append(Setting("flag", "-np", str(seqs), f"the batch limit of {plan.about()}: one slot per sequence",
                             (plan.line("max_num_seqs"),)))
    else:
        found.append(Omitted("flag", "-np", plan.holds_no("max_num_seqs"), (plan.line("max_num_seqs"),)))
    for name, what in (("-b", "logical"), ("-ub", "physical")):
        if step:
            found.append(Setting("flag", name, str(step), f"the {what} batch: {step} tokens per step "
                                 f"(max_num_batched_tokens of {plan.about()}, whose activations its memory sizing "
                                 "counted)", (plan.line("max_num_batched_tokens"),)))
        else:
            found.append(Omitted("flag", name, plan.holds_no("max_num_batched_tokens"),
                                 (plan.line("max_num_batched_tokens"),)))
    return found


def gguf_types(x: ExportInputs) -> Note:
    """Which GGUF weight types have verified kernels here: the floats from the dtype checks, Q8_0 and Q4_0/Q4_1 from
    the int8 and int4 matmul checks; K-quants have no check in bringup."""
    verified, unverified, evidence = [], [], []
    to_get = None
    for dtype, name in GGUF_FLOATS.items():
        ok, lines = dtype_verified(x.profile, dtype)
        (verified if ok else unverified).append(name)
        evidence.append(lines[0])
    blocks = []
    for scheme, types in GGUF_BLOCKS.items():
        fact = quantized_kernel(x.profile, scheme)
        evidence.extend(fact.evidence)
        if fact.value is True:
            verified.append(f"{', '.join(types)} ({scheme} matmul: {fact.reason})")
            blocks.append("/".join(types))
        else:
            unverified.append(f"{', '.join(types)} ({scheme} matmul: {fact.reason})")
            to_get = to_get or fact.to_get
    prefer = (f"Prefer {' or '.join(blocks)} files to K-quants" if blocks else
              "Prefer a float file of a verified type: no block-quantized type is verified")
    text = (f"GGUF weight types with kernels verified here: {', '.join(verified) or 'none'}; not verified: "
            f"{', '.join([*unverified, K_QUANTS + ' (no K-quant check in bringup)'])}. {prefer}")
    return Note("gguf_types", text, tuple(evidence), to_get)


def items(x: ExportInputs) -> list[Item]:
    return [threads(x), gpu_layers(x), flash_attention(x), *kv_types(x), *plan_sizes(x), llama_cpp_graphs(x)]


def notes(x: ExportInputs) -> list[Note]:
    return [gguf_types(x)]


ENGINE = EngineSpec(name="llama.cpp", title="llama-server", version=VERSION, command=("llama-server",),
                    model_flag="-m", loads="gguf", placeholder="MODEL.gguf", items=items, notes=notes)
