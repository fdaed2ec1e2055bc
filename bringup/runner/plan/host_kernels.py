"""Every choice of a host kernel (runner/host/ holds the kernels and their checks; this module decides).

Three kernels are candidates, each used only where it ran here, matched the plain path on a check and measured
faster (under MARGIN of the plain path's time): the panels linear kernel (one of the weight layouts the start-up
timing compares, plan/layout.py), the paged decode attention (first in the attention list, decode steps only)
and the fused decode layers (every layer of a decode step in one call). Each function returns the plan's
`Choice` with its evidence; the confirmation on the served model (confirm.py) may take a kernel back out.
"""

from __future__ import annotations

import functools

import torch

from bringup.backends.host import is_host
from bringup.profiles.attention_kinds import PAGED_DECODE
from bringup.runner.host import decode_layers, flash_prompt, paged_decode
from bringup.runner.host.kernel_check import KernelCheck
from bringup.runner.model.config import ModelConfig
from bringup.runner.model.decoder import DecoderModel, WeightLayout
from bringup.runner.plan.attention_timings import ERROR_FACTOR, ERROR_SLACK
from bringup.runner.plan.layout import STREAM_BYTES, LayoutTimings, linear_weight_bytes
from bringup.runner.plan.noise import kept
from bringup.runner.plan.plan import FUSED, MARGIN, MODULES, Choice
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.weights.kernels import panels as panel_kernel
from bringup.runner.weights.kernels.build import HostKernelInputError, KernelUnavailable
from bringup.runner.weights.kinds import IN_OUT, OUT_IN, PLAIN_KINDS

# the confirmation's names for the host-kernel candidates it times on the served model
PAGED, LAYOUT, FUSED_LAYERS = PAGED_DECODE, "weight_layout", "fused"


# ------------------------------------------------------------------------------------ panels (a weight layout)
def panels_why_not(device: torch.device, dtype: torch.dtype, config: ModelConfig) -> str | None:
    """None when the panels kernel can store every linear layer of this model and runs here; otherwise why not."""
    c = config  # the head may have any width: it is padded with zero columns and the logits cut back
    outs = {(c.num_heads + 2 * c.num_kv_heads) * c.head_dim, c.hidden_size, 2 * c.intermediate_size}
    if c.moe is not None:
        outs.add(2 * c.moe.expert_intermediate_size)
    odd = sorted(o for o in outs if o % panel_kernel.PANEL)
    if odd:
        return f"layer output sizes {odd} are not multiples of {panel_kernel.PANEL}"
    return panel_kernel.check(device, dtype)


def choose_layout(facts: ProfileFacts, timings: LayoutTimings, dtype: torch.dtype, config: ModelConfig,
                  free_bytes: int | None) -> tuple[WeightLayout, Choice]:
    """The kind for one-row steps and the kind for larger steps, from the timings (and bench's one-row ratio)."""
    name = str(dtype).removeprefix("torch.")
    k, n, times = config.hidden_size, 2 * config.intermediate_size, timings.times
    notes = [f"seconds per 1x{k}x{n} {name} product, weights cycled through {timings.stream_bytes / 2**20:.0f} "
             f"MiB (the model's linear weights, at most {STREAM_BYTES / 2**20:.0f} MiB), by rows: "
             + ", ".join(f"{m}:" + "/".join(f"{kind} {t * 1e6:.0f}us" for kind, t in row.items())
                         for m, row in times.items())]
    notes += [f"{kind} not tried: {why}" for kind, why in timings.skipped.items()]
    one = {kind: times[1][kind] for kind in PLAIN_KINDS}  # one row: x@W or F.linear (bench compares these two)
    bench = facts.linear_vs_matmul_speedup(name)
    if bench is not None:
        one[IN_OUT] = one[OUT_IN] * bench[0]  # bench's speed-up of F.linear over x@W is the same time ratio
        notes.append(f"1 row from bench: {bench[0]:.2f} (median of {bench[1]} decode GEMMs)")
    spread = timings.spreads
    if spread:
        notes.append("spread across tune's runs by rows: " + ", ".join(
            f"{m}:" + "/".join(f"{kind} {x:.0%}" for kind, x in row.items()) for m, row in spread.items()))
    plain = _winner(one, OUT_IN, spread.get(1, {}))
    notes.append(f"plain winner at 1 row: {plain}")
    extras = [kind for kind in times[1] if kind not in PLAIN_KINDS]  # timed only here, so judged on these timings
    small = _winner({plain: times[1][plain], **{kind: times[1][kind] for kind in extras}}, plain, spread.get(1, {}))
    if small != plain:
        notes.append(f"{small} beats {plain} at 1 row ({times[1][small] * 1e6:.0f}us vs {times[1][plain] * 1e6:.0f}us)")
    switch, large = 1, small
    for m in list(times)[1:]:
        if _winner(times[m], small, spread.get(m, {})) != small:
            break
        switch = m
    above = [_winner(times[m], small, spread.get(m, {})) for m in times if m > switch]
    if above:
        large = max(set(above), key=above.count)
    if large != small:
        extra = linear_weight_bytes(config, dtype)
        if free_bytes is None or free_bytes < 4 * extra:
            notes.append(f"a second copy ({extra / 2**20:.0f} MiB) does not fit comfortably; one layout")
            large = small
        else:
            notes.append(f"both copies kept (+{extra / 2**20:.0f} MiB)")
    layout = WeightLayout(small, large, switch if large != small else 0)
    return layout, Choice(layout.describe(), "; ".join(notes))


