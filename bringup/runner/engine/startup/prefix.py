"""Step 13, prefix caching: the prefix_caching row, as the options ask (on unless --no-prefix-caching)."""

from __future__ import annotations

from dataclasses import replace

from bringup.runner.engine.prefix_key import KV_SETTINGS
from bringup.runner.engine.startup.context import Start
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.plan import ExecutionPlan


def prefix_caching(plan: ExecutionPlan, start: Start) -> ExecutionPlan:
    """The plan with its prefix_caching row."""
    if not start.inputs.options.prefix_caching:
        return replace(plan, prefix_caching=Choice(False, "off (--no-prefix-caching): every prompt is computed "
                                                          "from scratch"))
    return replace(plan, prefix_caching=Choice(True, (
        f"on (default): full blocks of {plan.block_size} tokens found again by the hash chain of their token ids, "
        f"rooted in the weights' file identity (name, size, the first and last MiB) and the plan's "
        f"{', '.join(KV_SETTINGS)}, block size and device; shared by "
        "reference count, least recently used evicted first; prompts that ask for prompt_logprobs compute every "
        "position")))
