"""The execution plan: every choice the executor makes, with the profile evidence that made it.

Rules (never a device name): prefer a low-precision dtype only when the profile shows it supported,
its op cases passed, and bench (when present) shows it faster; attention is the ordered list of
implementations whose capability and op cases are verified; compiled only when the compiled check
passed the blocks and measured a speed-up. A path whose ops the profile records running through the host
(host_fallbacks.py) ranks after a verified alternative that does not. Without a usable profile: float32, plain
attention, eager — said at WARNING.

Op names come from profiles/hot_path.py and attention implementations from profiles/attention_kinds.py (each
spelled there once); the plan's values are data, and their text is written only by shown.py.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from statistics import median
from typing import Any

from bringup.errors import BringupError
from bringup.log import get_logger
from bringup.profiles.attention_kinds import PAGED_DECODE, PLAIN_ATTENTION, SDPA_BY_PREFERENCE
from bringup.profiles.hot_path import (
    DECODER_OPS,
    DENSE_EXPERT_OPS,
    GELU_OPS,
    GROUPED_EXPERT_OPS,
    MOE_ROUTER_OPS,
    PLAIN_ATTENTION_OPS,
    SILU_OPS,
    SOFTCAP_OPS,
    WINDOW_OPS,
)
from bringup.runner.model.config import ModelConfig
from bringup.runner.plan.choice import Choice
from bringup.runner.plan.host_fallbacks import (
    fallbacks_choice,
    fewer_fallbacks,
    hot_path_fallbacks,
    on_device_first,
    runs_where,
)
from bringup.runner.plan.profile_facts import ProfileFacts
from bringup.runner.plan.settings import SETTINGS
from bringup.runner.plan.shown import shown as shown_value

log = get_logger("runner.plan")

LOW_PRECISION = ("bfloat16", "float16")
RUNNER_DTYPES = ("float32", *LOW_PRECISION)
PLAIN_OPS = set(PLAIN_ATTENTION_OPS)
# ops the decoder runs in the model dtype (verify-ops names); a low-precision dtype needs these verified, not
# every op. Sampling (argmax, multinomial, sort, cumsum) runs on float32 logits, so it is not listed.
RUNNER_OPS = set(DECODER_OPS)
# an MoE model's router (softmax, top-k) runs in the model dtype too
MOE_DTYPE_OPS = set(MOE_ROUTER_OPS)
DEFAULT_MAX_MODEL_LEN = 4096
DEFAULT_MAX_NUM_SEQS = 16
BLOCK_SIZE = 16
# a step of this many tokens already keeps a GEMM efficient; larger steps only stall the running decodes
STEP_TOKENS_FOR_SEVERAL_PROMPTS = 2048
# a decode step's layers: the model's modules, or every layer in one host-kernel call (host/decode_layers.py)
MODULES, FUSED = "modules", "fused"
SETTING_NAMES = tuple(setting.name for setting in SETTINGS)  # in the order of the plan's rows
MARGIN = 0.9  # a measured candidate (a weight layout, a host kernel) is kept when it takes under 90 % of the plain path


@dataclass(frozen=True)
class ExecutionPlan:
    """Every setting the executor follows, with its evidence; built once at start-up, then frozen."""

    device: str
    profile: str
    dtype: Choice
    attention: Choice  # value: ordered list of implementations to try
    compiled: Choice  # value: torch.compile backend name, or None for eager
    max_model_len: Choice
    max_num_seqs: Choice
    max_num_batched_tokens: Choice
    weight_layout: Choice = field(default_factory=lambda: Choice("out_in", "not decided yet"))
    experts: Choice = field(default_factory=lambda: Choice("none", "no experts in this model"))
    decode_layers: Choice = field(default_factory=lambda: Choice(MODULES, "not decided yet"))
    # the layers of the other steps (prompts, mixed): the modules, or their element-wise parts in host kernels
    prompt_layers: Choice = field(default_factory=lambda: Choice(MODULES, "not decided yet"))
    kv_blocks: Choice = field(default_factory=lambda: Choice(0, "not sized yet"))
    # value: the batch-size buckets whose decode steps replay captured graphs ([]: every step eager)
    graphs: Choice = field(default_factory=lambda: Choice([], "not decided yet"))
    quantization: Choice = field(default_factory=lambda: Choice("none", "not requested (--quantization none)"))
    # value: the planned hot path's ops that the profile records running through the host (a backend's fallback)
    host_fallbacks: Choice = field(default_factory=lambda: Choice([], "not checked yet"))
    # value: the device the runner fell back to (global fallback, --allow-cpu-fallback), or None
    global_fallback: Choice = field(default_factory=lambda: Choice(None, "none: the model runs on the device "
                                                                         "selected"))
    # value: whether full KV blocks are kept and found again by their tokens (engine/block_manager.py)
    prefix_caching: Choice = field(default_factory=lambda: Choice(False, "not decided yet"))
    # value: prompt tokens a step may carry beside running decodes (None: prompts run whole)
    prefill_chunk: Choice = field(default_factory=lambda: Choice(None, "not decided yet"))
    # value: the decodes' average context from which a step past the fused decode layers' rows runs as two forwards
    # (0: always; None: one forward)
    mixed_steps: Choice = field(default_factory=lambda: Choice(None, "not decided yet"))
    # value: which device holds which layers, the others left out with why (placement/placement.py); None: one device
    placement: Choice = field(default_factory=lambda: Choice(None, "one device named (--device)"))
    block_size: int = BLOCK_SIZE
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """Every field as data; each setting {value, evidence} with its value as the plan table shows it (`shown`)."""
        data = asdict(self)
        for name in SETTING_NAMES:
            data[name]["shown"] = self.shown(name)
        return data

    def shown(self, setting: str) -> str:
        return shown_value(setting, getattr(self, setting).value, self.block_size)

    def rows(self) -> list[tuple[str, str, str]]:
        """(setting, value as shown, evidence) for the start-up table."""
        return [(name, self.shown(name), getattr(self, name).evidence) for name in SETTING_NAMES]


def build_plan(facts: ProfileFacts, profile_label: str, device: str, config: ModelConfig,
               max_num_seqs: int | None, max_model_len: int | None, dtype: str | None = None,
               force: bool = False) -> ExecutionPlan:
    """The draft plan from the profile; `dtype` (None or "auto": the plan's choice) as --dtype asks."""
    warnings = []
    if facts.profile is None:
        warnings.append(f"no usable profile ({profile_label}): conservative plan (float32, plain attention, "
                        "eager); run `bringup all` to measure this device")
        for w in warnings:
            log.warning(w)
    limit = choose_max_model_len(config, max_model_len)
    ops = model_ops(config, limit.value)
    dtype_choice = choose_dtype(facts, ops) if dtype in (None, "auto") else requested_dtype(facts, dtype, force, ops)
    seqs = Choice(max_num_seqs, "requested (engine option)") if max_num_seqs else Choice(
        DEFAULT_MAX_NUM_SEQS, "default (no measured batch limit yet)")
    tokens = Choice(step_tokens(seqs.value, limit.value),
                    f"max(max_model_len, max_num_seqs, min({STEP_TOKENS_FOR_SEVERAL_PROMPTS}, max_num_seqs × "
                    "max_model_len)): a whole prompt fits one step, and short prompts arriving together "
                    "prefill together")
    attention = restrict_attention(choose_attention(facts, dtype_choice.value), config, limit.value)
    experts = choose_experts(facts, dtype_choice.value, config)
    return ExecutionPlan(
        device=device, profile=profile_label, dtype=dtype_choice, attention=attention,
        compiled=choose_compiled(facts, dtype_choice.value), max_model_len=limit, max_num_seqs=seqs,
        max_num_batched_tokens=tokens, warnings=warnings, experts=experts,
        host_fallbacks=fallbacks_choice(hot_path_fallbacks(facts, dtype_choice.value,
                                                           ops | path_ops(attention.value, experts.value))),
    )


def step_tokens(max_num_seqs: int, max_model_len: int) -> int:
    """max_num_batched_tokens: a whole prompt fits one step, and short prompts arriving together prefill together."""
    return max(max_model_len, max_num_seqs, min(STEP_TOKENS_FOR_SEVERAL_PROMPTS, max_num_seqs * max_model_len))


def planned_ops(config: ModelConfig, plan: ExecutionPlan) -> set[str]:
    """Every op (verify-ops names) `plan` runs in the model's dtype, sampling aside."""
    return model_ops(config, plan.max_model_len.value) | path_ops(plan.attention.value, plan.experts.value)


def path_ops(attention: list[str], experts: str) -> set[str]:
    """The ops (verify-ops names) of the first planned attention implementation and the expert path."""
    first = next((name for name in attention if name != PAGED_DECODE), PLAIN_ATTENTION)
    ops = PLAIN_OPS if first == PLAIN_ATTENTION else {first}  # an SDPA backend's or a backend kernel's own op
    return ops | (set(GROUPED_EXPERT_OPS) if experts == "grouped" else set())


def model_ops(config: ModelConfig, max_model_len: int | None = None) -> set[str]:
    """The ops a low-precision dtype needs verified to run this model (a window needs its mask only when a
    context can outgrow it)."""
    ops = RUNNER_OPS | (MOE_DTYPE_OPS if config.moe is not None else set())
    if _window_bites(config, max_model_len):
        ops = ops | WINDOW_OPS
    if config.attn_logit_softcap is not None or config.final_logit_softcap is not None:
        ops = ops | SOFTCAP_OPS
    if config.hidden_act != "silu":  # GeGLU (Gemma-2)
        ops = (ops - SILU_OPS) | GELU_OPS
    return ops


def _window_bites(config: ModelConfig, max_model_len: int | None) -> bool:
    window = config.attention_window
    return window is not None and (max_model_len is None or window < max_model_len)


def attention_limits(config: ModelConfig, max_model_len: int) -> dict[str, str]:
    """Attention implementations that cannot compute this model's attention, each with why."""
    arch, limits = config.architecture, {}
    if config.attn_logit_softcap is not None:
        why = f"cannot apply attention logit soft-capping ({arch})"
        limits |= {name: why for name in (*SDPA_BY_PREFERENCE, PAGED_DECODE)}
    if _window_bites(config, max_model_len) and PAGED_DECODE not in limits:
        limits[PAGED_DECODE] = (f"has no sliding-window mask ({arch}: window {config.attention_window} < "
                                  f"max_model_len {max_model_len})")
    return limits


def restrict_attention(choice: Choice, config: ModelConfig, max_model_len: int) -> Choice:
    """`choice` without the implementations that cannot run the model's attention math, saying why."""
    limits = attention_limits(config, max_model_len)
    dropped = [name for name in choice.value if name in limits]
    if not dropped:
        return choice
    kept = [name for name in choice.value if name not in limits]
    by_reason: dict[str, list[str]] = {}
    for name in dropped:
        by_reason.setdefault(limits[name], []).append(name)
    notes = "; ".join(f"{', '.join(names)}: {why}" for why, names in by_reason.items())
    if not kept:
        raise BringupError(f"no planned attention implementation can run this model ({notes}); "
                           f"{PLAIN_ATTENTION} can, but the profile marks its ops failed: re-run `bringup verify-ops`")
    return Choice(kept, f"{notes}; {choice.evidence}")


def choose_experts(facts: ProfileFacts, dtype: str, config: ModelConfig) -> Choice:
    """"grouped" (only the chosen experts run) when verify-ops passed every op it needs at `dtype`; otherwise
    "dense" (every expert on every token: matmul, mul, add)."""
    if config.moe is None:
        return Choice("none", "no experts in this model")
    if facts.profile is None:
        return Choice("dense", "no profile: every expert on every token (matmul, mul, add), the conservative path")
    verdicts = {op: facts.ops(dtype, {op}) for op in GROUPED_EXPERT_OPS}
    missing = [f"{op} {v.describe()}" for op, v in verdicts.items() if not v.verified]
    if missing:
        return Choice("dense", f"grouped needs {', '.join(GROUPED_EXPERT_OPS)} verified at {dtype}, but "
                               f"{'; '.join(missing)}: every expert on every token instead")
    grouped, dense = facts.ops(dtype, set(GROUPED_EXPERT_OPS)), facts.ops(dtype, DENSE_EXPERT_OPS)
    if grouped.falls_back and fewer_fallbacks(dense, grouped):
        return Choice("dense", f"grouped falls back to the host ({grouped.fallback_notes()}); "
                               f"{runs_where('dense', dense)}: every expert on every token instead")
    passed = ", ".join(f"{op} {v.passed}" for op, v in verdicts.items())
    return Choice("grouped", f"only the chosen {config.moe.top_k} of {config.moe.num_experts} experts per token; "
                             f"op cases passed at {dtype}: {passed}")


def choose_dtype(facts: ProfileFacts, runner_ops: set[str] = RUNNER_OPS) -> Choice:
    """The fastest low-precision dtype that is verified and measured faster than float32 (the first verified
    one when bench has not measured them); float32 otherwise."""
    if facts.profile is None:
        return Choice("float32", "no profile: conservative default")
    rejected, usable = [], []
    full = facts.bench_tflops("float32")
    for name in LOW_PRECISION:
        status, evidence = facts.capability("dtypes", name)
        if status != "supported":
            rejected.append(f"{name} capability {status}" + (f" ({evidence})" if evidence else ""))
            continue
        ops = facts.ops(name, runner_ops)
        if not ops.verified:
            rejected.append(f"{name} {ops.describe()}")
            continue
        low = facts.bench_tflops(name)
        if low is not None and full is not None and low <= full:
            rejected.append(f"{name} matmul {low:.3g} TFLOP/s not faster than float32 {full:.3g}")
            continue
        speed = f"; matmul {low:.3g} vs float32 {full:.3g} TFLOP/s" if low and full else ""
        usable.append((low or 0.0, name, f"supported ({evidence}); {ops.describe()}{speed}", ops))
    if not usable:
        return Choice("float32", "float32 because " + "; ".join(rejected))
    # fewest ops through the host first, then the fastest; max keeps the first of equals (LOW_PRECISION order)
    best = max(usable, key=lambda u: (-len(u[3].host_fallback), u[0]))
    full_ops = facts.ops("float32", runner_ops)
    if best[3].falls_back and fewer_fallbacks(full_ops, best[3]):
        return Choice("float32", f"float32 because {best[1]} falls back to the host ({best[3].fallback_notes()}); "
                                 f"{runs_where('float32', full_ops)}; {full_ops.describe()}")
    others = [f"{name} also usable{f' ({low:.3g} TFLOP/s)' if low else ''}"
              f"{f', but falls back to the host ({ops.fallback_notes()})' if ops.falls_back else ''}"
              for low, name, _, ops in usable if name != best[1]]
    return Choice(best[1], "; ".join([best[2], *others, *rejected]))


def requested_dtype(facts: ProfileFacts, name: str, force: bool, runner_ops: set[str] = RUNNER_OPS) -> Choice:
    """The dtype the user asked for; BringupError when the profile says it cannot run here (unless `force`)."""
    if name not in RUNNER_DTYPES:
        raise BringupError(f"--dtype {name!r} is not one the runner serves; use auto or one of "
                           f"{', '.join(RUNNER_DTYPES)}")
    if facts.profile is None:
        return Choice(name, "requested with --dtype; no profile to check it against")
    status, evidence = facts.capability("dtypes", name)
    ops = facts.ops(name, runner_ops)
    problems = ([f"capabilities.dtypes.{name} is {status} ({evidence})"] if status == "unsupported" else []) + (
        [ops.describe()] if ops.failed else [])
    if problems and not force:
        raise BringupError(f"--dtype {name}: the profile says it does not run correctly here ({'; '.join(problems)}); "
                           "choose another dtype, or pass --force to run it anyway")
    if problems:
        log.warning("--dtype %s forced although %s", name, "; ".join(problems))
        return Choice(name, f"requested with --dtype --force although {'; '.join(problems)}")
    return Choice(name, f"requested with --dtype; capability {status} ({evidence}); {ops.describe()}")


def backend_attention(facts: ProfileFacts) -> list[str]:
    """Implementations a device family's backend supplied, as the probe recorded them (details.supplied_by);
    tried before the SDPA ones, each only where the probe verified it."""
    caps = facts.profile.capabilities if facts.profile else None
    return [name for name, cap in (caps.attention.items() if caps else []) if cap.details.get("supplied_by")]


def choose_attention(facts: ProfileFacts, dtype: str) -> Choice:
    """The ordered implementations to try; BringupError when the profile rules every one out."""
    if facts.profile is None:
        return Choice([PLAIN_ATTENTION], "no profile: plain matmul-softmax over paged K/V")
    usable, notes, verdicts = [], [], {}
    for name in (*backend_attention(facts), *SDPA_BY_PREFERENCE):
        status, evidence = facts.capability("attention", name, dtype)
        ops = facts.ops(dtype, {name})  # its own op: an SDPA backend's cases, or a backend kernel's
        if status != "supported" or ops.failed:
            notes.append(f"{name} {status if status != 'supported' else ops.describe()}")
            continue
        usable.append(name)
        verdicts[name] = ops
        notes.append(f"{name} supported ({evidence}), {ops.describe()}")
    plain = facts.ops(dtype, PLAIN_OPS)
    if plain.failed:
        notes.append(f"{PLAIN_ATTENTION} {plain.describe()}")
    else:
        usable.append(PLAIN_ATTENTION)
        verdicts[PLAIN_ATTENTION] = plain
        notes.append(f"{PLAIN_ATTENTION}: {plain.describe()} at {dtype}")
    usable, moved = on_device_first(usable, verdicts)
    if moved:
        notes.insert(0, moved)
    if not usable:
        raise BringupError(
            f"the profile marks every attention path failed at {dtype} ({'; '.join(notes)}); at least one must "
            f"pass: capabilities.attention.sdpa_* supported (bringup probe) or the "
            f"verify-ops matmul/bmm/softmax cases at {dtype}")
    return Choice(usable, "; ".join(notes))


def choose_compiled(facts: ProfileFacts, dtype: str) -> Choice:
    caps = facts.profile.capabilities if facts.profile else None
    if caps is None:
        return Choice(None, "eager: no compile capability in the profile")
    notes = []
    for backend, cap in caps.compile.items():
        if cap.status != "supported":
            notes.append(f"{backend} {cap.status}")
            continue
        passing, failing = facts.compiled(dtype, backend)
        if failing or not passing:
            notes.append(f"{backend}: {len(failing)} compiled block(s) failed" if failing
                         else f"{backend}: no compiled checks at {dtype}")
            continue
        speedups = [r.speedup for r in passing if r.speedup]
        if not speedups or median(speedups) <= 1.0:
            notes.append(f"{backend}: not measured faster than eager")
            continue
        decode = facts.e2e_compiled_decode_speedup()
        if decode is not None and decode <= 1.0:
            notes.append(f"{backend}: blocks pass, but bench e2e decode compiled runs at {decode:.2f}x of eager")
            continue
        e2e = f"; bench e2e decode {decode:.2f}x" if decode is not None else ""
        return Choice(backend, f"{len(passing)} compiled block(s) passed at {dtype}; median speed-up "
                               f"{median(speedups):.2f}x over eager{e2e}")
    return Choice(None, "eager: " + ("; ".join(notes) or "no compile backend supported"))


def choose_max_model_len(config: ModelConfig, requested: int | None) -> Choice:
    limits = {"config max_position_embeddings": config.max_position_embeddings}
    if config.sliding_window and not config.sliding_layers:  # a window whose layers the family did not say
        limits["sliding window (not implemented; context capped)"] = config.sliding_window
    limits["--max-model-len" if requested else "default cap"] = requested or DEFAULT_MAX_MODEL_LEN
    source = min(limits, key=lambda k: limits[k])
    return Choice(limits[source], f"min of {', '.join(f'{k} {v}' for k, v in limits.items())}")
