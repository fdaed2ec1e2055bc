"""The start-up pipeline runs its steps in the order docs/runner.md writes down, and every step hands on a plan."""

import re
from pathlib import Path

from bringup.runner.engine.engine import EngineOptions, LLMEngine
from bringup.runner.engine.startup import pipeline
from bringup.runner.engine.startup.context import Start
from bringup.runner.plan.plan import ExecutionPlan

DOC = Path(__file__).resolve().parents[2] / "docs" / "runner.md"


def documented_steps() -> list[str]:
    section = DOC.read_text().split("## The start-up pipeline", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| \d+ \| `(\w+)` \(`\w+\.py`\)", section, flags=re.MULTILINE)


def test_the_docs_list_the_steps_in_the_order_they_run():
    assert documented_steps() == ["derive", *(step.__name__ for step in pipeline.STEPS)]


def test_each_step_hands_on_a_plan_and_the_engine_serves_the_last(monkeypatch):
    seen: list[tuple[str, ExecutionPlan]] = []

    def watched(step):
        def run(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
            new = step(plan, start)
            seen.append((step.__name__, new))
            return new
        return run

    monkeypatch.setattr(pipeline, "STEPS", tuple(watched(step) for step in pipeline.STEPS))
    engine = LLMEngine.create(EngineOptions(max_num_seqs=2, max_model_len=64, use_record=False))
    assert [name for name, _ in seen] == documented_steps()[1:]
    assert all(isinstance(plan, ExecutionPlan) for _, plan in seen)
    assert engine.plan is seen[-1][1] and engine.executor.plan is engine.plan
    assert engine.plan.kv_blocks.value > 0 and engine.plan.decode_layers.value is not None