def _winner(seconds: dict[str, float], incumbent: str, spread: dict[str, float] | None = None) -> str:
    """The fastest kind when it takes under MARGIN of the incumbent's time and wins beyond both kinds' spread (when
    known: tune's runs); otherwise the incumbent."""
    best = min(seconds, key=seconds.__getitem__)
    noise = max((spread or {}).get(best, 0.0), (spread or {}).get(incumbent, 0.0))
    return best if kept(seconds[best], seconds[incumbent], noise) else incumbent



# ------------------------------------------------------------------------------------ accuracy of a host kernel
BF16_UNIT = 2.0 ** -8  # bfloat16's unit roundoff: a systematic scale beyond it is no rounding's doing (DESIGN.md)


def accuracy_verdict(check: KernelCheck, cases: str) -> tuple[bool, str]:
    """A bfloat16 kernel against float64 beside the plain path: not materially less accurate (the start-up attention
    check's rule) and no systematic scale beyond bfloat16's unit roundoff (the bias test's floor); the evidence."""
    errors = f"error {check.error:.2g} vs the plain path's {check.plain_error:.2g} against float64, scale " \
             f"{check.scale_error:+.1e}, on {cases}"
    if check.error > ERROR_FACTOR * check.plain_error + ERROR_SLACK:
        return False, f"{errors}: less accurate than the plain path"
    if abs(check.scale_error) > BF16_UNIT:
        return False, f"{errors}: biased (a systematic scale beyond bfloat16's rounding)"
    return True, errors


# ------------------------------------------------------------------------------------ paged decode attention
def paged_decode_why_not(device: torch.device, dtype: torch.dtype, heads: int, kv_heads: int, head_dim: int
                         ) -> tuple[str | None, str]:
    """(None, how it matched) where the paged decode kernel runs here and is accurate: in float32 it matches the
    gather path; in bfloat16 it passes accuracy_verdict against float64. Otherwise (why not, "")."""
    if dtype == torch.bfloat16:
        if not is_host(device):
            return f"a host-memory kernel; tensors on {device} are not in host memory", ""
        try:
            used, evidence = accuracy_verdict(paged_decode.checked_bf16(heads, kv_heads, head_dim),
                                              f"{len(paged_decode.CHECK_CASES)} ragged decode steps")
        except KernelUnavailable as exc:
            return str(exc), ""
        return (None, evidence) if used else (evidence, "")
    why = paged_decode.check(device, dtype, heads, kv_heads, head_dim)
    return why, "matches matmul-softmax on a check"


@functools.lru_cache(maxsize=16)
def paged_decode_verdict(device: torch.device, dtype: torch.dtype, heads: int, kv_heads: int, head_dim: int
                         ) -> tuple[bool, str]:
    """Whether the paged decode kernel checks out here and is faster than gather + matmul-softmax, and why."""
    why, matched = paged_decode_why_not(device, dtype, heads, kv_heads, head_dim)
    if why is not None:
        return False, why
    kernel, gather = paged_decode.time_against_gather(device, heads, kv_heads, head_dim, dtype=dtype)
    timing = f"{kernel * 1e6:.0f}us vs gather + matmul-softmax {gather * 1e6:.0f}us on an 8 x 256-token decode step"
    if kernel < MARGIN * gather:
        return True, f"reads K/V in place; {matched}; {timing}"
    return False, f"not faster: {timing}"


