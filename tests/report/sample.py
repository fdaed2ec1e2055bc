"""A synthetic profile holding every section, with failing cases and hostile strings, for the report tests."""

from __future__ import annotations

from pathlib import Path

from bringup.profiles.schema import (
    Capabilities,
    Capability,
    DeviceSection,
    EnvironmentSection,
    Profile,
    StageStamp,
)
from bringup.profiles.sections.bench import (
    BenchGroup,
    BenchRecord,
    BenchSection,
    DatasheetRef,
    HarnessSettingsModel,
    MeasuredCeilings,
)
from bringup.profiles.sections.collectives import CollectiveCaseRecord, CollectiveFault, CollectivesSection
from bringup.profiles.sections.ops import CompiledRecord, OpCaseRecord
from bringup.profiles.sections.selftest import SelftestSection
from bringup.profiles.store import render_yaml

HOSTILE = '<script>alert("pwned")</script>'
HOSTILE_MESSAGE = "<img src=x onerror=alert(1)> RuntimeError: bad | *bold* `tick` [link](http://evil.example)"
REFERENCE_PROFILES = Path(__file__).resolve().parents[2] / "reference" / "profiles"

SETTINGS = HarnessSettingsModel(warmup=1, min_reps=3, max_reps=50, rel_iqr_threshold=0.05, budget_s=0.15,
                                min_rep_s=0.002, flush_cache=False)


def matmul(dtype: str, size: int, seconds: float) -> BenchRecord:
    flops, moved = 2.0 * size**3, 3.0 * size * size * 2
    return BenchRecord(key=f"{dtype} square {size}", name="matmul", dtype=dtype, params={"m": size}, median_s=seconds,
                       iqr_s=seconds * 0.01, min_s=seconds * 0.98, reps=5, flops=flops, bytes=moved,
                       tflops=flops / seconds / 1e12, gbps=moved / seconds / 1e9, intensity=flops / moved)


def bench_section() -> BenchSection:
    triad = BenchRecord(key="triad float32", name="triad", dtype="float32", median_s=0.01, iqr_s=0.0001, min_s=0.0099,
                        reps=3, flops=2e8, bytes=1.2e9, tflops=0.02, gbps=120.0, intensity=1 / 6)
    copy = BenchRecord(key="copy float32", name="copy", dtype="float32", median_s=0.01, iqr_s=0.0001, reps=3,
                       bytes=1e9, gbps=100.0)
    groups = {
        "matmul": BenchGroup(settings=SETTINGS, records=[
            matmul("float32", 512, 0.002), matmul("bfloat16", 512, 0.0005), matmul("bfloat16", 1024, 0.003),
            BenchRecord(key=f"weird {HOSTILE}", name="matmul", dtype="int8", status="skipped", reason=HOSTILE)]),
        "bandwidth": BenchGroup(settings=SETTINGS, records=[copy, triad]),
        "dispatch": BenchGroup(records=[BenchRecord(key="tiny_op", name="tiny_op", median_s=2e-6, iqr_s=1e-8)]),
        "e2e": BenchGroup(records=[BenchRecord(
            key="decode_b1", name="decode", dtype="bfloat16", median_s=1e-3, min_s=1e-3, reps=1,
            params={"tokens_per_s": 1000.0, "plan": {"dtype": "bfloat16", "compiled": "eager"},
                    "fallbacks": {"op": 1, "path": 0, "global": 0}})]),
        "transfer": BenchGroup(status="not_applicable", reason="same memory", records=[
            BenchRecord(key="h2d pinned", name="h2d", status="not_applicable", reason="same memory")]),
    }
    ceilings = MeasuredCeilings(tflops={"float32": 0.27, "bfloat16": 0.72}, gbps=120.0, gbps_kernel="triad")
    sheet = DatasheetRef(id="x", name="Example Accelerator", source="vendor sheet", memory_bandwidth_gbps=400.0,
                         dense_tflops={"float32": 2.0, "bfloat16": 8.0, "tf32": 4.0})
    return BenchSection(groups=groups, ceilings=ceilings, datasheet=sheet)


