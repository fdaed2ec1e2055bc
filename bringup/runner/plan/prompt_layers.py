"""The prompt_layers row from a prompt timed through the fused prompt layers and through the model's modules (plain
data: the start-up step, engine/startup/prompt.py, times them or is given them)."""

from __future__ import annotations

from dataclasses import dataclass

from bringup.runner.plan.noise import floor_noise, kept
from bringup.runner.plan.plan import FUSED, MODULES, Choice


@dataclass(frozen=True)
class PromptTimings:
    tokens: int  # the prompt's length
    kernels: list[float]  # seconds of each run through the fused prompt layers
    modules: list[float]  # seconds of each run through the modules, alternated with those


def choose_prompt_layers(timings: PromptTimings, how: str, flash: tuple[bool, str] = (False, "not tried")) -> Choice:
    """The fused prompt layers (already checked on the model) where the timings keep them over the modules (under
    MARGIN of their time, beyond the floors' noise); the modules otherwise. `how`: how the timings were taken; `flash`:
    whether the fused layers attend prompts by the flash kernel (or by the plan's attention), and its check."""
    kernels, modules = min(timings.kernels), min(timings.modules)
    noise = max(floor_noise(timings.kernels), floor_noise(timings.modules))
    runs = min(len(timings.kernels), len(timings.modules))
    timing = f"a {timings.tokens}-token prompt in {kernels * 1e3:.1f} ms against the modules' {modules * 1e3:.1f} ms " \
             f"(the fastest of {runs} run{'s' if runs > 1 else ''} each, {how}; floor noise {noise:.0%})"
    if not kept(kernels, modules, noise):
        return Choice(MODULES, f"the model's modules: fused prompt layers not faster: {timing}")
    used, check = flash
    attention = f"prompts' attention by the AMX flash kernel straight from the cache ({check}), decode rows' as " \
                "planned" if used else f"attention as planned (the prompt flash kernel not used: {check})"
    return Choice(FUSED, "norm, rotary embedding with the cache write and SiLU * up in host kernels, the products as "
                         f"planned, {attention}; matches the modules on a check; {timing}")