def with_paged_decode(attention: Choice, use: bool, why: str) -> Choice:
    """The plan's attention list with paged_decode first (decode steps) when it checked out and is faster."""
    if use:
        return Choice([PAGED_DECODE, *attention.value], f"{PAGED_DECODE} for decode steps: {why}; {attention.evidence}")
    return Choice(attention.value, f"{attention.evidence}; {PAGED_DECODE} not used: {why}")


def every_step_attention(attention: list[str]) -> list[str]:
    """The attention implementations that serve every step: the plan's list without the decode-only kernel."""
    return [name for name in attention if name != PAGED_DECODE]


# ------------------------------------------------------------------------------------ prompts' flash kernel
@functools.lru_cache(maxsize=16)
def prompt_flash_verdict(dtype: torch.dtype, heads: int, kv_heads: int, head_dim: int) -> tuple[bool, str]:
    """Whether the fused prompt layers attend prompts by the AMX flash kernel (host/flash_prompt.py), and the evidence
    either way: it runs here and passes accuracy_verdict against float64. Its speed is the prompt layers' timing on
    the served model."""
    if dtype != torch.bfloat16:
        return False, f"bfloat16 only; the model runs {str(dtype).removeprefix('torch.')}"
    why = flash_prompt.declines(heads, kv_heads, head_dim)
    if why is not None:
        return False, why
    return accuracy_verdict(flash_prompt.checked(heads, kv_heads, head_dim),
                            f"{len(flash_prompt.CHECK_CASES)} prompts fresh and behind cached contexts")


# ------------------------------------------------------------------------------------ fused decode layers
def choose_decode_layers(model: DecoderModel, block_size: int, max_model_len: int, kv_blocks: int
                         ) -> tuple[decode_layers.FusedDecode | None, Choice]:
    """The draft plan's decode layers: the kernel (and its evidence) when it can compute this model, builds here
    and matches the modules on a check; the modules, and why, otherwise. Timing on the model decides later."""
    why = decode_layers.cannot_fuse(model, max_model_len)
    if why is None:
        try:
            fused = decode_layers.FusedDecode(model)
            why = decode_layers.check_on_model(fused, block_size, max_model_len, kv_blocks)
        except (KernelUnavailable, HostKernelInputError) as exc:
            why = str(exc)
        if why is None:
            pages = "huge pages advised" if fused.huge_pages else "huge pages not available here (madvise refused)"
            return fused, Choice(FUSED, "every layer of a decode step in one host-kernel call; matches the modules on "
                                        f"a ragged three-sequence check; its {fused.kind} weights in one block, "
                                        f"{pages}")
    return None, Choice(MODULES, f"the model's modules: fused decode layers not used: {why}")


def decode_layers_not_tried() -> Choice:
    return Choice(MODULES, "the model's modules: fused decode layers not tried (given as data)")


# ------------------------------------------------------------------------------------ after timing on the model
def not_confirmed(name: str, choice: Choice, verdict: str) -> Choice:
    """The plain path instead of the host-kernel candidate `name` that did not beat it on the served model."""
    if name == PAGED:
        return Choice(every_step_attention(choice.value), f"{PAGED} {verdict}; {choice.evidence}")
    if name == FUSED_LAYERS:
        return Choice(MODULES, f"the model's modules: fused decode layers {verdict}; {choice.evidence}")
    return Choice(OUT_IN, f"out_in (F.linear): {choice.value} {verdict}; start-up timing said: {choice.evidence}")


def not_timed(name: str, choice: Choice, why: str) -> Choice:
    """`choice` when the confirmation could not time it on the served model: a hand-written kernel is used only
    where it measured faster, so the fused decode layers give way to the modules; the others stand, noted."""
    if name == FUSED_LAYERS:
        return Choice(MODULES, f"the model's modules: fused decode layers not timed on this model: {why}")
    return Choice(choice.value, f"{choice.evidence}; not confirmed on this model: {why}")
