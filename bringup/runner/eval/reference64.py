"""The float64 reference: the same weights on the CPU in float64, eager, plain attention (as selftest builds it)."""

from __future__ import annotations

from pathlib import Path

from bringup.runner.engine.engine import LLMEngine
from bringup.runner.engine.executor import Executor
from bringup.runner.selftest import reference_model, reference_plan


def reference_executor(engine: LLMEngine, model_dir: Path | None, ctx: int) -> tuple[Executor, list[int]]:
    """An executor over the float64 CPU model with a KV cache for one window, and that window's block table."""
    model = reference_model(engine, model_dir)
    size = engine.plan.block_size
    blocks = -(-ctx // size)
    model.allocate_kv_cache(blocks, size)
    return Executor(model, reference_plan(engine), engine.fallbacks), list(range(blocks))
