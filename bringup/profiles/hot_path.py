"""The ops the runner runs, by their verify-ops names: the one place the plan's op sets and the verdict's hot path
spell them (tests/profiles/test_op_sets.py checks that every name is an op some catalog case produces).

Defined here, below the runner and the verdict: the plan needs an op set verified in a dtype before it picks that
dtype or path (runner/plan/plan.py composes them per model and plan), and the verdict warns when a hot-path op runs
through the host (a fallback off the hot path is listed for information only). The attention ops are the SDPA
backends' own ops (one per backend in the catalog), named by profiles/attention_kinds.py.
"""

from bringup.profiles.attention_kinds import SDPA_BACKENDS

# the ops the decoder runs in the model dtype; a low-precision dtype needs these verified, not every op
DECODER_OPS: frozenset[str] = frozenset({
    "matmul", "linear", "addmm", "bmm", "softmax", "log_softmax", "rms_norm", "silu", "mul", "add", "embedding",
    "rotary", "index_copy", "index_select", "cat", "masked_fill", "rsqrt", "mean", "pow", "cast",
})
FUSED_NORM_OPS: frozenset[str] = frozenset({"F.rms_norm"})  # rms_norm's float32 form (runner/model/norm.py)
ATTENTION_OPS: frozenset[str] = frozenset(SDPA_BACKENDS)
# the plain attention path: matmul and softmax over the gathered K/V
PLAIN_ATTENTION_OPS: frozenset[str] = frozenset({"matmul", "bmm", "softmax"})
# sampling runs on the step's float32 logits, on the model's device (runner/engine/sampling.py; the draw itself is
# runner/draws.py, which verify-ops runs whole as runner_sampler)
SAMPLING_OPS: frozenset[str] = frozenset({"argmax", "topk", "sort", "multinomial", "cumsum", "runner_sampler"})
HOT_PATH_OPS: frozenset[str] = DECODER_OPS | FUSED_NORM_OPS | ATTENTION_OPS | SAMPLING_OPS

# ops only some models run in the model dtype (the plan adds them per model; not every device's hot path)
MOE_ROUTER_OPS: frozenset[str] = frozenset({"moe_router"})  # an MoE model's router (softmax, top-k)
# what the "grouped" expert path runs beyond the dense one: routing, the stable sort of token->expert pairs,
# per-expert matmuls over contiguous groups, the weighted sum back per token
GROUPED_EXPERT_OPS: tuple[str, ...] = ("moe_router", "moe_group_tokens", "grouped_matmul", "index_add")
DENSE_EXPERT_OPS: frozenset[str] = frozenset({"matmul", "mul", "add"})  # every expert on every token
WINDOW_OPS: frozenset[str] = frozenset({"sliding_window_mask"})  # a sliding window's mask
SOFTCAP_OPS: frozenset[str] = frozenset({"tanh_softcap"})  # tanh soft-capping of logits
SILU_OPS, GELU_OPS = frozenset({"silu"}), frozenset({"gelu"})  # the MLP's activation: SwiGLU, or GeGLU (Gemma-2)

def on_hot_path(op: str) -> bool:
    return op in HOT_PATH_OPS
