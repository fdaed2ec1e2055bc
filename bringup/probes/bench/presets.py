"""The two presets: `quick` (a minute on a small CPU) and `full` (the default)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bringup.probes.bench.harness import HarnessSettings

PresetName = Literal["quick", "full"]


@dataclass(frozen=True)
class DecoderShape:
    """A decoder layer's projections (K x N of each GEMM), from a public model config."""

    model: str
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def gemms(self) -> dict[str, tuple[int, int]]:
        """name -> (K, N): fused QKV, attention output, fused gate+up, down."""
        kv = 2 * self.kv_heads * self.head_dim
        return {
            "qkv": (self.hidden, self.hidden + kv),
            "o": (self.hidden, self.hidden),
            "gate_up": (self.hidden, 2 * self.intermediate),
            "down": (self.intermediate, self.hidden),
        }


TINYLLAMA_1B = DecoderShape("TinyLlama-1.1B", hidden=2048, intermediate=5632, heads=32, kv_heads=4)
LLAMA3_8B = DecoderShape("Llama-3-8B", hidden=4096, intermediate=14336, heads=32, kv_heads=8)


@dataclass(frozen=True)
class Preset:
    name: PresetName
    settings: HarnessSettings
    square_sizes: tuple[int, ...]
    decoder: DecoderShape
    llm_m: tuple[int, ...]  # tokens per GEMM: 1 (decode) to a few thousand (prefill)
    stream_llc_multiple: int  # bandwidth arrays are this many times the last-level cache
    transfer_mib: tuple[int, ...]
    attention_seq: tuple[int, ...]
    attention_heads: int
    attention_head_dim: int
    max_call_s: float  # sizes whose estimated single call exceeds this are skipped, with the reason
    ops_limit: int | None = None  # at most this many op cases (one per op), None: every passed case
    memory_fraction: float = 0.25  # one measurement's buffers may use this share of free device memory
    quant_activations: tuple[str, ...] = ("float32",)  # activation dtypes of the weight-only quantized kernels


QUICK = Preset(
    name="quick",
    settings=HarnessSettings(warmup=1, min_reps=3, max_reps=50, rel_iqr_threshold=0.05, budget_s=0.15,
                             min_rep_s=2e-3),
    square_sizes=(256, 512, 1024),
    decoder=TINYLLAMA_1B,
    llm_m=(1, 64),
    stream_llc_multiple=4,
    transfer_mib=(1, 64),
    attention_seq=(128, 512),
    attention_heads=8,
    attention_head_dim=64,
    max_call_s=0.3,
    ops_limit=20,
)

FULL = Preset(
    name="full",
    settings=HarnessSettings(warmup=3, min_reps=7, max_reps=1000, rel_iqr_threshold=0.03, budget_s=2.0,
                             min_rep_s=5e-3),
    square_sizes=(256, 512, 1024, 2048, 4096, 8192, 16384),
    decoder=LLAMA3_8B,
    llm_m=(1, 8, 32, 128, 512, 2048, 4096),
    stream_llc_multiple=8,
    transfer_mib=(1, 16, 256),
    attention_seq=(128, 512, 1024, 2048, 4096, 8192),
    attention_heads=32,
    attention_head_dim=128,
    max_call_s=2.0,
    quant_activations=("float32", "bfloat16"),
)

PRESETS = {"quick": QUICK, "full": FULL}
