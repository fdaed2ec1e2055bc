"""Profiles with injected evidence for the export tests: `verified(...)` holds every piece of evidence an exported
flag can read, each test takes one away or makes it negative, and `tuned(...)` is a plan as `bringup tune` records
one. Models are files of the test's own: a config.json directory, a .gguf of a few bytes."""

from __future__ import annotations

import json
from pathlib import Path

from bringup.profiles.hot_path import DECODER_OPS
from bringup.profiles.schema import Capabilities, Capability, DeviceSection, EnvironmentSection, Profile
from bringup.profiles.sections.collectives import CollectivesSection
from bringup.profiles.sections.models import ModelPlanRecord, RecordedChoice
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord

FLOATS = ("float32", "bfloat16", "float16")
FP8 = ("float8_e4m3fn", "float8_e5m2")
GB = 10**9
NO_FP8_UNITS = "a CPU has no FP8 arithmetic units; FP8 is a storage format here"


def supported(evidence: str = "checked here", **details) -> Capability:
    return Capability(status="supported", evidence=evidence, details=details)


def unsupported(reason: str = "refused here", **details) -> Capability:
    return Capability(status="unsupported", reason=reason, details=details)


def host_device(logical: int = 4, physical: int = 4, usable: int = 4) -> DeviceSection:
    return DeviceSection(id="cpu", backend="cpu", name="Test CPU", extra={
        "logical_cores": logical, "physical_cores": physical, "usable_cores": usable, "torch_threads": usable})


def accelerator_device() -> DeviceSection:
    return DeviceSection(id="accel:0", backend="accel", name="Test accelerator")


def op_cases() -> list[OpCaseRecord]:
    cases = [OpCaseRecord(op=op, dtype=dtype, case="[4,8]", status="pass") for op in sorted(DECODER_OPS)
             for dtype in FLOATS]
    for fp8 in FP8:
        cases += [OpCaseRecord(op="cast", dtype=fp8, case="[64,129] to=float32", status="pass"),
                  OpCaseRecord(op="cast", dtype="float32", case=f"[64,129] to={fp8}", status="pass")]
    return cases


def compiled_records() -> list[CompiledRecord]:
    return [CompiledRecord(target=target, dtype=dtype, backend="inductor", status="pass", eager_err=1e-3,
                           compiled_err=1e-3, allowed=3e-3)
            for target in ("rms_norm_linear", "llama_decoder_layer") for dtype in FLOATS]


def verified(host: bool = True, free: int = 60 * GB, total: int = 64 * GB) -> Profile:
    """Every check an export reads passed (graph capture not applicable on the host, as its backend declares)."""
    attention = {name: supported("causal GQA", dtypes={d: "pass" for d in FLOATS})
                 for name in ("sdpa_math", "sdpa_flash")}
    features = {"int8_weight_only_matmul": supported("int8 kernel"), "int4_weight_only_matmul": supported("int4"),
                "fp8_scaled_mm": supported("fp8 kernel")}
    not_applicable = {}
    if host:
        not_applicable = {"features.graphs": "a CPU has no graph-capture API",
                          **{f"dtypes.{fp8}": NO_FP8_UNITS for fp8 in FP8}}
    else:
        features["graphs"] = supported("captured and replayed")
    capabilities = Capabilities(
        dtypes={**{d: supported() for d in FLOATS}, **{fp8: unsupported("no fp8 addmm") for fp8 in FP8}},
        memory={"free": supported(bytes=free), "total": supported(bytes=total)},
        attention=attention, compile={"inductor": supported("sample compiled")}, features=features,
        not_applicable=not_applicable)
    environment = EnvironmentSection(bringup="0.1.0", torch="2.13.0", python="3.11", os="Linux",
                                     cpu={"cores": "16 logical, 8 physical, 16 usable"})
    return Profile(device=host_device() if host else accelerator_device(), environment=environment,
                   capabilities=capabilities, ops=op_cases(), compiled=compiled_records())


def tuned(source: str, dtype: str = "bfloat16", quantization: str = "none", seqs: int = 8, length: int = 1024,
          step: int = 2048, kv: int = 512, at: str = "2026-12-01T00:00:00+00:00", model: str = "m",
          device: str = "cpu") -> ModelPlanRecord:
    """A plan as tune records it: each setting's value as data, with the text the plan table shows; `kv` blocks of
    16 tokens."""
    plan = {"dtype": (dtype, dtype), "quantization": (quantization, quantization),
            "max_model_len": (length, str(length)), "max_num_seqs": (seqs, str(seqs)),
            "max_num_batched_tokens": (step, str(step)), "kv_blocks": (kv, f"{kv} × 16 tokens"),
            "compiled": (None, "eager")}
    return ModelPlanRecord(model=model, source=source, model_sha256="ab" * 32, device=device, dtype=dtype,
                           quantization=quantization, tuned=at, bringup="0.1.0", runs=2, plan_format=2, block_size=16,
                           plan={k: RecordedChoice(value=v, evidence=f"measured {k}", shown=text)
                                 for k, (v, text) in plan.items()},
                           layout_times={1: {"out_in": 1e-4}}, layout_stream_bytes=1, paged_decode=False,
                           paged_decode_evidence="not timed")


def tuned_as_text(source: str, **settings) -> ModelPlanRecord:
    """The same plan as a tune from before plan values were data wrote it: each value the text the table shows, no
    plan_format (1) and no block size."""
    record = tuned(source, **settings)
    return record.model_copy(update={
        "plan_format": 1, "block_size": None,
        "plan": {k: RecordedChoice(value=c.shown, evidence=c.evidence) for k, c in record.plan.items()}})


def with_plan(profile: Profile, record: ModelPlanRecord, key: str = "m [abababab]") -> Profile:
    return profile.model_copy(update={"models": {**(profile.models or {}), key: record}})


def model_dir(root: Path, heads: int = 8, kv_heads: int = 2, layers: int = 4, hidden: int = 512) -> Path:
    """A model directory with the config.json fields an export reads (head_dim = hidden / heads)."""
    folder = root / f"model-{heads}h"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps({
        "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": kv_heads,
        "hidden_size": hidden}))
    return folder


def gguf_file(root: Path, size: int = 4096) -> Path:
    path = root / "m.gguf"
    path.write_bytes(b"GGUF" + bytes(size - 4))
    return path


def collectives(status: str = "pass", devices: int = 4, data_path: str = "device", device_type: str = "accel"
                ) -> CollectivesSection:
    return CollectivesSection(status=status, world_size=devices, launch="spawn", backend="vendorccl",
                              backend_reason="the device's collective library", device_type=device_type,
                              data_path=data_path, rank_devices=[f"accel:{i}" for i in range(devices)], timeout_s=60,
                              seconds=3.0)