def ops_records(failing: int = 2) -> list[OpCaseRecord]:
    records = [OpCaseRecord(op="softmax", dtype=d, case="[4,128]", status="pass", max_abs=1e-6, max_rel=1e-5)
               for d in ("float32", "bfloat16")]
    records += [OpCaseRecord(op="matmul", dtype="float32", case="[8,8]x[8,8]", status="pass")]
    records += [OpCaseRecord(op="rms_norm", dtype="bfloat16", case=f"shape=[{i},4096]", status="fail",
                             max_abs=0.5, max_rel=0.25, nmse=0.01, worst_index=[i, 17], worst_output=0,
                             rtol=0.016, atol=1e-5, seconds=0.01, message=HOSTILE_MESSAGE)
                for i in range(failing)]
    records.append(OpCaseRecord(op="float8_mm", dtype="float8_e4m3fn", case="[4,4]", status="unsupported",
                                message="not implemented"))
    return records


def compiled_records() -> list[CompiledRecord]:
    return [
        CompiledRecord(target="rms_norm_linear", dtype="float32", backend="inductor", status="pass", eager_err=1e-7,
                       compiled_err=1e-7, allowed=1e-5, speedup=1.2),
        CompiledRecord(target="decoder_layer", dtype="bfloat16", backend="inductor", status="mismatch",
                       eager_err=1e-3, compiled_err=0.2, allowed=3e-3, failing_backend="aot_eager_decomp_partition",
                       ladder={"eager": "pass", "aot_eager": "pass", "aot_eager_decomp_partition": "mismatch"},
                       message=HOSTILE),
    ]


def capabilities() -> Capabilities:
    return Capabilities(
        dtypes={"float32": Capability(status="supported", evidence="matmul vs fp64 ok"),
                "bfloat16": Capability(status="supported", evidence="matmul vs fp64 ok"),
                "float8_e4m3fn": Capability(status="unsupported", reason=HOSTILE)},
        attention={"sdpa_math": Capability(status="supported", evidence="ok",
                                           details={"dtypes": {"float32": "pass", "bfloat16": "pass"}})},
        compile={"inductor": Capability(status="supported", evidence="compiled fullgraph")},
        features={"graphs": Capability(status="unknown", reason="not probed")},
    )


def full_profile(failing: int = 2) -> Profile:
    stamp = StageStamp(started="2026-01-01T00:00:00+00:00", finished="2026-01-01T00:01:00+00:00", bringup="0.1.0",
                       status="complete")
    return Profile(
        device=DeviceSection(id="cpu", backend="cpu", name=f"Evil {HOSTILE} CPU", vendor="Acme", arch="x86_64",
                             memory_total_bytes=2**34),
        environment=EnvironmentSection(bringup="0.1.0", torch="2.5.0", python="3.11", os="Linux",
                                       env={"CUDA_VISIBLE_DEVICES": HOSTILE}),
        capabilities=capabilities(),
        ops=ops_records(failing),
        compiled=compiled_records(),
        bench=bench_section(),
        selftest=SelftestSection(status="pass", model="builtin", device="cpu", dtype="bfloat16", attention="sdpa_math",
                                 weight_layout="out_in", prompt_tokens=8, steps=4, max_abs_err=0.01,
                                 reference_rms=1.0, threshold=0.1, top1_agreement=1.0, fallbacks={"op": 0}),
        collectives=CollectivesSection(
            status="fail", world_size=2, launch="fork", backend="gloo", backend_reason="cpu", device_type="cpu",
            timeout_s=30, seconds=2.0, cases=[CollectiveCaseRecord(op="all_reduce_sum", dtype="float32",
                                                                   size_bytes=4096, count=1024, status="fail",
                                                                   wrong=3, ranks=2, busbw_gbps=1.5)],
            faults=[CollectiveFault(rank=1, kind="hung", detail=HOSTILE)]),
        stages={"devices": stamp, "bench": stamp},
    )


def write_profile(path: Path, profile: Profile) -> Path:
    path.write_text(render_yaml(profile), encoding="utf-8")
    return path
